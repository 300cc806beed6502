//! Catalog benchmarks (figures, not assertions): `cargo bench -p bundle-tool --bench catalog_bench`.
//!
//! Generates (once, cached under $OLMKIT_BENCH_DIR or /tmp/olmkit-bench) a catalog shaped like
//! the full community-operators catalog rendered by opm: 330 packages, about 7,000 bundles, each
//! with `olm.bundle.object` properties (base64 CSV and CRDs) averaging about 230 KB, about 1.6 GB
//! of 4-space JSON in one directory per package. Then measures the real `bundle-tool` binary
//! (`catalog validate`, `render`) with /usr/bin/time for wall time and peak RSS, and the release
//! planner in-process (load + plan + atomic write) into that catalog and into a small one.
//! For scale (from the issue): `opm validate` on such a catalog took ~97 s and 8.8 GB peak RSS,
//! `opm render` ~69 s and 5.6 GB. opm is not installed here, so it is not re-run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use olmkit_catalog::catalog_dir::{CatalogDir, write_package_update};
use olmkit_catalog::declcfg::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, WriteFormat,
};
use olmkit_catalog::property::Property;
use olmkit_release::catalog_plan::{ReleaseRequest, SkipRangeMode, plan_release};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const PACKAGES: usize = 330;
const BUNDLES: usize = 7000;
const OBJECT_BYTES: usize = 230 * 1024;
const GENERATOR: &str = "olmkit catalog bench generator v1";

/// Deterministic pseudo-random words (xorshift), so payloads look like text, not zeros.
fn filler(seed: u64, len: usize) -> String {
    const WORDS: [&str; 16] = [
        "operator",
        "memcached",
        "cluster",
        "replica",
        "install",
        "upgrade",
        "channel",
        "bundle",
        "catalog",
        "kubernetes",
        "controller",
        "status",
        "webhook",
        "resource",
        "version",
        "deploy",
    ];
    let mut x = seed | 1;
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(WORDS[(x % 16) as usize]);
        s.push(' ');
    }
    s.truncate(len);
    s
}

fn object(kind: &str, name: &str, seed: u64, raw_len: usize) -> String {
    let obj = serde_json::json!({
        "apiVersion": if kind == "ClusterServiceVersion" { "operators.coreos.com/v1alpha1" } else { "apiextensions.k8s.io/v1" },
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"description": filler(seed, raw_len)},
    });
    base64::engine::general_purpose::STANDARD.encode(obj.to_string())
}

fn package(p: usize) -> DeclarativeConfig {
    let name = format!("community-operator-{p:03}");
    let count = BUNDLES / PACKAGES + usize::from(p < BUNDLES % PACKAGES);
    let mut cfg = DeclarativeConfig::default();
    cfg.packages.push(Package {
        schema: "olm.package".into(),
        name: name.clone(),
        default_channel: "stable".into(),
        icon: None,
        description: filler(p as u64, 2000),
        properties: vec![],
    });
    let mut stable = Vec::new();
    let mut fast = Vec::new();
    for i in 0..count {
        let version = format!("{}.{}.0", i / 10, i % 10);
        let bname = format!("{name}.v{version}");
        let seed = (p * 1000 + i) as u64;
        // A CSV (about 70% of the payload) and two CRDs.
        let raw = OBJECT_BYTES * 3 / 4;
        let mut props = vec![
            Property::package(&name, &version),
            Property::gvk("example.com", &format!("Kind{p}"), "v1"),
            Property::gvk("example.com", &format!("Kind{p}"), "v1beta1"),
            Property::bundle_object(object(
                "CustomResourceDefinition",
                "a",
                seed,
                raw * 15 / 100,
            )),
            Property::bundle_object(object(
                "CustomResourceDefinition",
                "b",
                seed + 1,
                raw * 15 / 100,
            )),
            Property::bundle_object(object(
                "ClusterServiceVersion",
                &bname,
                seed + 2,
                raw * 70 / 100,
            )),
        ];
        props.shrink_to_fit();
        cfg.bundles.push(Bundle {
            schema: "olm.bundle".into(),
            name: bname.clone(),
            package: name.clone(),
            image: format!("quay.io/community/{name}-bundle:v{version}"),
            properties: props,
            related_images: vec![olmkit_catalog::declcfg::RelatedImage {
                name: "operator".into(),
                image: format!("quay.io/community/{name}:v{version}"),
            }],
            omitted_objects: 0,
        });
        let prev = i
            .checked_sub(1)
            .map(|j| format!("{name}.v{}.{}.0", j / 10, j % 10));
        stable.push(ChannelEntry {
            name: bname.clone(),
            replaces: prev.clone().unwrap_or_default(),
            skips: vec![],
            skip_range: if i > 0 {
                format!("<{version}")
            } else {
                String::new()
            },
        });
        if i + 5 >= count {
            fast.push(ChannelEntry {
                name: bname,
                replaces: prev.unwrap_or_default(),
                skips: vec![],
                skip_range: String::new(),
            });
        }
    }
    for (cname, entries) in [("stable", stable), ("fast", fast)] {
        cfg.channels.push(Channel {
            schema: "olm.channel".into(),
            name: cname.into(),
            package: name.clone(),
            entries,
            properties: vec![],
        });
    }
    cfg
}

