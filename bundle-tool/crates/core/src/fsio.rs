//! All-or-nothing output.
//!
//! A failed command must leave no partial output. Everything bundle-tool writes goes through this
//! module: single files are written to a temporary sibling and renamed; multi-path updates (a
//! release touching `bundle/` and `catalog/`) are staged in full in a temporary directory on the
//! same filesystem and then swapped in by renames, with the previous contents moved aside and put
//! back if any rename fails.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// A write could not be completed; nothing was changed at the target.
#[derive(Debug, Error)]
pub enum WriteOutputError {
    /// An I/O operation failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A relative path escapes the output root or is absolute.
    #[error("refusing to write outside the output root: {0}")]
    UnsafePath(PathBuf),
    /// The target exists and overwriting was not allowed.
    #[error("{0} already exists")]
    Exists(PathBuf),
}

fn io<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> WriteOutputError + 'a {
    move |source| WriteOutputError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Checks that `rel` is a plain relative path (no root, no `..`).
pub fn check_relative(rel: &Path) -> Result<(), WriteOutputError> {
    let ok = !rel.as_os_str().is_empty()
        && rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if ok {
        Ok(())
    } else {
        Err(WriteOutputError::UnsafePath(rel.to_path_buf()))
    }
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `bytes` to `path` atomically (temporary sibling, then rename), creating parents.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteOutputError> {
    let dir = parent_of(path);
    fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(&dir)
        .map_err(io("create temporary file in", &dir))?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(io("write", path))?;
    tmp.as_file().sync_all().map_err(io("sync", path))?;
    tmp.persist(path).map_err(|e| WriteOutputError::Io {
        action: "rename into",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(())
}

/// Writes a whole directory tree at `dest` atomically: `files` maps relative paths to contents.
/// With `replace`, an existing `dest` is swapped out (and removed); without, it is an error.
pub fn write_tree_atomic(
    dest: &Path,
    files: &BTreeMap<PathBuf, Vec<u8>>,
    replace: bool,
) -> Result<(), WriteOutputError> {
    let mut cs = Changeset::new(parent_of(dest))?;
    let name = dest
        .file_name()
        .map(PathBuf::from)
        .ok_or_else(|| WriteOutputError::UnsafePath(dest.to_path_buf()))?;
    if !replace && dest.exists() {
        return Err(WriteOutputError::Exists(dest.to_path_buf()));
    }
    cs.put_dir(&name, files.iter().map(|(p, b)| (p.clone(), b.clone())))?;
    cs.commit()
}

/// What a [`Changeset`] will do to one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlannedChange {
    /// The path does not exist yet and will be created.
    Create(PathBuf),
    /// The path exists and will be replaced.
    Replace(PathBuf),
    /// The path will be removed.
    Remove(PathBuf),
}

#[derive(Debug)]
enum UnitKind {
    Put,
    Remove,
}

#[derive(Debug)]
struct Unit {
    rel: PathBuf,
    kind: UnitKind,
    staged: PathBuf,
}

/// A set of file and directory replacements under one root, applied all together or not at all.
#[derive(Debug)]
pub struct Changeset {
    root: PathBuf,
    stage: Option<tempfile::TempDir>,
    units: Vec<Unit>,
}

impl Changeset {
    /// Starts a changeset under `root` (created if missing). The staging area lives inside
    /// `root` so that the final renames never cross filesystems.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, WriteOutputError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(io("create directory", &root))?;
        let stage = tempfile::Builder::new()
            .prefix(".bundle-tool-stage-")
            .tempdir_in(&root)
            .map_err(io("create staging directory in", &root))?;
        Ok(Self {
            root,
            stage: Some(stage),
            units: Vec::new(),
        })
    }

    fn stage_dir(&self) -> &Path {
        // `stage` is only taken in `commit`, which consumes self.
        self.stage
            .as_ref()
            .map(|s| s.path())
            .unwrap_or(Path::new("."))
    }

    fn next_staged(&self) -> PathBuf {
        self.stage_dir().join(format!("unit-{}", self.units.len()))
    }

    /// Stages `bytes` to replace (or create) the file `rel`.
    pub fn put_file(
        &mut self,
        rel: impl AsRef<Path>,
        bytes: &[u8],
    ) -> Result<(), WriteOutputError> {
        let rel = rel.as_ref();
        check_relative(rel)?;
        let staged = self.next_staged();
        fs::write(&staged, bytes).map_err(io("write", &staged))?;
        self.units.retain(|u| u.rel != rel);
        self.units.push(Unit {
            rel: rel.to_path_buf(),
            kind: UnitKind::Put,
            staged,
        });
        Ok(())
    }

    /// Stages a directory with exactly `files` (relative paths) to replace (or create) `rel`.
    pub fn put_dir(
        &mut self,
        rel: impl AsRef<Path>,
        files: impl IntoIterator<Item = (PathBuf, Vec<u8>)>,
    ) -> Result<(), WriteOutputError> {
        let rel = rel.as_ref();
        check_relative(rel)?;
        let staged = self.next_staged();
        fs::create_dir_all(&staged).map_err(io("create directory", &staged))?;
        for (p, bytes) in files {
            check_relative(&p)?;
            let target = staged.join(&p);
            let dir = parent_of(&target);
            fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
            fs::write(&target, bytes).map_err(io("write", &target))?;
        }
        self.units.retain(|u| u.rel != rel);
        self.units.push(Unit {
            rel: rel.to_path_buf(),
            kind: UnitKind::Put,
            staged,
        });
        Ok(())
    }

    /// Stages removal of the file or directory `rel` (nothing happens if it does not exist).
    pub fn remove(&mut self, rel: impl AsRef<Path>) -> Result<(), WriteOutputError> {
        let rel = rel.as_ref();
        check_relative(rel)?;
        let staged = self.next_staged();
        self.units.retain(|u| u.rel != rel);
        self.units.push(Unit {
            rel: rel.to_path_buf(),
            kind: UnitKind::Remove,
            staged,
        });
        Ok(())
    }

    /// What committing would do, in order.
    pub fn plan(&self) -> Vec<PlannedChange> {
        self.units
            .iter()
            .filter_map(|u| {
                let exists = self.root.join(&u.rel).symlink_metadata().is_ok();
                match (&u.kind, exists) {
                    (UnitKind::Put, true) => Some(PlannedChange::Replace(u.rel.clone())),
                    (UnitKind::Put, false) => Some(PlannedChange::Create(u.rel.clone())),
                    (UnitKind::Remove, true) => Some(PlannedChange::Remove(u.rel.clone())),
                    (UnitKind::Remove, false) => None,
                }
            })
            .collect()
    }

    /// True when nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// Applies every staged change. On failure, every change already made is undone and the
    /// error is returned; the staging directory is removed either way.
    pub fn commit(mut self) -> Result<(), WriteOutputError> {
        let stage = self
            .stage
            .take()
            .ok_or_else(|| WriteOutputError::UnsafePath(self.root.clone()))?;
        let backups = stage.path().join("backups");
        fs::create_dir_all(&backups).map_err(io("create directory", &backups))?;
        // (target, backup if any, whether new content was moved in)
        let mut done: Vec<(PathBuf, Option<PathBuf>, bool)> = Vec::new();
        let mut result = Ok(());
        for (i, u) in self.units.iter().enumerate() {
            let target = self.root.join(&u.rel);
            let step = (|| {
                let dir = parent_of(&target);
                fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
                let backup = if target.symlink_metadata().is_ok() {
                    let b = backups.join(i.to_string());
                    fs::rename(&target, &b).map_err(io("move aside", &target))?;
                    Some(b)
                } else {
                    None
                };
                done.push((target.clone(), backup, false));
                if let UnitKind::Put = u.kind {
                    fs::rename(&u.staged, &target).map_err(io("rename into place", &target))?;
                    if let Some(last) = done.last_mut() {
                        last.2 = true;
                    }
                }
                Ok(())
            })();
            if let Err(e) = step {
                result = Err(e);
                break;
            }
        }
        if result.is_err() {
            for (target, backup, moved_in) in done.into_iter().rev() {
                if moved_in {
                    let _ = remove_any(&target);
                }
                if let Some(b) = backup {
                    let _ = fs::rename(&b, &target);
                }
            }
        }
        drop(stage);
        result
    }
}

fn remove_any(path: &Path) -> std::io::Result<()> {
    match path.symlink_metadata() {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(_) => Ok(()),
    }
}

/// Reads every regular file under `dir` into a map of relative path to contents, sorted.
/// Used to snapshot trees (tests compare before/after; `--plan` diffs).
pub fn read_tree(dir: &Path) -> Result<BTreeMap<PathBuf, Vec<u8>>, WriteOutputError> {
    fn walk(
        base: &Path,
        dir: &Path,
        out: &mut BTreeMap<PathBuf, Vec<u8>>,
    ) -> Result<(), WriteOutputError> {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .map_err(io("read directory", dir))?
            .collect::<Result<_, _>>()
            .map_err(io("read directory", dir))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let ft = e.file_type().map_err(io("stat", &p))?;
            if ft.is_dir() {
                walk(base, &p, out)?;
            } else if ft.is_file() {
                let rel = p.strip_prefix(base).unwrap_or(&p).to_path_buf();
                out.insert(rel, fs::read(&p).map_err(io("read", &p))?);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    if dir.exists() {
        walk(dir, dir, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changeset_replaces_and_creates() {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir_all(root.path().join("bundle/old")).unwrap();
        fs::write(root.path().join("bundle/old/a"), "old").unwrap();
        let mut cs = Changeset::new(root.path()).unwrap();
        cs.put_dir("bundle/old", [(PathBuf::from("b/c"), b"new".to_vec())])
            .unwrap();
        cs.put_file("catalog/x.yaml", b"x").unwrap();
        assert_eq!(
            cs.plan(),
            vec![
                PlannedChange::Replace("bundle/old".into()),
                PlannedChange::Create("catalog/x.yaml".into())
            ]
        );
        cs.commit().unwrap();
        let tree = read_tree(root.path()).unwrap();
        let keys: Vec<_> = tree.keys().cloned().collect();
        assert_eq!(
            keys,
            vec![
                PathBuf::from("bundle/old/b/c"),
                PathBuf::from("catalog/x.yaml")
            ]
        );
    }

    #[test]
    fn failed_commit_rolls_back() {
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join("keep"), "keep").unwrap();
        fs::write(root.path().join("blocker"), "file, not a dir").unwrap();
        let before = read_tree(root.path()).unwrap();
        let mut cs = Changeset::new(root.path()).unwrap();
        cs.put_file("keep", b"changed").unwrap();
        // Its parent is a regular file, so creating it must fail after "keep" was swapped.
        cs.put_file("blocker/child", b"x").unwrap();
        assert!(cs.commit().is_err());
        assert_eq!(read_tree(root.path()).unwrap(), before);
    }

    #[test]
    fn rejects_escaping_paths() {
        let root = tempfile::tempdir().unwrap();
        let mut cs = Changeset::new(root.path()).unwrap();
        assert!(cs.put_file("../x", b"").is_err());
        assert!(cs.put_file("/etc/x", b"").is_err());
    }
}
