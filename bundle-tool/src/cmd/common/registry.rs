//! Registry and image-build helpers shared by `image` and `release`: the registry connection
//! flags, credentials (flags, environment, `--password-stdin` read once per process), the
//! registry as olmkit-image's [`RegistryPublisher`] with one progress bar per push, the build
//! time of reproducible images, and how olmkit-image's errors become exit codes and hints.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, progress};
use olmkit_image::auth::{AuthSources, ENV_PASSWORD, ENV_USERNAME};
use olmkit_image::build::BuildImageError;
use olmkit_image::layout::WriteLayoutError;
use olmkit_image::publish::{PublishError, RegistryPublisher};
use olmkit_image::push::{ExistingTag, PushImageError};
use olmkit_image::remote::{RemoteEvent, RemoteOptions, RetryPolicy};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Registry connection options.
#[derive(clap::Args, Debug, Clone)]
pub struct RegistryArgs {
    /// Talk plain HTTP to the registry (a local registry without TLS).
    #[arg(long)]
    pub insecure: bool,
    /// Registry user name; the password comes from BUNDLE_TOOL_REGISTRY_PASSWORD or
    /// --password-stdin. Without it, Docker/podman credential files are used.
    #[arg(long, env = "BUNDLE_TOOL_REGISTRY_USERNAME")]
    pub username: Option<String>,
    /// Read the registry password from standard input.
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
    /// Attempts per registry operation when it fails transiently (connection refused or
    /// reset, 5xx, 429).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub retries: u32,
    /// Wait before the first retry (doubles each time, at most 8 s), e.g. `500ms`, `2s`.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub retry_backoff: Duration,
    /// TCP connect timeout, e.g. `10s`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
}

/// Go's duration grammar (`500ms`, `2s`, `1h30m`), from its one home in olmkit-core.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    olmkit_core::duration::parse_duration(s.trim()).map_err(|e| e.to_string())
}

pub(crate) fn build_time(created: Option<&str>) -> Result<jiff::Timestamp, CmdError> {
    let hint = "use `now`, seconds since 1970 (e.g. 1700000000) or RFC 3339 (2024-01-02T03:04:05Z)";
    match created {
        Some("now") => Ok(jiff::Timestamp::now()),
        Some(s) => {
            if let Ok(ts) = olmkit_core::epoch::parse_epoch(s) {
                Ok(ts)
            } else {
                s.parse::<jiff::Timestamp>()
                    .map_err(|e| CmdError::msg(format!("--created {s:?}: {e}")).hint(hint))
            }
        }
        None => Ok(olmkit_core::epoch::source_date_epoch()
            .user_hint("unset SOURCE_DATE_EPOCH or set it to seconds since 1970")?
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH)),
    }
}

pub(crate) fn build_err(e: BuildImageError) -> CmdError {
    let user = e.is_user_error();
    // One set of hints for every command that builds images, the release pipeline's.
    let hint = olmkit_release::images::build_hint(&e);
    let mut err = if user {
        CmdError::user(e)
    } else {
        CmdError::unexpected(e)
    };
    if let Some(h) = hint {
        err = err.hint(h);
    }
    err
}

pub(crate) fn layout_err(e: WriteLayoutError) -> CmdError {
    match e {
        WriteLayoutError::NotALayout { .. } => CmdError::user(e)
            .hint("pass --layout with a new or empty directory, or an existing OCI layout"),
        WriteLayoutError::InvalidRefName { .. } => {
            CmdError::user(e).hint("names look like quay.io/example/operator:v1.0.0 or v1.0.0")
        }
        other => CmdError::unexpected(other),
    }
}

pub(crate) fn push_err(e: PushImageError) -> CmdError {
    let user = e.is_user_error();
    let hints = e.hints();
    let mut err = if user {
        CmdError::user(e)
    } else {
        CmdError::unexpected(e)
    };
    if let CmdError::User { hints: h, .. } = &mut err {
        h.extend(hints);
    } else {
        for h in hints {
            eprintln!("hint: {h}");
        }
    }
    err
}

/// The progress bar of the push under way, one per image (olmkit-image's
/// [`RemoteEvent::PushStarted`] starts the next); [`PushProgress::clear`] ends the last one.
#[derive(Clone, Default)]
pub(crate) struct PushProgress(Arc<Mutex<Option<indicatif::ProgressBar>>>);