fn bench_dir() -> PathBuf {
    std::env::var_os("OLMKIT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/olmkit-bench"))
}

fn ensure_big_catalog(root: &Path) -> u64 {
    let dir = root.join("community-catalog");
    let marker = root.join("community-catalog.done");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(GENERATOR) {
        let _ = std::fs::remove_dir_all(&dir);
        let t = Instant::now();
        eprintln!("generating the big catalog in {} (once)...", dir.display());
        (0..PACKAGES).into_par_iter().for_each(|p| {
            let cfg = package(p);
            let name = &cfg.packages[0].name;
            let text =
                olmkit_catalog::declcfg::render_config(&cfg, WriteFormat::Json).expect("render");
            let pdir = dir.join(name);
            std::fs::create_dir_all(&pdir).expect("mkdir");
            std::fs::write(pdir.join("catalog.json"), text).expect("write");
        });
        std::fs::write(&marker, GENERATOR).expect("marker");
        eprintln!("generated in {:.1} s", t.elapsed().as_secs_f64());
    }
    walk_size(&dir)
}

fn walk_size(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                total += walk_size(&p);
            } else if let Ok(m) = e.metadata() {
                total += m.len();
            }
        }
    }
    total
}

/// Runs the binary under /usr/bin/time -v; returns (wall seconds, CPU seconds, peak RSS MB,
/// exit ok). CPU time is reported too because wall time on a shared 2-core machine depends on
/// what else runs.
fn measure(args: &[&str]) -> (f64, f64, f64, bool) {
    let bin = env!("CARGO_BIN_EXE_bundle-tool");
    let t = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(bin)
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()
        .expect("run /usr/bin/time");
    let wall = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rss_kb: f64 = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN);
    let secs = |key: &str| -> f64 {
        stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(f64::NAN)
    };
    let cpu = secs("User time (seconds): ") + secs("System time (seconds): ");
    (wall, cpu, rss_kb / 1024.0, out.status.success())
}

