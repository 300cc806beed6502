//! The catalog server's index builder and payload reader under attack (issue #24, items 4-7).
//! Every catalog file, and every file an `olm.bundle.object` `ref` names, is opened once
//! through the catalog's root (`olmkit_core::confine`), checked on that descriptor and read
//! from it: a symbolic link out of the catalog (there when listed, or swapped in later), a
//! FIFO, a file with several hard links or one over its size limit is refused with the words
//! `catalog validate` uses, never read, and a FIFO never blocks. Duplicate-key warnings name
//! the line of the file, not of the document.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use olmkit_catalog_server::build::{BuildIndexError, BuildOptions, BuiltIndex, build_index};
use olmkit_catalog_server::catalog::Catalog;
use olmkit_catalog_server::index::{encode_index, read_index};
use olmkit_catalog_server::{payload, query};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

const MARKER: &str = "OUTSIDE-SECRET-c2VjcmV0";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// A sparse file of `len` bytes (zeros; no disk used).
fn sparse(path: &Path, len: u64) {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// Runs `f` on a thread of its own and returns its result; a call still running after a
/// minute fails the test (a blocked open is the bug these tests catch).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} still running after a minute: it blocks"))
}

fn build(dir: &Path) -> Result<BuiltIndex, BuildIndexError> {
    let dir = dir.to_path_buf();
    within("build_index", move || {
        build_index(&dir, &BuildOptions::default())
    })
}

/// The memcached catalog of this repository, copied to `dir`.
fn memcached_catalog(dir: &Path) {
    copy_dir(&repo().join("catalog/memcached-operator"), &dir.join("p"));
}

/// A file outside the catalog whose content, if it were ever read, would show.
fn outside_file(dir: &Path) -> PathBuf {
    let p = dir.join("outside.yaml");
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: secret\ndata:\n  auth: {MARKER}\n"
        ),
    )
    .unwrap();
    p
}

#[test]
fn catalog_files_are_refused_as_catalog_validate_refuses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = outside_file(tmp.path());
    type Attack = fn(&Path, &Path);
    let attacks: [(&str, &str, Attack); 4] = [
        ("link.yaml", "outside", |f, o| {
            std::os::unix::fs::symlink(o, f).unwrap()
        }),
        ("pipe.yaml", "FIFO", |f, _| mkfifo(f)),
        ("hard.yaml", "hard links", |f, o| {
            std::fs::hard_link(o, f).unwrap()
        }),
        // Over the 512 MiB of a YAML catalog file, refused from its size.
        ("big.yaml", "more than the", |f, _| sparse(f, 600 << 20)),
    ];
    for (name, why, attack) in attacks {
        let cat = tmp.path().join(format!("catalog-{name}"));
        memcached_catalog(&cat);
        attack(&cat.join("p").join(name), &outside);
        let ours = match build(&cat) {
            Err(BuildIndexError::Load(e)) => e.to_string(),
            other => panic!("{name}: {other:?}"),
        };
        let theirs = olmkit_catalog::declcfg::load_dir(&cat, &Default::default())
            .unwrap_err()
            .to_string();
        assert_eq!(ours, theirs, "{name}");
        assert!(ours.contains(name) && ours.contains(why), "{name}: {ours}");
        assert!(!ours.contains(MARKER), "{name}: {ours}");
    }
}

/// A catalog whose bundle has one `olm.bundle.object` read from `objects/cm.yaml` (a `ref`;
/// `.indexignore` keeps the walk from taking the object for a catalog file).
fn catalog_with_a_ref(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("objects")).unwrap();
    std::fs::write(dir.join(".indexignore"), "objects/\n").unwrap();
    std::fs::write(
        dir.join("catalog.json"),
        r#"{"schema":"olm.package","name":"p","defaultChannel":"c"}
{"schema":"olm.channel","name":"c","package":"p","entries":[{"name":"p.v1.0.0"}]}
{"schema":"olm.bundle","name":"p.v1.0.0","package":"p","image":"example.com/p:v1","properties":[
 {"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}},
 {"type":"olm.bundle.object","value":{"ref":"objects/cm.yaml"}}]}
"#,
    )
    .unwrap();
    let object = dir.join("objects/cm.yaml");
    std::fs::write(
        &object,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n",
    )
    .unwrap();
    object
}

fn objects(cat: &Catalog) -> Result<Vec<String>, String> {
    query::get_bundle(cat, "p", "c", "p.v1.0.0")
        .map(|b| b.object)
        .map_err(|e| format!("{e:?}"))
}

