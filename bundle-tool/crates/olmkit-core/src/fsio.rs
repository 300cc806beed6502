//! All-or-nothing, crash-safe output.
//!
//! A failed command must leave no partial output, and neither may a crash (`kill -9`, power
//! loss) at any instant. Everything bundle-tool writes goes through this module.
//!
//! # Output files (`-o`, `--output`)
//!
//! [`write_output`] is the one way a command writes a file the user named: `-` (and
//! `/dev/stdout`) is standard output; a character device or a FIFO (and `/dev/fd/N`,
//! `/proc/self/fd/N`) is opened and written in place, never replaced (`-o /dev/null` as root
//! used to replace the system's `/dev/null` with a regular file); a regular file or a new path
//! is written atomically ([`write_file_atomic`]: a temporary sibling, fsynced, renamed over the
//! target). A replaced file keeps its permission bits (and, when allowed, its owner); a new one
//! gets `0644` minus the umask, as a shell's `>` would create it. A symbolic link to a regular
//! file is followed: the file it names is replaced and the link stays, so that a link into a
//! build context keeps working. Anything else (a directory, a link to one, a dangling link, a
//! block device, a socket) is an error naming the path. Other hard links to a replaced file
//! keep the old content, as with any atomic replace.
//!
//! # Multi-path updates
//!
//! A release touching `bundle/` and `catalog/` goes through a [`Changeset`]:
//!
//! 1. every new file and directory is staged in full in `.bundle-tool-stage-<pid>-*` inside the
//!    root (same filesystem, so the renames below are atomic) and fsynced; the stage holds an
//!    `.indexignore` ignoring everything, so that a catalog loader walking a root that is the
//!    catalog itself (a promote) never reads staged or old content;
//! 2. an intent journal, `.bundle-tool-journal` in the root, naming the stage and every change
//!    to come (with the inode number of each staged entry), is written in the stage, fsynced
//!    and renamed into the root (the commit point);
//! 3. each target is replaced so that **the path never goes missing**: whatever exists (a file,
//!    a directory, a link) is swapped with its new content in one
//!    `renameat2(RENAME_EXCHANGE)` (Linux 3.15 and later), after which the old content lives
//!    in the stage; a new path is renamed into place; a removal is a rename into the stage.
//!    Every parent directory is fsynced after its rename. No file of the tree ever has a
//!    second link, not even for an instant: readers refuse a file with several hard links
//!    (`confine::HardLinks`) and do not take the lock, so a link into the stage would make a
//!    reader running at that moment refuse the file;
//! 4. the journal is unlinked (its directory fsynced), then the stage.
//!
//! So at every instant each path holds either its old or its new content, whole; across paths
//! the tree is mixed only while the journal exists. Where `RENAME_EXCHANGE` is missing (another
//! OS, or a filesystem that refuses it with `EINVAL`, such as some network filesystems), a file
//! over a file is renamed over it (a copy of the old file kept in the stage first, for an undo;
//! undoing it there links the new file back into the stage before the old one returns), and a
//! directory is replaced by two renames (aside into the stage, then the new one in) and is
//! missing for the instant between them; the journal already exists then, so readers roll it
//! forward or refuse (below).
//!
//! [`recover`] (run by [`Changeset::new`], at the start of a release, and by readers) rolls a
//! journal left by a crashed run forward: the new content was complete and durable before the
//! journal existed, so finishing the changes always gives the new tree. A change counts as done
//! when the target's inode is the staged entry's, so recovery is idempotent and may itself be
//! interrupted anywhere (it relies on inode numbers staying the same until then, as they do on
//! local Linux filesystems). Without a journal the tree was never touched, and the stage of a
//! dead process is simply removed. An exclusive `flock` on the root directory keeps two
//! bundle-tool processes from committing or recovering at once.
//!
//! # Readers
//!
//! Every command that reads a project tree (`bundle/`, `catalog/`, the catalog server's
//! configs) first calls [`recover_before_read`] on each input: a journal in the input's
//! directory or any directory above it (or up to two levels below it) whose changes touch the
//! input means an interrupted commit. The reader rolls it forward when it can take the lock and
//! write; otherwise (a read-only tree, another user's files, or [`NO_REPAIR_ENV`] set) it
//! refuses with a [`PendingCommit`] whose hint says how to repair it. A half-committed tree is
//! never read as if it were valid. Readers do not take the lock while they read: a reader
//! running at the same moment as a live commit may still see some paths old and others new.
//!
//! Crash tests: [`crash_point`] (`OLMKIT_CRASH_AT=n`) aborts the process at the n-th durability
//! step (each staged write, fsync, mkdir, link, rename, exchange and unlink), and
//! [`Changeset::commit_crashing_at`] stops a commit dead at one of them in-process.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
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
    /// The path is something bundle-tool does not write or replace (a directory where a file
    /// is written, a device where a file or directory would replace it, ...).
    #[error("refusing to write {path}: it is {kind}")]
    Unwritable {
        /// The path.
        path: PathBuf,
        /// What it is ("a directory", "a character device", ...).
        kind: &'static str,
    },
    /// An interrupted commit covers the path and could not be completed.
    #[error(transparent)]
    Pending(Box<PendingCommit>),
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

impl WriteOutputError {
    /// A `hint:` line for the user, when there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            WriteOutputError::Pending(p) => Some(p.hint()),
            _ => None,
        }
    }
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

/// `symlink_metadata`, with a missing path as `None`.
fn lstat(path: &Path) -> Result<Option<fs::Metadata>, WriteOutputError> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("inspect", path)(e)),
    }
}

// ---------------------------------------------------------------------------------------------
// Single output files
// ---------------------------------------------------------------------------------------------

/// Where [`write_output`] put the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputTarget {
    /// Standard output (`-`, `/dev/stdout`).
    Stdout,
    /// Written in place: a character device, a FIFO or an inherited descriptor.
    InPlace,
    /// A regular file, replaced (or created) atomically.
    File,
}

/// What an output path is.
enum OutputKind {
    /// Nothing there yet.
    Missing,
    /// A regular file (at the given path: the link's target when the path is a link).
    File(PathBuf, fs::Metadata),
    /// A character device or a FIFO.
    Stream(&'static str),
    /// Anything that cannot be written.
    Other(&'static str),
}

fn output_kind(path: &Path) -> Result<OutputKind, WriteOutputError> {
    let Some(meta) = lstat(path)? else {
        return Ok(OutputKind::Missing);
    };
    let link = meta.file_type().is_symlink();
    let meta = if link {
        match fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(OutputKind::Other("a dangling symbolic link"));
            }
            Err(e) => return Err(io("follow the link", path)(e)),
        }
    } else {
        meta
    };
    let ft = meta.file_type();
    Ok(if ft.is_file() {
        let real = if link {
            fs::canonicalize(path).map_err(io("follow the link", path))?
        } else {
            path.to_path_buf()
        };
        OutputKind::File(real, meta)
    } else if ft.is_char_device() {
        OutputKind::Stream("a character device")
    } else if ft.is_fifo() {
        OutputKind::Stream("a FIFO")
    } else if ft.is_dir() && link {
        OutputKind::Other("a symbolic link to a directory")
    } else if ft.is_dir() {
        OutputKind::Other("a directory")
    } else if ft.is_block_device() {
        OutputKind::Other("a block device")
    } else if ft.is_socket() {
        OutputKind::Other("a socket")
    } else {
        OutputKind::Other("not a regular file")
    })
}

/// Paths that name one of this process's open descriptors: written in place, appending (a
/// shell's `>` already truncated them; `>>` must not be clobbered).
fn is_descriptor_path(path: &Path) -> bool {
    ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"]
        .iter()
        .any(|p| path.starts_with(p))
        || path == Path::new("/dev/stderr")
}

/// Opens an existing path for writing, without creating or truncating it, and writes `bytes`.
fn write_in_place(path: &Path, bytes: &[u8], append: bool) -> Result<(), WriteOutputError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .append(append)
        .open(path)
        .map_err(io("open", path))?;
    f.write_all(bytes)
        .and_then(|()| f.flush())
        .map_err(io("write", path))
}