/// CPU seconds used by this process so far (utime + stime from /proc, USER_HZ = 100).
fn self_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(") ")?.1.to_string();
            let f: Vec<&str> = rest.split_whitespace().collect();
            let u: f64 = f.get(11)?.parse().ok()?;
            let st: f64 = f.get(12)?.parse().ok()?;
            Some((u + st) / 100.0)
        })
        .unwrap_or(f64::NAN)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn self_peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn release_into(dir: &Path, package: &str, version: &str) -> (f64, f64, f64) {
    let t = Instant::now();
    let catalog = CatalogDir::open(dir).expect("open catalog");
    let load = t.elapsed().as_secs_f64();
    let bundle = Bundle {
        schema: "olm.bundle".into(),
        name: format!("{package}.v{version}"),
        package: package.into(),
        image: format!("quay.io/community/{package}-bundle:v{version}"),
        properties: vec![Property::package(package, version)],
        related_images: vec![],
        omitted_objects: 0,
    };
    let plan = plan_release(
        &catalog.config,
        &ReleaseRequest {
            bundle,
            channels: vec!["stable".into()],
            default_channel: None,
            skip_range: SkipRangeMode::BelowNew,
        },
    )
    .expect("plan");
    let planned = t.elapsed().as_secs_f64();
    write_package_update(&catalog, package, &plan.changes, catalog.format_of(package))
        .expect("write");
    (load, planned, t.elapsed().as_secs_f64())
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs us with no args: keep that cheap.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("catalog_bench: run with `cargo bench -p bundle-tool --bench catalog_bench`");
        return;
    }
    let root = bench_dir();
    std::fs::create_dir_all(&root).expect("bench dir");
    let bytes = ensure_big_catalog(&root);
    let big = root.join("community-catalog");
    let dir = big.to_str().expect("utf-8 path");
    println!(
        "machine: {} cores; catalog: {PACKAGES} packages, {BUNDLES} bundles, {:.2} GB of FBC JSON",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        bytes as f64 / 1e9
    );
    // Warm the page cache so that every figure measures parsing, not the disk.
    let _ = measure(&["catalog", "validate", dir]);
    println!("load average before: {}", load_average());
    let (w, c, r, ok) = measure(&["catalog", "validate", dir]);
    println!(
        "bundle-tool catalog validate: {w:6.2} s wall, {c:6.2} s CPU, {r:7.0} MB peak RSS, valid={ok}   (opm validate: ~97 s, 8.8 GB)"
    );
    let (w, c, r, ok) = measure(&["render", dir, "-o", "json"]);
    println!(
        "bundle-tool render -o json:   {w:6.2} s wall, {c:6.2} s CPU, {r:7.0} MB peak RSS, ok={ok}      (opm render: ~69 s, 5.6 GB)"
    );
    let (w, c, r, ok) = measure(&[
        "graph",
        "--catalog-dir",
        dir,
        "--package",
        "community-operator-000",
    ]);
    println!(
        "bundle-tool graph (1 pkg):    {w:6.2} s wall, {c:6.2} s CPU, {r:7.0} MB peak RSS, ok={ok}"
    );

    // Release into the big catalog: then put the package file back so the cache stays valid.
    let pkg = "community-operator-007";
    let file = big.join(pkg).join("catalog.json");
    let backup = std::fs::read(&file).expect("read package file");
    let cpu0 = self_cpu_s();
    let (load, plan, total) = release_into(&big, pkg, "99.0.0");
    let cpu = self_cpu_s() - cpu0;
    std::fs::write(&file, backup).expect("restore package file");
    println!(
        "release into the big catalog:  {total:6.2} s wall, {cpu:.2} s CPU (load {load:.2} s, plan {:.3} s, write {:.3} s), process peak RSS so far {:.0} MB",
        plan - load,
        total - plan,
        self_peak_rss_mb()
    );

    // Release into a small catalog like ours.
    let small = root.join("small-catalog");
    let _ = std::fs::remove_dir_all(&small);
    std::fs::create_dir_all(small.join("memcached-operator")).expect("mkdir");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/catalog/graph-demo/memcached-operator/catalog.yaml");
    std::fs::copy(demo, small.join("memcached-operator/catalog.yaml")).expect("copy");
    let mut best = f64::MAX;
    for i in 0..5 {
        let (_, _, total) = release_into(&small, "memcached-operator", &format!("1.{i}.0"));
        best = best.min(total);
    }
    println!(
        "release into our small catalog: {:.1} ms (best of 5)",
        best * 1000.0
    );
    release_command_on_this_repo(&root);
    load_scaling(&root, &big);
    println!("load average after: {}", load_average());
}

