//! Bundle generation and validation speed, in process and through the real binary.
//!
//! Prints, for the memcached fixture project (our operator's layout) and the 29 real bundles:
//! - in-process time to parse the manifests and generate the bundle, to validate it, and to
//!   load and validate every real bundle (first run, with schema compilation, and steady state);
//! - wall time of the real binary for `generate bundle` (stdin and `--kustomize`) and
//!   `validate`, process start included, and its peak RSS (via /usr/bin/time when present);
//! - the peer figure: Python `jsonschema.Draft4Validator` (tests/python venv) validating the
//!   same CSVs against the same embedded OLM CSV schema, next to ours.
//!
//! Run: `cargo bench -p bundle-tool --bench bundle_bench`. Target: our bundle generated and
//! validated end to end in under 50 ms.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use olmkit_bundle::generate::{GenerateInputs, GenerateOptions, generate_bundle};
use olmkit_bundle::load::load_manifest_stream;
use olmkit_bundle::{ValidateOptions, load_bundle_dir, schemas, validate_bundle};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Median and min of `n` runs of `f`.
fn measure(n: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    let mut v: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    v.sort();
    (v[v.len() / 2], v[0])
}

fn peak_rss_self() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
        })
        .unwrap_or_else(|| "n/a".into())
}

fn real_bundles() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for op in [
        "authorino-operator",
        "node-healthcheck-operator",
        "skupper-operator",
    ] {
        for e in std::fs::read_dir(root().join("tests/fixtures/real-bundles").join(op))
            .into_iter()
            .flatten()
            .flatten()
        {
            if e.path().join("manifests").is_dir() {
                v.push(e.path());
            }
        }
    }
    v.sort();
    v
}

/// Runs the binary `n` times; returns (median wall time, peak RSS in KiB if measurable).
fn run_binary(
    n: usize,
    args: &[&str],
    stdin: Option<&[u8]>,
    cwd: &Path,
) -> (Duration, Duration, Option<u64>) {
    let bin = env!("CARGO_BIN_EXE_bundle-tool");
    let (med, min) = measure(n, || {
        let mut c = Command::new(bin);
        c.args(args)
            .current_dir(cwd)
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        let mut child = c.spawn().expect("run bundle-tool");
        if let (Some(data), Some(mut si)) = (stdin, child.stdin.take()) {
            use std::io::Write;
            let _ = si.write_all(data);
        }
        let st = child.wait().expect("wait");
        assert!(st.success(), "bundle-tool {args:?} failed");
    });
    let rss = Path::new("/usr/bin/time")
        .exists()
        .then(|| {
            let mut c = Command::new("/usr/bin/time");
            c.arg("-f")
                .arg("%M")
                .arg(bin)
                .args(args)
                .current_dir(cwd)
                .env("SOURCE_DATE_EPOCH", "1700000000")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .stdin(if stdin.is_some() {
                    Stdio::piped()
                } else {
                    Stdio::null()
                });
            let mut child = c.spawn().ok()?;
            if let (Some(data), Some(mut si)) = (stdin, child.stdin.take()) {
                use std::io::Write;
                let _ = si.write_all(data);
            }
            let out = child.wait_with_output().ok()?;
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()?
                .trim()
                .parse::<u64>()
                .ok()
        })
        .flatten();
    (med, min, rss)
}

