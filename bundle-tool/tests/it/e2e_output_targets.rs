//! End to end: where `-o` / `--output` may write (issue #24 item 9). An output that is a
//! character device or a FIFO is written in place, never replaced by a regular file (as root,
//! `catalog index -o /dev/full` used to replace the system's device); `-` is stdout; regular
//! files are replaced atomically and keep their permission bits; new files get 0644 minus the
//! umask; a symbolic link to a regular file is followed (the file is replaced, the link stays);
//! a directory is refused, naming it. Through the real binary: `catalog index -o`, `image
//! dockerfile catalog --output`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::image_harness as harness;

use harness::*;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `catalog index CATALOG -o OUT`.
fn index_to(out: &Path) -> (i32, String, String) {
    run(bundle_tool()
        .args(["catalog", "index"])
        .arg(fixture_catalog())
        .arg("-o")
        .arg(out))
}

/// `image dockerfile catalog --output OUT`.
fn dockerfile_to(out: &Path) -> (i32, String, String) {
    run(bundle_tool()
        .args(["image", "dockerfile", "catalog", "--output"])
        .arg(out))
}

/// A character device that is safe to write: a private twin of `/dev/null` (made with
/// `mknod`, so that a regression replaces the twin and not the system's device) when this user
/// may make device nodes; `/dev/null` itself otherwise (a user who cannot make device nodes
/// cannot replace it either).
fn null_device(dir: &Path) -> PathBuf {
    let twin = dir.join("null");
    let made = Command::new("mknod")
        .arg(&twin)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    if made {
        std::fs::set_permissions(&twin, std::fs::Permissions::from_mode(0o666)).unwrap();
        twin
    } else {
        PathBuf::from("/dev/null")
    }
}

fn assert_char_device(path: &Path, what: &str) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    assert!(
        meta.file_type().is_char_device(),
        "{what}: {} is no longer a character device but {:?}",
        path.display(),
        meta.file_type()
    );
}

#[test]
fn a_character_device_output_is_written_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = null_device(tmp.path());
    let (code, out, err) = index_to(&dev);
    assert_eq!(code, 0, "{out}{err}");
    assert_char_device(&dev, "catalog index -o");
    let (code, out, err) = dockerfile_to(&dev);
    assert_eq!(code, 0, "{out}{err}");
    assert_char_device(&dev, "image dockerfile --output");
    // Nothing was left beside it either.
    if dev.starts_with(tmp.path()) {
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("null")]);
    }
}

/// `/dev/full` refuses every write: the error names it and the device stays.
#[test]
fn a_full_device_is_an_error_and_stays_a_device() {
    let tmp = tempfile::tempdir().unwrap();
    let twin = tmp.path().join("full");
    let made = Command::new("mknod")
        .arg(&twin)
        .args(["c", "1", "7"])
        .status()
        .is_ok_and(|s| s.success());
    let full = if made {
        twin
    } else {
        PathBuf::from("/dev/full")
    };
    let (code, out, err) = dockerfile_to(&full);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains(&full.display().to_string()), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert_char_device(&full, "image dockerfile --output");
}

/// A FIFO is written to, not replaced: a reader on the other end gets the whole output.
#[test]
fn a_fifo_output_is_written_to_its_reader() {
    for (what, write) in [
        (
            "catalog index -o",
            index_to as fn(&Path) -> (i32, String, String),
        ),
        ("image dockerfile --output", dockerfile_to),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let path = fifo.clone();
        // Blocks in open until the writer opens the FIFO; a build that replaces the FIFO
        // leaves it blocked, so it is joined only once the FIFO is known to be intact.
        let reader = std::thread::spawn(move || std::fs::read(path).unwrap());
        let (code, out, err) = write(&fifo);
        assert_eq!(code, 0, "{what}: {out}{err}");
        let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(ft.is_fifo(), "{what}: the FIFO was replaced by {ft:?}");
        let got = reader.join().unwrap();
        assert!(!got.is_empty(), "{what}: the reader got nothing");
        if what.starts_with("image") {
            assert!(
                String::from_utf8_lossy(&got).contains("FROM "),
                "{what}: {}",
                String::from_utf8_lossy(&got)
            );
        }
    }
}

