//! What the suites that build other Cargo projects (`e2e_scaffold`'s generated projects,
//! `e2e_examples`' example operators) share: this repository's target directory, where those
//! projects build so that they reuse its compiled dependencies. They all name their binary
//! `manager`, so `target/debug/manager` is one path for all of them: one build, or one project's
//! tests, at a time across both suites (they run in this one test process).

use std::path::{Path, PathBuf};
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
