//! All-or-nothing, crash-safe output.
//!
//! A failed command must leave no partial output, and neither may a crash (`kill -9`, power
//! loss) at any instant. Everything bundle-tool writes goes through this module: single files
//! are written to a temporary sibling, fsynced and renamed; multi-path updates (a release
//! touching `bundle/` and `catalog/`) go through a [`Changeset`]:
//!
//! 1. every new file and directory is staged in full in `.bundle-tool-stage-<pid>-*` inside the
//!    root (same filesystem, so the renames below are atomic) and fsynced;
//! 2. an intent journal, `.bundle-tool-journal` in the root, naming the stage and every rename
//!    to come, is written, fsynced and renamed into place (the commit point);
//! 3. each target is moved aside into the stage and the new content renamed in, each parent
//!    directory fsynced after its rename;
//! 4. the journal is removed (fsynced), then the stage.
//!
//! [`recover`] (run by [`Changeset::new`] and at the start of a release) finds a journal left by
//! a crashed run and rolls it forward: the new content was complete and durable before the
//! journal existed, so finishing the renames always gives the new tree; without a journal the
//! tree was never touched and the stage of the dead process is simply removed. This is the
//! write-ahead-intent scheme databases and package managers use. An exclusive `flock` on the
//! root directory keeps two bundle-tool processes from committing or recovering at once.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// A write could not be completed; nothing was changed at the target, except for
/// [`WriteOutputError::Interrupted`], which leaves the change to [`recover`].
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
    /// Applying the change failed and so did putting the old content back: the journal is kept,
    /// and the next [`recover`] of `root` completes the change.
    #[error(
        "{error}; undoing it failed too ({undo}), so the change is left to be completed by recovery of {}",
        root.display()
    )]
    Interrupted {
        /// The root whose journal recovery will roll forward.
        root: PathBuf,
        /// Why the change stopped.
        error: Box<WriteOutputError>,
        /// Why the undo failed.
        undo: std::io::Error,
    },
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
    crash_point();
    std::io::Write::write_all(&mut tmp, bytes).map_err(io("write", path))?;
    crash_point();
    tmp.as_file().sync_all().map_err(io("sync", path))?;
    crash_point();
    tmp.persist(path).map_err(|e| WriteOutputError::Io {
        action: "rename into",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    // The rename itself is durable only once the directory is.
    sync_dir(&dir)
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

/// Name of the intent journal a committing [`Changeset`] keeps in its root.
pub const JOURNAL_FILE: &str = ".bundle-tool-journal";
/// The journal while it is being written (never read; removed by [`recover`]).
const JOURNAL_TMP_FILE: &str = ".bundle-tool-journal.tmp";
/// Prefix of staging directories (followed by the owning process id and a random part).
pub const STAGE_PREFIX: &str = ".bundle-tool-stage-";

/// Environment variable of the crash-test hook (see [`crash_point`]).
pub const CRASH_AT_ENV: &str = "OLMKIT_CRASH_AT";

/// Test hook for crash-safety tests: with `OLMKIT_CRASH_AT=n` in the environment, the process
/// aborts at the n-th durability step (a file write, an fsync or a rename of this module or the
/// OCI layout writer) — no destructors, no cleanup, the same state a `kill -9` there leaves.
/// Without the variable it costs one relaxed atomic load after the first call.
pub fn crash_point() {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static AT: OnceLock<Option<usize>> = OnceLock::new();
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let at = AT.get_or_init(|| {
        std::env::var(CRASH_AT_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(n) = *at
        && COUNT.fetch_add(1, Ordering::Relaxed) + 1 == n
    {
        eprintln!("{CRASH_AT_ENV}: aborting at durability step {n}");
        std::process::abort();
    }
}

/// One rename of a commit, as recorded in the journal (paths relative to the root, and for
/// `staged`/`backup` relative to the stage).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Unit {
    /// The target, relative to the root.
    rel: PathBuf,
    /// Whether new content is moved in (false: the target is only removed).
    put: bool,
    /// The staged content, relative to the stage.
    staged: PathBuf,
    /// Where the old target is moved aside, relative to the stage.
    backup: PathBuf,
}

/// The intent record written before the first rename of a commit.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Journal {
    /// The stage directory's name (a direct child of the root).
    stage: String,
    /// The renames, in order.
    units: Vec<Unit>,
}

/// A set of file and directory replacements under one root, applied all together or not at all.
#[derive(Debug)]
pub struct Changeset {
    root: PathBuf,
    stage: Option<tempfile::TempDir>,
    units: Vec<Unit>,
}

/// What [`recover`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Renames finished from the journal of an interrupted commit.
    pub rolled_forward: usize,
    /// Whether a journal was found (an interrupted commit was completed).
    pub journal_found: bool,
    /// Staging directories of dead processes removed.
    pub stale_stages_removed: usize,
}

/// An exclusive lock on a directory, held until dropped.
#[derive(Debug)]
struct RootLock {
    _held: fs::File,
}

fn lock_root(root: &Path) -> Result<RootLock, WriteOutputError> {
    let f = fs::File::open(root).map_err(io("open", root))?;
    f.lock().map_err(io("lock", root))?;
    Ok(RootLock { _held: f })
}

/// fsyncs a directory, so that renames and creations inside it are durable.
fn sync_dir(dir: &Path) -> Result<(), WriteOutputError> {
    crash_point();
    fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io("sync directory", dir))
}

/// fsyncs every file and directory under `path` (the directories after their content).
fn sync_tree(path: &Path) -> Result<(), WriteOutputError> {
    let meta = path.symlink_metadata().map_err(io("stat", path))?;
    if meta.is_dir() {
        for e in fs::read_dir(path).map_err(io("read directory", path))? {
            let e = e.map_err(io("read directory", path))?;
            sync_tree(&e.path())?;
        }
        sync_dir(path)
    } else if meta.is_file() {
        crash_point();
        fs::File::open(path)
            .and_then(|f| f.sync_all())
            .map_err(io("sync", path))
    } else {
        Ok(())
    }
}

/// Creates `dir` and its missing parents below `root`, fsyncing each parent that gained an entry.
fn create_dirs_synced(dir: &Path) -> Result<(), WriteOutputError> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = parent_of(dir);
    create_dirs_synced(&parent)?;
    match fs::create_dir(dir) {
        Ok(()) => sync_dir(&parent),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io("create directory", dir)(e)),
    }
}