#[test]
fn files_named_by_bundle_object_refs_are_opened_through_the_catalog_root() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = outside_file(tmp.path());
    // The ordinary case: the referenced file is served.
    let cat = tmp.path().join("ok");
    catalog_with_a_ref(&cat);
    let built = build(&cat).unwrap();
    let served = Catalog::new(&cat, built.index, &cat).unwrap();
    assert_eq!(
        objects(&served).unwrap(),
        vec![r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"inside"}}"#]
    );

    type Attack = fn(&Path, &Path);
    let attacks: [(&str, Attack); 4] = [
        ("outside", |f, o| std::os::unix::fs::symlink(o, f).unwrap()),
        ("FIFO", |f, _| mkfifo(f)),
        ("hard links", |f, o| std::fs::hard_link(o, f).unwrap()),
        // Over the 64 MiB of a manifest file: refused from its size, not read.
        ("more than the", |f, _| sparse(f, 100 << 20)),
    ];
    for (why, attack) in attacks {
        // Refused when the index is built: a finding naming the file, nothing read.
        let cat = tmp.path().join(format!("build-{}", why.replace(' ', "-")));
        let object = catalog_with_a_ref(&cat);
        std::fs::remove_file(&object).unwrap();
        attack(&object, &outside);
        let report = match build(&cat) {
            Err(BuildIndexError::Invalid { report, .. }) => report.render_text(),
            other => panic!("{why}: the catalog must not be servable: {other:?}"),
        };
        assert!(
            report.contains("objects/cm.yaml") && report.contains(why),
            "{why}: {report}"
        );
        assert!(!report.contains(MARKER), "{why}: {report}");

        // Refused when a client asks for the bundle after the file changed under the index.
        let cat = tmp.path().join(format!("serve-{}", why.replace(' ', "-")));
        let object = catalog_with_a_ref(&cat);
        let built = build(&cat).unwrap();
        let served = Catalog::new(&cat, built.index, &cat).unwrap();
        std::fs::remove_file(&object).unwrap();
        attack(&object, &outside);
        let got = within("payload", move || objects(&served));
        let e = got.expect_err(why);
        assert!(
            e.contains("objects/cm.yaml") && e.contains(why),
            "{why}: {e}"
        );
        assert!(!e.contains(MARKER), "{why}: {e}");
    }
}

#[test]
fn payload_reads_refuse_a_catalog_file_swapped_after_indexing() {
    // The server builds its index at startup without checksums; a blob is read back from its
    // file when a client asks. A file replaced afterwards by a link out of the catalog (to a
    // file with the same bytes at the same place, but a secret) is refused, not read.
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("catalog");
    memcached_catalog(&cat);
    let inside = format!(
        "{{\"schema\":\"example.other\",\"name\":\"{}\"}}\n",
        "i".repeat(MARKER.len())
    );
    std::fs::write(cat.join("p/x.json"), &inside).unwrap();
    let outside = tmp.path().join("outside.json");
    std::fs::write(&outside, inside.replace(&"i".repeat(MARKER.len()), MARKER)).unwrap();
    let built = within("build_index", {
        let cat = cat.clone();
        move || {
            build_index(
                &cat,
                &BuildOptions {
                    threads: 1,
                    checksums: false,
                },
            )
        }
    })
    .unwrap();
    let served = Arc::new(Catalog::new(&cat, built.index, &cat).unwrap());
    let blob = |served: &Arc<Catalog>| {
        let served = served.clone();
        within("custom blob", move || {
            let span = served.index().others[0].span.clone().unwrap();
            payload::read_blob(&served.source(), &span)
                .map(|b| format!("{b:?}"))
                .map_err(|e| e.to_string())
        })
    };
    assert!(blob(&served).unwrap().contains("iiii"));

    std::fs::remove_file(cat.join("p/x.json")).unwrap();
    std::os::unix::fs::symlink(&outside, cat.join("p/x.json")).unwrap();
    let e = blob(&served).unwrap_err();
    assert!(e.contains("x.json") && e.contains("outside"), "{e}");
    assert!(!e.contains(MARKER), "{e}");

    std::fs::remove_file(cat.join("p/x.json")).unwrap();
    std::fs::hard_link(&outside, cat.join("p/x.json")).unwrap();
    let e = blob(&served).unwrap_err();
    assert!(e.contains("x.json") && e.contains("hard links"), "{e}");
    assert!(!e.contains(MARKER), "{e}");

    std::fs::remove_file(cat.join("p/x.json")).unwrap();
    mkfifo(&cat.join("p/x.json"));
    let e = blob(&served).unwrap_err();
    assert!(e.contains("x.json") && e.contains("FIFO"), "{e}");
}

/// Swaps `file` between `inside` (a regular file) and a link to `outside`, with atomic renames
/// so that the name always exists, until `stop`.
fn swapper(
    file: PathBuf,
    inside: String,
    outside: PathBuf,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let dir = file.parent().unwrap().to_path_buf();
        // Names the catalog's .indexignore keeps the loaders from listing.
        let (link_tmp, file_tmp) = (dir.join(".swap-link"), dir.join(".swap-file"));
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            let _ = std::fs::remove_file(&link_tmp);
            std::os::unix::fs::symlink(&outside, &link_tmp).unwrap();
            std::fs::rename(&link_tmp, &file).unwrap();
            std::fs::write(&file_tmp, &inside).unwrap();
            std::fs::rename(&file_tmp, &file).unwrap();
            swaps += 1;
        }
        swaps
    })
}

