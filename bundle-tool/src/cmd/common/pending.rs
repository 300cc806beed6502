//! Interrupted commits and output files: before a command reads `bundle/`, `catalog/` or
//! anything else a bundle-tool changeset may be half-way through (see
//! `olmkit_core::fsio::recover_before_read`), it completes the interrupted commit or refuses
//! with a hint; and every file a user names with `-o`/`--output` is written through one
//! function (`olmkit_core::fsio::write_output`).

use crate::exit::CmdError;
use olmkit_core::fsio::{self, OutputTarget, WriteOutputError};
use std::path::Path;

/// Completes an interrupted bundle-tool commit touching any of `inputs` (each a file or a
/// directory, existing or not), or refuses (exit 1) with a hint saying how to repair the tree.
pub fn recover_before_reading<'a>(
    inputs: impl IntoIterator<Item = &'a Path>,
) -> Result<(), CmdError> {
    for input in inputs {
        match fsio::recover_before_read(input) {
            Ok(done) => {
                for (root, r) in done.iter().filter(|(_, r)| r.journal_found) {
                    eprintln!(
                        "note: completed an interrupted bundle-tool commit in {} ({} change(s) applied) before reading {}",
                        root.display(),
                        r.rolled_forward,
                        input.display()
                    );
                }
            }
            Err(e) => {
                let hint = e.hint();
                return Err(CmdError::user(e).hint(hint));
            }
        }
    }
    Ok(())
}

/// Writes an output file the user named: `-` is stdout, a character device or FIFO is
/// written in place, a regular file or new path atomically (keeping an existing file's mode).
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<OutputTarget, CmdError> {
    fsio::write_output(path, bytes).map_err(|e| {
        let hint = match &e {
            WriteOutputError::Pending(p) => p.hint(),
            WriteOutputError::Unwritable { .. } => {
                "give the path of a file to write (it is replaced atomically), a FIFO or device to write to, or - for stdout".to_string()
            }
            _ => "check that the output directory is writable".to_string(),
        };
        CmdError::user(e).hint(hint)
    })
}
