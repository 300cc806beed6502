//! Why an image could not be built. Its own module so that the layer and tree builders, which
//! `build` uses, can report errors without importing `build` back.

use std::path::PathBuf;
use thiserror::Error;

/// An image could not be built from its inputs.
#[derive(Debug, Error)]
pub enum BuildImageError {
    /// An input file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    ReadInput {
        /// The input.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file of a copied directory may not be read: a link out of the directory, not a
    /// regular file, several hard links, over the size limit (see [`olmkit_core::confine`]).
    #[error(transparent)]
    Input(#[from] olmkit_core::confine::ReadConfinedError),
    /// A path inside the image is absolute after normalization, empty or escapes the root.
    #[error("{path}: not a safe path inside an image: {reason}")]
    UnsafePath {
        /// The offending path.
        path: String,
        /// Why it is refused.
        reason: String,
    },
    /// Two entries of a layer collide.
    #[error("{path}: {reason}")]
    PathConflict {
        /// The in-image path.
        path: String,
        /// What collides.
        reason: String,
    },
    /// A host file cannot be put into an image.
    #[error("{path}: {reason}")]
    UnsupportedFile {
        /// The host file.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
    /// An executable is not usable as the image's program.
    #[error("{path}: {reason}")]
    Binary {
        /// The binary.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An input is semantically unusable (labels, bundle annotations, option values).
    #[error("{what}: {reason}")]
    Invalid {
        /// What is invalid (a file and field, or an option).
        what: String,
        /// Why.
        reason: String,
    },
    /// `SOURCE_DATE_EPOCH` is malformed.
    #[error(transparent)]
    Epoch(#[from] olmkit_core::epoch::ReadEpochError),
    /// Writing the tar stream failed (an internal error: it writes to memory).
    #[error("cannot archive {path}: {source}")]
    Archive {
        /// The entry being written.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The manifest or config could not be assembled (an internal error).
    #[error("cannot assemble the image {what}: {message}")]
    Assemble {
        /// Manifest or config.
        what: &'static str,
        /// The error.
        message: String,
    },
}

impl BuildImageError {
    /// True when the inputs are at fault (exit 1), false for internal failures (exit 2).
    pub fn is_user_error(&self) -> bool {
        !matches!(
            self,
            BuildImageError::Archive { .. } | BuildImageError::Assemble { .. }
        )
    }
}
