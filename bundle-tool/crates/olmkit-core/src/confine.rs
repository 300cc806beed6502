//! Reading input without leaving its root: the one opener every reader of bundles, catalogs,
//! templates and manifest folders goes through.
//!
//! A bundle or catalog directory is untrusted input: a symlink in it may point at
//! `/etc/passwd` or at `~/.docker/config.json`, a hard link may be another name of such a
//! file, a FIFO would block a reader forever, a sparse file may claim 8 GiB; whatever
//! bundle-tool reads it may copy into a catalog or an image. So every file of an input is:
//!
//! 1. opened once, relative to the root's directory descriptor (taken when the root is
//!    opened), never by a path string that could be re-resolved: with `openat2`
//!    (`RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`) where the kernel has it, else (and to name
//!    the link on a refusal) by walking the path one component at a time with `O_NOFOLLOW`,
//!    reading each symbolic link itself and following it only while it stays under the root.
//!    Symlinks that stay inside the root (absolute ones too) work as usual; one that leads out
//!    is refused with an error naming it and where it leads. A link swapped in after a
//!    directory was listed is caught the same way: there is no check-then-read window;
//! 2. checked on the opened descriptor (`fstat`): a regular file (a FIFO, socket, device or
//!    directory is refused, naming it; the open itself is non-blocking, so a FIFO cannot hang
//!    it), with one link ([`HardLinks`]: a file with several cannot be proven to belong to the
//!    input), and no larger than the reader's [`SizeLimit`] (before anything is read);
//! 3. read from that descriptor, into a buffer reserved up front without aborting on failure
//!    (an allocation that fails is an error naming the file), never beyond the limit even if
//!    the file grows meanwhile.
//!
//! Files a user names directly on the command line (`--manifests FILE`, `render FILE`) have no
//! root to stay in: [`open_named`] follows their symlinks, as any command does, and applies
//! the same descriptor checks (regular file, size).

use crate::docs::{ParseWarning, warn};
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The environment variable that lets readers read a file with several hard links (with a
/// warning naming it) instead of refusing it.
pub const ALLOW_HARD_LINKS_ENV: &str = "BUNDLE_TOOL_ALLOW_HARD_LINKS";

/// What to do with a file of an input that has more than one hard link.
///
/// A hard link to `~/.docker/config.json` inside a bundle is that file: no path check can tell
/// it from a file of the bundle, and its content would be embedded in a catalog
/// (`olm.bundle.object`) or an image. Files of a checkout, a tarball or a generated tree have
/// one link; a file with more cannot be proven to belong to the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HardLinks {
    /// Refuse it, naming it (the default).
    Refuse,
    /// Read it, with a warning naming it ([`ALLOW_HARD_LINKS_ENV`] set to a non-empty value
    /// other than `0` or `false`).
    Warn,
}

impl HardLinks {
    /// The policy the environment asks for ([`ALLOW_HARD_LINKS_ENV`]); refuse by default.
    pub fn from_env() -> Self {
        match std::env::var(ALLOW_HARD_LINKS_ENV) {
            Ok(v) if !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false") => {
                HardLinks::Warn
            }
            _ => HardLinks::Refuse,
        }
    }
}

/// The most bytes a reader takes from one file, and what that file is (for the message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeLimit {
    /// Largest size accepted.
    pub bytes: u64,
    /// What is bounded, as the refusal says it (`a bundle or manifest file`).
    pub what: &'static str,
}

/// Files of Kubernetes manifests: a bundle's `manifests/` and `metadata/` files and its
/// `bundle.Dockerfile`, `--manifests`, `--base-csv` and `--samples` files, stdin, catalog
/// templates. 64 MiB: OLM refuses a bundle whose manifests exceed 1 MiB gzip-compressed, and
/// no API server stores an object over 1.5 MiB; the largest real bundle file is a few MB.
pub const MANIFEST_FILE: SizeLimit = SizeLimit {
    bytes: 64 << 20,
    what: "a bundle or manifest file",
};

/// A YAML catalog file, parsed whole: the document parsers' own bound
/// ([`crate::docs::MAX_DOCUMENT_BYTES`]). JSON catalog files have no per-file bound (they are
/// read one document at a time), only [`CATALOG_DOCUMENT`].
pub const CATALOG_YAML_FILE: SizeLimit = SizeLimit {
    bytes: crate::docs::MAX_DOCUMENT_BYTES as u64,
    what: "a YAML catalog file",
};