#[test]
fn dash_is_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, err) = run(bundle_tool().current_dir(tmp.path()).args([
        "image",
        "dockerfile",
        "catalog",
        "--output",
        "-",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("FROM "), "{out}");
    let out = Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
        .current_dir(tmp.path())
        .args(["catalog", "index"])
        .arg(fixture_catalog())
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "no file named - (or anything else) may be created"
    );
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// An existing file is replaced atomically and keeps its permission bits (it used to become
/// 0600, or 0644 for the index).
#[test]
fn an_existing_file_keeps_its_mode() {
    let tmp = tempfile::tempdir().unwrap();
    for (what, write, m) in [
        (
            "catalog index -o",
            index_to as fn(&Path) -> (i32, String, String),
            0o640,
        ),
        ("image dockerfile --output", dockerfile_to, 0o664),
        ("image dockerfile --output", dockerfile_to, 0o600),
    ] {
        let out = tmp.path().join("out");
        std::fs::write(&out, "old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(m)).unwrap();
        let (code, o, e) = write(&out);
        assert_eq!(code, 0, "{what}: {o}{e}");
        assert_ne!(std::fs::read(&out).unwrap(), b"old", "{what}");
        assert_eq!(
            mode(&out),
            m,
            "{what}: mode {:o} became {:o}",
            m,
            mode(&out)
        );
        std::fs::remove_file(&out).unwrap();
    }
}

/// A new file is created like `>` creates one: 0644 minus the umask (it used to be 0600).
#[test]
fn a_new_file_gets_the_usual_mode() {
    let tmp = tempfile::tempdir().unwrap();
    for (umask, want) in [("022", 0o644), ("027", 0o640)] {
        let out = tmp.path().join(format!("Dockerfile-{umask}"));
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "umask {umask} && exec \"$0\" image dockerfile catalog --output \"$1\""
            ))
            .arg(env!("CARGO_BIN_EXE_bundle-tool"))
            .arg(&out)
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
        assert_eq!(mode(&out), want, "umask {umask}");
    }
}

/// A symbolic link to a regular file is followed: the file it names is replaced (keeping its
/// mode), the link stays a link.
#[test]
fn a_link_to_a_file_is_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real-Dockerfile");
    std::fs::write(&real, "old").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = tmp.path().join("catalog.Dockerfile");
    std::os::unix::fs::symlink("real-Dockerfile", &link).unwrap();
    let (code, out, err) = dockerfile_to(&link);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced by a file"
    );
    assert!(
        std::fs::read_to_string(&real).unwrap().contains("FROM "),
        "the file the link names was not written"
    );
    assert_eq!(mode(&real), 0o640);
}

/// A directory, a link to one, or a dangling link: refused, naming the path, nothing written.
#[test]
fn a_directory_or_a_dangling_link_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("adir");
    std::fs::create_dir(&dir).unwrap();
    let to_dir = tmp.path().join("link-to-dir");
    std::os::unix::fs::symlink("adir", &to_dir).unwrap();
    let dangling = tmp.path().join("dangling");
    std::os::unix::fs::symlink("nowhere/file", &dangling).unwrap();
    for (path, says) in [
        (&dir, "is a directory"),
        (&to_dir, "directory"),
        (&dangling, "symbolic link"),
    ] {
        for write in [
            index_to as fn(&Path) -> (i32, String, String),
            dockerfile_to,
        ] {
            let (code, out, err) = write(path);
            assert_eq!(code, 1, "{}: {out}{err}", path.display());
            assert!(
                err.contains(&path.display().to_string()) && err.contains(says),
                "{}: {err}",
                path.display()
            );
        }
    }
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
    assert!(!tmp.path().join("nowhere").exists());
}
