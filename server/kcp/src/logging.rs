//! Process-wide logging from the upstream flags `--logging-format` and `-v`.
//!
//! Operators and log pipelines set these flags on kcp Deployments (kcp-operator renders
//! `--logging-format=json` and `-v=N`), so the binary honours them instead of inventing its own.
//! klog verbosity numbers map onto tracing levels; `RUST_LOG`, when set, wins, because it is the
//! finer tool when debugging one module.

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;

/// `--logging-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoggingFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("RUST_LOG is not a valid filter: {0}")]
    Filter(#[from] tracing_subscriber::filter::ParseError),
    #[error("a global logger is already installed: {0}")]
    AlreadyInstalled(String),
}

/// The tracing level for a klog verbosity: 0-1 info, 2-4 debug, 5 and above trace.
fn level_for_verbosity(verbosity: u32) -> LevelFilter {
    match verbosity {
        0..=1 => LevelFilter::INFO,
        2..=4 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

/// Installs the global subscriber, writing to stderr like klog.
pub fn init(format: LoggingFormat, verbosity: u32) -> Result<(), LoggingError> {
    let filter = match std::env::var(EnvFilter::DEFAULT_ENV) {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::try_new(directives)?,
        _ => EnvFilter::default().add_directive(level_for_verbosity(verbosity).into()),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match format {
        LoggingFormat::Text => builder.try_init(),
        LoggingFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|err| LoggingError::AlreadyInstalled(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn klog_verbosity_maps_to_levels() {
        assert_eq!(level_for_verbosity(0), LevelFilter::INFO);
        assert_eq!(level_for_verbosity(1), LevelFilter::INFO);
        assert_eq!(level_for_verbosity(2), LevelFilter::DEBUG);
        assert_eq!(level_for_verbosity(4), LevelFilter::DEBUG);
        assert_eq!(level_for_verbosity(5), LevelFilter::TRACE);
        assert_eq!(level_for_verbosity(10), LevelFilter::TRACE);
    }
}
