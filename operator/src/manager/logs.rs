//! The log filter of `kcp-operator run`: `RUST_LOG` (default `info`), with kube-client's own
//! failure lines switched off. kube-client logs every failed request at ERROR ("failed with
//! status 500") and the reconciler then logs the same failure with its context at WARN; each
//! failure is logged once, by the reconciler, as controller-runtime's operators (upstream
//! kcp-operator) do.

use tracing_subscriber::EnvFilter;

/// kube-client's per-request failure lines (its trace layer's target).
const CLIENT_FAILURES: &str = "kube_client::client::builder=off";

/// The filter for `rust_log` (the value of `RUST_LOG`, if set).
pub fn filter(rust_log: Option<&str>) -> EnvFilter {
    let base = rust_log
        .filter(|value| !value.trim().is_empty())
        .unwrap_or("info");
    EnvFilter::try_new(format!("{base},{CLIENT_FAILURES}"))
        .unwrap_or_else(|_| EnvFilter::new(format!("info,{CLIENT_FAILURES}")))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    fn logged(rust_log: Option<&str>) -> String {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter(rust_log))
            .with_writer(captured.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "kube_client::client::builder", "failed with status 500");
            tracing::warn!(target: "kcp_operator::controller::run", "reconcile failed");
        });
        let bytes = captured.0.lock().expect("lock").clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn a_failure_is_logged_once_by_the_reconciler() {
        for rust_log in [None, Some("info"), Some("debug"), Some("")] {
            let text = logged(rust_log);
            assert!(text.contains("reconcile failed"), "{rust_log:?}: {text}");
            assert!(!text.contains("failed with status"), "{rust_log:?}: {text}");
        }
    }
}