/// One catalog file of `mb` MB in `dir/catalog.<ext>`: whole packages of the big catalog
/// (bundle objects included) as opm's JSON stream or as `render -o yaml` documents.
fn one_file_catalog(root: &Path, big: &Path, mb: usize, yaml: bool) -> PathBuf {
    let ext = if yaml { "yaml" } else { "json" };
    let dir = root.join(format!("one-file-{mb}mb-{ext}"));
    let file = dir.join(format!("catalog.{ext}"));
    if file.is_file() {
        return dir;
    }
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut text = Vec::new();
    let mut p = 0;
    while text.len() < mb << 20 {
        let name = format!("community-operator-{:03}", p % PACKAGES);
        let json = std::fs::read(big.join(&name).join("catalog.json")).expect("package file");
        if yaml {
            let tmp = root.join("one-file-tmp");
            let _ = std::fs::remove_dir_all(&tmp);
            std::fs::create_dir_all(tmp.join(&name)).expect("mkdir");
            std::fs::write(tmp.join(&name).join("catalog.json"), &json).expect("write");
            let out = Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
                .args(["render", "-o", "yaml"])
                .arg(&tmp)
                .output()
                .expect("render -o yaml");
            assert!(out.status.success(), "render -o yaml failed");
            text.extend_from_slice(&out.stdout);
        } else {
            text.extend_from_slice(&json);
        }
        p += 1;
    }
    std::fs::write(&file, text).expect("write one-file catalog");
    dir
}

/// One file of `mb` MB of tiny blobs (about 200 bytes each, no payloads): the per-document
/// cost, which a quadratic splitter or error-position scan shows first.
fn tiny_blob_catalog(root: &Path, mb: usize) -> PathBuf {
    let dir = root.join(format!("tiny-blobs-{mb}mb"));
    let file = dir.join("catalog.json");
    if file.is_file() {
        return dir;
    }
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut text = String::with_capacity((mb << 20) + 4096);
    let mut p = 0;
    while text.len() < mb << 20 {
        let pkg = format!("tiny-{p:06}");
        text.push_str(&format!(
            "{{\"schema\":\"olm.package\",\"name\":\"{pkg}\",\"defaultChannel\":\"stable\"}}\n"
        ));
        let mut entries = Vec::new();
        for v in 0..20 {
            let b = format!("{pkg}.v0.{v}.0");
            text.push_str(&format!(
                "{{\"schema\":\"olm.bundle\",\"name\":\"{b}\",\"package\":\"{pkg}\",\"image\":\"quay.io/t/{pkg}:v0.{v}.0\",\"properties\":[{{\"type\":\"olm.package\",\"value\":{{\"packageName\":\"{pkg}\",\"version\":\"0.{v}.0\"}}}}]}}\n"
            ));
            entries.push(if v == 0 {
                format!("{{\"name\":\"{b}\"}}")
            } else {
                format!("{{\"name\":\"{b}\",\"replaces\":\"{pkg}.v0.{}.0\"}}", v - 1)
            });
        }
        text.push_str(&format!(
            "{{\"schema\":\"olm.channel\",\"name\":\"stable\",\"package\":\"{pkg}\",\"entries\":[{}]}}\n",
            entries.join(",")
        ));
        p += 1;
    }
    std::fs::write(&file, text).expect("write tiny-blob catalog");
    dir
}

