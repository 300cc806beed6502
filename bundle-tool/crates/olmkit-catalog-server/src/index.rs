//! The catalog index file: a [`CatalogIndex`] in protobuf encoding behind an 8-byte magic.
//!
//! `bundle-tool catalog index` writes it next to the catalog (by default `<configs>/../index`,
//! so it is not itself walked as part of the catalog); the server reads it instead of scanning
//! the FBC files, which turns minutes of start-up into milliseconds on big catalogs. Before
//! trusting an index the server checks that it lists exactly the catalog's files with the same
//! sizes; every blob read is also checked against its recorded SHA-256.
//!
//! The index file is opened like any file a user names ([`olmkit_core::confine::open_named`]:
//! a FIFO is refused without blocking) and read within [`CATALOG_INDEX`], checked from its
//! descriptor before it is read.

use crate::build::INDEX_FORMAT;
use crate::index_pb::CatalogIndex;
use olmkit_catalog::declcfg::catalog_files;
use olmkit_core::confine::{CATALOG_INDEX, InputRoot, ReadConfinedError};
use prost::Message;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// First bytes of every index file.
pub const MAGIC: &[u8; 8] = b"OLMKIDX\x01";

/// An index file could not be used.
#[derive(Debug, Error)]
pub enum OpenIndexError {
    /// The file could not be read.
    #[error("cannot read index {path}: {source}")]
    Read {
        /// The index file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file may not be read: not a regular file (a FIFO), or over [`CATALOG_INDEX`].
    #[error(transparent)]
    Refused(ReadConfinedError),
    /// The file is not an index or is damaged.
    #[error("{path} is not a catalog index: {reason}")]
    Corrupt {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The index does not describe the catalog as it is now.
    #[error("index {path} is stale: {reason}")]
    Stale {
        /// The index file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
}

/// An index file could not be written.
#[derive(Debug, Error)]
#[error("cannot write index {path}: {source}")]
pub struct WriteIndexError {
    /// Where.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: olmkit_core::fsio::WriteOutputError,
}

/// Where the index of the catalog at `configs` lives unless told otherwise: a file named
/// `index` next to the catalog directory (`/configs` → `/index`).
pub fn default_index_path(configs: &Path) -> PathBuf {
    let trimmed = configs.components().collect::<PathBuf>();
    match trimmed.parent() {
        Some(parent) => parent.join("index"),
        None => PathBuf::from("index"),
    }
}

/// The bytes of an index file.
pub fn encode_index(index: &CatalogIndex) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + index.encoded_len());
    out.extend_from_slice(MAGIC);
    index.encode_raw(&mut out);
    out
}

/// Parses the bytes of an index file.
pub fn decode_index(path: &Path, bytes: &[u8]) -> Result<CatalogIndex, OpenIndexError> {
    let corrupt = |reason: String| OpenIndexError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| corrupt("it does not start with the index magic bytes".into()))?;
    let index = CatalogIndex::decode(body).map_err(|e| corrupt(e.to_string()))?;
    if index.format != INDEX_FORMAT {
        return Err(corrupt(format!(
            "format {} is not supported (this build reads format {INDEX_FORMAT}); rebuild it with `bundle-tool catalog index`",
            index.format
        )));
    }
    Ok(index)
}

/// Writes an index file atomically.
pub fn write_index(path: &Path, index: &CatalogIndex) -> Result<(), WriteIndexError> {
    olmkit_core::fsio::write_file_atomic(path, &encode_index(index)).map_err(|source| {
        WriteIndexError {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Reads an index file.
pub fn read_index(path: &Path) -> Result<CatalogIndex, OpenIndexError> {
    let bytes = olmkit_core::confine::read_named(path, CATALOG_INDEX).map_err(|e| match e {
        ReadConfinedError::Io { source, .. } => OpenIndexError::Read {
            path: path.to_path_buf(),
            source,
        },
        other => OpenIndexError::Refused(other),
    })?;
    decode_index(path, &bytes)
}

/// Checks that `index` lists exactly the files of the catalog at `root`, with their sizes.
/// (Contents are checked blob by blob, with checksums, when they are read.)
pub fn check_fresh(index: &CatalogIndex, path: &Path, root: &Path) -> Result<(), OpenIndexError> {
    let stale = |reason: String| OpenIndexError::Stale {
        path: path.to_path_buf(),
        reason,
    };
    let files = catalog_files(root).map_err(|e| stale(e.to_string()))?;
    let current: Vec<String> = files
        .iter()
        .map(|p| {
            p.strip_prefix(root)
                .unwrap_or(p)
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    let indexed: Vec<&str> = index.files.iter().map(|f| f.path.as_str()).collect();
    if current
        .iter()
        .map(String::as_str)
        .ne(indexed.iter().copied())
    {
        let added: Vec<&str> = current
            .iter()
            .map(String::as_str)
            .filter(|c| !indexed.contains(c))
            .collect();
        let removed: Vec<&str> = indexed
            .iter()
            .copied()
            .filter(|i| !current.iter().any(|c| c == i))
            .collect();
        return Err(stale(format!(
            "the catalog's files changed (new: {added:?}, gone: {removed:?})"
        )));
    }
    let confine = InputRoot::new(root).map_err(|e| stale(e.to_string()))?;
    for (f, p) in index.files.iter().zip(&files) {
        let size = confine
            .inspect(p)
            .map(|m| m.len())
            .map_err(|e| stale(e.to_string()))?;
        if size != f.size {
            return Err(stale(format!(
                "{} is {size} bytes, the index recorded {}",
                f.path, f.size
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn default_path_is_a_sibling() {
        assert_eq!(
            default_index_path(Path::new("/configs")),
            PathBuf::from("/index")
        );
        assert_eq!(
            default_index_path(Path::new("/a/configs/")),
            PathBuf::from("/a/index")
        );
        assert_eq!(
            default_index_path(Path::new("configs")),
            PathBuf::from("index")
        );
    }

    #[test]
    fn round_trip_and_corruption() {
        let idx = CatalogIndex {
            format: INDEX_FORMAT,
            generator: "t".into(),
            ..Default::default()
        };
        let bytes = encode_index(&idx);
        assert_eq!(decode_index(Path::new("i"), &bytes).unwrap(), idx);
        let e = decode_index(Path::new("i"), b"hello").unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
        let mut bad = bytes.clone();
        bad.push(0xff);
        assert!(decode_index(Path::new("i"), &bad).is_err());
        let other = encode_index(&CatalogIndex {
            format: 99,
            ..Default::default()
        });
        assert!(
            decode_index(Path::new("i"), &other)
                .unwrap_err()
                .to_string()
                .contains("format 99")
        );
    }
}
