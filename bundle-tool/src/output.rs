//! Terminal output: logging to stderr, report formats and progress bars.
//!
//! Data goes to stdout; progress and logs go to stderr so that `bundle-tool ... > file` captures
//! only data. Progress bars draw only when stderr is a terminal, and log lines carry colour
//! only there too (or when asked): escape codes in a redirected log file are noise.

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// Output format of reporting commands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable text.
    #[default]
    Text,
    /// Machine-readable JSON.
    Json,
}

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Plain text.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// When log lines on stderr are coloured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// When stderr is a terminal, unless `NO_COLOR` is set (`CLICOLOR_FORCE` forces it on).
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Whether to colour stderr, from `--color`, the environment (<https://no-color.org>, and
/// `CLICOLOR_FORCE` from the clicolors convention; `NO_COLOR` wins) and whether stderr is a
/// terminal.
pub fn use_color(
    choice: ColorChoice,
    env: impl Fn(&str) -> Option<String>,
    stderr_is_terminal: bool,
) -> bool {
    let set = |name: &str| env(name).is_some_and(|v| !v.is_empty());
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto if set("NO_COLOR") => false,
        ColorChoice::Auto
            if set("CLICOLOR_FORCE") && env("CLICOLOR_FORCE").as_deref() != Some("0") =>
        {
            true
        }
        ColorChoice::Auto => stderr_is_terminal,
    }
}

/// Options shared by every command.
#[derive(clap::Args, Debug, Clone)]
pub struct GlobalArgs {
    /// More log output (-v: debug, -vv: trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Never draw progress bars.
    #[arg(long, global = true)]
    pub no_progress: bool,
    /// Colour log lines on stderr: auto (when it is a terminal and NO_COLOR is not set),
    /// always or never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
}

/// Starts logging to stderr.
pub fn init_logging(args: &GlobalArgs) {
    let default = match args.verbose {
        0 => "warn,bundle_tool=info,olmkit=info",
        1 => {
            "info,bundle_tool=debug,olmkit_core=debug,olmkit_bundle=debug,olmkit_catalog=debug,olmkit_image=debug,olmkit_catalog_server=debug,olmkit_cluster=debug"
        }
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let color = use_color(
        args.color,
        |name| std::env::var(name).ok(),
        std::io::stderr().is_terminal(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(color)
        .with_writer(std::io::stderr);
    let _ = match args.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.with_target(false).try_init(),
    };
}

/// A progress bar on stderr for `len` steps, hidden when stderr is not a terminal or when
/// `--no-progress` is given.
pub fn progress(args: &GlobalArgs, len: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if args.no_progress || !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} ({elapsed})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message.to_string());
    bar
}

/// A spinner on stderr for work of unknown length.
pub fn spinner(args: &GlobalArgs, message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if args.no_progress || !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
    }
    bar.set_message(message.to_string());
    bar
}

/// Writes data to stdout. A closed pipe (`bundle-tool ... | head`) is not an error.
pub fn print_data(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn colour_follows_the_terminal_the_flag_and_the_environment() {
        use ColorChoice::*;
        assert!(use_color(Auto, env(&[]), true));
        assert!(!use_color(Auto, env(&[]), false));
        assert!(!use_color(Auto, env(&[("NO_COLOR", "1")]), true));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(use_color(Auto, env(&[("NO_COLOR", "")]), true));
        assert!(use_color(Auto, env(&[("CLICOLOR_FORCE", "1")]), false));
        assert!(!use_color(Auto, env(&[("CLICOLOR_FORCE", "0")]), false));
        assert!(!use_color(
            Auto,
            env(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]),
            true
        ));
        assert!(use_color(Always, env(&[("NO_COLOR", "1")]), false));
        assert!(!use_color(Never, env(&[("CLICOLOR_FORCE", "1")]), true));
    }
}