/// Catalog load must be linear in the input size for any layout (issue: one 39 MiB file took
/// 21.7 s where the same catalog split per package took 1 s). Times `catalog validate` and
/// `render -o json` on one file of 10, 40 and 160 MB in three shapes and prints the time per
/// MB; the largest/smallest ratio should stay under 2.
fn load_scaling(root: &Path, big: &Path) {
    // Process start, argument parsing and schema set-up are paid once per run: measured on a
    // one-blob catalog and subtracted, so that the figure per MB is the loading itself.
    let one = root.join("one-blob");
    std::fs::create_dir_all(&one).expect("mkdir");
    std::fs::write(
        one.join("catalog.json"),
        r#"{"schema":"olm.package","name":"p"}"#,
    )
    .expect("write");
    let base = (0..5)
        .map(|_| measure(&["catalog", "validate", one.to_str().expect("utf-8")]).0)
        .fold(f64::MAX, f64::min);
    println!(
        "\nload scaling, one file (time per MB should be flat; {:.1} ms of process start subtracted):",
        base * 1000.0
    );
    type Make<'a> = Box<dyn Fn(usize) -> PathBuf + 'a>;
    let shapes: [(&str, Make); 3] = [
        (
            "JSON stream (opm render)",
            Box::new(|mb| one_file_catalog(root, big, mb, false)),
        ),
        (
            "YAML documents (render -o yaml)",
            Box::new(|mb| one_file_catalog(root, big, mb, true)),
        ),
        (
            "tiny blobs, JSON lines",
            Box::new(|mb| tiny_blob_catalog(root, mb)),
        ),
    ];
    for (shape, make) in &shapes {
        for cmd in [&["catalog", "validate"][..], &["render", "-o", "json"][..]] {
            let mut per_mb = Vec::new();
            for mb in [10usize, 40, 160] {
                let dir = make(mb);
                let d = dir.to_str().expect("utf-8 path");
                let mb_real = walk_size(&dir) as f64 / (1u64 << 20) as f64;
                let mut args: Vec<&str> = cmd.to_vec();
                args.push(d);
                let _ = measure(&args);
                let (w, c, r, ok) = measure(&args);
                let net = (w - base).max(0.0) / mb_real;
                per_mb.push(net);
                println!(
                    "  {shape:32} {:24} {mb_real:6.1} MB: {w:6.2} s wall, {c:6.2} s CPU, {r:6.0} MB RSS, {:6.2} ms/MB, ok={ok}",
                    cmd.join(" "),
                    net * 1000.0
                );
            }
            let max = per_mb.iter().cloned().fold(f64::MIN, f64::max);
            let min = per_mb.iter().cloned().fold(f64::MAX, f64::min);
            println!(
                "  {shape:32} {:24} time per MB max/min: {:.2}",
                cmd.join(" "),
                max / min
            );
        }
    }
}

/// The whole `bundle-tool release` through the real binary on a copy of this repository's
/// config/, bundle/ and catalog/ (generation, validation with upgrade safety, catalog plan and
/// validation, atomic write; no images): once reading the manifests through `kubectl
/// kustomize` (what `make release` does) and once from pre-rendered manifests (our own part),
/// next to `kubectl kustomize` alone as the peer.
fn release_command_on_this_repo(root: &Path) {
    let bin = env!("CARGO_BIN_EXE_bundle-tool");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = root.join("release-repo");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("mkdir");
    for d in ["config", "bundle", "catalog"] {
        let ok = Command::new("cp")
            .arg("-r")
            .arg(repo.join(d))
            .arg(work.join(d))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "copy {d}");
    }
    let rendered = work.join("manifests.yaml");
    let t = Instant::now();
    let out = Command::new("kubectl")
        .args(["kustomize", "config/manifests"])
        .current_dir(&work)
        .output();
    let kustomize_ms = t.elapsed().as_secs_f64() * 1000.0;
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        println!("release command: kubectl kustomize failed or missing; skipped");
        return;
    };
    std::fs::write(&rendered, &out.stdout).expect("write manifests");
    let catalog = work.join("catalog/memcached-operator/catalog.yaml");
    let original = std::fs::read(&catalog).expect("read catalog");
    let run = |extra: &[&str]| -> f64 {
        let mut times = Vec::new();
        for _ in 0..5 {
            let _ = std::fs::remove_dir_all(work.join("bundle/memcached-operator/9.0.0"));
            std::fs::write(&catalog, &original).expect("restore catalog");
            let t = Instant::now();
            let ok = Command::new(bin)
                .args(["release", "--version", "9.0.0", "--no-images"])
                .args(extra)
                .current_dir(&work)
                .env("SOURCE_DATE_EPOCH", "1700000000")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "bundle-tool release failed");
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    let with_kustomize = run(&[]);
    let from_file = run(&["--manifests", rendered.to_str().unwrap_or_default()]);
    println!(
        "bundle-tool release (binary, this repo, no images): {with_kustomize:.1} ms with kubectl kustomize, {from_file:.1} ms from rendered manifests (median of 5; target < 200 ms)"
    );
    println!("peer: kubectl kustomize config/manifests alone: {kustomize_ms:.1} ms");
}