/// One document (blob) of a JSON catalog stream.
pub const CATALOG_DOCUMENT: SizeLimit = SizeLimit {
    bytes: crate::docs::MAX_DOCUMENT_BYTES as u64,
    what: "one catalog document",
};

/// A catalog index file (`bundle-tool catalog index`; read by `serve` and `catalog-server`,
/// copied by `image build catalog --index`): metadata without the bundles' objects, tens of MB
/// for the largest catalogs. 1 GiB.
pub const CATALOG_INDEX: SizeLimit = SizeLimit {
    bytes: 1 << 30,
    what: "a catalog index",
};

/// A file of a directory copied into an image layer (`image build catalog`; a bundle's files
/// are [`MANIFEST_FILE`]s), which holds it whole in memory: a JSON catalog stream has no
/// per-file bound when it is read (one document at a time), but it has one here. 4 GiB, over
/// twice the largest rendered catalog (1.7 GB, `render -o json` of a community catalog).
pub const IMAGE_LAYER_FILE: SizeLimit = SizeLimit {
    bytes: 4 << 30,
    what: "a file copied into an image",
};

/// Reading a confined file failed.
#[derive(Debug, Error)]
pub enum ReadConfinedError {
    /// The path leaves the root.
    #[error(transparent)]
    Confine(#[from] ConfineError),
    /// The file cannot be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a regular file (a FIFO would block the reader, a device feed it forever).
    #[error(
        "{path}: {kind}, not a regular file: refusing to read it (input files must be regular files)"
    )]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is (`a FIFO (named pipe)`, `a directory`...).
        kind: &'static str,
    },
    /// A file with several hard links (see [`HardLinks`]).
    #[error(
        "{path}: the file has {links} hard links: it may be another name of a file outside the input, which no path check can tell; refusing to read it (copy it so that it has one link, or set {ALLOW_HARD_LINKS_ENV}=1 to read it with a warning)"
    )]
    HardLinked {
        /// The file.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },
    /// Larger than the reader accepts; nothing was read.
    #[error(
        "{path}: {size} bytes, more than the {} bytes ({}) {} may have: refusing to read it",
        limit.bytes, human(limit.bytes), limit.what
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (at least).
        size: u64,
        /// The bound it breaks.
        limit: SizeLimit,
    },
    /// The memory to read it could not be had.
    #[error("{path}: cannot allocate {size} bytes to read it")]
    OutOfMemory {
        /// The file.
        path: PathBuf,
        /// Bytes wanted.
        size: u64,
    },
    /// Swapped between a link and a file again and again while it was opened.
    #[error("{path}: kept changing between a symbolic link and a file while it was opened")]
    Changed {
        /// The file.
        path: PathBuf,
    },
}

impl ReadConfinedError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ReadConfinedError::Confine(ConfineError::Outside { path, .. })
            | ReadConfinedError::Confine(ConfineError::Resolve { path, .. })
            | ReadConfinedError::Io { path, .. }
            | ReadConfinedError::NotRegular { path, .. }
            | ReadConfinedError::HardLinked { path, .. }
            | ReadConfinedError::TooLarge { path, .. }
            | ReadConfinedError::OutOfMemory { path, .. }
            | ReadConfinedError::Changed { path } => path,
        }
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b => format!("{b} B"),
    }
}

