//! The file tree of one image layer, as it will appear inside the container.
//!
//! A [`FileTree`] owns the rules that make layers safe and reproducible before any byte is
//! written: every path is relative to the image root (a leading `/` is accepted and dropped),
//! never contains `..`, and every ancestor directory exists as an entry of its own. Entries carry
//! an explicit mode and owner, so nothing depends on the umask, owner or timestamps of the
//! machine that builds the image. Files copied from the host get mode 0755 when any execute bit
//! is set and 0644 otherwise (git checkouts differ only in that bit).
//!
//! A directory copied from the host (a bundle, a catalog) is untrusted input: each of its
//! files is opened once through the directory's root ([`InputRoot`]), checked on that
//! descriptor (a regular file, one hard link, within a size limit) and read from it, so a
//! link out of the directory swapped in after it was listed, a FIFO, a hard link to a file
//! outside or a sparse file of many gigabytes is refused, naming it, instead of being copied
//! into the image.

use crate::error::BuildImageError;
use olmkit_core::confine::{IMAGE_LAYER_FILE, InputFile, InputRoot, ReadConfinedError, SizeLimit};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path};

/// Owner of an entry (numeric ids; images carry no user names in their tar headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner {
    /// User id.
    pub uid: u64,
    /// Group id.
    pub gid: u64,
}

impl Owner {
    /// `0:0`.
    pub const ROOT: Owner = Owner { uid: 0, gid: 0 };
    /// `65532:65532`, the conventional non-root user of distroless-style images.
    pub const NONROOT: Owner = Owner {
        uid: 65532,
        gid: 65532,
    };
}

/// What an entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A regular file with its contents.
    File(Vec<u8>),
    /// A symbolic link to the given target.
    Symlink(String),
}

/// One entry of a [`FileTree`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Directory, file or symlink.
    pub kind: EntryKind,
    /// Permission bits (including setuid/setgid/sticky), e.g. `0o644`.
    pub mode: u32,
    /// Owner.
    pub owner: Owner,
}

/// Default mode of directories.
pub const DIR_MODE: u32 = 0o755;
/// Default mode of regular files.
pub const FILE_MODE: u32 = 0o644;
/// Default mode of executables.
pub const EXEC_MODE: u32 = 0o755;

/// The contents of one layer: normalized relative paths mapped to entries. Sorted iteration
/// (byte order of the path) puts every directory before its children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileTree {
    entries: BTreeMap<String, Entry>,
}

/// Normalizes an in-image path: drops a leading `/`, `.` components and repeated slashes;
/// refuses `..`, NUL bytes and empty paths.
pub fn normalize_image_path(path: &str) -> Result<String, BuildImageError> {
    let unsafe_path = |reason: &str| BuildImageError::UnsafePath {
        path: path.to_string(),
        reason: reason.to_string(),
    };
    if path.contains('\0') {
        return Err(unsafe_path("contains a NUL byte"));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(unsafe_path("contains `..`")),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(unsafe_path("names the image root, not an entry"));
    }
    Ok(parts.join("/"))
}

