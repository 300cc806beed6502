//! What the suites that build other Cargo projects (`e2e_scaffold`'s generated projects,
//! `e2e_examples`' example operators) share: this repository's target directory, where those
//! projects build so that they reuse its compiled dependencies. They all name their binary
//! `manager`, so `target/debug/manager` is one path for all of them: one build, or one project's
//! tests, at a time across both suites (they run in this one test process).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};

static ONE_PROJECT_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Holds `target/debug/manager` for one project until dropped.
pub fn one_project_at_a_time() -> MutexGuard<'static, ()> {
    ONE_PROJECT_AT_A_TIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// This repository's target directory (the one the tests were built in).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// `program` to run in one of those projects (`make`, `cargo`, `sh`), building in the shared
/// target directory with this bundle-tool. It gets this process' environment otherwise, and
/// `SOURCE_DATE_EPOCH` in particular is left as it is: Cargo reruns the build scripts that read
/// it (cc's, in ring) when it changes, so a value of the projects' own would rebuild most of the
/// shared dependencies each time a build of this repository and one of theirs alternate.
pub fn project_command(dir: &Path, program: &str) -> Command {
    let mut command = Command::new(program);
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
