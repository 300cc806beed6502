//! Locations of the workspace, its fixtures and the optional upstream reference data.

use std::path::{Path, PathBuf};

/// Root of the workspace (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    // this crate lives in tests/e2e-support/
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `tests/fixtures`.
pub fn fixtures() -> PathBuf {
    workspace_root().join("tests/fixtures")
}

/// `../shared/reference` next to the workspace, if present. Only upstream-conformance suites
/// may use it, and they must say loudly when it is absent.
pub fn upstream_reference() -> Option<PathBuf> {
    let p = workspace_root().join("../shared/reference");
    p.is_dir().then_some(p)
}

/// True when running in CI (`CI` set to anything but empty, `0` or `false`), where the
/// upstream reference data must be present.
pub fn in_ci() -> bool {
    ci_value_means_ci(std::env::var("CI").ok().as_deref())
}

/// Whether a value of `CI` means "running in CI". Kept apart from the environment so the rule
/// is testable without mutating the process environment (which is `unsafe`, and forbidden).
fn ci_value_means_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// Prints a loud notice that a conformance suite was skipped. The project builds and tests
/// without `../shared` (in CI too), so a missing corpus is a skip, never a failure; the notice
/// goes straight to stderr, past the harness' capture, so that the skip is seen.
pub fn announce_skip(suite: &str, why: &str) {
    let line = "!".repeat(78);
    let notice = format!("{line}\n!! SKIPPED: {suite}\n!! {why}\n{line}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), notice.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::ci_value_means_ci;

    #[test]
    fn ci_values() {
        // What CI systems set (GitHub Actions, GitLab, `CI=1 make test`) counts...
        for v in ["true", "1", "yes", "TRUE"] {
            assert!(ci_value_means_ci(Some(v)), "{v}");
        }
        // ...an unset, empty or explicitly negative value does not.
        for v in [None, Some(""), Some("0"), Some("false"), Some("False")] {
            assert!(!ci_value_means_ci(v), "{v:?}");
        }
    }
}
