//! Registry and image-build helpers shared by `image` and `release`: the registry connection
//! flags, credentials (flags, environment, `--password-stdin` read once per process), pushes
//! that refuse to move a published tag, the build time of reproducible images, and how
//! olmkit-image's errors become exit codes and hints.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, progress};
use olmkit_image::auth::{AuthSources, ENV_PASSWORD, ENV_USERNAME};
use olmkit_image::build::{BuildImageError, Image};
use olmkit_image::layout::WriteLayoutError;
use olmkit_image::push::{
    ExistingTag, PushImageError, PushOptions, PushReport, RegistryOperation, push_with, tag_digest,
};
use olmkit_image::remote::{RemoteEvent, RemoteOptions, RetryPolicy, parse_reference};
use std::sync::Arc;
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

pub(crate) fn remote_options(
    args: &RegistryArgs,
    g: &GlobalArgs,
) -> Result<(RemoteOptions, indicatif::ProgressBar), CmdError> {
    let mut auth = AuthSources::from_env().user_hint(format!(
        "set both {ENV_USERNAME} and {ENV_PASSWORD}, or neither"
    ))?;
    if args.password_stdin {
        // Read once per process: a release checks and pushes several images, and a second
        // read of stdin would find it empty.
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
        auth.explicit = Some((args.username.clone().unwrap_or_default(), pw));
    } else if let Some(user) = &args.username {
        match std::env::var(ENV_PASSWORD) {
            Ok(pw) if !pw.is_empty() => auth.explicit = Some((user.clone(), pw)),
            _ => {
                return Err(CmdError::msg(format!(
                    "--username {user} needs a password: set {ENV_PASSWORD} or use --password-stdin"
                )));
            }
        }
    }
    let bar = progress(g, 0, "pushing");
    let sink_bar = bar.clone();
    let events = Arc::new(move |e: RemoteEvent| match e {
        RemoteEvent::BlobDone { .. } => sink_bar.inc(1),
        RemoteEvent::Retrying {
            action,
            attempt,
            delay,
            ..
        } => sink_bar.set_message(format!(
            "{action}: attempt {attempt} failed, retrying in {delay:?}"
        )),
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
        bar,
    ))
}

/// `--force` as the push policy for a tag that already names other content.
pub(crate) fn existing_tag(force: bool) -> ExistingTag {
    if force {
        ExistingTag::Overwrite
    } else {
        ExistingTag::Refuse
    }
}

/// Checks, without pushing, that `image` may go to `target`: the tag is free or already names
/// this image (then the push changes nothing). Lets a command that pushes several images
/// refuse before the first one moves a tag.
pub(crate) async fn check_tag_free(
    image: &Image,
    target: &str,
    args: &RegistryArgs,
    g: &GlobalArgs,
) -> Result<(), CmdError> {
    let reference = parse_reference(target)
        .user_hint("references look like registry.example.com/team/image:tag")?;
    if reference.digest().is_some() {
        return Ok(());
    }
    let (remote, bar) = remote_options(args, g)?;
    bar.finish_and_clear();
    match tag_digest(&reference, &remote, RegistryOperation::Push)
        .await
        .map_err(push_err)?
    {
        Some(d) if d != image.digest().to_string() => Err(push_err(PushImageError::TagExists {
            reference: reference.whole(),
            existing: d,
            ours: image.digest().clone(),
        })),
        _ => Ok(()),
    }
}

pub(crate) async fn push_image(
    image: &Image,
    target: &str,
    args: &RegistryArgs,
    existing: ExistingTag,
    g: &GlobalArgs,
) -> Result<PushReport, CmdError> {
    let reference = parse_reference(target)
        .user_hint("references look like registry.example.com/team/image:tag")?;
    let (remote, bar) = remote_options(args, g)?;
    bar.set_length(image.blobs().count() as u64);
    bar.set_message(format!("pushing {}", reference.whole()));
    let result = push_with(image, &reference, &PushOptions { remote }, existing).await;
    bar.finish_and_clear();
    result.map_err(push_err)
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