impl FileTree {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries (including implied directories).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the tree has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in archive order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries.iter().map(|(p, e)| (p.as_str(), e))
    }

    /// The entry at `path`, if any.
    pub fn get(&self, path: &str) -> Option<&Entry> {
        normalize_image_path(path)
            .ok()
            .and_then(|p| self.entries.get(&p))
    }

    /// Top-level names (first path component of every entry), sorted.
    pub fn top_level(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .entries
            .keys()
            .filter(|p| !p.contains('/'))
            .cloned()
            .collect();
        out.dedup();
        out
    }

    /// Total bytes of regular file contents.
    pub fn content_bytes(&self) -> u64 {
        self.entries
            .values()
            .map(|e| match &e.kind {
                EntryKind::File(b) => b.len() as u64,
                _ => 0,
            })
            .sum()
    }

    fn ensure_parents(&mut self, path: &str) -> Result<(), BuildImageError> {
        let mut end = 0;
        while let Some(i) = path[end..].find('/') {
            let parent = &path[..end + i];
            match self.entries.get(parent) {
                None => {
                    self.entries.insert(
                        parent.to_string(),
                        Entry {
                            kind: EntryKind::Dir,
                            mode: DIR_MODE,
                            owner: Owner::ROOT,
                        },
                    );
                }
                Some(Entry {
                    kind: EntryKind::Dir,
                    ..
                }) => {}
                Some(_) => {
                    return Err(BuildImageError::PathConflict {
                        path: format!("/{path}"),
                        reason: format!("its parent /{parent} is not a directory"),
                    });
                }
            }
            end += i + 1;
        }
        Ok(())
    }

    fn insert(&mut self, path: &str, entry: Entry) -> Result<(), BuildImageError> {
        let path = normalize_image_path(path)?;
        if entry.mode & !0o7777 != 0 {
            return Err(BuildImageError::UnsafePath {
                path: format!("/{path}"),
                reason: format!("mode {:o} has bits outside 0o7777", entry.mode),
            });
        }
        self.ensure_parents(&path)?;
        match (self.entries.get(&path), &entry.kind) {
            // Declaring a directory that already exists (implied or explicit) sets its mode
            // and owner; merging two directories is what layering does anyway.
            (
                Some(Entry {
                    kind: EntryKind::Dir,
                    ..
                }),
                EntryKind::Dir,
            ) => {}
            (Some(existing), _) => {
                let what = match existing.kind {
                    EntryKind::Dir => "a directory",
                    EntryKind::File(_) => "a file",
                    EntryKind::Symlink(_) => "a symlink",
                };
                return Err(BuildImageError::PathConflict {
                    path: format!("/{path}"),
                    reason: format!("the layer already has {what} at this path"),
                });
            }
            (None, EntryKind::Dir) => {}
            (None, _) => {
                let prefix = format!("{path}/");
                if self.entries.keys().any(|k| k.starts_with(&prefix)) {
                    return Err(BuildImageError::PathConflict {
                        path: format!("/{path}"),
                        reason: "the layer already has entries below this path".into(),
                    });
                }
            }
        }
        self.entries.insert(path, entry);
        Ok(())
    }

    /// Adds a regular file owned by root.
    pub fn add_file(
        &mut self,
        path: &str,
        data: impl Into<Vec<u8>>,
        mode: u32,
    ) -> Result<(), BuildImageError> {
        self.add_file_owned(path, data, mode, Owner::ROOT)
    }

    /// Adds a regular file with the given owner.
    pub fn add_file_owned(
        &mut self,
        path: &str,
        data: impl Into<Vec<u8>>,
        mode: u32,
        owner: Owner,
    ) -> Result<(), BuildImageError> {
        self.insert(
            path,
            Entry {
                kind: EntryKind::File(data.into()),
                mode,
                owner,
            },
        )
    }

    /// Adds (or sets the mode and owner of) a directory.
    pub fn add_dir(&mut self, path: &str, mode: u32, owner: Owner) -> Result<(), BuildImageError> {
        self.insert(
            path,
            Entry {
                kind: EntryKind::Dir,
                mode,
                owner,
            },
        )
    }

    /// Adds a symbolic link (mode 0777, owned by root, like `ln -s` makes).
    pub fn add_symlink(&mut self, path: &str, target: &str) -> Result<(), BuildImageError> {
        if target.is_empty() || target.contains('\0') {
            return Err(BuildImageError::UnsafePath {
                path: path.to_string(),
                reason: "symlink target is empty or contains a NUL byte".into(),
            });
        }
        self.insert(
            path,
            Entry {
                kind: EntryKind::Symlink(target.to_string()),
                mode: 0o777,
                owner: Owner::ROOT,
            },
        )
    }

    /// Copies the host file `src` to `dest` (mode 0755 if executable on the host, else 0644),
    /// owned by root. `src` is named by the caller, so a link is followed; the file is opened
    /// without blocking, checked to be a regular file and read from that descriptor, at most
    /// [`IMAGE_LAYER_FILE`].
    pub fn add_host_file(&mut self, dest: &str, src: &Path) -> Result<(), BuildImageError> {
        let file = olmkit_core::confine::open_named(src)?;
        self.add_opened_file(dest, file, IMAGE_LAYER_FILE)
    }

    /// Adds an opened file: its bytes (within `limit`) and its mode, from its descriptor.
    fn add_opened_file(
        &mut self,
        dest: &str,
        file: InputFile,
        limit: SizeLimit,
    ) -> Result<(), BuildImageError> {
        let executable = file
            .file()
            .metadata()
            .map_err(|source| BuildImageError::ReadInput {
                path: file.path().to_path_buf(),
                source,
            })?
            .permissions()
            .mode()
            & 0o111
            != 0;
        let data = file.read_to_end(limit)?;
        self.add_file(dest, data, if executable { EXEC_MODE } else { FILE_MODE })
    }

    /// Copies the host directory `src` (recursively) to `dest`, like `COPY src dest/` does:
    /// directories 0755, files 0644 or 0755, everything owned by root. Symlinks are kept as
    /// symlinks when they point inside `src` with a relative target; anything else (absolute
    /// or escaping symlinks, sockets, devices) is refused, naming the file. Files are read
    /// through `src` as the root ([`FileTree::add_input_dir`]), each at most
    /// [`IMAGE_LAYER_FILE`].
    pub fn add_host_dir(&mut self, dest: &str, src: &Path) -> Result<(), BuildImageError> {
        if !src.is_dir() {
            return Err(not_a_directory(src));
        }
        let root = InputRoot::new(src).map_err(ReadConfinedError::from)?;
        self.add_input_dir(dest, &root, src, IMAGE_LAYER_FILE)
    }

    /// [`FileTree::add_host_dir`] for the directory `src` of the input `root` (`src` is the
    /// root or under it, as the root's path names it): every file is opened once through the
    /// root, without following a link out of it, checked on the descriptor (a regular file,
    /// one hard link unless `BUNDLE_TOOL_ALLOW_HARD_LINKS` says otherwise, at most `limit`)
    /// and read from it. Symlinks are kept as in [`FileTree::add_host_dir`].
    pub fn add_input_dir(
        &mut self,
        dest: &str,
        root: &InputRoot,
        src: &Path,
        limit: SizeLimit,
    ) -> Result<(), BuildImageError> {
        let dest = normalize_image_path(dest)?;
        if !src.is_dir() {
            return Err(not_a_directory(src));
        }
        self.add_dir(&dest, DIR_MODE, Owner::ROOT)?;
        let walker = walkdir::WalkDir::new(src)
            .follow_links(false)
            .sort_by_file_name()
            .min_depth(1);
        for item in walker {
            let item = item.map_err(|e| {
                let path = e.path().unwrap_or(src).to_path_buf();
                BuildImageError::ReadInput {
                    path,
                    source: e
                        .into_io_error()
                        .unwrap_or_else(|| std::io::Error::other("filesystem loop")),
                }
            })?;
            let rel = item.path().strip_prefix(src).unwrap_or(item.path());
            let rel_str = rel_to_string(item.path(), rel)?;
            let target = format!("{dest}/{rel_str}");
            let ft = item.file_type();
            if ft.is_dir() {
                self.add_dir(&target, DIR_MODE, Owner::ROOT)?;
            } else if ft.is_file() {
                // Listed as a file; what is opened is whatever the name is now, checked.
                let file = root.open(item.path())?;
                self.add_opened_file(&target, file, limit)?;
            } else if ft.is_symlink() {
                let link = std::fs::read_link(item.path()).map_err(|source| {
                    BuildImageError::ReadInput {
                        path: item.path().to_path_buf(),
                        source,
                    }
                })?;
                check_symlink_inside(item.path(), rel, &link)?;
                let link_str = link
                    .to_str()
                    .ok_or_else(|| BuildImageError::UnsupportedFile {
                        path: item.path().to_path_buf(),
                        reason: "symlink target is not UTF-8".into(),
                    })?;
                self.add_symlink(&target, link_str)?;
            } else {
                return Err(BuildImageError::UnsupportedFile {
                    path: item.path().to_path_buf(),
                    reason: "only regular files, directories and symlinks can go into an image"
                        .into(),
                });
            }
        }
        Ok(())
    }
}

