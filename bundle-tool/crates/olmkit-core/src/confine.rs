//! Reading input without leaving its root.
//!
//! A bundle or catalog directory is untrusted input: a symlink in it may point at
//! `/etc/passwd` or at `~/.docker/config.json`, and whatever bundle-tool reads it may copy into
//! a catalog or an image. Every reader resolves the paths it opens through an [`InputRoot`]: a
//! path whose real location (all symlinks resolved) is not under the root's real location is
//! refused with an error naming the link and where it points. Symlinks that stay inside the
//! root are followed as usual.

use std::path::{Path, PathBuf};
use thiserror::Error;

/// A path of the input resolves outside its root, or cannot be resolved.
#[derive(Debug, Error)]
pub enum ConfineError {
    /// A symlink (the path itself or one of its parents) leads outside the root.
    #[error(
        "{path}: resolves to {target}, outside {root}: refusing to read it (a symbolic link out of the input)"
    )]
    Outside {
        /// The path as the input names it.
        path: PathBuf,
        /// Where it really is.
        target: PathBuf,
        /// The root it must stay under.
        root: PathBuf,
    },
    /// The path (or the root) cannot be resolved: it does not exist, or a symlink dangles.
    #[error("{path}: cannot resolve: {source}")]
    Resolve {
        /// The path as given.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The directory an input must stay in.
#[derive(Clone, Debug)]
pub struct InputRoot {
    /// As given (for messages).
    given: PathBuf,
    /// With every symlink resolved.
    real: PathBuf,
}

impl InputRoot {
    /// The root `dir` (which must exist). The root itself may be a symlink: what counts is where
    /// it leads.
    pub fn new(dir: &Path) -> Result<Self, ConfineError> {
        let real = dir.canonicalize().map_err(|source| ConfineError::Resolve {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            given: dir.to_path_buf(),
            real,
        })
    }

    /// The root as given.
    pub fn path(&self) -> &Path {
        &self.given
    }

    /// Checks that `path` (under the root, as the input names it) really is inside the root.
    pub fn check(&self, path: &Path) -> Result<(), ConfineError> {
        let target = path
            .canonicalize()
            .map_err(|source| ConfineError::Resolve {
                path: path.to_path_buf(),
                source,
            })?;
        if target.starts_with(&self.real) {
            Ok(())
        } else {
            Err(ConfineError::Outside {
                path: path.to_path_buf(),
                target,
                root: self.given.clone(),
            })
        }
    }

    /// Reads `path` after [`InputRoot::check`].
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, ReadConfinedError> {
        self.check(path)?;
        std::fs::read(path).map_err(|source| ReadConfinedError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Reading a confined file failed.
#[derive(Debug, Error)]
pub enum ReadConfinedError {
    /// The path leaves the root.
    #[error(transparent)]
    Confine(#[from] ConfineError),
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Checks every entry under `dir` (recursively, not following directory symlinks twice):
/// the first path that leads outside `root` is an error. For readers that hand a whole tree on
/// (image layers, `walkdir` users) and want one check up front.
pub fn check_tree(root: &InputRoot, dir: &Path) -> Result<(), ConfineError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ConfineError::Resolve {
        path: dir.to_path_buf(),
        source,
    })?;
    for e in entries {
        let e = e.map_err(|source| ConfineError::Resolve {
            path: dir.to_path_buf(),
            source,
        })?;
        let p = e.path();
        let ft = e.file_type().map_err(|source| ConfineError::Resolve {
            path: p.clone(),
            source,
        })?;
        if ft.is_symlink() {
            root.check(&p)?;
        } else if ft.is_dir() {
            check_tree(root, &p)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_inside_pass_links_outside_are_refused_with_their_target() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("bundle");
        std::fs::create_dir_all(root.join("manifests")).unwrap();
        std::fs::write(root.join("manifests/a.yaml"), "a").unwrap();
        symlink("a.yaml", root.join("manifests/b.yaml")).unwrap();
        symlink(outside.path().join("secret"), root.join("manifests/c.yaml")).unwrap();
        symlink(outside.path(), root.join("metadata")).unwrap();
        let r = InputRoot::new(&root).unwrap();
        assert_eq!(r.read(&root.join("manifests/b.yaml")).unwrap(), b"a");
        let e = r
            .read(&root.join("manifests/c.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("manifests/c.yaml") && e.contains("secret") && e.contains("outside"),
            "{e}"
        );
        // A file reached through a linked directory is outside too.
        std::fs::write(outside.path().join("annotations.yaml"), "x").unwrap();
        assert!(r.check(&root.join("metadata/annotations.yaml")).is_err());
        let e = check_tree(&r, &root).unwrap_err().to_string();
        assert!(e.contains("outside"), "{e}");
    }

    #[test]
    fn a_root_that_is_a_symlink_counts_where_it_leads() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("f"), "f").unwrap();
        symlink(&real, tmp.path().join("link")).unwrap();
        let r = InputRoot::new(&tmp.path().join("link")).unwrap();
        assert!(r.check(&tmp.path().join("link/f")).is_ok());
        check_tree(&r, &tmp.path().join("link")).unwrap();
    }

    #[test]
    fn dangling_links_are_an_error_naming_the_link() {
        let tmp = tempfile::tempdir().unwrap();
        symlink("nowhere", tmp.path().join("x")).unwrap();
        let r = InputRoot::new(tmp.path()).unwrap();
        let e = r.check(&tmp.path().join("x")).unwrap_err().to_string();
        assert!(e.contains("/x: cannot resolve"), "{e}");
    }
}
