//! Reading input under attack (issue #24, items 4-8 and 11), through the real binary: a FIFO
//! where a file should be is refused, naming it, without blocking; files too big to be input
//! are refused from their size before they are read (and files a command does not need are
//! not read at all), with no allocation failure aborting the process even under an
//! address-space limit; a hard link to a file outside the input is refused (or, with
//! `BUNDLE_TOOL_ALLOW_HARD_LINKS=1`, read with a warning naming it); duplicate YAML keys warn,
//! naming file and line, in every command that reads the file; and `release` refuses an
//! object larger than etcd stores. The check-then-read race is `olmkit-catalog`'s
//! `tests/input_race.rs` (in-process: thousands of loads in a few seconds).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::image_harness as harness;

use harness::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "c2VjcmV0OnBhc3N3b3Jk";

fn newest_bundle() -> PathBuf {
    let pkg = root().join("bundle/memcached-operator");
    let mut versions: Vec<semver::Version> = std::fs::read_dir(&pkg)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.parse().ok())
        .collect();
    versions.sort();
    pkg.join(versions.last().unwrap().to_string())
}

/// Runs `cmd` with a deadline: (exit code, stdout, stderr). A command still running at the
/// deadline is killed and the test fails (a hang is the bug these tests catch).
fn run_within(cmd: &mut Command, limit: Duration) -> (i32, String, String) {
    use std::os::unix::process::ExitStatusExt;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bundle-tool");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}: it blocks");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = |v: Vec<u8>| String::from_utf8_lossy(&v).into_owned();
    let out = text(out_t.join().unwrap());
    let err = text(err_t.join().unwrap());
    // A signal (an abort on a failed allocation) shows as 128 + signal, as a shell shows it.
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    (code, out, err)
}

const DEADLINE: Duration = Duration::from_secs(120);

/// `bundle-tool ARGS` in `dir` under an address-space limit of `gib` GiB (`prlimit --as`).
fn limited(dir: &Path, gib: u64, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new("prlimit");
    c.arg(format!("--as={}", gib << 30))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_bundle-tool"))
        .args(args)
        .current_dir(dir)
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .env("NO_COLOR", "1")
        .env_remove("BUNDLE_TOOL_ALLOW_HARD_LINKS");
    run_within(&mut c, DEADLINE)
}