/// Writes a file the user named (`-o`, `--output`): see the module documentation. `-` is
/// standard output; a character device or a FIFO is written in place; a regular file or a new
/// path is written atomically, keeping an existing file's permission bits. A directory, a
/// link to one, a dangling link, a block device or a socket is an error naming the path. An
/// interrupted commit covering the path is completed first (or the write refused).
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<OutputTarget, WriteOutputError> {
    if path.as_os_str() == "-" || path == Path::new("/dev/stdout") {
        let mut out = std::io::stdout().lock();
        return match out.write_all(bytes).and_then(|()| out.flush()) {
            // A reader that went away (`| head`) is not an error of ours.
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(io("write", path)(e)),
            _ => Ok(OutputTarget::Stdout),
        };
    }
    if is_descriptor_path(path) {
        write_in_place(path, bytes, true)?;
        return Ok(OutputTarget::InPlace);
    }
    recover_before_read(path).map_err(|e| WriteOutputError::Pending(Box::new(e)))?;
    match output_kind(path)? {
        OutputKind::Missing => replace_file(path, bytes, None).map(|()| OutputTarget::File),
        OutputKind::File(real, meta) => {
            replace_file(&real, bytes, Some(&meta)).map(|()| OutputTarget::File)
        }
        OutputKind::Stream(_) => write_in_place(path, bytes, false).map(|()| OutputTarget::InPlace),
        OutputKind::Other(kind) => Err(WriteOutputError::Unwritable {
            path: path.to_path_buf(),
            kind,
        }),
    }
}

/// Writes `bytes` to `path` atomically (temporary sibling, fsync, rename over it, fsync of the
/// directory), creating parents. For regular files and new paths only: an existing file keeps
/// its permission bits, a new one gets `0644` minus the umask, a link to a regular file is
/// followed; anything else (a device, a FIFO, a directory...) is refused, never replaced. Use
/// [`write_output`] for paths the user named.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteOutputError> {
    match output_kind(path)? {
        OutputKind::Missing => replace_file(path, bytes, None),
        OutputKind::File(real, meta) => replace_file(&real, bytes, Some(&meta)),
        OutputKind::Stream(kind) | OutputKind::Other(kind) => Err(WriteOutputError::Unwritable {
            path: path.to_path_buf(),
            kind,
        }),
    }
}

/// The atomic replacement of a regular file (or creation of a new one) at `path`.
fn replace_file(
    path: &Path,
    bytes: &[u8],
    existing: Option<&fs::Metadata>,
) -> Result<(), WriteOutputError> {
    let dir = parent_of(path);
    fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        // As a normal create: the kernel applies the umask.
        .permissions(fs::Permissions::from_mode(0o644))
        .tempfile_in(&dir)
        .map_err(io("create temporary file in", &dir))?;
    if let Some(old) = existing {
        // The owner first (a chown clears set-id bits), then the mode. Only root may give a
        // file away; anyone may keep its group when they belong to it. Best effort.
        let mine = tmp.as_file().metadata().map_err(io("inspect", path))?;
        if mine.uid() != old.uid() || mine.gid() != old.gid() {
            let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(old.uid()), Some(old.gid()))
                .or_else(|_| std::os::unix::fs::fchown(tmp.as_file(), None, Some(old.gid())));
        }
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))
            .map_err(io("set the permissions of", path))?;
    }
    crash_point();
    tmp.write_all(bytes).map_err(io("write", path))?;
    crash_point();
    tmp.as_file().sync_all().map_err(io("sync", path))?;
    crash_point();
    tmp.persist(path).map_err(|e| WriteOutputError::Io {
        action: "rename into",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    // The rename itself is durable only once the directory is.
    crash_point();
    fs::File::open(&dir)
        .and_then(|f| f.sync_all())
        .map_err(io("sync directory", &dir))
}

/// Writes a whole directory tree at `dest` atomically: `files` maps relative paths to contents.
/// With `replace`, an existing `dest` is swapped out (and removed); without, it is an error.
pub fn write_tree_atomic(
    dest: &Path,
    files: &BTreeMap<PathBuf, Vec<u8>>,
    replace: bool,
) -> Result<(), WriteOutputError> {
    let name = dest
        .file_name()
        .map(PathBuf::from)
        .ok_or_else(|| WriteOutputError::UnsafePath(dest.to_path_buf()))?;
    if let Some(m) = lstat(dest)? {
        if !replace {
            return Err(WriteOutputError::Exists(dest.to_path_buf()));
        }
        if let Some(kind) = special_kind(&m) {
            return Err(WriteOutputError::Unwritable {
                path: dest.to_path_buf(),
                kind,
            });
        }
    }
    let mut cs = Changeset::new(parent_of(dest))?;
    cs.put_dir(&name, files.iter().map(|(p, b)| (p.clone(), b.clone())))?;
    cs.commit()
}

/// What a [`Changeset`] never replaces: anything but a file, a directory or a symbolic link.
fn special_kind(m: &fs::Metadata) -> Option<&'static str> {
    let ft = m.file_type();
    if ft.is_file() || ft.is_dir() || ft.is_symlink() {
        None
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        Some("not a file or directory")
    }
}

// ---------------------------------------------------------------------------------------------
// Changesets
// ---------------------------------------------------------------------------------------------

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
/// Where older versions wrote the journal before renaming it (removed by [`recover`]).
const LEGACY_JOURNAL_TMP_FILE: &str = ".bundle-tool-journal.tmp";
/// The journal while it is being written, inside the stage (never read).
const JOURNAL_TMP_IN_STAGE: &str = "journal.tmp";
/// Prefix of staging directories (followed by the owning process id and a random part).
pub const STAGE_PREFIX: &str = ".bundle-tool-stage-";
/// The ignore file of a stage: catalog loaders (and opm) skip everything in it.
const STAGE_IGNORE: &str = ".indexignore";

/// Environment variable of the crash-test hook (see [`crash_point`]).
pub const CRASH_AT_ENV: &str = "OLMKIT_CRASH_AT";

/// Environment variable that keeps [`recover_before_read`] from completing an interrupted
/// commit: with `OLMKIT_NO_REPAIR=1` readers refuse as they would on a tree they cannot write
/// (for tests of the refusal, and for whoever wants readers never to write).
pub const NO_REPAIR_ENV: &str = "OLMKIT_NO_REPAIR";

/// Test hook for crash-safety tests: with `OLMKIT_CRASH_AT=n` in the environment, the process
/// aborts at the n-th durability step (a file write, an fsync, a mkdir, a link, a rename, an
/// exchange or an unlink of this module, or a step of the OCI layout writer) — no destructors,
/// no cleanup, the same state a `kill -9` there leaves. Without the variable it costs one
/// relaxed atomic load after the first call.
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

/// One change of a commit, as recorded in the journal (paths relative to the root, and for
/// `staged`/`backup` relative to the stage).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Unit {
    /// The target, relative to the root.
    rel: PathBuf,
    /// Whether new content is moved in (false: the target is only removed).
    put: bool,
    /// The staged content, relative to the stage.
    staged: PathBuf,
    /// Where the old target goes, relative to the stage.
    backup: PathBuf,
    /// Inode number of the staged content: the change is done once the target has it. Absent
    /// in journals of older versions (then a staged entry still there means "not done").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    new_ino: Option<u64>,
}

/// The intent record written before the first change of a commit.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Journal {
    /// The stage directory's name (a direct child of the root).
    stage: String,
    /// The changes, in order.
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
    /// Changes finished from the journal of an interrupted commit.
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

/// Why a sequence of durability steps stopped: an I/O error, or (tests) a simulated crash.
#[derive(Debug)]
enum Halt {
    Io(WriteOutputError),
    Crash,
}

impl From<WriteOutputError> for Halt {
    fn from(e: WriteOutputError) -> Self {
        Halt::Io(e)
    }
}

