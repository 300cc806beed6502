//! Image benchmarks (`cargo bench -p bundle-tool --bench image_bench`): build time and
//! compressed size of the operator, bundle and catalog images, building all three, writing the
//! layout, and pushing to a local `docker-registry` — with peers measured in the same run:
//! `umoci` building the same FBC-only catalog image from files, and `skopeo copy oci:... docker://`
//! pushing the same images.
//!
//! Binaries: `$IMAGE_BENCH_STATIC_DIR` (default `target/static`, written by
//! hack/build-static.sh) for `operator` and `catalog-server`; when missing, the bench's own
//! `bundle-tool` binary (dynamically linked) stands in, and the report says so.
//! `IMAGE_BENCH_RUNS` (default 5) sets the repetitions; figures are medians.
//! `IMAGE_BENCH_BIG=1` also builds a catalog image from the catalog bench's generated catalog
//! (`$OLMKIT_BENCH_DIR/community-catalog`, if present).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_support::registry::Registry;
use olmkit_image::build::Image;
use olmkit_image::images::{
    CatalogImageInputs, CatalogServer, HealthProbe, OperatorImageInputs, build_bundle_image,
    build_catalog_image, build_operator_image,
};
use olmkit_image::layout::write_to_layout;
use olmkit_image::push::{PushOptions, push};
use olmkit_image::remote::{RemoteOptions, parse_reference};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut(usize) -> T) -> (f64, T) {
    let mut times = Vec::new();
    let mut last = None;
    for i in 0..runs {
        let t = Instant::now();
        let v = f(i);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        last = Some(v);
    }
    (median(times), last.unwrap())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn pick(dir: &Path, name: &str) -> (PathBuf, String, bool) {
    let p = dir.join(name);
    if p.is_file() {
        let size = std::fs::metadata(&p).unwrap().len();
        (
            p.clone(),
            format!("{} (static release, {:.1} MiB)", p.display(), mib(size)),
            false,
        )
    } else {
        let p = PathBuf::from(env!("CARGO_BIN_EXE_bundle-tool"));
        let size = std::fs::metadata(&p).unwrap().len();
        (
            p.clone(),
            format!(
                "{} (FALLBACK: bench build of bundle-tool, dynamic, {:.1} MiB; run hack/build-static.sh)",
                p.display(),
                mib(size)
            ),
            true,
        )
    }
}

fn row(what: &str, ms: f64, image: &Image) {
    println!(
        "  {what:<34} {ms:>9.1} ms   {:>8.2} MiB compressed   {} layer(s)",
        mib(image.compressed_size()),
        image.layers.len()
    );
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = e2e_support::paths::workspace_root();
    let runs: usize = std::env::var("IMAGE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let static_dir = std::env::var_os("IMAGE_BENCH_STATIC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/static"));
    let (operator, op_desc, op_dyn) = pick(&static_dir, "operator");
    let (server, srv_desc, srv_dyn) = pick(&static_dir, "catalog-server");
    let bundle_dir = root.join("tests/fixtures/real-bundles/authorino-operator/0.13.0");
    let fbc = root.join("tests/fixtures/fbc-examples/valid/opm-index-declcfgs-latest");
    let created = jiff::Timestamp::from_second(1_700_000_000).unwrap();

    println!(
        "image bench: {} cores, median of {runs} run(s)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!("  operator binary:       {op_desc}");
    println!("  catalog-server binary: {srv_desc}");
    println!("  bundle: {}", bundle_dir.display());
    println!("  catalog: {}", fbc.display());
    println!("build (in memory, pure builder):");

    let mut op_inputs = OperatorImageInputs::new(&operator, created);
    op_inputs.args = vec!["run".into()];
    op_inputs.allow_dynamic = op_dyn;
    let (ms, op) = time(runs, |_| build_operator_image(&op_inputs).unwrap());
    row("operator image", ms, &op);

    let bundle_inputs = olmkit_release::images::bundle_image_inputs(&bundle_dir, created).unwrap();
    let (ms, bundle) = time(runs, |_| build_bundle_image(&bundle_inputs).unwrap().image);
    row("bundle image", ms, &bundle);

    let mut cat_inputs = CatalogImageInputs::new(&fbc, created);
    let mut s = CatalogServer::new(&server);
    s.allow_dynamic = srv_dyn;
    s.health_probe = HealthProbe::ServerSymlink;
    cat_inputs.server = Some(s);
    let (ms, catalog) = time(runs, |_| build_catalog_image(&cat_inputs).unwrap());
    row("catalog image", ms, &catalog);
    let verdict = if mib(catalog.compressed_size()) < 15.0 {
        "under"
    } else {
        "OVER"
    };
    println!(
        "  -> catalog image {:.2} MiB compressed: {verdict} the 15 MB target",
        mib(catalog.compressed_size())
    );

    let configs_only = CatalogImageInputs::new(&fbc, created);
    let (ms_ours_fbc, fbc_img) = time(runs, |_| build_catalog_image(&configs_only).unwrap());
    row("catalog image, FBC only", ms_ours_fbc, &fbc_img);

    let (ms_all, _) = time(runs, |_| {
        std::thread::scope(|sc| {
            let a = sc.spawn(|| build_operator_image(&op_inputs).unwrap());
            let b = sc.spawn(|| build_bundle_image(&bundle_inputs).unwrap());
            let c = sc.spawn(|| build_catalog_image(&cat_inputs).unwrap());
            (a.join().unwrap(), b.join().unwrap(), c.join().unwrap())
        })
    });
    println!(
        "  all three images (parallel)        {ms_all:>9.1} ms   (target: under 2000 ms: {})",
        if ms_all < 2000.0 { "met" } else { "MISSED" }
    );

    let tmp = tempfile::tempdir().unwrap();
    let (ms, _) = time(runs, |i| {
        let dir = tmp.path().join(format!("layout-{i}"));
        write_to_layout(
            &dir,
            &[
                (&op, "operator:bench"),
                (&bundle, "bundle:bench"),
                (&catalog, "catalog:bench"),
            ],
        )
        .unwrap()
    });
    println!("  write all three to a new OCI layout {ms:>8.1} ms");
    let layout = tmp.path().join("layout-0");

    // Peer: umoci building the FBC-only catalog image from the same files.
    if Command::new("umoci").arg("--version").output().is_ok() {
        let (ms_umoci, ok) = time(runs, |i| {
            let l = tmp.path().join(format!("umoci-{i}"));
            let image = format!("{}:cat", l.display());
            let steps: Vec<Vec<String>> = vec![
                vec!["init".into(), "--layout".into(), l.display().to_string()],
                vec!["new".into(), "--image".into(), image.clone()],
                vec![
                    "insert".into(),
                    "--image".into(),
                    image.clone(),
                    fbc.display().to_string(),
                    "/configs".into(),
                ],
                vec![
                    "config".into(),
                    "--image".into(),
                    image.clone(),
                    "--config.label".into(),
                    "operators.operatorframework.io.index.configs.v1=/configs".into(),
                ],
            ];
            steps.iter().all(|args| {
                Command::new("umoci")
                    .args(args)
                    .output()
                    .map(|o| o.status.success())
                    .unwrap_or(false)
            })
        });
        // Ours, including writing the layout, for a like-for-like comparison.
        let (ms_ours, _) = time(runs, |i| {
            let img = build_catalog_image(&configs_only).unwrap();
            write_to_layout(&tmp.path().join(format!("ours-{i}")), &[(&img, "cat")]).unwrap()
        });
        println!("peer: FBC-only catalog image from files, written to an OCI layout:");
        println!("  bundle-tool (build + write layout)  {ms_ours:>8.1} ms");
        println!(
            "  umoci init+new+insert+config        {ms_umoci:>8.1} ms{}",
            if ok { "" } else { "   (umoci FAILED)" }
        );
    } else {
        println!("peer: umoci not installed (tests/scripts/setup.sh installs it); skipped");
    }

    if std::env::var("IMAGE_BENCH_BIG").is_ok_and(|v| v == "1") {
        let big = std::env::var_os("OLMKIT_BENCH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp/olmkit-bench"))
            .join("community-catalog");
        if big.is_dir() {
            let inputs = CatalogImageInputs::new(&big, created);
            let (ms, img) = time(1, |_| build_catalog_image(&inputs).unwrap());
            row("big generated catalog, FBC only", ms, &img);
        } else {
            println!(
                "  big catalog: {} missing (run the catalog bench first)",
                big.display()
            );
        }
    }

    // Push: ours vs skopeo copy from the same layout, fresh repositories each run.
    if Command::new("docker-registry")
        .arg("--version")
        .output()
        .is_err()
        || Command::new("skopeo").arg("--version").output().is_err()
    {
        println!("push: docker-registry or skopeo missing (run tests/scripts/setup.sh); skipped");
        return;
    }
    // A fresh registry per run and per tool: skopeo's blob-info cache would otherwise turn
    // uploads into cross-repository mounts of blobs an earlier run left behind.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = PushOptions {
        remote: RemoteOptions {
            insecure: true,
            ..Default::default()
        },
    };
    let images = [
        ("operator", &op, "operator:bench"),
        ("bundle", &bundle, "bundle:bench"),
        ("catalog", &catalog, "catalog:bench"),
    ];
    let mut ours = vec![Vec::new(); 3];
    let mut again = vec![Vec::new(); 3];
    let mut peer = vec![Vec::new(); 3];
    let mut peer_ok = true;
    for _ in 0..runs {
        let registry = Registry::start();
        let host = registry.host();
        for (k, (name, img, _)) in images.iter().enumerate() {
            let r = parse_reference(&format!("{host}/{name}:v1")).unwrap();
            let t = Instant::now();
            rt.block_on(push(img, &r, &opts)).unwrap();
            ours[k].push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            let rep = rt.block_on(push(img, &r, &opts)).unwrap();
            again[k].push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(rep.blobs_uploaded, 0);
        }
        drop(registry);
        let registry = Registry::start();
        let host = registry.host();
        for (k, (name, _, layout_name)) in images.iter().enumerate() {
            let t = Instant::now();
            peer_ok &= Command::new("skopeo")
                .args(["copy", "--quiet", "--dest-tls-verify=false"])
                .arg(format!("oci:{}:{layout_name}", layout.display()))
                .arg(format!("docker://{host}/{name}:v1"))
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            peer[k].push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    println!("push to a local docker-registry, empty registry each run:");
    for (k, (name, img, _)) in images.iter().enumerate() {
        println!(
            "  {name:<9} {:>7.2} MiB   bundle-tool {:>7.1} ms   (already there: {:>6.1} ms)   skopeo copy {:>7.1} ms{}",
            mib(img.compressed_size()),
            median(ours[k].clone()),
            median(again[k].clone()),
            median(peer[k].clone()),
            if peer_ok { "" } else { " (skopeo FAILED)" }
        );
    }
}