fn tool(dir: &Path, args: &[&str]) -> (i32, String, String) {
    run_within(
        bundle_tool()
            .current_dir(dir)
            .env_remove("BUNDLE_TOOL_ALLOW_HARD_LINKS")
            .args(args),
        DEADLINE,
    )
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

/// A sparse file of `len` bytes (zeros; no disk used).
fn sparse(path: &Path, len: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

#[track_caller]
fn refused_naming(result: (i32, String, String), needles: &[&str]) -> String {
    let (code, out, err) = result;
    let all = format!("{out}{err}");
    assert_eq!(code, 1, "must exit 1:\n{all}");
    for n in needles {
        assert!(all.contains(n), "the error must mention {n:?}:\n{all}");
    }
    all
}

/// A scratch project: this repository's `config/`, with 0.1.0 released.
fn released_project(tmp: &Path) -> PathBuf {
    let p = tmp.join("project");
    copy_dir(&root().join("config"), &p.join("config"));
    let (code, out, err) = tool(&p, &["release", "--version", "0.1.0", "--no-images"]);
    assert_eq!(code, 0, "{out}\n{err}");
    p
}

#[test]
fn fifos_are_refused_naming_them_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    // A symbolic link (inside the bundle) to a FIFO: reading it would wait for a writer forever.
    let b = work.join("bundle");
    copy_dir(&newest_bundle(), &b);
    std::fs::create_dir_all(b.join("tests")).unwrap();
    mkfifo(&b.join("tests/pipe"));
    std::os::unix::fs::symlink("../tests/pipe", b.join("manifests/pipe.yaml")).unwrap();
    for args in [
        &["validate", "bundle"][..],
        &[
            "render",
            "bundle",
            "--image-ref-template",
            "x/{package}:{version}",
        ],
        &[
            "catalog",
            "from-bundles",
            "--image-ref-template",
            "x/{package}:{version}",
            "bundle",
        ],
    ] {
        let (code, out, err) = tool(work, args);
        let all = format!("{out}{err}");
        // from-bundles leaves a bundle it cannot load out, with a warning, as opm does; with
        // nothing left it fails.
        assert_eq!(code, 1, "{args:?}:\n{all}");
        assert!(
            all.contains("pipe.yaml") && all.contains("FIFO"),
            "{args:?} must name the FIFO:\n{all}"
        );
    }

    // A FIFO in a catalog directory, as such or through a link.
    let cat = work.join("catalog");
    copy_dir(&root().join("catalog/memcached-operator"), &cat.join("p"));
    mkfifo(&cat.join("p/pipe.yaml"));
    for args in [
        &["catalog", "validate", "catalog"][..],
        &["render", "catalog"],
    ] {
        refused_naming(tool(work, args), &["pipe.yaml", "FIFO"]);
    }
    std::fs::remove_file(cat.join("p/pipe.yaml")).unwrap();
    mkfifo(&work.join("elsewhere"));
    std::fs::rename(work.join("elsewhere"), cat.join("pipe")).unwrap();
    std::os::unix::fs::symlink("../pipe", cat.join("p/link.yaml")).unwrap();
    refused_naming(
        tool(work, &["catalog", "validate", "catalog"]),
        &["link.yaml", "FIFO"],
    );

    // `--manifests` naming a FIFO: a clear error naming it, not "Not a directory".
    mkfifo(&work.join("m.fifo"));
    let all = refused_naming(
        tool(
            work,
            &[
                "generate",
                "bundle",
                "--version",
                "0.0.1",
                "--package",
                "p",
                "--manifests",
                "m.fifo",
                "--output-dir",
                "out",
            ],
        ),
        &["m.fifo", "FIFO"],
    );
    assert!(!all.contains("Not a directory"), "{all}");
    assert!(!work.join("out").exists());
}

#[test]
fn release_refuses_a_fifo_in_the_previous_bundle_and_as_manifests() {
    let tmp = tempfile::tempdir().unwrap();
    let p = released_project(tmp.path());
    mkfifo(&p.join("bundle/memcached-operator/0.1.0/manifests/pipe.yaml"));
    let before = files(&p.join("catalog"));
    refused_naming(
        tool(&p, &["release", "--version", "0.2.0", "--no-images"]),
        &["pipe.yaml", "FIFO"],
    );
    assert_eq!(files(&p.join("catalog")), before);
    assert!(!p.join("bundle/memcached-operator/0.2.0").exists());

    std::fs::remove_file(p.join("bundle/memcached-operator/0.1.0/manifests/pipe.yaml")).unwrap();
    mkfifo(&p.join("m.fifo"));
    let all = refused_naming(
        tool(
            &p,
            &[
                "release",
                "--version",
                "0.2.0",
                "--no-images",
                "--manifests",
                "m.fifo",
            ],
        ),
        &["m.fifo", "FIFO"],
    );
    assert!(!all.contains("Not a directory"), "{all}");
    assert!(!p.join("bundle/memcached-operator/0.2.0").exists());
}

#[test]
fn big_files_are_refused_from_their_size_and_unneeded_ones_are_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    // A 4 GiB file the validator does not need (scorecard tests): not read at all, so
    // `validate` passes under a 2 GiB address-space limit.
    let b = work.join("bundle");
    copy_dir(&newest_bundle(), &b);
    sparse(&b.join("tests/scorecard/huge"), 4 << 30);
    let (code, out, err) = limited(work, 2, &["validate", "bundle"]);
    assert_eq!(
        code, 0,
        "validate read a file it does not need:\n{out}\n{err}"
    );

    // A manifest beyond the bundle file limit: refused from its size, before it is read.
    sparse(&b.join("manifests/huge.yaml"), 100 << 20);
    refused_naming(
        limited(work, 2, &["validate", "bundle"]),
        &["manifests/huge.yaml", "more than the"],
    );
    refused_naming(
        limited(
            work,
            2,
            &[
                "render",
                "bundle",
                "--image-ref-template",
                "x/{package}:{version}",
            ],
        ),
        &["manifests/huge.yaml", "more than the"],
    );

    // A 3 GiB file in a catalog: every reader refuses it from its size, with exit 1 (no
    // abort on a failed allocation), under a 2 GiB address-space limit.
    let cat = work.join("catalog");
    copy_dir(&root().join("catalog/memcached-operator"), &cat.join("p"));
    sparse(&cat.join("big.yaml"), 3 << 30);
    for args in [
        &["catalog", "validate", "catalog"][..],
        &["render", "catalog"],
        &["catalog", "index", "catalog", "-o", "index"],
        &["graph", "--catalog-dir", "catalog"],
    ] {
        refused_naming(limited(work, 2, args), &["big.yaml", "more than the"]);
    }
    assert!(!work.join("index").exists());
}

