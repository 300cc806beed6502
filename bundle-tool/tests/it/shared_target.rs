//! What the suites that build other Cargo projects (`e2e_authoring`'s generated projects,
//! `e2e_examples`' example operators) share: this repository's target directory, where those
//! projects build so that they reuse its compiled dependencies. They all name their binary
//! `manager`, so `target/debug/manager` is one path for all of them: one build, or one project's
//! tests, at a time across both suites, whether their tests run as threads of one process
//! (`cargo test`) or as processes of their own (`cargo nextest`): a file lock in the target
//! directory.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Holds `target/debug/manager` for one project until dropped (the lock goes with the file).
pub struct ProjectTurn {
    _lock: File,
}

/// Waits for, then takes, the shared target directory's `target/debug/manager`. (`flock` locks
/// belong to the open file: two threads of one process, each with its own open, exclude each
/// other as two processes do.)
pub fn one_project_at_a_time() -> ProjectTurn {
    let dir = target_dir();
    std::fs::create_dir_all(&dir).expect("create the target directory");
    let path = dir.join(".e2e-shared-target.lock");
    let file = File::create(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    ProjectTurn { _lock: file }
}

/// This repository's target directory (the one the tests were built in).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// `program` to run in one of those projects (`make`, `cargo`, `sh`), building in the shared
/// target directory with this bundle-tool, in the environment this repository's own builds
/// see. Cargo reruns a build script when a variable it reads changes, and with it every crate
/// above (cc's list, in ring's, has `SOURCE_DATE_EPOCH` and `CARGO_MANIFEST_DIR`), so the
/// variables Cargo set for this test process (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`...) are
/// removed, and `SOURCE_DATE_EPOCH` is left as it is: otherwise a build of this repository and
/// one of the projects' would rebuild most of the shared dependencies each time they alternate.
pub fn project_command(dir: &Path, program: &str) -> Command {
    let mut command = Command::new(program);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_for_this_crate) {
            command.env_remove(name);
        }
    }
    command
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("BUNDLE_TOOL", env!("CARGO_BIN_EXE_bundle-tool"))
        .env_remove("RUST_LOG")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS");
    command
}

/// The variables Cargo sets when it runs a crate's tests (the Cargo book, "Environment
/// variables Cargo sets for crates"), as opposed to those a user sets for Cargo.
fn set_by_cargo_for_this_crate(name: &str) -> bool {
    const EXACT: [&str; 9] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    EXACT.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}
