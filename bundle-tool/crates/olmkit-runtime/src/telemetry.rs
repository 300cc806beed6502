//! Structured logging of the operator process (tracing), as text or JSON lines on stderr.

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// The filter when `RUST_LOG` is unset: the operator's crate and this runtime at info, other
/// libraries at warn.
pub fn default_filter(operator_crate: &str) -> String {
    format!("warn,{operator_crate}=info,olmkit_runtime=info")
}

/// Installs the global subscriber (`RUST_LOG`, else [`default_filter`]). Calling it twice keeps
/// the first one.
pub fn init(format: LogFormat, operator_crate: &str) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(default_filter(operator_crate)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(true);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}