#[test]
fn hard_links_to_outside_files_are_refused_unless_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let secret = tmp.path().join("config.json");
    std::fs::write(
        &secret,
        format!("{{\"auths\": {{\"quay.io\": {{\"auth\": \"{SECRET}\"}}}}}}"),
    )
    .unwrap();
    let b = work.join("bundle");
    copy_dir(&newest_bundle(), &b);
    std::fs::hard_link(&secret, b.join("manifests/leak.yaml")).unwrap();
    let encoded = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(&secret).unwrap())
    };
    for args in [
        &["validate", "bundle"][..],
        &[
            "render",
            "bundle",
            "--bundle-object",
            "--image-ref-template",
            "x/{package}:{version}",
        ],
        &[
            "catalog",
            "from-bundles",
            "--bundle-object",
            "--image-ref-template",
            "x/{package}:{version}",
            "bundle",
        ],
    ] {
        let all = refused_naming(tool(&work, args), &["leak.yaml", "hard link"]);
        assert!(
            !all.contains(SECRET) && !all.contains(&encoded),
            "{args:?} leaked the file"
        );
    }
    // The opt-in reads it, with a warning naming it.
    let (code, out, err) = run_within(
        bundle_tool()
            .current_dir(&work)
            .env("BUNDLE_TOOL_ALLOW_HARD_LINKS", "1")
            .args([
                "render",
                "bundle",
                "--bundle-object",
                "--image-ref-template",
                "x/{package}:{version}",
            ]),
        DEADLINE,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("warning") && err.contains("leak.yaml") && err.contains("hard link"),
        "{err}"
    );
    std::fs::remove_file(b.join("manifests/leak.yaml")).unwrap();

    // A catalog file hard-linked from outside.
    let cat = work.join("catalog");
    copy_dir(&root().join("catalog/memcached-operator"), &cat.join("p"));
    std::fs::hard_link(&secret, cat.join("p/leak.json")).unwrap();
    for args in [
        &["catalog", "validate", "catalog"][..],
        &["render", "catalog"],
    ] {
        let all = refused_naming(tool(&work, args), &["leak.json", "hard link"]);
        assert!(!all.contains(SECRET), "{args:?} leaked the file");
    }
}

/// The line of `needle` in `text`, 1-based.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l == needle).unwrap() + 1
}

