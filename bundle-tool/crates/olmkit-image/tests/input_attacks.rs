//! `image build bundle|catalog` copy an untrusted directory into a layer (issue #24, items
//! 4-7): every file is opened once through the directory's root (`olmkit_core::confine`),
//! checked on that descriptor and read from it, within a size limit. A file swapped for a link
//! out of the directory after it was listed is refused, never copied; a file with several hard
//! links is refused (unless `BUNDLE_TOOL_ALLOW_HARD_LINKS=1`); a file over the limit is refused
//! from its size, before it is read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use olmkit_image::images::{BundleImageInputs, build_bundle_image, configs_layer};
use olmkit_image::tree::{EntryKind, FileTree};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const MARKER: &str = "OUTSIDE-SECRET-c2VjcmV0";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let target = to.join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn t0() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000).unwrap()
}

/// Everything a tree holds, as text (to look for the outside file's content).
fn contents(tree: &FileTree) -> String {
    tree.entries()
        .map(|(path, e)| match &e.kind {
            EntryKind::File(data) => format!("{path}: {}\n", String::from_utf8_lossy(data)),
            other => format!("{path}: {other:?}\n"),
        })
        .collect()
}

fn secret(dir: &Path) -> PathBuf {
    let p = dir.join("config.json");
    std::fs::write(
        &p,
        format!("{{\"auths\":{{\"quay.io\":{{\"auth\":\"{MARKER}\"}}}}}}"),
    )
    .unwrap();
    p
}

#[test]
fn a_catalog_file_hard_linked_from_outside_is_not_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = secret(tmp.path());
    let cat = tmp.path().join("catalog");
    copy_dir(&repo().join("catalog/memcached-operator"), &cat.join("p"));
    std::fs::hard_link(&outside, cat.join("p/leak.json")).unwrap();
    let e = match configs_layer(&cat, None) {
        Ok(layer) => panic!("copied: {}", contents(&layer.tree)),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("p/leak.json") && e.contains("hard links"), "{e}");
    assert!(!e.contains(MARKER), "{e}");
}

#[test]
fn a_bundle_file_over_the_manifest_limit_is_refused_from_its_size() {
    let tmp = tempfile::tempdir().unwrap();
    let b = tmp.path().join("bundle");
    copy_dir(&repo().join("bundle/memcached-operator/0.4.0"), &b);
    // Not read by a bundle loader (scorecard tests), but copied into the image: 100 MiB of
    // zeros, over the 64 MiB of a bundle file.
    std::fs::File::create(b.join("tests/scorecard/huge"))
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let mut inputs = BundleImageInputs::new(&b, t0());
    inputs.annotations_file = Some("metadata/annotations.yaml".into());
    inputs.annotations.insert(
        "operators.operatorframework.io.bundle.package.v1".into(),
        "memcached-operator".into(),
    );
    let e = build_bundle_image(&inputs)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tests/scorecard/huge") && e.contains("more than the"),
        "{e}"
    );
}

#[test]
fn ordinary_directories_copy_as_before() {
    // Modes from the host's execute bit, links inside kept as links, every file's bytes.
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("a.yaml"), "a").unwrap();
    std::fs::write(d.join("sub/run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(d.join("sub/run.sh"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink("../a.yaml", d.join("sub/link")).unwrap();
    let mut t = FileTree::new();
    t.add_host_dir("/x", &d).unwrap();
    let e = |p: &str| t.get(p).unwrap().clone();
    assert_eq!(e("x/a.yaml").kind, EntryKind::File(b"a".to_vec()));
    assert_eq!(e("x/a.yaml").mode, 0o644);
    assert_eq!(e("x/sub/run.sh").mode, 0o755);
    assert_eq!(e("x/sub/link").kind, EntryKind::Symlink("../a.yaml".into()));
}

#[test]
fn a_file_swapped_for_a_link_after_listing_is_never_copied() {
    // The check-then-read race of issue #24 (item 4), for the layer's directory copy: while
    // a file of the catalog is swapped, over and over, between a regular file and a link to a
    // file outside, the layer is built again and again; the outside file never shows in it.
    const LOADS: usize = 20_000;
    let tmp = tempfile::tempdir().unwrap();
    let outside = secret(tmp.path());
    let cat = tmp.path().join("catalog");
    std::fs::create_dir_all(cat.join("p")).unwrap();
    std::fs::write(cat.join("p/a.yaml"), "schema: olm.package\nname: a\n").unwrap();
    let file = cat.join("p/x.yaml");
    let inside = "schema: example.other\nname: inside\n";
    std::fs::write(&file, inside).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, file) = (stop.clone(), file.clone());
        // Outside the copied directory, so that the copy never lists them.
        let (link_tmp, file_tmp) = (tmp.path().join("swap-link"), tmp.path().join("swap-file"));
        std::thread::spawn(move || {
            let mut swaps = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&link_tmp);
                std::os::unix::fs::symlink(&outside, &link_tmp).unwrap();
                std::fs::rename(&link_tmp, &file).unwrap();
                std::fs::write(&file_tmp, inside).unwrap();
                std::fs::rename(&file_tmp, &file).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let mut leaked = 0;
    let mut copied = 0;
    for _ in 0..LOADS {
        let seen = match configs_layer(&cat, None) {
            Ok(layer) => {
                copied += 1;
                contents(&layer.tree)
            }
            Err(e) => e.to_string(),
        };
        if seen.contains(MARKER) {
            leaked += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "the swapper hardly ran ({swaps} swaps)");
    assert!(copied > 0, "no build got through ({swaps} swaps)");
    assert_eq!(
        leaked, 0,
        "the outside file was copied in {leaked} of {LOADS} builds ({swaps} swaps)"
    );
}
