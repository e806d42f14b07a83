//! kubelet's remote command protocol (`/exec` and `/attach`), independent of the transport:
//! the query (`command` repeated, `stdin`, `stdout`, `stderr`, `tty`, as kube's `ExecOptions`
//! reach kubelet), the channels (stdin, stdout, stderr, the error channel that carries the final
//! `metav1.Status`, and resize), and the exchange itself ([`pump`]): client input goes to the
//! command, its output to the client, and the last message is the status, `Success`, or
//! `Failure` with reason `NonZeroExitCode` and the code in a cause of type `ExitCode`, which
//! kubectl turns into its own exit code ([`Version`]: what older protocol versions do instead).
//! The transports are SPDY/3.1 ([`crate::exec_spdy`]) and WebSocket ([`crate::exec_websocket`]).

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::exec_process::{Event, Running};
use crate::terminal::TermSize;

/// What the client asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl ExecOptions {
    pub fn parse(query: &str) -> ExecOptions {
        let mut options = ExecOptions::default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let flag = value == "1" || value == "true";
            match key.as_ref() {
                "command" => options.command.push(value.into_owned()),
                "stdin" | "input" => options.stdin = flag,
                "stdout" | "output" => options.stdout = flag,
                "stderr" | "error" => options.stderr = flag,
                "tty" => options.tty = flag,
                _ => {}
            }
        }
        // A terminal merges stderr into stdout.
        if options.tty {
            options.stderr = false;
        }
        options
    }

    /// kubelet refuses a request that streams nothing.
    pub fn validate(&self) -> Result<(), String> {
        if !self.stdin && !self.stdout && !self.stderr {
            return Err("you must specify at least 1 of stdin, stdout, stderr".into());
        }
        Ok(())
    }
}

/// The status a command ended with, as the error channel carries it.
pub fn exit_status(code: i32, command: &[String]) -> Value {
    if code == 0 {
        return json!({ "metadata": {}, "status": "Success" });
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: error executing command {command:?}, exit code {code}"),
        "reason": "NonZeroExitCode",
        "details": { "causes": [{ "reason": "ExitCode", "message": code.to_string() }] },
    })
}

/// What the protocol version changes in an exchange (kubelet's protocol handlers): v3 added the
/// resize stream to SPDY (a WebSocket always had its resize channel), v4 made the error channel
/// carry the final `Status` as JSON, success included; before, it carried only a failure's
/// message, as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub resize: bool,
    pub json_status: bool,
}

impl Version {
    pub const V4: Version = Version {
        resize: true,
        json_status: true,
    };

    /// What the error channel carries for the final `status` (nothing for a v1-v3 success).
    pub fn status_body(self, status: &Value) -> Option<Vec<u8>> {
        if self.json_status {
            return serde_json::to_vec(status).ok();
        }
        if status["status"] == "Success" {
            return None;
        }
        Some(
            status["message"]
                .as_str()
                .unwrap_or_default()
                .as_bytes()
                .to_vec(),
        )
    }
}

/// A failure before or instead of running the command.
pub fn failure_status(message: &str) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
    })
}

/// Terminal sizes in a resize channel's data: JSON objects `{"Width":..,"Height":..}`, one
/// after the other (client-go writes them with a JSON encoder). Keeps what is not complete yet.
#[derive(Default)]
pub struct ResizeDecoder {
    pending: Vec<u8>,
}

impl ResizeDecoder {
    pub fn feed(&mut self, data: &[u8]) -> Vec<TermSize> {
        self.pending.extend_from_slice(data);
        let mut sizes = Vec::new();
        let mut stream = serde_json::Deserializer::from_slice(&self.pending).into_iter::<Value>();
        let mut consumed = 0;
        while let Some(Ok(value)) = stream.next() {
            consumed = stream.byte_offset();
            let dimension = |name: &str| {
                value[name]
                    .as_u64()
                    .and_then(|v| u16::try_from(v).ok())
                    .unwrap_or(0)
            };
            sizes.push(TermSize {
                width: dimension("Width"),
                height: dimension("Height"),
            });
        }
        self.pending.drain(..consumed);
        sizes
    }
}

/// Output channels of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Stdout,
    Stderr,
}

