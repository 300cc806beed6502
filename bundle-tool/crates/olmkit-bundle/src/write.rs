//! Writing a generated bundle to disk, all or nothing.
//!
//! Two layouts ([`crate::generate::FileLayout`]):
//! - versioned (`bundle/<package>/<version>/`, our releases): the bundle directory is staged in
//!   full and swapped in with renames ([`olmkit_core::fsio::write_tree_atomic`]), so it holds
//!   exactly the generated files;
//! - operator-sdk's (`make bundle`): generated files are written over what is there and every
//!   other file is kept, as operator-sdk's `generate bundle` does (it only ever creates or
//!   truncates the files it generates): `metadata/properties.yaml`, hand-added manifests and a
//!   scorecard configuration from an earlier run stay. `metadata/annotations.yaml` and the
//!   project-root `bundle.Dockerfile` are left alone when bundle metadata already exists and
//!   `--overwrite=false` (operator-sdk's `runMetadata`). All files, in the bundle directory and
//!   at the project root, are committed in one [`Changeset`].

use crate::generate::GeneratedBundle;
use olmkit_core::fsio::{Changeset, WriteOutputError, read_tree, write_tree_atomic};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// The bundle's metadata file, relative to the bundle directory.
pub const ANNOTATIONS_FILE: &str = "metadata/annotations.yaml";
/// The Dockerfile, relative to the project root (operator-sdk layout) or the bundle directory.
pub const DOCKERFILE: &str = "bundle.Dockerfile";
/// Where operator-sdk keeps the scorecard configuration in a bundle.
pub const SCORECARD_CONFIG: &str = "tests/scorecard/config.yaml";

/// Writing the bundle failed; nothing was changed.
#[derive(Debug, Error)]
pub enum WriteBundleError {
    /// Existing bundle metadata cannot be read.
    #[error("{file}: {message}")]
    Metadata {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The files could not be written.
    #[error(transparent)]
    Write(#[from] WriteOutputError),
}

/// Writes `bundle` as the directory `dir`, replacing what is there.
pub fn write_bundle(dir: &Path, bundle: &GeneratedBundle) -> Result<(), WriteOutputError> {
    write_tree_atomic(dir, &bundle.files, true)
}

/// True when `bundle_root` already holds bundle metadata: a `metadata/annotations.yaml` with at
/// least one annotation (operator-sdk's `registry.FindBundleMetadata` at its default path). A
/// file there that is not such a mapping is an error naming it, as in operator-sdk.
pub fn metadata_exists(bundle_root: &Path) -> Result<bool, WriteBundleError> {
    let file = bundle_root.join(ANNOTATIONS_FILE);
    let bytes = match olmkit_core::confine::read_named(&file, olmkit_core::confine::MANIFEST_FILE) {
        Ok(b) => b,
        Err(olmkit_core::confine::ReadConfinedError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(false);
        }
        Err(e) => {
            return Err(WriteBundleError::Metadata {
                file,
                message: e.to_string(),
            });
        }
    };
    let doc =
        olmkit_core::docs::parse_document(&file.display().to_string(), &bytes).map_err(|e| {
            WriteBundleError::Metadata {
                file: file.clone(),
                message: format!("not bundle metadata: {e}"),
            }
        })?;
    match doc.get("annotations") {
        Some(serde_json::Value::Object(m)) => Ok(!m.is_empty()),
        None | Some(serde_json::Value::Null) => Ok(false),
        Some(_) => Err(WriteBundleError::Metadata {
            file,
            message: "annotations: must be a mapping of annotation keys to values".into(),
        }),
    }
}

/// What an operator-sdk-layout write changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SdkWrite {
    /// Files to write, relative to the bundle directory.
    pub bundle_files: BTreeMap<PathBuf, Vec<u8>>,
    /// Files to write, relative to the project root.
    pub root_files: BTreeMap<PathBuf, Vec<u8>>,
}

impl SdkWrite {
    /// The files of `bundle` to write; without its metadata (annotations and Dockerfile) when
    /// `write_metadata` is false.
    pub fn new(bundle: &GeneratedBundle, write_metadata: bool) -> Self {
        let mut bundle_files = bundle.files.clone();
        let mut root_files = bundle.root_files.clone();
        if !write_metadata {
            bundle_files.remove(Path::new(ANNOTATIONS_FILE));
            bundle_files.remove(Path::new(DOCKERFILE));
            root_files.remove(Path::new(DOCKERFILE));
        }
        SdkWrite {
            bundle_files,
            root_files,
        }
    }

    /// The bundle directory as it will be once written: what `bundle_dir` holds now, with
    /// these files written over it. This is what validation must see.
    pub fn merged_tree(
        &self,
        bundle_dir: &Path,
    ) -> Result<BTreeMap<PathBuf, Vec<u8>>, WriteBundleError> {
        let mut tree = if bundle_dir.is_dir() {
            read_tree(bundle_dir)?
        } else {
            BTreeMap::new()
        };
        for (p, b) in &self.bundle_files {
            tree.insert(p.clone(), b.clone());
        }
        Ok(tree)
    }

    /// Writes the files, all or nothing: `bundle_files` under `bundle_dir`, `root_files` under
    /// `project_root`. Other files are not touched.
    pub fn commit(&self, project_root: &Path, bundle_dir: &Path) -> Result<(), WriteBundleError> {
        let root = absolute(project_root)?;
        let dir = absolute(bundle_dir)?;
        let common = common_ancestor(&root, &dir);
        let mut cs = Changeset::new(&common)?;
        let under = |base: &Path, rel: &Path| -> PathBuf {
            base.strip_prefix(&common).unwrap_or(base).join(rel)
        };
        for (p, b) in &self.bundle_files {
            cs.put_file(under(&dir, p), b)?;
        }
        for (p, b) in &self.root_files {
            cs.put_file(under(&root, p), b)?;
        }
        cs.commit()?;
        Ok(())
    }
}

fn absolute(p: &Path) -> Result<PathBuf, WriteBundleError> {
    let abs = std::path::absolute(p).map_err(|e| {
        WriteBundleError::Write(WriteOutputError::Io {
            action: "resolve",
            path: p.to_path_buf(),
            source: e,
        })
    })?;
    // Resolve `..` lexically so that the common ancestor is a real prefix of both paths.
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The longest path both `a` and `b` start with.
fn common_ancestor(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_ancestors() {
        assert_eq!(
            common_ancestor(Path::new("/a/b/c"), Path::new("/a/b/d/e")),
            PathBuf::from("/a/b")
        );
        assert_eq!(
            common_ancestor(Path::new("/a/b"), Path::new("/a/b/bundle")),
            PathBuf::from("/a/b")
        );
    }

    #[test]
    fn metadata_detection() {
        let d = tempfile::tempdir().unwrap();
        assert!(!metadata_exists(d.path()).unwrap());
        std::fs::create_dir_all(d.path().join("metadata")).unwrap();
        std::fs::write(d.path().join(ANNOTATIONS_FILE), "annotations: {}\n").unwrap();
        assert!(!metadata_exists(d.path()).unwrap());
        std::fs::write(d.path().join(ANNOTATIONS_FILE), "annotations:\n  a: b\n").unwrap();
        assert!(metadata_exists(d.path()).unwrap());
        std::fs::write(d.path().join(ANNOTATIONS_FILE), "annotations: [1]\n").unwrap();
        let e = metadata_exists(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("metadata/annotations.yaml: annotations: must be a mapping"),
            "{e}"
        );
    }
}
