//! Locations of the workspace, its fixtures and the optional upstream reference data.

use std::path::{Path, PathBuf};

/// Root of the workspace (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
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
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// Prints a loud notice that a conformance suite was skipped; in CI, where the data must be
/// there, fails instead, so that a suite cannot pass by not running.
pub fn announce_skip(suite: &str, why: &str) {
    assert!(
        !in_ci(),
        "{suite}: {why}; CI is set, and in CI the upstream data must be present"
    );
    let line = "!".repeat(78);
    eprintln!("{line}\n!! SKIPPED: {suite}\n!! {why}\n{line}");
}