#[test]
fn the_index_builder_never_reads_a_link_swapped_in() {
    // The check-then-read race of issue #24 (item 4), for the server's loader: while a catalog
    // file is swapped, over and over, between a regular file and a link to a file outside the
    // catalog, the index is built again and again; the outside file never shows in an index
    // (nor in an error).
    const LOADS: usize = 2000;
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("catalog");
    memcached_catalog(&cat);
    std::fs::write(cat.join("p/.indexignore"), ".swap-*\n").unwrap();
    let inside = "schema: example.other\nname: inside\n".to_string();
    let outside = tmp.path().join("outside.yaml");
    std::fs::write(&outside, format!("schema: example.other\nname: {MARKER}\n")).unwrap();
    std::fs::write(cat.join("p/x.yaml"), &inside).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let handle = swapper(cat.join("p/x.yaml"), inside, outside, stop.clone());
    let leaked = AtomicUsize::new(0);
    let opts = BuildOptions {
        threads: 1,
        checksums: false,
    };
    for _ in 0..LOADS {
        let seen = match build_index(&cat, &opts) {
            Ok(built) => format!("{:?}", built.index.others),
            Err(e) => e.to_string(),
        };
        if seen.contains(MARKER) {
            leaked.fetch_add(1, Ordering::Relaxed);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = handle.join().unwrap();
    assert!(swaps > 10, "the swapper hardly ran ({swaps} swaps)");
    assert_eq!(
        leaked.load(Ordering::Relaxed),
        0,
        "the outside file was read in {} of {LOADS} index builds ({swaps} swaps)",
        leaked.load(Ordering::Relaxed)
    );
}

/// Every warning reported through `olmkit_core::docs::warn` in this test process.
fn warnings() -> &'static Mutex<Vec<String>> {
    static SEEN: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    SEEN.get_or_init(|| {
        olmkit_core::docs::set_warning_sink(|w| {
            if let Some(seen) = SEEN.get() {
                seen.lock().unwrap().push(w.to_string());
            }
        });
        Mutex::new(Vec::new())
    })
}

#[test]
fn duplicate_key_warnings_name_the_line_of_the_file() {
    let seen = warnings();
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("catalog");
    std::fs::create_dir_all(&cat).unwrap();
    // The repeated key is on line 9 of the file, line 5 of its document.
    let text = concat!(
        "schema: olm.package\n",
        "name: dupkey-op\n",
        "defaultChannel: stable\n",
        "---\n",
        "schema: olm.channel\n",
        "package: dupkey-op\n",
        "name: stable\n",
        "entries: [{name: dupkey-op.v1.0.0}]\n",
        "name: stable\n",
        "---\n",
        "schema: olm.bundle\n",
        "package: dupkey-op\n",
        "name: dupkey-op.v1.0.0\n",
        "image: example.com/dupkey-op:v1\n",
        "properties: [{type: olm.package, value: {packageName: dupkey-op, version: 1.0.0}}]\n",
    );
    std::fs::write(cat.join("dupkey.yaml"), text).unwrap();
    build(&cat).unwrap();
    let seen = seen.lock().unwrap().clone();
    let ours: Vec<&String> = seen.iter().filter(|w| w.contains("dupkey")).collect();
    assert!(
        ours.iter()
            .any(|w| w.starts_with("dupkey.yaml:9: ") && w.contains("\"name\"")),
        "{ours:?}"
    );
}

#[test]
fn a_yaml_file_that_ends_with_a_document_marker_is_served_as_it_validates() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("catalog");
    memcached_catalog(&cat);
    let file = cat.join("p/catalog.yaml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("---\n# nothing after the last document\n");
    std::fs::write(&file, text).unwrap();
    olmkit_catalog::declcfg::load_dir(&cat, &Default::default()).unwrap();
    let built = build(&cat).unwrap();
    assert_eq!(built.index.bundles.len(), 4);
}

#[test]
fn an_index_file_that_is_a_fifo_or_too_big_is_refused_without_reading_it() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("index");
    mkfifo(&fifo);
    let e = within("read_index", move || read_index(&fifo).unwrap_err()).to_string();
    assert!(e.contains("index") && e.contains("FIFO"), "{e}");

    let big = tmp.path().join("big-index");
    sparse(&big, 2 << 30);
    let e = within("read_index", move || read_index(&big).unwrap_err()).to_string();
    assert!(
        e.contains("big-index") && e.contains("more than the"),
        "{e}"
    );

    // An ordinary index still reads.
    let cat = tmp.path().join("catalog");
    memcached_catalog(&cat);
    let built = build(&cat).unwrap();
    let path = tmp.path().join("ok-index");
    std::fs::write(&path, encode_index(&built.index)).unwrap();
    assert_eq!(read_index(&path).unwrap(), built.index);
}