/// A result that a simulated crash cannot interrupt (no crash step was asked for).
fn no_crash<T>(r: Result<T, Halt>) -> Result<T, WriteOutputError> {
    r.map_err(|h| match h {
        Halt::Io(e) => e,
        Halt::Crash => WriteOutputError::Io {
            action: "complete",
            path: PathBuf::from("(simulated crash)"),
            source: std::io::Error::other("a simulated crash outside a crash test"),
        },
    })
}

/// Counts the durability steps of a commit or a recovery (each also a [`crash_point`]); in
/// tests, stops dead at the `crash_at`-th, before it happens.
struct Steps {
    count: usize,
    crash_at: Option<usize>,
}

impl Steps {
    fn new(crash_at: Option<usize>) -> Self {
        Steps { count: 0, crash_at }
    }

    fn step(&mut self) -> Result<(), Halt> {
        crash_point();
        self.count += 1;
        if self.crash_at == Some(self.count) {
            Err(Halt::Crash)
        } else {
            Ok(())
        }
    }

    /// fsyncs a directory, so that renames and creations inside it are durable.
    fn sync_dir(&mut self, dir: &Path) -> Result<(), Halt> {
        self.step()?;
        fs::File::open(dir)
            .and_then(|f| fsync(&f))
            .map_err(io("sync directory", dir))?;
        Ok(())
    }

    /// fsyncs every file and directory under `path` (the directories after their content).
    fn sync_tree(&mut self, path: &Path) -> Result<(), Halt> {
        let meta = path.symlink_metadata().map_err(io("stat", path))?;
        if meta.is_dir() {
            for e in fs::read_dir(path).map_err(io("read directory", path))? {
                let e = e.map_err(io("read directory", path))?;
                self.sync_tree(&e.path())?;
            }
            self.sync_dir(path)
        } else if meta.is_file() {
            self.step()?;
            fs::File::open(path)
                .and_then(|f| fsync(&f))
                .map_err(io("sync", path))?;
            Ok(())
        } else {
            Ok(())
        }
    }

    /// Creates `dir` and its missing parents, fsyncing each parent that gained an entry.
    fn create_dirs(&mut self, dir: &Path) -> Result<(), Halt> {
        if dir.is_dir() {
            return Ok(());
        }
        let parent = parent_of(dir);
        self.create_dirs(&parent)?;
        self.step()?;
        match fs::create_dir(dir) {
            Ok(()) => self.sync_dir(&parent),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(io("create directory", dir)(e).into()),
        }
    }

    /// Renames `from` to `to`, replacing a file there (no directory sync).
    fn rename(&mut self, from: &Path, to: &Path, action: &'static str) -> Result<(), Halt> {
        self.step()?;
        fs::rename(from, to).map_err(io(action, to))?;
        Ok(())
    }

    /// fsyncs the parents of both paths (once when they are the same).
    fn sync_parents(&mut self, a: &Path, b: &Path) -> Result<(), Halt> {
        let (pa, pb) = (parent_of(a), parent_of(b));
        self.sync_dir(&pa)?;
        if pa != pb {
            self.sync_dir(&pb)?;
        }
        Ok(())
    }

    /// Unlinks a file.
    fn unlink(&mut self, path: &Path) -> Result<(), Halt> {
        self.step()?;
        fs::remove_file(path).map_err(io("remove", path))?;
        Ok(())
    }

    /// Removes a stage: every entry, its ignore file last (so that what is left of a stage
    /// interrupted here is still ignored by catalog loaders), then the directory. I/O errors
    /// are left to the removal of stale stages; a simulated crash stops it.
    fn remove_stage(&mut self, stage: &Path) -> Result<(), Halt> {
        let Ok(entries) = fs::read_dir(stage) else {
            return Ok(());
        };
        let entries: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name() != STAGE_IGNORE)
            .map(|e| e.path())
            .collect();
        for e in entries {
            self.remove_tree(&e)?;
        }
        self.remove_tree(&stage.join(STAGE_IGNORE))?;
        self.remove_tree(stage)
    }

    fn remove_tree(&mut self, path: &Path) -> Result<(), Halt> {
        let Ok(meta) = path.symlink_metadata() else {
            return Ok(());
        };
        if meta.is_dir() {
            let entries: Vec<PathBuf> = fs::read_dir(path)
                .map(|rd| rd.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            for e in entries {
                self.remove_tree(&e)?;
            }
            self.step()?;
            let _ = fs::remove_dir(path);
        } else {
            self.step()?;
            let _ = fs::remove_file(path);
        }
        Ok(())
    }
}

/// `fsync(2)`. (The in-process crash tests, which stop a commit dead but never lose the page
/// cache, count these steps without paying for them.)
fn fsync(f: &fs::File) -> std::io::Result<()> {
    #[cfg(test)]
    if tests::NO_SYNC.with(|c| c.get()) {
        return Ok(());
    }
    f.sync_all()
}

/// Swaps two paths atomically: `Ok(false)` when the system cannot (not Linux, or a filesystem
/// without `RENAME_EXCHANGE`), having changed nothing.
fn exchange(a: &Path, b: &Path) -> std::io::Result<bool> {
    #[cfg(test)]
    if tests::NO_EXCHANGE.with(|c| c.get()) {
        return Ok(false);
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        use rustix::io::Errno;
        match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
            Ok(()) => Ok(true),
            Err(e) if e == Errno::INVAL || e == Errno::NOSYS || e == Errno::OPNOTSUPP => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (a, b);
        Ok(false)
    }
}

/// How one change of a commit was made (for an undo).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// The target did not exist: the staged content was renamed in.
    Created,
    /// No exchange: a file renamed over a file; `kept`: the old one was copied to the backup
    /// first.
    OverFile { kept: bool },
    /// Target and staged content exchanged: the old content is at the staged path.
    Exchanged,
    /// No exchange: the old content was renamed to the backup, the new not yet in.
    Aside,
    /// No exchange: the old content renamed to the backup, then the new content in.
    AsideIn,
    /// A removal: the target was renamed to the backup.
    Removed,
}

/// One change a commit made: where, and how to undo it.
#[derive(Clone, Debug)]
struct Done {
    target: PathBuf,
    staged: PathBuf,
    backup: PathBuf,
    how: How,
}

/// A free name for a backup: `backup`, else `backup.1`, `backup.2`...
fn free_name(backup: &Path) -> PathBuf {
    let mut candidate = backup.to_path_buf();
    let mut n = 0;
    while candidate.symlink_metadata().is_ok() {
        n += 1;
        let mut s = backup.as_os_str().to_owned();
        s.push(format!(".{n}"));
        candidate = PathBuf::from(s);
    }
    candidate
}

/// Puts the staged content at `target` so that the target path never goes missing (except for
/// a directory where `RENAME_EXCHANGE` is unavailable), recording each change in `done` as soon
/// as it is made.
fn put_in_place(
    target: &Path,
    staged: &Path,
    backup: &Path,
    steps: &mut Steps,
    done: &mut Vec<Done>,
) -> Result<(), Halt> {
    steps.create_dirs(&parent_of(target))?;
    let new_is_dir = staged
        .symlink_metadata()
        .map_err(io("stat", staged))?
        .is_dir();
    let record = |done: &mut Vec<Done>, backup: &Path, how| {
        done.push(Done {
            target: target.to_path_buf(),
            staged: staged.to_path_buf(),
            backup: backup.to_path_buf(),
            how,
        });
    };
    match lstat(target)? {
        None => {
            steps.rename(staged, target, "rename into place")?;
            record(done, backup, How::Created);
            steps.sync_parents(target, staged)
        }
        Some(old) => {
            // One atomic swap, files included: the old content ends up in the stage with its
            // one link (a hard link kept for an undo would show readers the file with two).
            steps.step()?;
            if exchange(staged, target).map_err(io("swap in", target))? {
                record(done, backup, How::Exchanged);
                return steps.sync_parents(target, staged);
            }
            if !old.is_dir() && !new_is_dir {
                // A copy, kept only for an undo (roll-forward never needs it).
                let kept = copy_aside(target, &old, backup).is_ok();
                steps.rename(staged, target, "rename into place")?;
                record(done, backup, How::OverFile { kept });
                return steps.sync_dir(&parent_of(target));
            }
            let backup = free_name(backup);
            steps.rename(target, &backup, "move aside")?;
            record(done, &backup, How::Aside);
            steps.sync_parents(target, &backup)?;
            steps.rename(staged, target, "rename into place")?;
            if let Some(last) = done.last_mut() {
                last.how = How::AsideIn;
            }
            steps.sync_parents(target, staged)
        }
    }
}