/// Renames `from` to `to` and makes the rename durable (both parents fsynced).
fn rename_synced(from: &Path, to: &Path, action: &'static str) -> Result<(), WriteOutputError> {
    crash_point();
    fs::rename(from, to).map_err(io(action, to))?;
    crash_point();
    sync_dir(&parent_of(to))?;
    let from_parent = parent_of(from);
    if from_parent != parent_of(to) {
        sync_dir(&from_parent)?;
    }
    Ok(())
}

/// True when the staging directory `name` (`<prefix><pid>-...`) belongs to a process that is
/// still running.
fn stage_owner_alive(name: &str, prefix: &str) -> bool {
    let pid = name
        .strip_prefix(prefix)
        .and_then(|rest| rest.split('-').next())
        .and_then(|p| p.parse::<u32>().ok());
    match pid {
        Some(pid) if pid == std::process::id() => true,
        Some(pid) => Path::new("/proc").join(pid.to_string()).exists(),
        // A stage without a pid comes from an older bundle-tool: nobody can own it any more.
        None => false,
    }
}

/// Finishes or cleans up after an interrupted [`Changeset`] under `root`: rolls a journal
/// forward and removes the staging directories of processes that are gone. Cheap when there is
/// nothing to do (one directory listing). Takes the root's lock.
pub fn recover(root: &Path) -> Result<Recovered, WriteOutputError> {
    if !root.is_dir() {
        return Ok(Recovered::default());
    }
    let _lock = lock_root(root)?;
    recover_locked(root)
}