impl PushProgress {
    fn with<T>(&self, f: impl FnOnce(&mut Option<indicatif::ProgressBar>) -> T) -> T {
        let mut guard = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }

    /// Clears the bar of the last push.
    pub(crate) fn clear(&self) {
        self.with(|bar| {
            if let Some(bar) = bar.take() {
                bar.finish_and_clear();
            }
        });
    }
}

/// The password given with `--username`: from standard input (read once per process: a release
/// checks and pushes several images, and a second read would find it empty) or the environment.
fn explicit_credentials(args: &RegistryArgs) -> Result<Option<(String, String)>, CmdError> {
    if args.password_stdin {
        static PASSWORD: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
        let pw = PASSWORD
            .get_or_init(|| {
                let mut pw = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut pw)
                    .map(|_| pw.trim_end_matches(['\n', '\r']).to_string())
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|e| {
                CmdError::msg(format!("--password-stdin: cannot read standard input: {e}"))
                    .hint("pipe the password into --password-stdin")
            })?;
        if pw.is_empty() {
            return Err(CmdError::msg("--password-stdin: standard input is empty"));
        }
        return Ok(Some((args.username.clone().unwrap_or_default(), pw)));
    }
    let Some(user) = &args.username else {
        return Ok(None);
    };
    match std::env::var(ENV_PASSWORD) {
        Ok(pw) if !pw.is_empty() => Ok(Some((user.clone(), pw))),
        _ => Err(CmdError::msg(format!(
            "--username {user} needs a password: set {ENV_PASSWORD} or use --password-stdin"
        ))),
    }
}

/// The registry connection the flags describe; its events drive one progress bar per push.
pub(crate) fn remote_options(
    args: &RegistryArgs,
    g: &GlobalArgs,
) -> Result<(RemoteOptions, PushProgress), CmdError> {
    let mut auth = AuthSources::from_env().user_hint(format!(
        "set both {ENV_USERNAME} and {ENV_PASSWORD}, or neither"
    ))?;
    if let Some(explicit) = explicit_credentials(args)? {
        auth.explicit = Some(explicit);
    }
    let bars = PushProgress::default();
    let sink = bars.clone();
    let g = g.clone();
    let events = Arc::new(move |e: RemoteEvent| match e {
        RemoteEvent::PushStarted { reference, blobs } => sink.with(|bar| {
            if let Some(old) = bar.take() {
                old.finish_and_clear();
            }
            *bar = Some(progress(&g, blobs as u64, &format!("pushing {reference}")));
        }),
        RemoteEvent::BlobDone { .. } => sink.with(|bar| {
            if let Some(bar) = bar {
                bar.inc(1);
            }
        }),
        RemoteEvent::Retrying {
            action,
            attempt,
            delay,
            ..
        } => sink.with(|bar| {
            if let Some(bar) = bar {
                bar.set_message(format!(
                    "{action}: attempt {attempt} failed, retrying in {delay:?}"
                ));
            }
        }),
    });
    Ok((
        RemoteOptions {
            insecure: args.insecure,
            auth,
            retry: RetryPolicy {
                attempts: args.retries,
                initial_backoff: args.retry_backoff,
                max_backoff: Duration::from_secs(8).max(args.retry_backoff),
            },
            connect_timeout: args.connect_timeout,
            read_timeout: Duration::from_secs(120),
            events: Some(events),
        },
        bars,
    ))
}

/// The registry the flags describe as a [`RegistryPublisher`]; `force` overwrites tags that
/// name other content.
pub(crate) fn registry_publisher(
    args: &RegistryArgs,
    force: bool,
    g: &GlobalArgs,
) -> Result<(RegistryPublisher, PushProgress), CmdError> {
    let (remote, bars) = remote_options(args, g)?;
    let existing = if force {
        ExistingTag::Overwrite
    } else {
        ExistingTag::Refuse
    };
    Ok((RegistryPublisher { remote, existing }, bars))
}

/// A failed publication as an exit code, with its hints.
pub(crate) fn publish_err(e: PublishError) -> CmdError {
    match e {
        PublishError::Layout(e) => layout_err(e),
        PublishError::Reference(e) => {
            CmdError::user(e).hint("references look like registry.example.com/team/image:tag")
        }
        PublishError::Push(e) => push_err(e),
    }
}

pub(crate) fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
    }
}