fn main() {
    let project = root().join("tests/fixtures/bundle/memcached-project");
    let stream = std::fs::read(project.join("kustomized.yaml")).expect("fixture stream");
    let options = GenerateOptions {
        version: Some(semver::Version::new(0, 1, 0)),
        created_at: "2023-11-14T22:13:20Z".into(),
        builder: "bundle-tool-bench".into(),
        ..Default::default()
    };
    println!(
        "bundle_bench: {} logical CPUs",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );

    // In process, first run (includes compiling the CSV and Deployment schemas once).
    let t = Instant::now();
    let docs = load_manifest_stream("<stdin>", &stream).expect("parse");
    let generated = generate_bundle(
        &GenerateInputs {
            manifests: docs,
            ..Default::default()
        },
        &options,
    )
    .expect("generate");
    let t_gen = t.elapsed();
    let bundle = generated.to_bundle(Path::new("b")).expect("load");
    let t = Instant::now();
    let report = validate_bundle(&bundle, None, &ValidateOptions::default());
    let t_val_first = t.elapsed();
    assert!(!report.has_errors());
    println!(
        "in-process, memcached fixture: parse+generate {} | validate (first, with schema compilation) {}",
        ms(t_gen),
        ms(t_val_first)
    );
    let (g_med, g_min) = measure(30, || {
        let docs = load_manifest_stream("<stdin>", &stream).expect("parse");
        let _ = generate_bundle(
            &GenerateInputs {
                manifests: docs,
                ..Default::default()
            },
            &options,
        );
    });
    let (v_med, v_min) = measure(30, || {
        let b = generated.to_bundle(Path::new("b")).expect("load");
        let _ = validate_bundle(&b, None, &ValidateOptions::default());
    });
    println!(
        "in-process, memcached fixture, steady state (30 runs): parse+generate median {} (min {}) | load+validate median {} (min {})",
        ms(g_med),
        ms(g_min),
        ms(v_med),
        ms(v_min)
    );

    let dirs = real_bundles();
    let (r_med, r_min) = measure(5, || {
        for d in &dirs {
            let b = load_bundle_dir(d).expect("real bundle");
            assert!(!validate_bundle(&b, None, &ValidateOptions::default()).has_errors());
        }
    });
    println!(
        "in-process, {} real bundles: load+validate all, median {} (min {}), {} per bundle",
        dirs.len(),
        ms(r_med),
        ms(r_min),
        ms(r_med / dirs.len() as u32)
    );
    println!("in-process peak RSS (VmHWM): {}", peak_rss_self());

    // The real binary, process start included.
    let tmp = std::env::temp_dir().join(format!("bundle-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&tmp);
    let out = tmp.join("bundle");
    let out_s = out.display().to_string();
    let (med, min, rss) = run_binary(
        20,
        &[
            "generate",
            "bundle",
            "--version",
            "0.1.0",
            "--manifests",
            "-",
            "--output-dir",
            &out_s,
        ],
        Some(&stream),
        &tmp,
    );
    println!(
        "binary: generate bundle (stdin, includes validation + atomic write): median {} (min {}), peak RSS {}",
        ms(med),
        ms(min),
        rss.map(|k| format!("{k} KiB"))
            .unwrap_or_else(|| "n/a".into())
    );
    let (vmed, vmin, vrss) = run_binary(20, &["validate", &out_s], None, &tmp);
    println!(
        "binary: validate bundle: median {} (min {}), peak RSS {}",
        ms(vmed),
        ms(vmin),
        vrss.map(|k| format!("{k} KiB"))
            .unwrap_or_else(|| "n/a".into())
    );
    println!(
        "binary: one-step generate (generation + validation + write, process start included): median {} (target < 50 ms)",
        ms(med)
    );
    println!(
        "binary: generate, then validate again in a second process: median {}",
        ms(med + vmed)
    );
    let kdir = project.join("config/manifests").display().to_string();
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        let (kmed, _, _) = run_binary(
            5,
            &[
                "generate",
                "bundle",
                "--version",
                "0.1.0",
                "--kustomize",
                &kdir,
                "--output-dir",
                &out_s,
            ],
            None,
            &tmp,
        );
        println!(
            "binary: generate bundle --kustomize (includes running kubectl kustomize): median {}",
            ms(kmed)
        );
        let (kk, _) = measure(5, || {
            let _ = Command::new("kubectl")
                .arg("kustomize")
                .arg(&kdir)
                .stdout(Stdio::null())
                .status();
        });
        println!(
            "peer: kubectl kustomize config/manifests alone: median {}",
            ms(kk)
        );
    }
    let all: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let mut args = vec!["validate"];
    args.extend(all.iter().map(String::as_str));
    let (amed, amin, arss) = run_binary(5, &args, None, &tmp);
    println!(
        "binary: validate all {} real bundles in one run: median {} (min {}), peak RSS {}",
        dirs.len(),
        ms(amed),
        ms(amin),
        arss.map(|k| format!("{k} KiB"))
            .unwrap_or_else(|| "n/a".into())
    );

    // Peer: Python jsonschema on the same CSVs and the same schema.
    let mut csvs = vec![];
    for d in dirs.iter().map(PathBuf::as_path).chain([out.as_path()]) {
        if let Ok(b) = load_bundle_dir(d)
            && let Some(c) = b.csv()
        {
            csvs.push(c.object.clone());
        }
    }
    let schema_path = tmp.join("csv.schema.json");
    let csvs_path = tmp.join("csvs.json");
    let _ = std::fs::write(&schema_path, schemas::csv_schema_json());
    let _ = std::fs::write(&csvs_path, serde_json::to_vec(&csvs).unwrap_or_default());
    let t = Instant::now();
    for c in &csvs {
        assert!(
            schemas::validate_csv(c)
                .map(|v| v.is_empty())
                .unwrap_or(false)
        );
    }
    println!(
        "ours: {} CSVs against the OLM CSV schema (compiled): {}",
        csvs.len(),
        ms(t.elapsed())
    );
    let python = root().join(".venv/bin/python");
    if python.exists() {
        let script = r#"
import json, sys, time
t0 = time.perf_counter()
import jsonschema
schema = json.load(open(sys.argv[1])); csvs = json.load(open(sys.argv[2]))
v = jsonschema.Draft4Validator(schema)
t1 = time.perf_counter()
bad = sum(1 for c in csvs if not v.is_valid(c))
t2 = time.perf_counter()
print(f"{(t1-t0)*1000:.2f} {(t2-t1)*1000:.2f} {bad} {len(csvs)}")
"#;
        let t = Instant::now();
        let out = Command::new(&python)
            .arg("-c")
            .arg(script)
            .arg(&schema_path)
            .arg(&csvs_path)
            .output();
        let wall = t.elapsed();
        match out {
            Ok(o) if o.status.success() => {
                let s = String::from_utf8_lossy(&o.stdout);
                let f: Vec<&str> = s.split_whitespace().collect();
                println!(
                    "peer: python jsonschema Draft4Validator: import+load {} ms, validate {} CSVs {} ms ({} invalid), process wall {}",
                    f.first().unwrap_or(&"?"),
                    f.get(3).unwrap_or(&"?"),
                    f.get(1).unwrap_or(&"?"),
                    f.get(2).unwrap_or(&"?"),
                    ms(wall)
                );
            }
            _ => println!(
                "peer: python jsonschema not runnable ({})",
                python.display()
            ),
        }
    } else {
        println!(
            "peer: {} missing (run tests/scripts/setup.sh)",
            python.display()
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
