//! The check-then-read race of issue #24 (item 4): while a file of the input is swapped, over
//! and over, between a regular file and a symbolic link to a file outside the input, every
//! reader loads the input again and again. The outside file's content must never appear in
//! what they return (or in their errors): each file is opened once, relative to the input's
//! directory, without following a link out of it, and read from that descriptor. Bounded: a
//! fixed number of loads, the swapping thread stops with them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const MARKER: &str = "OUTSIDE-SECRET-c2VjcmV0";
const LOADS: usize = 5000;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let target = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Swaps `file` between `inside` (a regular file's bytes) and a link to `outside`, with atomic
/// renames so that the name always exists, until `stop`.
fn swapper(
    file: PathBuf,
    inside: &'static str,
    outside: PathBuf,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let dir = file.parent().unwrap().to_path_buf();
        let (link_tmp, file_tmp) = (dir.join(".swap-link"), dir.join(".swap-file"));
        let mut swaps = 0;
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
}

/// Runs `load` [`LOADS`] times while `file` is swapped; `load` returns everything it read (or
/// its error's text). Asserts the outside file never shows, and that the swapper really ran.
fn race(file: PathBuf, inside: &'static str, outside: &Path, load: impl Fn() -> String) {
    let stop = Arc::new(AtomicBool::new(false));
    let handle = swapper(file, inside, outside.to_path_buf(), stop.clone());
    let leaked = AtomicUsize::new(0);
    for _ in 0..LOADS {
        if load().contains(MARKER) {
            leaked.fetch_add(1, Ordering::Relaxed);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = handle.join().unwrap();
    assert!(swaps > 10, "the swapper hardly ran ({swaps} swaps)");
    assert_eq!(
        leaked.load(Ordering::Relaxed),
        0,
        "the outside file was read {} times in {LOADS} loads ({swaps} swaps)",
        leaked.load(Ordering::Relaxed)
    );
}

struct Fixture {
    _tmp: tempfile::TempDir,
    outside: PathBuf,
    work: PathBuf,
}

const INSIDE_MANIFEST: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n";

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside.yaml");
    std::fs::write(
        &outside,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: secret\ndata:\n  auth: {MARKER}\n"
        ),
    )
    .unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    Fixture {
        outside,
        work,
        _tmp: tmp,
    }
}

fn bundle(f: &Fixture) -> PathBuf {
    let b = f.work.join("bundle");
    copy_dir(&repo().join("bundle/memcached-operator/0.4.0"), &b);
    std::fs::write(b.join("manifests/x.yaml"), INSIDE_MANIFEST).unwrap();
    b
}

#[test]
fn the_opm_bundle_loader_never_reads_a_link_swapped_in() {
    let f = fixture();
    let b = bundle(&f);
    race(
        b.join("manifests/x.yaml"),
        INSIDE_MANIFEST,
        &f.outside,
        || match olmkit_catalog::render_opm::load_bundle_dir_opm(&b) {
            Ok(bundle) => bundle
                .manifest_files
                .values()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect(),
            Err(e) => e.to_string(),
        },
    );
}

#[test]
fn the_bundle_loader_never_reads_a_link_swapped_in() {
    let f = fixture();
    let b = bundle(&f);
    race(
        b.join("manifests/x.yaml"),
        INSIDE_MANIFEST,
        &f.outside,
        || match olmkit_bundle::load_bundle_dir(&b) {
            Ok(bundle) => format!("{:?}", bundle.manifests),
            Err(e) => e.to_string(),
        },
    );
}

#[test]
fn the_catalog_loader_never_reads_a_link_swapped_in() {
    let f = fixture();
    let cat = f.work.join("catalog");
    copy_dir(&repo().join("catalog/memcached-operator"), &cat.join("p"));
    // An extra blob of a schema of its own: the outside file, once swapped in, would load as
    // one too (its kind/metadata are just fields), so reading it shows.
    const INSIDE: &str = "schema: example.other\nname: inside\n";
    std::fs::write(
        &f.outside,
        format!("schema: example.other\nname: secret\nauth: {MARKER}\n"),
    )
    .unwrap();
    std::fs::write(cat.join("p/x.yaml"), INSIDE).unwrap();
    race(
        cat.join("p/x.yaml"),
        INSIDE,
        &f.outside,
        || match olmkit_catalog::declcfg::load_dir(
            &cat,
            &olmkit_catalog::declcfg::LoadOptions::default(),
        ) {
            Ok(cfg) => format!("{:?}", cfg.others),
            Err(e) => e.to_string(),
        },
    );
}
