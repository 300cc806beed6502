//! Applying scaffolded files to disk, all or nothing (`olmkit_core::fsio::Changeset`: staged,
//! fsynced, journaled, then renamed into place), and reading what `create api` needs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use olmkit_core::fsio::{Changeset, WriteOutputError};
use thiserror::Error;

use crate::project::{FILE, Project};
use crate::{Changes, CreateApiOptions, GeneratedFile, ScaffoldError};

/// Why writing or reading a project failed.
#[derive(Debug, Error)]
pub enum WriteError {
    /// `init` into a directory that has files.
    #[error("{}: the directory is not empty ({})", dir.display(), entries.join(", "))]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
        /// Some of what is in it.
        entries: Vec<String>,
    },
    /// `create api` outside a project.
    #[error("{}: no PROJECT file", dir.display())]
    NoProject {
        /// The directory.
        dir: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Writing failed; nothing was changed.
    #[error(transparent)]
    Write(#[from] WriteOutputError),
    /// The project's files are not what create api expects.
    #[error(transparent)]
    Scaffold(#[from] ScaffoldError),
}

impl WriteError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NotEmpty { .. } => Some(
                "init writes a new project: run it in an empty directory, or pass --project-dir with a new one"
                    .into(),
            ),
            Self::NoProject { .. } => Some(
                "run create api in the root of a project made by `bundle-tool init`, or pass --project-dir"
                    .into(),
            ),
            Self::Write(e) => e.hint(),
            Self::Scaffold(e) => e.hint(),
            Self::Read { .. } => None,
        }
    }
}

/// What a directory holds besides what `init` tolerates (`.git`).
fn entries(dir: &Path) -> Result<Vec<String>, WriteError> {
    let read = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(WriteError::Read {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut names = Vec::new();
    for entry in read {
        let entry = entry.map_err(|source| WriteError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != ".git" {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Writes a new project into `dir` (created if missing; an existing one must be empty but for
/// `.git`), all files or none.
pub fn write_init(dir: &Path, files: &[GeneratedFile]) -> Result<(), WriteError> {
    let found = entries(dir)?;
    if !found.is_empty() {
        return Err(WriteError::NotEmpty {
            dir: dir.to_path_buf(),
            entries: found.into_iter().take(5).collect(),
        });
    }
    let mut changeset = Changeset::new(dir)?;
    // Top-level files one by one, each top-level directory as a whole.
    let mut dirs: BTreeMap<String, Vec<(PathBuf, Vec<u8>)>> = BTreeMap::new();
    for f in files {
        match f.path.split_once('/') {
            None => changeset.put_file(&f.path, f.contents.as_bytes())?,
            Some((top, rest)) => dirs
                .entry(top.to_string())
                .or_default()
                .push((PathBuf::from(rest), f.contents.as_bytes().to_vec())),
        }
    }
    for (top, content) in dirs {
        changeset.put_dir(&top, content)?;
    }
    changeset.commit()?;
    Ok(())
}

/// Applies `create api`'s changes to the project in `dir`, all or none.
pub fn write_changes(dir: &Path, changes: &Changes) -> Result<(), WriteError> {
    let mut changeset = Changeset::new(dir)?;
    for f in &changes.files {
        changeset.put_file(&f.file.path, f.file.contents.as_bytes())?;
    }
    changeset.commit()?;
    Ok(())
}

/// Reads the project in `dir`: its PROJECT file and the files `create api` would read.
pub fn read_project(
    dir: &Path,
    options: &CreateApiOptions,
) -> Result<(Project, BTreeMap<String, String>), WriteError> {
    let project_file = dir.join(FILE);
    let text = match std::fs::read_to_string(&project_file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(WriteError::NoProject {
                dir: dir.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(WriteError::Read {
                path: project_file,
                source,
            });
        }
    };
    let project = Project::parse(&text)?;
    let mut files = BTreeMap::from([(FILE.to_string(), text)]);
    for rel in crate::create_api_reads(&project, options) {
        let path = dir.join(&rel);
        match std::fs::read_to_string(&path) {
            Ok(t) => {
                files.insert(rel, t);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(WriteError::Read { path, source }),
        }
    }
    Ok((project, files))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, contents: &str) -> GeneratedFile {
        GeneratedFile {
            path: path.into(),
            contents: contents.into(),
        }
    }

    #[test]
    fn init_writes_everything_into_an_empty_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        write_init(
            &dir,
            &[
                file("README.md", "r\n"),
                file("src/lib.rs", "l\n"),
                file("config/a/b.yaml", "b\n"),
            ],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("config/a/b.yaml")).unwrap(),
            "b\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(),
            "l\n"
        );
        let left: Vec<String> = entries(&dir).unwrap();
        assert_eq!(
            left,
            ["README.md", "config", "src"],
            "no staging left behind"
        );
    }

    #[test]
    fn init_refuses_a_directory_with_files() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("x"), "").unwrap();
        let e = write_init(tmp.path(), &[file("a", "a")]).unwrap_err();
        assert!(matches!(e, WriteError::NotEmpty { .. }), "{e}");
        assert!(e.hint().unwrap().contains("empty directory"));
        assert!(!tmp.path().join("a").exists());
    }
}