/// Copies the old file (or symbolic link) `target` to `backup`, for an undo where files cannot
/// be exchanged: a copy, not a hard link, so that the target never has a second link.
fn copy_aside(target: &Path, old: &fs::Metadata, backup: &Path) -> std::io::Result<()> {
    if old.file_type().is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(target)?, backup)
    } else {
        fs::copy(target, backup).map(|_| ())
    }
}

/// Completes one journaled change; true when something had to be done.
fn roll_forward(root: &Path, stage: &Path, u: &Unit, steps: &mut Steps) -> Result<bool, Halt> {
    check_relative(&u.rel)?;
    check_relative(&u.staged)?;
    check_relative(&u.backup)?;
    let target = root.join(&u.rel);
    let backup = stage.join(&u.backup);
    steps.create_dirs(&parent_of(&backup))?;
    if !u.put {
        if lstat(&target)?.is_none() {
            return Ok(false);
        }
        let backup = free_name(&backup);
        steps.rename(&target, &backup, "move aside")?;
        steps.sync_parents(&target, &backup)?;
        return Ok(true);
    }
    let staged = stage.join(&u.staged);
    let staged_meta = lstat(&staged)?;
    let want = match (u.new_ino, &staged_meta) {
        (Some(ino), _) => ino,
        // An older journal: the staged entry is moved away when its change is done.
        (None, Some(m)) => m.ino(),
        (None, None) => return Ok(false),
    };
    if lstat(&target)?.is_some_and(|m| m.ino() == want) {
        return Ok(false);
    }
    match staged_meta {
        Some(m) if m.ino() == want => {
            put_in_place(&target, &staged, &backup, steps, &mut Vec::new())?;
            Ok(true)
        }
        _ => Err(WriteOutputError::Io {
            action: "complete the interrupted commit of",
            path: target,
            source: std::io::Error::other(format!(
                "its new content is neither in place nor staged in {}",
                stage.display()
            )),
        }
        .into()),
    }
}

/// Finishes or cleans up after an interrupted [`Changeset`] under `root`: rolls a journal
/// forward and removes the staging directories of processes that are gone. Cheap when there is
/// nothing to do (one directory listing). Takes the root's lock.
pub fn recover(root: &Path) -> Result<Recovered, WriteOutputError> {
    no_crash(recover_inner(root, &mut Steps::new(None)))
}

fn recover_inner(root: &Path, steps: &mut Steps) -> Result<Recovered, Halt> {
    if !root.is_dir() {
        return Ok(Recovered::default());
    }
    let _lock = lock_root(root)?;
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
            let stage_name = Path::new(&journal.stage);
            if stage_name.components().count() != 1 {
                return Err(WriteOutputError::UnsafePath(stage_name.to_path_buf()).into());
            }
            check_relative(stage_name)?;
            let stage = root.join(stage_name);
            for u in &journal.units {
                if roll_forward(root, &stage, u, steps)? {
                    out.rolled_forward += 1;
                }
            }
            steps.unlink(&journal_path)?;
            steps.sync_dir(root)?;
            out.journal_found = true;
            steps.remove_stage(&stage)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("read", &journal_path)(e).into()),
    }
    // A journal that never reached its final name was never a commit point.
    let _ = fs::remove_file(root.join(LEGACY_JOURNAL_TMP_FILE));
    out.stale_stages_removed = remove_stale_stages(root, STAGE_PREFIX)?;
    Ok(out)
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

// ---------------------------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------------------------

/// An input is part of an interrupted commit that this process did not complete (it cannot
/// write the tree, or repairs are off).
#[derive(Debug, Error)]
#[error(
    "{} is part of an interrupted bundle-tool commit ({}) that was not completed: {reason}",
    input.display(),
    root.join(JOURNAL_FILE).display()
)]
pub struct PendingCommit {
    /// The input that was to be read.
    pub input: PathBuf,
    /// The changeset root holding the journal.
    pub root: PathBuf,
    /// Why it was not completed.
    pub reason: String,
}

impl PendingCommit {
    /// The `hint:` line: how to repair the tree.
    pub fn hint(&self) -> String {
        format!(
            "the tree is half old, half new until the interrupted commit is completed: run this command again as a user who can write {} (bundle-tool completes an interrupted commit before it reads), or re-run the interrupted `bundle-tool release` or `promote`",
            self.root.display()
        )
    }
}

/// `path` made absolute, with `.` and `..` resolved lexically.
pub fn absolute_lexical(path: &Path) -> std::io::Result<PathBuf> {
    let abs = std::path::absolute(path)?;
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    Ok(out)
}

/// Whether the journal in `root` (if any) has a change touching `input` (a path at, above or
/// below one of its targets). An unreadable journal touches everything.
fn journal_touches(root: &Path, input: &Path) -> bool {
    let journal = root.join(JOURNAL_FILE);
    let Ok(meta) = journal.symlink_metadata() else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let Ok(bytes) = fs::read(&journal) else {
        // Gone meanwhile (a commit that just finished), or unreadable.
        return journal.symlink_metadata().is_ok();
    };
    match serde_json::from_slice::<Journal>(&bytes) {
        Ok(j) => j.units.iter().any(|u| {
            let target = root.join(&u.rel);
            target.starts_with(input) || input.starts_with(&target)
        }),
        Err(_) => true,
    }
}