#[test]
fn duplicate_keys_warn_naming_file_and_line_in_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    // A catalog whose package says `defaultChannel` twice: Go's decoder (opm) takes the last.
    let cat = work.join("catalog");
    copy_dir(&root().join("catalog/memcached-operator"), &cat.join("p"));
    let file = cat.join("p/catalog.yaml");
    let text = std::fs::read_to_string(&file).unwrap().replacen(
        "defaultChannel: stable\n",
        "defaultChannel: stable\ndefaultChannel: alpha\n",
        1,
    );
    std::fs::write(&file, &text).unwrap();
    let line = line_of(&text, "defaultChannel: alpha");
    let at = format!("catalog.yaml:{line}");
    let (code, out, err) = tool(work, &["catalog", "validate", "catalog"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("1 warning(s)")
            && out.contains("defaultChannel")
            && out.contains(&format!("line {line}")),
        "catalog validate must warn, naming file and line:\n{out}\n{err}"
    );
    for args in [
        &["render", "catalog"][..],
        &["render", "catalog", "-o", "yaml"],
        &["graph", "--catalog-dir", "catalog"],
    ] {
        let (code, out, err) = tool(work, args);
        assert_eq!(code, 0, "{args:?}:\n{out}\n{err}");
        assert!(
            err.contains("warning") && err.contains(&at) && err.contains("defaultChannel"),
            "{args:?} must warn naming {at}:\n{err}"
        );
    }

    // A bundle whose CSV repeats a key: `render` and `from-bundles` warn too.
    let b = work.join("bundle");
    copy_dir(&newest_bundle(), &b);
    let csv = std::fs::read_dir(b.join("manifests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".clusterserviceversion.yaml"))
        .unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let text = text.replacen(
        "kind: ClusterServiceVersion\n",
        "kind: ClusterServiceVersion\nkind: ClusterServiceVersion\n",
        1,
    );
    std::fs::write(&csv, &text).unwrap();
    let line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| *l == "kind: ClusterServiceVersion")
        .nth(1)
        .unwrap()
        .0
        + 1;
    let name = csv.file_name().unwrap().to_string_lossy().into_owned();
    let at = format!("{name}:{line}");
    for args in [
        &[
            "render",
            "bundle",
            "--image-ref-template",
            "x/{package}:{version}",
        ][..],
        &[
            "catalog",
            "from-bundles",
            "--image-ref-template",
            "x/{package}:{version}",
            "bundle",
        ],
    ] {
        let (code, out, err) = tool(work, args);
        assert_eq!(code, 0, "{args:?}:\n{out}\n{err}");
        assert!(
            err.contains("warning") && err.contains(&at) && err.contains("\"kind\""),
            "{args:?} must warn naming {at}:\n{err}"
        );
    }

    // A template.
    let template = "schema: olm.template.basic\nentries:\n- schema: olm.package\n  name: foo\n  defaultChannel: stable\n  defaultChannel: candidate\n- schema: olm.channel\n  package: foo\n  name: candidate\n  entries: []\n";
    std::fs::write(work.join("template.yaml"), template).unwrap();
    let (code, out, err) = tool(work, &["render", "template.yaml"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("warning")
            && err.contains("template.yaml:6")
            && err.contains("defaultChannel"),
        "render of a template must warn:\n{err}"
    );
}

#[test]
fn release_warns_about_duplicate_keys_in_the_catalog() {
    let tmp = tempfile::tempdir().unwrap();
    let p = released_project(tmp.path());
    let file = p.join("catalog/memcached-operator/catalog.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let old = text
        .lines()
        .find(|l| l.starts_with("defaultChannel: "))
        .unwrap()
        .to_string();
    let text = text.replacen(
        &format!("{old}\n"),
        &format!("{old}\ndefaultChannel: beta\n"),
        1,
    );
    std::fs::write(&file, &text).unwrap();
    let line = line_of(&text, "defaultChannel: beta");
    let (_, out, err) = tool(&p, &["release", "--version", "0.2.0", "--no-images"]);
    assert!(
        err.contains("warning")
            && err.contains(&format!("catalog.yaml:{line}"))
            && err.contains("defaultChannel"),
        "release must warn naming the catalog file and line:\n{out}\n{err}"
    );
}

#[test]
fn release_refuses_objects_larger_than_etcd_stores() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("project");
    copy_dir(&root().join("config"), &p.join("config"));
    let m = p.join("m");
    std::fs::create_dir_all(&m).unwrap();
    let out = Command::new("kubectl")
        .args(["kustomize", "config/manifests"])
        .current_dir(&p)
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(m.join("operator.yaml"), &out.stdout).unwrap();
    // 2 MiB of data: the bundle compresses well below OLM's limit, but no API server stores it.
    std::fs::write(
        m.join("big.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  x: {}\n",
            "a".repeat(2 << 20)
        ),
    )
    .unwrap();
    let release = [
        "release",
        "--version",
        "0.1.0",
        "--no-images",
        "--manifests",
        "m",
    ];
    refused_naming(tool(&p, &release), &["ConfigMap big", "big.yaml"]);
    assert!(!p.join("bundle").exists() && !p.join("catalog").exists());

    // 200 MB: refused from the file's size, before it is read.
    std::fs::remove_file(m.join("big.yaml")).unwrap();
    sparse(&m.join("huge.yaml"), 200 << 20);
    refused_naming(limited(&p, 2, &release), &["huge.yaml", "more than the"]);
    assert!(!p.join("bundle").exists() && !p.join("catalog").exists());
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

#[test]
fn the_catalog_servers_index_reads_files_through_the_catalog_root() {
    // `catalog index` builds the index `serve` and `catalog-server` build at startup; it reads
    // the file an `olm.bundle.object` `ref` names the way every reader reads input: a link out
    // of the catalog, a FIFO, a hard link and a file over the manifest limit are refused,
    // naming the file, without blocking, leaking or aborting (a 2 GiB address-space limit).
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    let secret = work.join("config.json");
    std::fs::write(
        &secret,
        format!("{{\"auths\": {{\"quay.io\": {{\"auth\": \"{SECRET}\"}}}}}}"),
    )
    .unwrap();
    let cat = work.join("catalog");
    catalog_with_a_ref(&cat);
    let (code, out, err) = tool(work, &["catalog", "index", "catalog", "-o", "index"]);
    assert_eq!(code, 0, "{out}\n{err}");
    std::fs::remove_file(work.join("index")).unwrap();
    type Attack = fn(&Path, &Path);
    let attacks: [(&str, Attack); 4] = [
        ("outside", |f, s| std::os::unix::fs::symlink(s, f).unwrap()),
        ("FIFO", |f, _| mkfifo(f)),
        ("hard links", |f, s| std::fs::hard_link(s, f).unwrap()),
        ("more than the", |f, _| sparse(f, 3 << 30)),
    ];
    for (why, attack) in attacks {
        let object = catalog_with_a_ref(&cat);
        std::fs::remove_file(&object).unwrap();
        attack(&object, &secret);
        let all = refused_naming(
            limited(work, 2, &["catalog", "index", "catalog", "-o", "index"]),
            &["objects/cm.yaml", why],
        );
        assert!(!all.contains(SECRET), "{why}: leaked the file:\n{all}");
        assert!(!work.join("index").exists(), "{why}");
        std::fs::remove_file(&object).unwrap();
    }
}

#[test]
fn catalog_index_warns_about_duplicate_keys_naming_the_files_line() {
    // The index builder parses a catalog one document at a time; a warning names the line of
    // the file (as `catalog validate` does), not of the document.
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    let cat = work.join("catalog");
    copy_dir(&root().join("catalog/memcached-operator"), &cat.join("p"));
    let file = cat.join("p/catalog.yaml");
    let text = std::fs::read_to_string(&file).unwrap().replacen(
        "name: alpha\n",
        "name: alpha\nname: alpha\n",
        1,
    );
    std::fs::write(&file, &text).unwrap();
    let line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| *l == "name: alpha")
        .nth(1)
        .unwrap()
        .0
        + 1;
    let (code, out, err) = tool(work, &["catalog", "validate", "catalog"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("line {line}")), "{out}");
    let (code, out, err) = tool(work, &["catalog", "index", "catalog", "-o", "index"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("warning") && err.contains(&format!("catalog.yaml:{line}: ")),
        "catalog index must warn naming catalog.yaml:{line}:\n{err}"
    );
}

#[test]
fn image_build_copies_files_through_the_opener() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    // A bundle file the loader does not read (scorecard tests) but the image copies: refused
    // from its size, with exit 1, under a 2 GiB address-space limit.
    let b = work.join("bundle");
    copy_dir(&newest_bundle(), &b);
    sparse(&b.join("tests/scorecard/huge"), 3 << 30);
    let bundle_args = [
        "image", "build", "bundle", "bundle", "--tag", "b:1", "--layout", "layout",
    ];
    refused_naming(
        limited(work, 2, &bundle_args),
        &["tests/scorecard/huge", "more than the"],
    );
    std::fs::remove_file(b.join("tests/scorecard/huge")).unwrap();
    let (code, out, err) = tool(work, &bundle_args);
    assert_eq!(code, 0, "{out}\n{err}");

    // A catalog file hard-linked from outside: refused, naming it; read with a warning when
    // allowed.
    let secret = work.join("config.json");
    std::fs::write(
        &secret,
        format!("{{\"auths\": {{\"quay.io\": {{\"auth\": \"{SECRET}\"}}}}}}"),
    )
    .unwrap();
    let cat = work.join("catalog");
    copy_dir(&root().join("catalog/memcached-operator"), &cat.join("p"));
    std::fs::hard_link(&secret, cat.join("p/leak.json")).unwrap();
    let catalog_args = [
        "image",
        "build",
        "catalog",
        "--configs-only",
        "catalog",
        "--tag",
        "c:1",
        "--layout",
        "layout",
    ];
    let all = refused_naming(tool(work, &catalog_args), &["p/leak.json", "hard link"]);
    assert!(!all.contains(SECRET), "leaked the file:\n{all}");
    let (code, out, err) = run_within(
        bundle_tool()
            .current_dir(work)
            .env("BUNDLE_TOOL_ALLOW_HARD_LINKS", "1")
            .args(catalog_args),
        DEADLINE,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("warning") && err.contains("leak.json") && err.contains("hard link"),
        "{err}"
    );

    // A file over the limit of a file copied into an image: refused from its size.
    std::fs::remove_file(cat.join("p/leak.json")).unwrap();
    sparse(&cat.join("p/huge.json"), 5 << 30);
    refused_naming(
        limited(work, 2, &catalog_args),
        &["p/huge.json", "more than the"],
    );
}