/// What a file type is, for [`ReadConfinedError::NotRegular`].
fn describe(t: std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn io_err(path: &Path, source: impl Into<std::io::Error>) -> ReadConfinedError {
    ReadConfinedError::Io {
        path: path.to_path_buf(),
        source: source.into(),
    }
}

/// Whether `openat2` may be tried (cleared once the kernel or a seccomp filter refuses it).
static OPENAT2: AtomicBool = AtomicBool::new(true);

/// Symbolic links followed in one path at most (Linux's `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: usize = 40;

/// A path component that changed kind while being opened is retried this often.
const MAX_RETRIES: usize = 64;

/// The directory an input must stay in, held open.
#[derive(Clone, Debug)]
pub struct InputRoot {
    /// As given (for messages).
    given: PathBuf,
    /// With every symlink resolved (absolute symlinks into the root are followed).
    real: PathBuf,
    /// The directory, opened `O_PATH` when the root was made: every file is opened relative to
    /// it.
    dir: Arc<OwnedFd>,
    /// Files with several links.
    hard_links: HardLinks,
    /// Use `openat2` when the kernel has it (tests turn it off to exercise the walk).
    fast: bool,
}

impl InputRoot {
    /// The root `dir` (which must exist), opened. The root itself may be a symlink: what
    /// counts is where it leads. Hard links follow [`HardLinks::from_env`].
    pub fn new(dir: &Path) -> Result<Self, ConfineError> {
        let resolve = |source: std::io::Error| ConfineError::Resolve {
            path: dir.to_path_buf(),
            source,
        };
        let real = dir.canonicalize().map_err(resolve)?;
        let fd = rustix::fs::open(
            &real,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| resolve(e.into()))?;
        Ok(Self {
            given: dir.to_path_buf(),
            real,
            dir: Arc::new(fd),
            hard_links: HardLinks::from_env(),
            fast: true,
        })
    }

    /// The same root with another hard-link policy.
    pub fn with_hard_links(mut self, policy: HardLinks) -> Self {
        self.hard_links = policy;
        self
    }

    /// The root as given.
    pub fn path(&self) -> &Path {
        &self.given
    }

    /// `path` relative to the root: `path` is under the root as given (`root.path().join(..)`,
    /// what listing the root yields), under its real location, or relative to the root.
    fn relative(&self, path: &Path) -> Result<PathBuf, ConfineError> {
        let rel = path
            .strip_prefix(&self.given)
            .or_else(|_| path.strip_prefix(&self.real))
            .map(Path::to_path_buf)
            .or_else(|_| {
                if path.is_relative() {
                    Ok(path.to_path_buf())
                } else {
                    Err(ConfineError::Outside {
                        path: path.to_path_buf(),
                        target: path.to_path_buf(),
                        root: self.given.clone(),
                    })
                }
            })?;
        Ok(rel)
    }

    /// Opens `path` with `flags` without leaving the root: `openat2` first, the walk when it
    /// is missing or refuses (the walk then names the link that leads out).
    fn resolve(&self, path: &Path, flags: OFlags) -> Result<OwnedFd, ReadConfinedError> {
        let rel = self.relative(path)?;
        if self.fast && OPENAT2.load(Ordering::Relaxed) {
            let target: &Path = if rel.as_os_str().is_empty() {
                Path::new(".")
            } else {
                &rel
            };
            match rustix::fs::openat2(
                self.dir.as_fd(),
                target,
                with_noctty(flags) | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ) {
                Ok(fd) => return Ok(fd),
                Err(Errno::NOSYS) | Err(Errno::PERM) => OPENAT2.store(false, Ordering::Relaxed),
                // An escape (EXDEV), an absolute link (which may lead back in), a race with a
                // rename (EAGAIN), or an ordinary error: the walk decides and words it.
                Err(_) => {}
            }
        }
        self.walk(path, &rel, flags)
    }

    /// The component walk: every component opened with `O_NOFOLLOW` relative to the directory
    /// opened before it; a symbolic link is read from its own descriptor and its target
    /// spliced into the path, followed only while it stays under the root.
    fn walk(&self, shown: &Path, rel: &Path, flags: OFlags) -> Result<OwnedFd, ReadConfinedError> {
        let mut pending: Vec<OsString> = Vec::new();
        push_components(&mut pending, rel);
        // The directories entered below the root, innermost last.
        let mut dirs: Vec<OwnedFd> = Vec::new();
        let (mut hops, mut retries) = (0usize, 0usize);
        let outside = |target: PathBuf| ConfineError::Outside {
            path: shown.to_path_buf(),
            target: std::fs::canonicalize(&target).unwrap_or(target),
            root: self.given.clone(),
        };
        while let Some(name) = pending.pop() {
            if name == ".." {
                if dirs.pop().is_none() {
                    let above = self.real.parent().unwrap_or(Path::new("/"));
                    return Err(outside(lexical(&above.join(rest(&pending)))).into());
                }
                continue;
            }
            let cur: BorrowedFd<'_> = dirs.last().map_or(self.dir.as_fd(), |d| d.as_fd());
            let last = pending.is_empty();
            let look = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = if last {
                match rustix::fs::openat(
                    cur,
                    &name,
                    with_noctty(flags) | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(fd) if !flags.contains(OFlags::PATH) => return Ok(fd),
                    Ok(fd) => fd,
                    // A symbolic link (or one was swapped in): look at it.
                    Err(Errno::LOOP) => rustix::fs::openat(cur, &name, look, Mode::empty())
                        .map_err(|e| io_err(shown, e))?,
                    Err(e) => return Err(io_err(shown, e)),
                }
            } else {
                rustix::fs::openat(cur, &name, look, Mode::empty()).map_err(|e| io_err(shown, e))?
            };
            let st = rustix::fs::fstat(&fd).map_err(|e| io_err(shown, e))?;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(io_err(shown, Errno::LOOP));
                    }
                    let target = rustix::fs::readlinkat(&fd, "", Vec::new())
                        .map_err(|e| io_err(shown, e))?;
                    let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                    if target.is_absolute() {
                        // Absolute links that lead back under the root are followed from it.
                        let Ok(inside) = target.strip_prefix(&self.real) else {
                            return Err(outside(target.join(rest(&pending))).into());
                        };
                        dirs.clear();
                        push_components(&mut pending, inside);
                    } else {
                        push_components(&mut pending, &target);
                    }
                }
                FileType::Directory => dirs.push(fd),
                _ if last => {
                    if flags.contains(OFlags::PATH) {
                        return Ok(fd);
                    }
                    // It was a link when opened for reading and is not one now: open again.
                    retries += 1;
                    if retries > MAX_RETRIES {
                        return Err(ReadConfinedError::Changed {
                            path: shown.to_path_buf(),
                        });
                    }
                    pending.push(name);
                }
                _ => return Err(io_err(shown, Errno::NOTDIR)),
            }
        }
        // The path named a directory (or the root): open it with the flags asked for.
        let cur: BorrowedFd<'_> = dirs.last().map_or(self.dir.as_fd(), |d| d.as_fd());
        rustix::fs::openat(cur, ".", flags | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| io_err(shown, e))
    }

    /// What `path` is (its symlinks followed while they stay under the root), without opening
    /// it for reading: a FIFO is not opened, a link out of the root is an error.
    pub fn inspect(&self, path: &Path) -> Result<std::fs::Metadata, ReadConfinedError> {
        let fd = self.resolve(path, OFlags::PATH)?;
        File::from(fd).metadata().map_err(|e| io_err(path, e))
    }

    /// Checks that `path` (under the root, as the input names it) really is inside the root.
    pub fn check(&self, path: &Path) -> Result<(), ConfineError> {
        match self.inspect(path) {
            Ok(_) => Ok(()),
            Err(ReadConfinedError::Confine(e)) => Err(e),
            Err(ReadConfinedError::Io { source, .. }) => Err(ConfineError::Resolve {
                path: path.to_path_buf(),
                source,
            }),
            Err(other) => Err(ConfineError::Resolve {
                path: path.to_path_buf(),
                source: std::io::Error::other(other.to_string()),
            }),
        }
    }

    /// Opens the regular file `path` for reading, confined (see the module docs), checked on
    /// its descriptor: a regular file, with one link (or as [`HardLinks`] allows).
    pub fn open(&self, path: &Path) -> Result<InputFile, ReadConfinedError> {
        let fd = match self.resolve(path, OFlags::RDONLY | OFlags::NONBLOCK) {
            Ok(fd) => fd,
            // A socket cannot be opened at all: say what it is.
            Err(ReadConfinedError::Io { source, .. })
                if source.raw_os_error() == Some(Errno::NXIO.raw_os_error()) =>
            {
                let meta = self.inspect(path)?;
                return Err(ReadConfinedError::NotRegular {
                    path: path.to_path_buf(),
                    kind: describe(meta.file_type()),
                });
            }
            Err(e) => return Err(e),
        };
        InputFile::checked(File::from(fd), path, Some(self.hard_links))
    }

    /// Reads the regular file `path` whole: [`InputRoot::open`], then
    /// [`InputFile::read_to_end`] within `limit`.
    pub fn read(&self, path: &Path, limit: SizeLimit) -> Result<Vec<u8>, ReadConfinedError> {
        self.open(path)?.read_to_end(limit)
    }

    #[cfg(test)]
    fn walk_only(mut self) -> Self {
        self.fast = false;
        self
    }
}