/// Directories that may hold a journal of a commit touching `input`: the input's directory and
/// every directory above it, and (for a directory) those up to two levels below it (a bundle
/// generated into `bundle/<package>/<version>` has its journal in `bundle/<package>`).
fn pending_roots(input: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Ok(abs) = absolute_lexical(input) {
        paths.push(abs);
    }
    if let Ok(real) = fs::canonicalize(input)
        && !paths.contains(&real)
    {
        paths.push(real);
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    let add = |root: &Path, roots: &mut Vec<PathBuf>| {
        if !roots.iter().any(|r| r == root) {
            roots.push(root.to_path_buf());
        }
    };
    for p in &paths {
        for dir in p.ancestors() {
            if journal_touches(dir, p) {
                add(dir, &mut roots);
            }
        }
        let mut level = vec![p.clone()];
        for _ in 0..2 {
            let mut next = Vec::new();
            for dir in &level {
                let Ok(entries) = fs::read_dir(dir) else {
                    continue;
                };
                for e in entries.flatten() {
                    let hidden = e.file_name().to_string_lossy().starts_with('.');
                    if !hidden && e.file_type().is_ok_and(|t| t.is_dir()) {
                        let sub = e.path();
                        if journal_touches(&sub, p) {
                            add(&sub, &mut roots);
                        }
                        next.push(sub);
                    }
                }
            }
            level = next;
        }
    }
    roots
}

fn repairs_off() -> bool {
    std::env::var(NO_REPAIR_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The hook every reader of a project tree calls before reading `input` (a file or a
/// directory, existing or not): an interrupted commit touching it (see [`pending_roots`]) is
/// rolled forward when this process can take the lock and write; otherwise the read is refused
/// with a [`PendingCommit`]. Returns the roots completed and what was done there. Costs a few
/// `stat`s when there is nothing to do.
pub fn recover_before_read(input: &Path) -> Result<Vec<(PathBuf, Recovered)>, PendingCommit> {
    let mut done = Vec::new();
    for root in pending_roots(input) {
        let refuse = |reason: String| PendingCommit {
            input: input.to_path_buf(),
            root: root.clone(),
            reason,
        };
        if repairs_off() {
            return Err(refuse(format!("repairs are off ({NO_REPAIR_ENV} is set)")));
        }
        match recover(&root) {
            Ok(r) => done.push((root, r)),
            Err(e) => return Err(refuse(e.to_string())),
        }
    }
    Ok(done)
}

impl Changeset {
    /// Starts a changeset under `root` (created if missing), after completing whatever an
    /// interrupted run left there or above it ([`recover_before_read`], [`recover`]). The
    /// staging area lives inside `root` so that the final renames never cross filesystems.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, WriteOutputError> {
        let root = root.into();
        no_crash(Steps::new(None).create_dirs(&root))?;
        recover_before_read(&root).map_err(|e| WriteOutputError::Pending(Box::new(e)))?;
        recover(&root)?;
        let stage = tempfile::Builder::new()
            .prefix(&format!("{STAGE_PREFIX}{}-", std::process::id()))
            .tempdir_in(&root)
            .map_err(io("create staging directory in", &root))?;
        let ignore = stage.path().join(STAGE_IGNORE);
        fs::write(
            &ignore,
            "# bundle-tool staging: nothing here is part of a catalog\n*\n",
        )
        .map_err(io("write", &ignore))?;
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
            new_ino: None,
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
        self.commit_inner(None).map(|_| ())
    }

    /// Crash-safety tests: commits, but stops dead just before the `step`-th durability step of
    /// the commit (fsyncs, the journal's write and rename, mkdirs, links, renames, exchanges,
    /// unlinks), leaving everything on disk as a `kill -9` there would. Returns true when it
    /// stopped, false when the commit has fewer steps and completed.
    #[doc(hidden)]
    pub fn commit_crashing_at(self, step: usize) -> Result<bool, WriteOutputError> {
        self.commit_inner(Some(step))
    }

    /// [`Changeset::commit`]; with `crash_at = Some(n)` (tests only) it stops dead at the n-th
    /// durability step. Returns whether it stopped.
    fn commit_inner(mut self, crash_at: Option<usize>) -> Result<bool, WriteOutputError> {
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
        // Nothing but files, directories and links is ever replaced: not a device, not a FIFO.
        for u in &self.units {
            let target = self.root.join(&u.rel);
            if let Some(kind) = lstat(&target)?.as_ref().and_then(special_kind) {
                return Err(WriteOutputError::Unwritable { path: target, kind });
            }
        }
        let backups = stage.path().join("backups");
        fs::create_dir_all(&backups).map_err(io("create directory", &backups))?;
        for u in &mut self.units {
            if u.put {
                let staged = stage.path().join(&u.staged);
                u.new_ino = Some(
                    fs::symlink_metadata(&staged)
                        .map_err(io("stat", &staged))?
                        .ino(),
                );
            }
        }
        let mut steps = Steps::new(crash_at);
        // 1. Everything staged is durable before the journal says it may be moved in; 2. the
        // commit point.
        match self.write_journal(stage.path(), &stage_name, &mut steps) {
            Ok(()) => {}
            Err(Halt::Crash) => {
                let _ = stage.keep();
                return Ok(true);
            }
            Err(Halt::Io(e)) => {
                // Nothing was changed yet. A journal that made it into the root must go before
                // its stage does; if it cannot, the stage stays for recovery to roll forward.
                let journal = self.root.join(JOURNAL_FILE);
                if journal.symlink_metadata().is_ok() {
                    if fs::remove_file(&journal).is_ok() {
                        let _ = fs::File::open(&self.root).and_then(|f| f.sync_all());
                    } else {
                        let _ = stage.keep();
                    }
                }
                return Err(e);
            }
        }
        // From here on the stage belongs to the journal: never removed behind its back.
        let stage = stage.keep();
        // 3. The changes.
        let mut done: Vec<Done> = Vec::new();
        let mut result = Ok(());
        for u in &self.units {
            match apply_unit(&self.root, &stage, u, &mut steps, &mut done) {
                Ok(()) => {}
                Err(Halt::Crash) => return Ok(true),
                Err(Halt::Io(e)) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if let Err(error) = result {
            // An I/O error (not a crash): put everything back as it was, durably. If that fails
            // too, the tree is half changed: keep the journal and the stage, so that recovery
            // completes the change (rolls forward) instead of leaving it half done.
            if let Err(undo) = undo_changes(done) {
                return Err(WriteOutputError::Interrupted {
                    root: self.root.clone(),
                    error: Box::new(error),
                    undo,
                });
            }
            result = Err(error);
        }
        // 4. Done (or undone): the journal goes first, then the stage with the old content.
        match finish_commit(&self.root, &stage, &mut steps) {
            Ok(()) => result.map(|()| false),
            Err(Halt::Crash) => Ok(true),
            Err(Halt::Io(e)) => result.and(Err(e)).map(|()| false),
        }
    }

    /// Steps 1 and 2 of a commit: fsyncs the stage, then writes the journal in the stage,
    /// fsyncs it and renames it into the root.
    fn write_journal(&self, stage: &Path, stage_name: &str, steps: &mut Steps) -> Result<(), Halt> {
        steps.sync_tree(stage)?;
        steps.sync_dir(&self.root)?;
        let journal = Journal {
            stage: stage_name.to_string(),
            units: self.units.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&journal).map_err(|e| WriteOutputError::Io {
            action: "encode the journal for",
            path: self.root.clone(),
            source: std::io::Error::other(e),
        })?;
        let tmp = stage.join(JOURNAL_TMP_IN_STAGE);
        steps.step()?;
        let mut f = fs::File::create(&tmp).map_err(io("create", &tmp))?;
        f.write_all(&bytes).map_err(io("write", &tmp))?;
        steps.step()?;
        fsync(&f).map_err(io("sync", &tmp))?;
        drop(f);
        let journal_path = self.root.join(JOURNAL_FILE);
        steps.rename(&tmp, &journal_path, "write the journal")?;
        steps.sync_dir(&self.root)
    }
}

/// Step 4 of a commit: the journal goes first (the tree is final from here on), then the stage.
fn finish_commit(root: &Path, stage: &Path, steps: &mut Steps) -> Result<(), Halt> {
    steps.unlink(&root.join(JOURNAL_FILE))?;
    steps.sync_dir(root)?;
    steps.remove_stage(stage)
}

/// Applies one change of a commit, recording what was done.
fn apply_unit(
    root: &Path,
    stage: &Path,
    u: &Unit,
    steps: &mut Steps,
    done: &mut Vec<Done>,
) -> Result<(), Halt> {
    let target = root.join(&u.rel);
    let backup = stage.join(&u.backup);
    if u.put {
        return put_in_place(&target, &stage.join(&u.staged), &backup, steps, done);
    }
    if lstat(&target)?.is_some() {
        steps.rename(&target, &backup, "move aside")?;
        done.push(Done {
            target: target.clone(),
            staged: stage.join(&u.staged),
            backup: backup.clone(),
            how: How::Removed,
        });
        steps.sync_parents(&target, &backup)?;
    }
    Ok(())
}

/// Undoes the changes of a failed commit, newest first, each folder synced. Every step leaves a
/// state the journal's roll-forward completes (the new content is back at its staged path, with
/// its inode, before the old content returns), so a failure part-way (reported to the caller,
/// who keeps the journal) is recovered like a crash.
fn undo_changes(done: Vec<Done>) -> std::io::Result<()> {
    let sync = |p: &Path| fs::File::open(parent_of(p))?.sync_all();
    for d in done.into_iter().rev() {
        match d.how {
            How::Created => {
                fs::rename(&d.target, &d.staged)?;
                sync(&d.staged)?;
            }
            How::OverFile { kept: true } => {
                fs::hard_link(&d.target, &d.staged)?;
                sync(&d.staged)?;
                fs::rename(&d.backup, &d.target)?;
            }
            How::OverFile { kept: false } => {
                return Err(std::io::Error::other(format!(
                    "the old content of {} was not kept",
                    d.target.display()
                )));
            }
            How::Exchanged => {
                if !exchange(&d.staged, &d.target)? {
                    return Err(std::io::Error::other(format!(
                        "cannot swap {} back",
                        d.target.display()
                    )));
                }
                sync(&d.staged)?;
            }
            How::AsideIn => {
                fs::rename(&d.target, &d.staged)?;
                sync(&d.staged)?;
                fs::rename(&d.backup, &d.target)?;
            }
            How::Aside | How::Removed => {
                fs::rename(&d.backup, &d.target)?;
            }
        }
        sync(&d.target)?;
    }
    Ok(())
}

/// Reads every regular file under `dir` into a map of relative path to contents, sorted.
/// Used to snapshot trees (tests compare before/after; `--plan` diffs). Symbolic links and
/// anything but regular files are not part of the snapshot. Each file is opened through `dir`
/// as an input root ([`crate::confine::InputRoot`]) and checked on its descriptor (a file
/// swapped for a link out of `dir` after the listing, a FIFO, a file with several hard links or
/// over [`crate::confine::MANIFEST_FILE`] is an error naming it, and is not read).
pub fn read_tree(dir: &Path) -> Result<BTreeMap<PathBuf, Vec<u8>>, WriteOutputError> {
    use crate::confine::{InputRoot, MANIFEST_FILE, ReadConfinedError};
    fn refused(path: &Path, e: ReadConfinedError) -> WriteOutputError {
        match e {
            ReadConfinedError::Io { source, .. } => io("read", path)(source),
            other => {
                // The opener's words, after "cannot read <path>: ".
                let text = other.to_string();
                let prefix = format!("{}: ", other.path().display());
                let why = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
                io("read", path)(std::io::Error::other(why))
            }
        }
    }
    fn walk(
        root: &InputRoot,
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
                walk(root, base, &p, out)?;
            } else if ft.is_file() {
                let rel = p.strip_prefix(base).unwrap_or(&p).to_path_buf();
                let bytes = root
                    .open(&p)
                    .and_then(|f| f.read_to_end(MANIFEST_FILE))
                    .map_err(|e| refused(&p, e))?;
                out.insert(rel, bytes);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    if dir.exists() {
        let root = InputRoot::new(dir).map_err(|e| refused(dir, e.into()))?;
        walk(&root, dir, dir, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Makes [`exchange`] report "unsupported", as on systems without `RENAME_EXCHANGE`.
        pub(super) static NO_EXCHANGE: Cell<bool> = const { Cell::new(false) };
        /// Makes the commit's fsyncs no-ops (still counted as steps).
        pub(super) static NO_SYNC: Cell<bool> = const { Cell::new(false) };
    }

    /// Runs `f` with `RENAME_EXCHANGE` available, then without it.
    fn both_ways(f: impl Fn(&str)) {
        for without in [false, true] {
            NO_EXCHANGE.with(|c| c.set(without));
            f(if without {
                "without RENAME_EXCHANGE"
            } else {
                "with RENAME_EXCHANGE"
            });
        }
        NO_EXCHANGE.with(|c| c.set(false));
    }

    fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
    }

    #[test]
    fn changeset_replaces_and_creates() {
        both_ways(|how| {
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
                ],
                "{how}"
            );
        });
    }

    #[test]
    fn failed_commit_rolls_back() {
        both_ways(|how| {
            let root = tempfile::tempdir().unwrap();
            fs::write(root.path().join("keep"), "keep").unwrap();
            fs::create_dir(root.path().join("dir")).unwrap();
            fs::write(root.path().join("dir/f"), "old").unwrap();
            fs::write(root.path().join("gone"), "gone").unwrap();
            fs::write(root.path().join("blocker"), "file, not a dir").unwrap();
            let before = read_tree(root.path()).unwrap();
            let mut cs = Changeset::new(root.path()).unwrap();
            cs.put_file("keep", b"changed").unwrap();
            cs.put_dir("dir", [(PathBuf::from("g"), b"new".to_vec())])
                .unwrap();
            cs.put_file("new", b"new").unwrap();
            cs.remove("gone").unwrap();
            // Its parent is a regular file, so creating it fails after the others were applied.
            cs.put_file("blocker/child", b"x").unwrap();
            assert!(cs.commit().is_err(), "{how}");
            assert_eq!(read_tree(root.path()).unwrap(), before, "{how}");
            assert!(!root.path().join(JOURNAL_FILE).exists(), "{how}");
        });
    }

    /// The changes of `cs` applied by hand up to the journal and every change, as a commit does
    /// it: (the stage, what was done).
    fn apply_by_hand(mut cs: Changeset) -> (PathBuf, Vec<Done>) {
        let stage = cs.stage.take().unwrap().keep();
        let name = stage.file_name().unwrap().to_str().unwrap().to_string();
        fs::create_dir_all(stage.join("backups")).unwrap();
        for u in cs.units.iter_mut().filter(|u| u.put) {
            u.new_ino = Some(fs::symlink_metadata(stage.join(&u.staged)).unwrap().ino());
        }
        let mut steps = Steps::new(None);
        cs.write_journal(&stage, &name, &mut steps).unwrap();
        let mut done = Vec::new();
        for u in &cs.units {
            apply_unit(&cs.root, &stage, u, &mut steps, &mut done).unwrap();
        }
        (stage, done)
    }

    /// A failed commit whose undo stops part-way keeps its journal; whatever the undo managed,
    /// recovery then completes the change.
    #[test]
    fn an_undo_that_stops_part_way_is_completed_by_recovery() {
        both_ways(|how| {
            for undone in 0..=5 {
                let root = tempfile::tempdir().unwrap();
                old_tree(root.path());
                let new = {
                    let r = tempfile::tempdir().unwrap();
                    old_tree(r.path());
                    new_change(r.path()).commit().unwrap();
                    read_tree(r.path()).unwrap()
                };
                let (_, done) = apply_by_hand(new_change(root.path()));
                assert_eq!(done.len(), 5, "{how}");
                let from = done.len() - undone;
                undo_changes(done[from..].to_vec()).unwrap();
                assert!(recover(root.path()).unwrap().journal_found, "{how}");
                assert_eq!(
                    read_tree(root.path()).unwrap(),
                    new,
                    "{how}, {undone} undone"
                );
            }
        });
    }

    /// A tree with an old bundle, a catalog file and a file the change removes.
    fn old_tree(root: &Path) {
        fs::create_dir_all(root.join("bundle/p/0.1.0")).unwrap();
        fs::write(root.join("bundle/p/0.1.0/csv.yaml"), "old csv").unwrap();
        fs::create_dir_all(root.join("catalog/p")).unwrap();
        fs::write(root.join("catalog/p/catalog.yaml"), "old catalog").unwrap();
        fs::write(root.join("catalog/p/gone.yaml"), "removed by the change").unwrap();
        fs::write(root.join("catalog/p/dir-to-file"), "a file, becomes a dir").unwrap();
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
        cs.put_dir(
            "catalog/p/dir-to-file",
            [(PathBuf::from("x"), b"now a directory".to_vec())],
        )
        .unwrap();
        cs
    }

    /// The content of one path: a file's bytes, a directory's files, or nothing.
    fn content(path: &Path) -> Option<BTreeMap<PathBuf, Vec<u8>>> {
        let m = path.symlink_metadata().ok()?;
        if m.is_dir() {
            Some(read_tree(path).unwrap())
        } else {
            Some(BTreeMap::from([(PathBuf::new(), fs::read(path).unwrap())]))
        }
    }

    const TARGETS: [&str; 5] = [
        "bundle/p/0.2.0",
        "bundle/p/0.1.0",
        "catalog/p/catalog.yaml",
        "catalog/p/gone.yaml",
        "catalog/p/dir-to-file",
    ];

    /// What `bundle/` and `catalog/` hold (no stage, no journal).
    fn project(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        for top in ["bundle", "catalog"] {
            for (k, v) in read_tree(&root.join(top)).unwrap() {
                out.insert(Path::new(top).join(k), v);
            }
        }
        out
    }

    /// After a crash at any point, each target holds its old or its new content, whole; with
    /// no journal the whole tree is old or new.
    fn check_each_path(root: &Path, old: &Path, new: &Path, what: &str) {
        let journal = root.join(JOURNAL_FILE).exists();
        for t in TARGETS {
            let now = content(&root.join(t));
            let ok = now == content(&old.join(t)) || now == content(&new.join(t));
            // Without RENAME_EXCHANGE, a directory is missing between its two renames (the
            // journal is there to complete it).
            let between = NO_EXCHANGE.with(|c| c.get()) && journal && now.is_none();
            assert!(ok || between, "{what}: {t} is neither old nor new: {now:?}");
        }
        if !journal {
            let tree = project(root);
            assert!(
                tree == project(old) || tree == project(new),
                "{what}: no journal, and the tree is neither old nor new"
            );
        }
        // A reader finds the journal when (and only when) there is one.
        assert_eq!(
            !pending_roots(&root.join("catalog")).is_empty(),
            journal,
            "{what}"
        );
        assert_eq!(
            !pending_roots(&root.join("bundle/p/0.2.0")).is_empty(),
            journal,
            "{what}"
        );
    }

    /// A commit stopped dead at each of its durability steps (every fsync, mkdir, link,
    /// rename, exchange and unlink), and recovery stopped dead at each of its own steps after
    /// that: at every point each path is old or new, and a final recovery gives the new tree
    /// (or the old one, for a crash before the commit point) with nothing left behind.
    #[test]
    fn a_crash_at_any_step_of_a_commit_or_its_recovery_never_leaves_a_path_half_done() {
        NO_SYNC.with(|c| c.set(true));
        both_ways(|how| {
            let old = tempfile::tempdir().unwrap();
            old_tree(old.path());
            let new = tempfile::tempdir().unwrap();
            old_tree(new.path());
            new_change(new.path()).commit().unwrap();
            assert_ne!(project(old.path()), project(new.path()));
            let mut crashes = 0;
            let mut with_journal = 0;
            for step in 1.. {
                assert!(step < 500, "{how}: the commit never completed");
                let crash = |root: &Path| {
                    old_tree(root);
                    new_change(root).commit_crashing_at(step).unwrap()
                };
                let root = tempfile::tempdir().unwrap();
                if !crash(root.path()) {
                    assert_eq!(project(root.path()), project(new.path()), "{how}");
                    break;
                }
                crashes += 1;
                let what = format!("{how}, crash at commit step {step}");
                check_each_path(root.path(), old.path(), new.path(), &what);
                let journal = root.path().join(JOURNAL_FILE).exists();
                with_journal += usize::from(journal);
                // Recovery, itself stopped dead at each of its steps, then run in full.
                for rstep in 1.. {
                    let root = tempfile::tempdir().unwrap();
                    assert!(crash(root.path()));
                    let stopped = match recover_inner(root.path(), &mut Steps::new(Some(rstep))) {
                        Err(Halt::Crash) => true,
                        Err(Halt::Io(e)) => panic!("{what}: recovery failed: {e}"),
                        Ok(_) => false,
                    };
                    let what = format!("{what}, recovery step {rstep}");
                    if stopped {
                        check_each_path(root.path(), old.path(), new.path(), &what);
                    }
                    let rec = recover(root.path()).unwrap();
                    let tree = project(root.path());
                    assert!(!root.path().join(JOURNAL_FILE).exists(), "{what}");
                    if journal {
                        assert_eq!(tree, project(new.path()), "{what}");
                        // What is left of the stage (of this process, which is alive, so
                        // stale-stage removal leaves it) is a stage, ignored by loaders.
                        for e in fs::read_dir(root.path()).unwrap() {
                            let name = e.unwrap().file_name().to_string_lossy().into_owned();
                            assert!(
                                !name.starts_with('.') || name.starts_with(STAGE_PREFIX),
                                "{what}: {name}"
                            );
                        }
                    } else {
                        assert!(
                            tree == project(old.path()) || tree == project(new.path()),
                            "{what}"
                        );
                        assert!(!rec.journal_found, "{what}");
                    }
                    // Recovering again does nothing.
                    assert_eq!(recover(root.path()).unwrap().rolled_forward, 0, "{what}");
                    if !stopped || !journal {
                        break;
                    }
                }
            }
            assert!(crashes > 20, "{how}: only {crashes} steps");
            assert!(
                with_journal > 8,
                "{how}: only {with_journal} steps after the commit point"
            );
        });
    }

    /// A journal written by an older bundle-tool (no inode numbers; the old content moved aside
    /// before the new content moved in) is still completed.
    #[test]
    fn a_journal_of_an_older_version_is_rolled_forward() {
        let root = tempfile::tempdir().unwrap();
        let stage = root.path().join(format!("{STAGE_PREFIX}1-old"));
        fs::create_dir_all(stage.join("backups")).unwrap();
        fs::create_dir_all(root.path().join("catalog/p")).unwrap();
        // Unit 0 was moved aside and not yet in; unit 1 was not started.
        fs::write(stage.join("unit-0"), "new catalog").unwrap();
        fs::write(stage.join("backups/0"), "old catalog").unwrap();
        fs::create_dir_all(stage.join("unit-1")).unwrap();
        fs::write(stage.join("unit-1/csv.yaml"), "new csv").unwrap();
        fs::create_dir_all(root.path().join("bundle/p/0.1.0")).unwrap();
        fs::write(root.path().join("bundle/p/0.1.0/csv.yaml"), "old csv").unwrap();
        let journal = serde_json::json!({
            "stage": stage.file_name().unwrap().to_str().unwrap(),
            "units": [
                { "rel": "catalog/p/catalog.yaml", "put": true, "staged": "unit-0", "backup": "backups/0" },
                { "rel": "bundle/p/0.1.0", "put": true, "staged": "unit-1", "backup": "backups/1" },
            ]
        });
        fs::write(root.path().join(JOURNAL_FILE), journal.to_string()).unwrap();
        let rec = recover(root.path()).unwrap();
        assert!(rec.journal_found);
        assert_eq!(rec.rolled_forward, 2);
        assert_eq!(
            fs::read(root.path().join("catalog/p/catalog.yaml")).unwrap(),
            b"new catalog"
        );
        assert_eq!(
            fs::read(root.path().join("bundle/p/0.1.0/csv.yaml")).unwrap(),
            b"new csv"
        );
        assert!(!stage.exists());
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
        // The 4 staged files and the stage's ignore file.
        assert_eq!(read_tree(root.path()).unwrap().len(), old.len() + 5);
        assert!(pending_roots(&root.path().join("catalog")).is_empty());
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

    /// Readers look for a journal in the input's directory and above (and two levels below),
    /// and only a journal whose changes touch the input concerns them.
    #[test]
    fn readers_find_the_journals_that_touch_their_input() {
        let root = tempfile::tempdir().unwrap();
        old_tree(root.path());
        // A journal left in the project root, naming bundle/p/0.2.0 and catalog/p/*.
        let (_, _) = apply_by_hand(new_change(root.path()));
        let r = root.path();
        for touched in [
            r.join("catalog"),
            r.join("catalog/p/catalog.yaml"),
            r.join("bundle/p/0.2.0"),
            r.join("bundle"),
            r.to_path_buf(),
        ] {
            assert_eq!(
                pending_roots(&touched),
                vec![r.to_path_buf()],
                "{}",
                touched.display()
            );
        }
        fs::create_dir_all(r.join("config")).unwrap();
        assert!(pending_roots(&r.join("config")).is_empty());
        assert!(pending_roots(&r.join("bundle/q/0.1.0")).is_empty());
        // Relative inputs and `..` resolve the same way.
        assert!(!pending_roots(&r.join("config/../catalog")).is_empty());
        // A reader that can write completes the commit before it reads.
        let done = recover_before_read(&r.join("catalog")).unwrap();
        assert_eq!(done.len(), 1);
        assert!(done[0].1.journal_found);
        assert!(pending_roots(&r.join("catalog")).is_empty());
        assert_eq!(
            fs::read(r.join("catalog/p/catalog.yaml")).unwrap(),
            b"new catalog"
        );

        // A journal two levels below a directory input (a bundle generated into
        // bundle/<package>/<version> has its root in bundle/<package>).
        let mut cs = Changeset::new(r.join("bundle/p")).unwrap();
        cs.put_dir("0.3.0", [(PathBuf::from("f"), b"x".to_vec())])
            .unwrap();
        let (_, _) = apply_by_hand(cs);
        assert_eq!(pending_roots(&r.join("bundle")), vec![r.join("bundle/p")]);
        assert!(pending_roots(&r.join("catalog")).is_empty());

        // A journal that cannot be read concerns everyone below it.
        fs::write(r.join("catalog/p").join(JOURNAL_FILE), "not json").unwrap();
        assert_eq!(
            pending_roots(&r.join("catalog/p/catalog.yaml")),
            vec![r.join("catalog/p")]
        );
        let refused = recover_before_read(&r.join("catalog")).unwrap_err();
        assert!(refused.to_string().contains("interrupted"), "{refused}");
        assert!(refused.hint().contains("run this command again"));
    }

    /// Nothing but files, directories and links is replaced by a changeset: a device or a FIFO
    /// where a file or directory would go is an error naming it, and is left as it was.
    #[test]
    fn a_changeset_never_replaces_a_fifo() {
        let root = tempfile::tempdir().unwrap();
        let fifo = root.path().join("out");
        mkfifo(&fifo);
        let err = write_tree_atomic(&fifo, &BTreeMap::new(), true).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let mut cs = Changeset::new(root.path()).unwrap();
        cs.put_file("out", b"x").unwrap();
        let err = cs.commit().unwrap_err();
        assert!(
            err.to_string().contains("a FIFO") && err.to_string().contains("out"),
            "{err}"
        );
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        let err = write_file_atomic(&fifo, b"x").unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn write_file_atomic_refuses_a_device_and_write_output_writes_it_in_place() {
        let null = Path::new("/dev/null");
        let err = write_file_atomic(null, b"x").unwrap_err();
        assert!(err.to_string().contains("a character device"), "{err}");
        assert!(fs::metadata(null).unwrap().file_type().is_char_device());
        assert_eq!(write_output(null, b"x").unwrap(), OutputTarget::InPlace);
        assert!(fs::metadata(null).unwrap().file_type().is_char_device());
    }

    #[test]
    fn write_output_feeds_a_fifo_reader() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let path = fifo.clone();
        let reader = std::thread::spawn(move || fs::read(path).unwrap());
        assert_eq!(
            write_output(&fifo, b"through the pipe").unwrap(),
            OutputTarget::InPlace
        );
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(reader.join().unwrap(), b"through the pipe");
    }

    #[test]
    fn write_output_keeps_the_mode_follows_links_and_names_what_it_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(write_output(&file, b"new").unwrap(), OutputTarget::File);
        assert_eq!(fs::read(&file).unwrap(), b"new");
        assert_eq!(fs::metadata(&file).unwrap().mode() & 0o7777, 0o640);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("f", &link).unwrap();
        write_output(&link, b"through the link").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&file).unwrap(), b"through the link");
        assert_eq!(fs::metadata(&file).unwrap().mode() & 0o7777, 0o640);
        // New paths get their parents.
        write_output(&dir.path().join("a/b/new"), b"n").unwrap();
        assert_eq!(fs::read(dir.path().join("a/b/new")).unwrap(), b"n");
        for (path, kind) in [
            (dir.path().join("a"), "a directory"),
            (dir.path().join("dangling"), "a dangling symbolic link"),
        ] {
            if kind.contains("dangling") {
                std::os::unix::fs::symlink("nowhere", &path).unwrap();
            }
            let err = write_output(&path, b"x").unwrap_err();
            assert!(
                matches!(&err, WriteOutputError::Unwritable { kind: k, .. } if *k == kind),
                "{err}"
            );
            assert!(err.to_string().contains(&path.display().to_string()));
        }
        // Nothing but the files written is left in the directory (no temporary files).
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a", "dangling", "f", "link"]);
    }

    /// Every regular file under `dir` with more than one link (a stage inside it is skipped:
    /// its `.indexignore` hides it from catalog loaders, and a bundle reader never lists it).
    fn linked_files(dir: &Path, out: &mut Vec<(PathBuf, u64)>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let e = e.unwrap();
            if e.file_name().to_string_lossy().starts_with(STAGE_PREFIX) {
                continue;
            }
            let m = e.path().symlink_metadata().unwrap();
            if m.is_dir() {
                linked_files(&e.path(), out);
            } else if m.is_file() && m.nlink() > 1 {
                out.push((e.path(), m.nlink()));
            }
        }
    }

    /// Readers refuse a file with several hard links (`confine::HardLinks`), and readers do
    /// not take the commit's lock: so no instant of a commit may show a file of the input with
    /// a second link (the old file used to be hard-linked into the stage just before the new
    /// one was renamed over it). Checked at every durability step, with and without
    /// `RENAME_EXCHANGE`, and for an undo after a failed commit.
    #[test]
    fn no_step_of_a_commit_shows_a_file_of_the_input_with_two_links() {
        NO_SYNC.with(|c| c.set(true));
        both_ways(|how| {
            for step in 1.. {
                assert!(step < 500, "{how}: the commit never completed");
                let root = tempfile::tempdir().unwrap();
                old_tree(root.path());
                let stopped = new_change(root.path()).commit_crashing_at(step).unwrap();
                let mut linked = Vec::new();
                linked_files(root.path(), &mut linked);
                assert!(linked.is_empty(), "{how}, step {step}: {linked:?}");
                // And a reader through the opener reads the input at that instant.
                for top in ["bundle", "catalog"] {
                    read_tree(&root.path().join(top))
                        .unwrap_or_else(|e| panic!("{how}, step {step}: {e}"));
                }
                if !stopped {
                    break;
                }
            }
            // A failed commit puts the old file back as it was, with one link.
            let root = tempfile::tempdir().unwrap();
            fs::write(root.path().join("keep"), "keep").unwrap();
            fs::write(root.path().join("blocker"), "file, not a dir").unwrap();
            let mut cs = Changeset::new(root.path()).unwrap();
            cs.put_file("keep", b"changed").unwrap();
            cs.put_file("blocker/child", b"x").unwrap();
            assert!(cs.commit().is_err(), "{how}");
            assert_eq!(fs::read(root.path().join("keep")).unwrap(), b"keep");
            let mut linked = Vec::new();
            linked_files(root.path(), &mut linked);
            assert!(linked.is_empty(), "{how}: {linked:?}");
        });
    }

    /// `read_tree` reads through the confined opener: a file with several hard links or over
    /// the bundle file limit is refused, naming it, without being read; links and FIFOs are
    /// not files of the tree (and a FIFO never blocks it).
    #[test]
    fn read_tree_refuses_hard_links_and_oversized_files() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("outside"), "secret").unwrap();
        let root = tmp.path().join("root");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("sub/a.yaml"), "a").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), root.join("link.yaml")).unwrap();
        mkfifo(&root.join("pipe.yaml"));
        assert_eq!(
            read_tree(&root).unwrap(),
            BTreeMap::from([(PathBuf::from("sub/a.yaml"), b"a".to_vec())])
        );

        fs::hard_link(tmp.path().join("outside"), root.join("sub/hard.yaml")).unwrap();
        let e = read_tree(&root).unwrap_err().to_string();
        assert!(
            e.contains("sub/hard.yaml") && e.contains("2 hard links") && !e.contains("secret"),
            "{e}"
        );
        fs::remove_file(root.join("sub/hard.yaml")).unwrap();

        fs::File::create(root.join("big"))
            .unwrap()
            .set_len(100 << 20)
            .unwrap();
        let e = read_tree(&root).unwrap_err().to_string();
        assert!(e.contains("big") && e.contains("more than the"), "{e}");
    }
}
