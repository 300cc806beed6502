//! Writing a generated bundle to disk, all or nothing.
//!
//! The bundle directory is staged in full and swapped in with renames
//! ([`olmkit_core::fsio::write_tree_atomic`]), so a failure leaves the previous bundle (or
//! nothing) in place, never a mix.

use crate::generate::GeneratedBundle;
use olmkit_core::fsio::{WriteOutputError, write_tree_atomic};
use std::path::Path;

/// Writes `bundle` as the directory `dir`, replacing what is there.
pub fn write_bundle(dir: &Path, bundle: &GeneratedBundle) -> Result<(), WriteOutputError> {
    write_tree_atomic(dir, &bundle.files, true)
}