/// `flags` plus `O_NOCTTY` for a real open (`O_PATH` takes no other flags: `openat2` refuses
/// them).
fn with_noctty(flags: OFlags) -> OFlags {
    if flags.contains(OFlags::PATH) {
        flags
    } else {
        flags | OFlags::NOCTTY
    }
}

/// Pushes the components of `path` onto `pending` so that popping yields them in order.
fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(parts.into_iter().rev());
}

/// The components still to walk, as a path.
fn rest(pending: &[OsString]) -> PathBuf {
    pending.iter().rev().collect()
}

/// `path` with `.` and `..` applied lexically (for messages).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// An opened input file, checked on its descriptor: a regular file (and, under a root, with
/// one link or as allowed). Read it with [`InputFile::read_to_end`], or take the file to
/// stream it.
#[derive(Debug)]
pub struct InputFile {
    file: File,
    path: PathBuf,
    meta: std::fs::Metadata,
}

impl InputFile {
    fn checked(
        file: File,
        path: &Path,
        links: Option<HardLinks>,
    ) -> Result<Self, ReadConfinedError> {
        let meta = file.metadata().map_err(|e| io_err(path, e))?;
        if !meta.is_file() {
            return Err(ReadConfinedError::NotRegular {
                path: path.to_path_buf(),
                kind: describe(meta.file_type()),
            });
        }
        match links {
            Some(policy) if meta.nlink() > 1 => match policy {
                HardLinks::Refuse => {
                    return Err(ReadConfinedError::HardLinked {
                        path: path.to_path_buf(),
                        links: meta.nlink(),
                    });
                }
                HardLinks::Warn => warn(&ParseWarning {
                    source_name: path.display().to_string(),
                    line: None,
                    message: format!(
                        "the file has {} hard links: it may be another name of a file outside the input; read because {ALLOW_HARD_LINKS_ENV} is set",
                        meta.nlink()
                    ),
                }),
            },
            _ => {}
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            meta,
        })
    }

    /// The path it was opened by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its size when it was opened.
    pub fn len(&self) -> u64 {
        self.meta.len()
    }

    /// Whether it was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.meta.len() == 0
    }

    /// The opened file, to read it in pieces.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// An error unless its size is within `limit`.
    pub fn check_size(&self, limit: SizeLimit) -> Result<(), ReadConfinedError> {
        if self.meta.len() > limit.bytes {
            return Err(ReadConfinedError::TooLarge {
                path: self.path.clone(),
                size: self.meta.len(),
                limit,
            });
        }
        Ok(())
    }

    /// Reads it whole: its size is checked against `limit` first (nothing is read when it is
    /// over), the buffer is reserved without aborting on failure, and a file that grows while
    /// it is read is cut at the limit and refused.
    pub fn read_to_end(self, limit: SizeLimit) -> Result<Vec<u8>, ReadConfinedError> {
        self.check_size(limit)?;
        let size = self.meta.len();
        let mut buf = Vec::new();
        let want = usize::try_from(size.saturating_add(1)).unwrap_or(usize::MAX);
        buf.try_reserve_exact(want)
            .map_err(|_| ReadConfinedError::OutOfMemory {
                path: self.path.clone(),
                size,
            })?;
        (&self.file)
            .take(limit.bytes.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::OutOfMemory {
                    ReadConfinedError::OutOfMemory {
                        path: self.path.clone(),
                        size: size.max(buf.len() as u64),
                    }
                } else {
                    io_err(&self.path, e)
                }
            })?;
        if buf.len() as u64 > limit.bytes {
            return Err(ReadConfinedError::TooLarge {
                path: self.path,
                size: buf.len() as u64,
                limit,
            });
        }
        Ok(buf)
    }
}