/// How a transport sends to the client.
pub trait Transport {
    /// Sends command output; false when the client is gone.
    fn output(&mut self, channel: Channel, data: Bytes) -> impl Future<Output = bool> + Send;
    /// Sends the final status and ends the exchange.
    fn finish(self, status: Value) -> impl Future<Output = ()> + Send;
}

/// Client input, as the transport received it.
pub struct Input {
    pub stdin: Option<mpsc::Receiver<Bytes>>,
    pub resize: Option<mpsc::Receiver<Bytes>>,
}

/// Starts the command with `start` and runs the exchange; a command that cannot start ends it
/// with a failure status.
pub async fn run<T, F>(start: F, options: &ExecOptions, input: Input, transport: T)
where
    T: Transport,
    F: FnOnce(&ExecOptions) -> Result<Running, String>,
{
    match start(options) {
        Ok(running) => pump(running, input, transport, &options.command).await,
        Err(message) => transport.finish(failure_status(&message)).await,
    }
}

/// Runs the exchange until the command ended (its status sent) or the client went away (the
/// command is then killed by dropping `running`).
async fn pump<T: Transport>(
    mut running: Running,
    input: Input,
    mut transport: T,
    command: &[String],
) {
    if let (Some(mut client_stdin), Some(stdin)) = (input.stdin, running.stdin.take()) {
        tokio::spawn(async move {
            while let Some(data) = client_stdin.recv().await {
                if stdin.send(data).await.is_err() {
                    break;
                }
            }
        });
    }
    if let (Some(mut client_resize), Some(resize)) = (input.resize, running.resize.clone()) {
        tokio::spawn(async move {
            let mut decoder = ResizeDecoder::default();
            while let Some(data) = client_resize.recv().await {
                for size in decoder.feed(&data) {
                    if resize.send(size).await.is_err() {
                        return;
                    }
                }
            }
        });
    }
    while let Some(event) = running.events.recv().await {
        let sent = match event {
            Event::Stdout(data) => transport.output(Channel::Stdout, data).await,
            Event::Stderr(data) => transport.output(Channel::Stderr, data).await,
            Event::Exited(code) => {
                transport.finish(exit_status(code, command)).await;
                return;
            }
        };
        if !sent {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_as_kubelet_reads_them() {
        let options = ExecOptions::parse(
            "command=sh&command=-c&command=echo+hi&stdin=true&stdout=1&stderr=true&tty=false&container=app",
        );
        assert_eq!(options.command, ["sh", "-c", "echo hi"]);
        assert!(options.stdin && options.stdout && options.stderr && !options.tty);
        let tty = ExecOptions::parse("command=sh&stdout=true&stderr=true&tty=true");
        assert!(!tty.stderr, "a terminal has no separate stderr");
        assert!(ExecOptions::parse("command=sh").validate().is_err());
    }

    #[test]
    fn before_v4_only_a_failure_is_told_and_as_text() {
        let text = Version {
            resize: true,
            json_status: false,
        };
        assert_eq!(text.status_body(&exit_status(0, &[])), None);
        let failed = text.status_body(&exit_status(3, &["sh".into()])).unwrap();
        assert!(
            String::from_utf8(failed)
                .unwrap()
                .starts_with("command terminated with non-zero exit code"),
        );
        let json: Value =
            serde_json::from_slice(&Version::V4.status_body(&exit_status(0, &[])).unwrap())
                .unwrap();
        assert_eq!(json["status"], "Success");
    }

    #[test]
    fn statuses_are_what_kubectl_decodes() {
        assert_eq!(exit_status(0, &[])["status"], "Success");
        let failed = exit_status(3, &["sh".into()]);
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(
            failed["details"]["causes"][0],
            json!({ "reason": "ExitCode", "message": "3" })
        );
    }

    #[test]
    fn resize_messages_decode_across_chunks() {
        let mut decoder = ResizeDecoder::default();
        assert!(decoder.feed(br#"{"Width":80,"Hei"#).is_empty());
        assert_eq!(
            decoder.feed(b"ght\":24}\n{\"Width\":100,\"Height\":30}\n"),
            vec![
                TermSize {
                    width: 80,
                    height: 24
                },
                TermSize {
                    width: 100,
                    height: 30
                }
            ]
        );
    }
}