fn not_a_directory(src: &Path) -> BuildImageError {
    BuildImageError::ReadInput {
        path: src.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
    }
}

fn rel_to_string(full: &Path, rel: &Path) -> Result<String, BuildImageError> {
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(s) => {
                parts.push(s.to_str().ok_or_else(|| BuildImageError::UnsupportedFile {
                    path: full.to_path_buf(),
                    reason: "file name is not UTF-8".into(),
                })?)
            }
            _ => {
                return Err(BuildImageError::UnsafePath {
                    path: full.display().to_string(),
                    reason: "unexpected path component".into(),
                });
            }
        }
    }
    Ok(parts.join("/"))
}

fn check_symlink_inside(full: &Path, rel: &Path, link: &Path) -> Result<(), BuildImageError> {
    let refuse = |reason: &str| BuildImageError::UnsupportedFile {
        path: full.to_path_buf(),
        reason: reason.to_string(),
    };
    if link.is_absolute() {
        return Err(refuse(
            "symlink with an absolute target; it would point outside the copied directory",
        ));
    }
    // Depth of the link's directory below the copied root; `..` may climb at most that far.
    let mut depth: i64 = rel.components().count() as i64 - 1;
    for c in link.components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return Err(refuse("symlink target has an unsupported form")),
        }
        if depth < 0 {
            return Err(refuse(
                "symlink points outside the copied directory; copy the target instead",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_and_refuses_escapes() {
        assert_eq!(normalize_image_path("/etc//passwd").unwrap(), "etc/passwd");
        assert_eq!(normalize_image_path("./a/./b/").unwrap(), "a/b");
        for bad in ["", "/", "..", "a/../../b", "a/..", "a\0b"] {
            assert!(normalize_image_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parents_are_implied_and_sorted_first() {
        let mut t = FileTree::new();
        t.add_file("/usr/local/bin/op", b"x".to_vec(), EXEC_MODE)
            .unwrap();
        t.add_file("/usr-x", b"y".to_vec(), FILE_MODE).unwrap();
        let paths: Vec<_> = t.entries().map(|(p, _)| p.to_string()).collect();
        assert_eq!(
            paths,
            [
                "usr",
                "usr-x",
                "usr/local",
                "usr/local/bin",
                "usr/local/bin/op"
            ]
        );
        assert_eq!(t.top_level(), ["usr", "usr-x"]);
    }

    #[test]
    fn conflicts_are_errors() {
        let mut t = FileTree::new();
        t.add_file("a", b"".to_vec(), FILE_MODE).unwrap();
        assert!(t.add_file("a/b", b"".to_vec(), FILE_MODE).is_err());
        assert!(t.add_file("a", b"".to_vec(), FILE_MODE).is_err());
        t.add_dir("d", 0o700, Owner::NONROOT).unwrap();
        t.add_dir("d", 0o1777, Owner::ROOT).unwrap();
        assert_eq!(t.get("/d").unwrap().mode, 0o1777);
        t.add_file("d/x", b"".to_vec(), FILE_MODE).unwrap();
        assert!(t.add_symlink("d", "x").is_err());
        assert!(t.add_file("bad-mode", b"".to_vec(), 0o100644).is_err());
    }

    #[test]
    fn host_dir_copy_normalizes_modes_and_checks_symlinks() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            d.path().join("sub/run.sh"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::fs::write(d.path().join("a.yaml"), "a: 1\n").unwrap();
        std::fs::set_permissions(
            d.path().join("a.yaml"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        symlink("../a.yaml", d.path().join("sub/link")).unwrap();
        let mut t = FileTree::new();
        t.add_host_dir("/configs", d.path()).unwrap();
        assert_eq!(t.get("configs/a.yaml").unwrap().mode, FILE_MODE);
        assert_eq!(t.get("configs/sub/run.sh").unwrap().mode, EXEC_MODE);
        assert_eq!(
            t.get("configs/sub/link").unwrap().kind,
            EntryKind::Symlink("../a.yaml".into())
        );

        symlink("../../etc/passwd", d.path().join("sub/escape")).unwrap();
        let err = FileTree::new()
            .add_host_dir("/configs", d.path())
            .unwrap_err();
        assert!(err.to_string().contains("sub/escape"), "{err}");
    }
}