/// Opens a file a user named directly (a command-line argument, not a file found under an
/// input root): symlinks are followed, as by any command, and the descriptor is checked as
/// under a root (a regular file; the open does not block on a FIFO). No hard-link rule: the
/// user chose this file.
pub fn open_named(path: &Path) -> Result<InputFile, ReadConfinedError> {
    let fd = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NXIO) => {
            let kind = std::fs::metadata(path)
                .map(|m| describe(m.file_type()))
                .unwrap_or("not a regular file");
            return Err(ReadConfinedError::NotRegular {
                path: path.to_path_buf(),
                kind,
            });
        }
        Err(e) => return Err(io_err(path, e)),
    };
    InputFile::checked(File::from(fd), path, None)
}

/// Reads a file a user named directly, whole, within `limit` ([`open_named`]).
pub fn read_named(path: &Path, limit: SizeLimit) -> Result<Vec<u8>, ReadConfinedError> {
    open_named(path)?.read_to_end(limit)
}

/// Reads a stream (stdin) whole, refusing more than `limit` bytes; `name` names it in errors.
pub fn read_stream(
    name: &str,
    reader: impl Read,
    limit: SizeLimit,
) -> Result<Vec<u8>, ReadConfinedError> {
    let mut buf = Vec::new();
    reader
        .take(limit.bytes.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| io_err(Path::new(name), e))?;
    if buf.len() as u64 > limit.bytes {
        return Err(ReadConfinedError::TooLarge {
            path: PathBuf::from(name),
            size: buf.len() as u64,
            limit,
        });
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Both resolvers: `openat2` (when the kernel has it) and the component walk.
    fn roots(dir: &Path) -> [InputRoot; 2] {
        let r = InputRoot::new(dir)
            .unwrap()
            .with_hard_links(HardLinks::Refuse);
        [r.clone(), r.walk_only()]
    }

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
        // Absolute links back into the root, and relative ones through `..`, are fine.
        symlink(
            root.canonicalize().unwrap().join("manifests/a.yaml"),
            root.join("abs.yaml"),
        )
        .unwrap();
        symlink("../manifests/./a.yaml", root.join("manifests/d.yaml")).unwrap();
        symlink("../../outside/secret", root.join("manifests/e.yaml")).unwrap();
        for r in roots(&root) {
            for ok in ["manifests/b.yaml", "abs.yaml", "manifests/d.yaml"] {
                assert_eq!(r.read(&root.join(ok), MANIFEST_FILE).unwrap(), b"a", "{ok}");
            }
            let e = r
                .read(&root.join("manifests/c.yaml"), MANIFEST_FILE)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("manifests/c.yaml") && e.contains("secret") && e.contains("outside"),
                "{e}"
            );
            let e = r
                .read(&root.join("manifests/e.yaml"), MANIFEST_FILE)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("manifests/e.yaml") && e.contains("outside"),
                "{e}"
            );
            // A file reached through a linked directory is outside too.
            std::fs::write(outside.path().join("annotations.yaml"), "x").unwrap();
            assert!(r.check(&root.join("metadata/annotations.yaml")).is_err());
            assert!(
                r.read(&root.join("../bundle/manifests/a.yaml"), MANIFEST_FILE)
                    .is_err()
            );
        }
    }

    #[test]
    fn a_root_that_is_a_symlink_counts_where_it_leads() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("f"), "f").unwrap();
        symlink(&real, tmp.path().join("link")).unwrap();
        for r in roots(&tmp.path().join("link")) {
            assert!(r.check(&tmp.path().join("link/f")).is_ok());
            assert_eq!(
                r.read(&tmp.path().join("link/f"), MANIFEST_FILE).unwrap(),
                b"f"
            );
        }
    }

    #[test]
    fn dangling_links_are_an_error_naming_the_link() {
        let tmp = tempfile::tempdir().unwrap();
        symlink("nowhere", tmp.path().join("x")).unwrap();
        for r in roots(tmp.path()) {
            let e = r.check(&tmp.path().join("x")).unwrap_err().to_string();
            assert!(e.contains("/x: cannot resolve"), "{e}");
        }
    }

    #[test]
    fn a_link_swapped_in_after_listing_is_refused() {
        // The directory is listed while x.yaml is a regular file; then it becomes a link to a
        // file outside. Opening the listed name reads neither the outside file nor by a
        // path checked earlier: the open resolves the link again, on the descriptor.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "SECRET").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("x.yaml"), "mine").unwrap();
        for r in roots(tmp.path()) {
            let listed: Vec<PathBuf> = std::fs::read_dir(tmp.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert!(r.check(&listed[0]).is_ok());
            std::fs::remove_file(tmp.path().join("x.yaml")).unwrap();
            symlink(outside.path().join("secret"), tmp.path().join("x.yaml")).unwrap();
            let e = r.read(&listed[0], MANIFEST_FILE).unwrap_err();
            assert!(
                matches!(e, ReadConfinedError::Confine(ConfineError::Outside { .. })),
                "{e}"
            );
            assert!(!e.to_string().contains("SECRET"));
            std::fs::remove_file(tmp.path().join("x.yaml")).unwrap();
            std::fs::write(tmp.path().join("x.yaml"), "mine").unwrap();
        }
    }

    #[test]
    fn fifos_and_directories_are_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("pipe");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        symlink("pipe", tmp.path().join("link.yaml")).unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        for r in roots(tmp.path()) {
            for p in ["pipe", "link.yaml"] {
                let e = r.read(&tmp.path().join(p), MANIFEST_FILE).unwrap_err();
                assert!(
                    matches!(
                        e,
                        ReadConfinedError::NotRegular {
                            kind: "a FIFO (named pipe)",
                            ..
                        }
                    ),
                    "{e}"
                );
                assert!(e.to_string().contains(p), "{e}");
                assert!(
                    r.inspect(&tmp.path().join(p))
                        .unwrap()
                        .file_type()
                        .is_fifo()
                );
            }
            let e = r.read(&tmp.path().join("d"), MANIFEST_FILE).unwrap_err();
            assert!(e.to_string().contains("a directory"), "{e}");
            assert!(r.inspect(&tmp.path().join("d")).unwrap().is_dir());
        }
        let e = read_named(&fifo, MANIFEST_FILE).unwrap_err().to_string();
        assert!(e.contains("FIFO"), "{e}");
    }

    #[test]
    fn sizes_are_checked_before_reading() {
        let tmp = tempfile::tempdir().unwrap();
        let big = tmp.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(100 << 30)
            .unwrap();
        for r in roots(tmp.path()) {
            let f = r.open(&big).unwrap();
            assert_eq!(f.len(), 100 << 30);
            let e = f.read_to_end(MANIFEST_FILE).unwrap_err();
            assert!(matches!(e, ReadConfinedError::TooLarge { size, .. } if size == 100 << 30));
            assert!(
                e.to_string()
                    .contains("more than the 67108864 bytes (64 MiB) a bundle or manifest file"),
                "{e}"
            );
        }
        let e = read_stream(
            "<stdin>",
            &[0u8; 11][..],
            SizeLimit {
                bytes: 10,
                what: "x",
            },
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("<stdin>: 11 bytes"), "{e}");
    }

    #[test]
    fn hard_links_are_refused_or_read_with_a_warning() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("outside"), "secret").unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::hard_link(tmp.path().join("outside"), root.join("x.yaml")).unwrap();
        for r in roots(&root) {
            let e = r.read(&root.join("x.yaml"), MANIFEST_FILE).unwrap_err();
            assert!(
                matches!(e, ReadConfinedError::HardLinked { links: 2, .. }),
                "{e}"
            );
            assert!(e.to_string().contains("x.yaml"), "{e}");
            let r = r.with_hard_links(HardLinks::Warn);
            assert_eq!(
                r.read(&root.join("x.yaml"), MANIFEST_FILE).unwrap(),
                b"secret"
            );
        }
        // A file named directly has no root to belong to.
        assert_eq!(
            read_named(&root.join("x.yaml"), MANIFEST_FILE).unwrap(),
            b"secret"
        );
    }

    #[test]
    fn directories_through_links_inside_are_walked() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        std::fs::write(tmp.path().join("a/b/f"), "f").unwrap();
        symlink("a/b", tmp.path().join("l")).unwrap();
        symlink("../l", tmp.path().join("a/up")).unwrap();
        symlink("loop2", tmp.path().join("loop1")).unwrap();
        symlink("loop1", tmp.path().join("loop2")).unwrap();
        for r in roots(tmp.path()) {
            assert_eq!(
                r.read(&tmp.path().join("l/f"), MANIFEST_FILE).unwrap(),
                b"f"
            );
            assert_eq!(
                r.read(&tmp.path().join("a/up/f"), MANIFEST_FILE).unwrap(),
                b"f"
            );
            assert!(r.inspect(&tmp.path().join("l")).unwrap().is_dir());
            assert!(r.read(&tmp.path().join("loop1"), MANIFEST_FILE).is_err());
        }
    }
}