fn recover_locked(root: &Path) -> Result<Recovered, WriteOutputError> {
    let mut out = Recovered::default();
    let journal_path = root.join(JOURNAL_FILE);
    match fs::read(&journal_path) {
        Ok(bytes) => {
            let journal: Journal =
                serde_json::from_slice(&bytes).map_err(|e| WriteOutputError::Io {
                    action: "read the journal",
                    path: journal_path.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                })?;
            let stage = root.join(&journal.stage);
            for u in &journal.units {
                if roll_forward(root, &stage, u)? {
                    out.rolled_forward += 1;
                }
            }
            fs::remove_file(&journal_path).map_err(io("remove", &journal_path))?;
            sync_dir(root)?;
            out.journal_found = true;
            let _ = fs::remove_dir_all(&stage);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("read", &journal_path)(e)),
    }
    // A journal that never reached its final name was never a commit point.
    let _ = fs::remove_file(root.join(JOURNAL_TMP_FILE));
    out.stale_stages_removed = remove_stale_stages(root, STAGE_PREFIX)?;
    Ok(out)
}

/// Removes the directories `<prefix><pid>-*` directly under `dir` whose process is gone: the
/// staging areas of runs that were killed. Returns how many were removed. Other writers with
/// their own staging (the OCI layout writer) use it with their own prefix.
pub fn remove_stale_stages(dir: &Path, prefix: &str) -> Result<usize, WriteOutputError> {
    let mut removed = 0;
    for e in fs::read_dir(dir).map_err(io("read directory", dir))? {
        let e = e.map_err(io("read directory", dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix)
            && !stage_owner_alive(&name, prefix)
            && fs::remove_dir_all(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Writes the journal durably: a fixed temporary name (so that [`recover`] can remove one left by
/// a crash), fsync, rename, fsync of the root.
fn write_journal(root: &Path, bytes: &[u8]) -> Result<(), WriteOutputError> {
    let tmp = root.join(JOURNAL_TMP_FILE);
    crash_point();
    let mut f = fs::File::create(&tmp).map_err(io("create", &tmp))?;
    std::io::Write::write_all(&mut f, bytes).map_err(io("write", &tmp))?;
    crash_point();
    f.sync_all().map_err(io("sync", &tmp))?;
    drop(f);
    rename_synced(&tmp, &root.join(JOURNAL_FILE), "write the journal")
}

/// Completes one journaled unit; true when something had to be done.
fn roll_forward(root: &Path, stage: &Path, u: &Unit) -> Result<bool, WriteOutputError> {
    check_relative(&u.rel)?;
    let target = root.join(&u.rel);
    let staged = stage.join(&u.staged);
    let backup = stage.join(&u.backup);
    let staged_pending = u.put && staged.symlink_metadata().is_ok();
    let target_exists = target.symlink_metadata().is_ok();
    let backup_exists = backup.symlink_metadata().is_ok();
    let mut acted = false;
    if u.put {
        if !staged_pending {
            // Already moved in.
            return Ok(false);
        }
        if target_exists && !backup_exists {
            // The old content is still in place: move it aside first, as the commit would have.
            create_dirs_synced(&parent_of(&backup))?;
            rename_synced(&target, &backup, "move aside")?;
        } else if target_exists {
            // Both a backup and a target while the new content is still staged: the target is
            // not ours (cannot happen with one committer); replace it all the same.
            remove_any(&target).map_err(io("remove", &target))?;
        }
        create_dirs_synced(&parent_of(&target))?;
        rename_synced(&staged, &target, "rename into place")?;
        acted = true;
    } else if target_exists && !backup_exists {
        create_dirs_synced(&parent_of(&backup))?;
        rename_synced(&target, &backup, "move aside")?;
        acted = true;
    }
    Ok(acted)
}

impl Changeset {
    /// Starts a changeset under `root` (created if missing), after [`recover`]ing whatever an
    /// interrupted run left there. The staging area lives inside `root` so that the final
    /// renames never cross filesystems.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, WriteOutputError> {
        let root = root.into();
        create_dirs_synced(&root)?;
        recover(&root)?;
        let stage = tempfile::Builder::new()
            .prefix(&format!("{STAGE_PREFIX}{}-", std::process::id()))
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

    fn push(&mut self, rel: &Path, put: bool) -> PathBuf {
        let n = self.units.len();
        let staged = PathBuf::from(format!("unit-{n}"));
        self.units.retain(|u| u.rel != rel);
        self.units.push(Unit {
            rel: rel.to_path_buf(),
            put,
            staged: staged.clone(),
            backup: PathBuf::from(format!("backups/{n}")),
        });
        self.stage_dir().join(staged)
    }

    /// Stages `bytes` to replace (or create) the file `rel`.
    pub fn put_file(
        &mut self,
        rel: impl AsRef<Path>,
        bytes: &[u8],
    ) -> Result<(), WriteOutputError> {
        let rel = rel.as_ref();
        check_relative(rel)?;
        let staged = self.stage_dir().join(format!("unit-{}", self.units.len()));
        crash_point();
        fs::write(&staged, bytes).map_err(io("write", &staged))?;
        self.push(rel, true);
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
        let staged = self.stage_dir().join(format!("unit-{}", self.units.len()));
        fs::create_dir_all(&staged).map_err(io("create directory", &staged))?;
        for (p, bytes) in files {
            check_relative(&p)?;
            let target = staged.join(&p);
            let dir = parent_of(&target);
            fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
            crash_point();
            fs::write(&target, bytes).map_err(io("write", &target))?;
        }
        self.push(rel, true);
        Ok(())
    }

    /// Stages removal of the file or directory `rel` (nothing happens if it does not exist).
    pub fn remove(&mut self, rel: impl AsRef<Path>) -> Result<(), WriteOutputError> {
        let rel = rel.as_ref();
        check_relative(rel)?;
        self.push(rel, false);
        Ok(())
    }

    /// What committing would do, in order.
    pub fn plan(&self) -> Vec<PlannedChange> {
        self.units
            .iter()
            .filter_map(|u| {
                let exists = self.root.join(&u.rel).symlink_metadata().is_ok();
                match (u.put, exists) {
                    (true, true) => Some(PlannedChange::Replace(u.rel.clone())),
                    (true, false) => Some(PlannedChange::Create(u.rel.clone())),
                    (false, true) => Some(PlannedChange::Remove(u.rel.clone())),
                    (false, false) => None,
                }
            })
            .collect()
    }

    /// True when nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// Applies every staged change, crash-safely (see the module documentation). On an error,
    /// every change already made is undone and the error is returned; the staging directory is
    /// removed either way. A crash leaves a journal that the next [`recover`] rolls forward.
    pub fn commit(self) -> Result<(), WriteOutputError> {
        self.commit_inner(None)
    }

    /// Crash-safety tests of other crates: commits but stops dead after the journal and
    /// `renames` renames, leaving everything on disk as a `kill -9` there would.
    #[doc(hidden)]
    pub fn commit_crashing_after(self, renames: usize) -> Result<(), WriteOutputError> {
        self.commit_inner(Some(renames))
    }

    /// [`Changeset::commit`]; with `crash_after = Some(n)` (tests only) it stops dead after the
    /// journal and `n` renames, leaving everything on disk as a `kill -9` there would.
    fn commit_inner(mut self, crash_after: Option<usize>) -> Result<(), WriteOutputError> {
        let stage = self
            .stage
            .take()
            .ok_or_else(|| WriteOutputError::UnsafePath(self.root.clone()))?;
        let _lock = lock_root(&self.root)?;
        let stage_name = stage
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .map(String::from)
            .ok_or_else(|| WriteOutputError::UnsafePath(stage.path().to_path_buf()))?;
        fs::create_dir_all(stage.path().join("backups"))
            .map_err(io("create directory", stage.path()))?;
        // 1. Everything staged is durable before the journal says it may be moved in.
        sync_tree(stage.path())?;
        sync_dir(&self.root)?;
        // 2. The commit point.
        let journal = Journal {
            stage: stage_name,
            units: self.units.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&journal).map_err(|e| WriteOutputError::Io {
            action: "encode the journal for",
            path: self.root.clone(),
            source: std::io::Error::other(e),
        })?;
        write_journal(&self.root, &bytes)?;
        // 3. The renames.
        let mut done: Vec<Done> = Vec::new();
        let mut result = Ok(());
        let mut renames = Crash {
            count: 0,
            at: crash_after,
        };
        for u in &self.units {
            match apply_unit(&self.root, stage.path(), u, &mut done, &mut renames) {
                Ok(false) => {}
                Ok(true) => {
                    let _ = stage.keep();
                    return Ok(());
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if let Err(error) = result {
            // An I/O error (not a crash): put everything back as it was, durably. If that fails
            // too, the tree is half changed: keep the journal and the stage, so that recovery
            // completes the change (rolls forward) instead of leaving it half done.
            if let Err(undo) = undo_renames(done) {
                let _ = stage.keep();
                return Err(WriteOutputError::Interrupted {
                    root: self.root.clone(),
                    error: Box::new(error),
                    undo,
                });
            }
            result = Err(error);
        }
        // 4. Done (or undone): the journal goes first, then the stage with the old content.
        let journal_path = self.root.join(JOURNAL_FILE);
        fs::remove_file(&journal_path).map_err(io("remove", &journal_path))?;
        sync_dir(&self.root)?;
        drop(stage);
        result
    }
}

/// Undoes the renames of a failed commit, newest first: new content goes back to its staged
/// path and the old content back to its place, each folder synced. Every step leaves a state the
/// journal's roll-forward completes, so a failure part-way (reported to the caller, who keeps
/// the journal) is recovered like a crash.
fn undo_renames(done: Vec<Done>) -> std::io::Result<()> {
    for (target, backup, staged) in done.into_iter().rev() {
        if let Some(staged) = staged {
            fs::rename(&target, &staged)?;
            fs::File::open(parent_of(&staged))?.sync_all()?;
        }
        if let Some(b) = backup {
            fs::rename(&b, &target)?;
        }
        fs::File::open(parent_of(&target))?.sync_all()?;
    }
    Ok(())
}

/// What a commit did to one unit: the target, where its old content went (if it had any) and
/// where its new content came from (once moved in).
type Done = (PathBuf, Option<PathBuf>, Option<PathBuf>);

/// Counts renames; in tests, says when to stop dead as a crash would.
struct Crash {
    count: usize,
    at: Option<usize>,
}

impl Crash {
    fn tick(&mut self) -> bool {
        self.count += 1;
        self.at.is_some_and(|n| self.count >= n)
    }
}

/// Moves one unit's old target aside and its new content in, recording what was done. Returns
/// true when a simulated crash stopped it.
fn apply_unit(
    root: &Path,
    stage: &Path,
    u: &Unit,
    done: &mut Vec<Done>,
    crash: &mut Crash,
) -> Result<bool, WriteOutputError> {
    let target = root.join(&u.rel);
    create_dirs_synced(&parent_of(&target))?;
    let backup = if target.symlink_metadata().is_ok() {
        let b = stage.join(&u.backup);
        rename_synced(&target, &b, "move aside")?;
        if crash.tick() {
            return Ok(true);
        }
        Some(b)
    } else {
        None
    };
    done.push((target.clone(), backup, None));
    if u.put {
        let staged = stage.join(&u.staged);
        rename_synced(&staged, &target, "rename into place")?;
        if let Some(last) = done.last_mut() {
            last.2 = Some(staged);
        }
        if crash.tick() {
            return Ok(true);
        }
    }
    Ok(false)
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

    /// A failed commit whose undo stops part-way keeps its journal; whatever the undo managed,
    /// recovery then completes the change.
    #[test]
    fn an_undo_that_stops_part_way_is_completed_by_recovery() {
        for undo_backup_too in [false, true] {
            let root = tempfile::tempdir().unwrap();
            fs::write(root.path().join("keep"), "old").unwrap();
            let mut cs = Changeset::new(root.path()).unwrap();
            cs.put_file("keep", b"new").unwrap();
            // Both renames (move aside, move in) done; the journal is still there.
            cs.commit_inner(Some(2)).unwrap();
            let journal: Journal =
                serde_json::from_slice(&fs::read(root.path().join(JOURNAL_FILE)).unwrap()).unwrap();
            let stage = root.path().join(&journal.stage);
            let u = &journal.units[0];
            let backup = undo_backup_too.then(|| stage.join(&u.backup));
            undo_renames(vec![(
                root.path().join("keep"),
                backup,
                Some(stage.join(&u.staged)),
            )])
            .unwrap();
            assert!(recover(root.path()).unwrap().journal_found);
            assert_eq!(fs::read(root.path().join("keep")).unwrap(), b"new");
        }
    }

    /// A tree with an old bundle, a catalog file and a file the change removes.
    fn old_tree(root: &Path) {
        fs::create_dir_all(root.join("bundle/p/0.1.0")).unwrap();
        fs::write(root.join("bundle/p/0.1.0/csv.yaml"), "old csv").unwrap();
        fs::create_dir_all(root.join("catalog/p")).unwrap();
        fs::write(root.join("catalog/p/catalog.yaml"), "old catalog").unwrap();
        fs::write(root.join("catalog/p/gone.yaml"), "removed by the change").unwrap();
    }

    fn new_change(root: &Path) -> Changeset {
        let mut cs = Changeset::new(root).unwrap();
        cs.put_dir(
            "bundle/p/0.2.0",
            [(PathBuf::from("manifests/csv.yaml"), b"new csv".to_vec())],
        )
        .unwrap();
        cs.put_dir(
            "bundle/p/0.1.0",
            [(PathBuf::from("csv.yaml"), b"rewritten".to_vec())],
        )
        .unwrap();
        cs.put_file("catalog/p/catalog.yaml", b"new catalog")
            .unwrap();
        cs.remove("catalog/p/gone.yaml").unwrap();
        cs
    }

    #[test]
    fn a_crash_after_any_rename_recovers_to_the_new_tree() {
        let reference = tempfile::tempdir().unwrap();
        old_tree(reference.path());
        let old = read_tree(reference.path()).unwrap();
        new_change(reference.path()).commit().unwrap();
        let new = read_tree(reference.path()).unwrap();
        assert_ne!(old, new);
        // 3 puts over existing or new paths and a removal: 6 renames in all.
        for crash_at in 1..=6 {
            let root = tempfile::tempdir().unwrap();
            old_tree(root.path());
            new_change(root.path())
                .commit_inner(Some(crash_at))
                .unwrap();
            assert!(root.path().join(JOURNAL_FILE).exists(), "crash {crash_at}");
            // Before recovery the tree is neither old nor new; recovery finishes the commit.
            let rec = recover(root.path()).unwrap();
            assert!(rec.journal_found);
            assert_eq!(
                read_tree(root.path()).unwrap(),
                new,
                "crash after {crash_at} renames"
            );
            let names: Vec<_> = fs::read_dir(root.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert!(
                names.iter().all(|n| !n.starts_with(".bundle-tool")),
                "{names:?}"
            );
            // Recovering again does nothing.
            assert_eq!(recover(root.path()).unwrap(), Recovered::default());
        }
    }

    #[test]
    fn a_crash_before_the_journal_leaves_the_old_tree_and_a_stage_that_is_cleaned() {
        let root = tempfile::tempdir().unwrap();
        old_tree(root.path());
        let old = read_tree(root.path()).unwrap();
        let cs = new_change(root.path());
        // The process dies while staging: its stage stays behind under a dead pid.
        let stage = cs.stage.as_ref().unwrap().path().to_path_buf();
        let dead = root.path().join(format!("{STAGE_PREFIX}999999999-dead"));
        fs::rename(&stage, &dead).unwrap();
        std::mem::forget(cs);
        assert_eq!(read_tree(root.path()).unwrap().len(), old.len() + 3);
        let rec = recover(root.path()).unwrap();
        assert!(!rec.journal_found);
        assert_eq!(rec.stale_stages_removed, 1);
        assert_eq!(read_tree(root.path()).unwrap(), old);
    }

    #[test]
    fn a_live_processes_stage_is_left_alone() {
        let root = tempfile::tempdir().unwrap();
        let cs = Changeset::new(root.path()).unwrap();
        assert_eq!(recover(root.path()).unwrap().stale_stages_removed, 0);
        assert!(cs.stage.as_ref().unwrap().path().exists());
    }

    #[test]
    fn rejects_escaping_paths() {
        let root = tempfile::tempdir().unwrap();
        let mut cs = Changeset::new(root.path()).unwrap();
        assert!(cs.put_file("../x", b"").is_err());
        assert!(cs.put_file("/etc/x", b"").is_err());
    }
}
