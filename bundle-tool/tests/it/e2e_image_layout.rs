//! End to end, no registry: `bundle-tool image build` writes the operator, bundle and catalog
//! images into one OCI layout, and independent tools read it back — skopeo (`oci:` transport),
//! umoci (unpacks a runnable rootfs; the static binary runs from it) and GNU tar (modes, owners,
//! mtimes of every layer). Also: reproducibility, layer reuse, Dockerfile equivalence, and bad
//! input (exit 1, clear error, layout untouched).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::image_harness as harness;

use e2e_support::registry::{gnu_tar_listing, require_tool, skopeo};
use harness::*;
use olmkit_image::dockerfile::parse_instructions;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const OP: &str = "example.com/memcached-operator:v0.1.0";
const BUNDLE: &str = "example.com/memcached-operator-bundle:v0.1.0";
const CATALOG: &str = "example.com/memcached-operator-catalog:latest";

fn build_all(
    dir: &Path,
    layout: &Path,
) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    let bin = static_binary(dir, "operator");
    let server = static_binary(dir, "catalog-server");
    let op = json(&ok(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(&bin)
        .args([
            "--arg",
            "run",
            "--expose",
            "9443",
            "--title",
            "memcached-operator",
        ])
        .args([
            "--image-version",
            "0.1.0",
            "--source",
            "https://github.com/example/memcached-operator",
        ])
        .args(["--output", "json", "--tag", OP, "--layout"])
        .arg(layout)));
    let bundle = json(&ok(bundle_tool()
        .args(["image", "build", "bundle"])
        .arg(fixture_bundle())
        .args(["--output", "json", "--tag", BUNDLE, "--layout"])
        .arg(layout)));
    let catalog = json(&ok(bundle_tool()
        .args(["image", "build", "catalog"])
        .arg(fixture_catalog())
        .arg("--server")
        .arg(&server)
        .args(["--health-probe"])
        .arg(&bin)
        .args(["--output", "json", "--tag", CATALOG, "--layout"])
        .arg(layout)));
    (op, bundle, catalog)
}

fn skopeo_inspect(layout: &Path, name: &str, config: bool) -> serde_json::Value {
    let target = format!("oci:{}:{name}", layout.display());
    let mut args = vec!["inspect"];
    if config {
        args.push("--config");
    }
    args.push(&target);
    json(&skopeo(&args))
}

#[test]
fn three_images_in_one_layout_read_by_skopeo_umoci_and_tar() {
    require_tool("skopeo");
    require_tool("umoci");
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let (op, bundle, catalog) = build_all(tmp.path(), &layout);

    // skopeo reads every image under its name, with our digests and labels.
    for (name, built) in [(OP, &op), (BUNDLE, &bundle), (CATALOG, &catalog)] {
        let info = skopeo_inspect(&layout, name, false);
        assert_eq!(info["Digest"], built["digest"], "{name}");
        assert_eq!(info["Created"], "2023-11-14T22:13:20Z", "{name}");
        assert_eq!(info["Os"], "linux");
        assert_eq!(info["Architecture"], "amd64");
    }
    let op_cfg = skopeo_inspect(&layout, OP, true);
    assert_eq!(op_cfg["config"]["User"], "65532:65532");
    assert_eq!(op_cfg["config"]["Entrypoint"][0], "/usr/local/bin/operator");
    assert_eq!(op_cfg["config"]["Cmd"][0], "run");
    assert!(op_cfg["config"]["ExposedPorts"]["9443/tcp"].is_object());
    assert_eq!(
        op_cfg["config"]["Labels"]["org.opencontainers.image.source"],
        "https://github.com/example/memcached-operator"
    );

    // Bundle labels are exactly metadata/annotations.yaml.
    let annotations = olmkit_bundle::load_bundle_dir(&fixture_bundle())
        .unwrap()
        .annotations;
    let b_cfg = skopeo_inspect(&layout, BUNDLE, true);
    let labels: BTreeMap<String, String> =
        serde_json::from_value(b_cfg["config"]["Labels"].clone()).unwrap();
    assert_eq!(labels, annotations);
    assert!(b_cfg["config"].get("Entrypoint").is_none());

    let c_cfg = skopeo_inspect(&layout, CATALOG, true);
    assert_eq!(
        c_cfg["config"]["Labels"]["operators.operatorframework.io.index.configs.v1"],
        "/configs"
    );
    assert_eq!(c_cfg["config"]["Entrypoint"][0], "/bin/catalog-server");
    assert_eq!(
        c_cfg["config"]["Cmd"],
        serde_json::json!(["/configs", "--port", "50051"])
    );

    // The operator and catalog images share their base layer (stored once).
    assert_eq!(op["layers"][0]["digest"], catalog["layers"][0]["digest"]);

    // umoci unpacks a runnable rootfs: the static binary runs with no libc around it.
    let rootfs_dir = tmp.path().join("unpacked-op");
    let st = Command::new("umoci")
        .args(["unpack", "--rootless", "--image"])
        .arg(format!("{}:{OP}", layout.display()))
        .arg(&rootfs_dir)
        .status()
        .unwrap();
    assert!(st.success());
    let exe = rootfs_dir.join("rootfs/usr/local/bin/operator");
    let out = Command::new(&exe).arg("run").output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("hello from"),
        "{out:?}"
    );
    let runtime: serde_json::Value =
        json(&std::fs::read_to_string(rootfs_dir.join("config.json")).unwrap());
    assert_eq!(runtime["process"]["user"]["uid"], 65532);
    assert_eq!(
        runtime["process"]["args"],
        serde_json::json!(["/usr/local/bin/operator", "run"])
    );
    let passwd = std::fs::read_to_string(rootfs_dir.join("rootfs/etc/passwd")).unwrap();
    assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");

    // The catalog lands at /configs byte for byte; the bundle keeps its three folders.
    let cat_dir = tmp.path().join("unpacked-cat");
    assert!(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:{CATALOG}", layout.display()))
            .arg(&cat_dir)
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(
        files(&cat_dir.join("rootfs/configs")),
        files(&fixture_catalog())
    );
    let probe = Command::new(cat_dir.join("rootfs/bin/grpc_health_probe"))
        .arg("-addr=:50051")
        .output()
        .unwrap();
    assert!(probe.status.success());
    let b_dir = tmp.path().join("unpacked-bundle");
    assert!(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:{BUNDLE}", layout.display()))
            .arg(&b_dir)
            .status()
            .unwrap()
            .success()
    );
    for folder in ["manifests", "metadata", "tests/scorecard"] {
        assert_eq!(
            files(&b_dir.join("rootfs").join(folder)),
            files(&fixture_bundle().join(folder)),
            "{folder}"
        );
    }

    // GNU tar: fixed modes, numeric owners, the SOURCE_DATE_EPOCH mtime, no absolute paths.
    let op_layers = layer_blobs(&layout, OP);
    let base = gnu_tar_listing(&op_layers[0]);
    let find = |l: &[(String, String, String)], p: &str| {
        l.iter()
            .find(|e| e.0 == p)
            .cloned()
            .unwrap_or_else(|| panic!("{p} not in {l:?}"))
    };
    assert_eq!(find(&base, "tmp/").1, "drwxrwxrwt");
    assert_eq!(find(&base, "tmp/").2, "0/0");
    assert_eq!(find(&base, "home/nonroot/").2, "65532/65532");
    assert_eq!(find(&base, "etc/passwd").1, "-rw-r--r--");
    let bin_layer = gnu_tar_listing(&op_layers[1]);
    assert_eq!(find(&bin_layer, "usr/local/bin/operator").1, "-rwxr-xr-x");
    assert_eq!(find(&bin_layer, "usr/").1, "drwxr-xr-x");
    for blob in layer_blobs(&layout, BUNDLE).iter().chain(&op_layers) {
        let out = Command::new("tar")
            .args(["--numeric-owner", "--full-time", "-tvzf"])
            .arg(blob)
            .output()
            .unwrap();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            assert!(line.contains("2023-11-14 22:13:20"), "{line}");
            let path = line.split_whitespace().nth(5).unwrap();
            assert!(!path.starts_with('/') && !path.contains(".."), "{line}");
        }
    }
    let bundle_layer = gnu_tar_listing(&layer_blobs(&layout, BUNDLE)[0]);
    let top: BTreeSet<String> = bundle_layer
        .iter()
        .map(|e| e.0.split('/').next().unwrap().to_string())
        .collect();
    assert_eq!(
        top,
        BTreeSet::from(["manifests".into(), "metadata".into(), "tests".into()])
    );
    assert!(bundle_layer.iter().all(|e| e.2 == "0/0"));

    // `image inspect` on the layout reports the same digests, text and JSON.
    let info = json(&ok(bundle_tool()
        .args(["image", "inspect", "--output", "json"])
        .arg(format!("{}:{CATALOG}", layout.display()))));
    assert_eq!(info["digest"], catalog["digest"]);
    assert_eq!(info["layers"].as_array().unwrap().len(), 3);
    assert_eq!(info["source"], "layout");
    let text = ok(bundle_tool()
        .args(["image", "inspect"])
        .arg(format!("oci:{}:{BUNDLE}", layout.display())));
    assert!(
        text.contains("operators.operatorframework.io.bundle.package.v1=authorino-operator"),
        "{text}"
    );
}

#[test]
fn same_inputs_same_digests_and_a_catalog_change_touches_only_its_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let server = static_binary(tmp.path(), "catalog-server");
    let fbc = tmp.path().join("catalog");
    copy_dir(&fixture_catalog(), &fbc);
    let build = |layout: &str| {
        json(&ok(bundle_tool()
            .args(["image", "build", "catalog"])
            .arg(&fbc)
            .arg("--server")
            .arg(&server)
            .args([
                "--health-probe-symlink",
                "--output",
                "json",
                "--tag",
                "cat:v1",
                "--layout",
            ])
            .arg(tmp.path().join(layout))))
    };
    let a = build("a");
    let b = build("b");
    assert_eq!(a["digest"], b["digest"]);
    assert_eq!(
        std::fs::read(tmp.path().join("a/index.json")).unwrap(),
        std::fs::read(tmp.path().join("b/index.json")).unwrap()
    );
    // Rebuilding into the same layout changes nothing.
    let before = files(&tmp.path().join("a"));
    build("a");
    assert_eq!(files(&tmp.path().join("a")), before);

    // Edit one catalog file: only the configs layer (and so config + manifest) changes.
    let some_file = files(&fbc).into_keys().next().unwrap();
    let p = fbc.join(&some_file);
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push('\n');
    std::fs::write(&p, text).unwrap();
    let c = build("a");
    assert_ne!(a["digest"], c["digest"]);
    assert_eq!(a["layers"][0], c["layers"][0]);
    assert_eq!(a["layers"][1], c["layers"][1]);
    assert_ne!(a["layers"][2], c["layers"][2]);
    // The layout now names the new image; the old blobs stay but are unreferenced.
    let entries = olmkit_image::layout::list_layout(&tmp.path().join("a")).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].digest.to_string(), c["digest"].as_str().unwrap());

    // A different SOURCE_DATE_EPOCH changes the digest; --created overrides it.
    let d = json(&ok(bundle_tool()
        .env("SOURCE_DATE_EPOCH", "1700000001")
        .args([
            "image",
            "build",
            "catalog",
            "--configs-only",
            "--output",
            "json",
            "--tag",
            "x",
        ])
        .arg(&fbc)
        .arg("--layout")
        .arg(tmp.path().join("d"))));
    let e = json(&ok(bundle_tool()
        .env("SOURCE_DATE_EPOCH", "1")
        .args([
            "image",
            "build",
            "catalog",
            "--configs-only",
            "--output",
            "json",
            "--tag",
            "x",
        ])
        .args(["--created", "2023-11-14T22:13:21Z"])
        .arg(&fbc)
        .arg("--layout")
        .arg(tmp.path().join("e"))));
    assert_eq!(d["digest"], e["digest"]);
}

#[test]
fn bad_input_is_exit_1_with_a_clear_error_and_the_layout_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let bin = static_binary(tmp.path(), "operator");
    ok(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(&bin)
        .args(["--tag", "op:v1", "--layout"])
        .arg(&layout));
    let before = files(&layout);

    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "operator".into(),
                "--binary".into(),
                "/nonexistent/operator".into(),
            ],
            "cannot read /nonexistent/operator",
        ),
        (
            // The test binary of this suite is a normal, dynamically linked cargo build.
            vec![
                "operator".into(),
                "--binary".into(),
                env!("CARGO_BIN_EXE_bundle-tool").into(),
            ],
            "dynamically linked",
        ),
        (
            vec!["operator".into(), "--binary".into(), "Cargo.toml".into()],
            "not an ELF executable",
        ),
        (
            vec![
                "bundle".into(),
                tmp.path().join("nope").display().to_string(),
            ],
            "not a bundle directory",
        ),
        (
            vec![
                "catalog".into(),
                "--configs-only".into(),
                tmp.path().join("nope").display().to_string(),
            ],
            "cannot read",
        ),
        (
            vec![
                "operator".into(),
                "--binary".into(),
                bin.display().to_string(),
                "--label".into(),
                "novalue".into(),
            ],
            "expected KEY=VALUE",
        ),
        (
            vec![
                "operator".into(),
                "--binary".into(),
                bin.display().to_string(),
                "--env".into(),
                "X".into(),
            ],
            "NAME=value",
        ),
    ];
    for (args, expected) in cases {
        let (code, out, err) = run(bundle_tool()
            .current_dir(root())
            .args(["image", "build"])
            .args(&args)
            .args(["--tag", "op:v2", "--layout"])
            .arg(&layout));
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains(expected),
            "{args:?}: expected {expected:?} in {err}"
        );
        assert!(err.starts_with("error: "), "{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(files(&layout), before, "{args:?} changed the layout");
    }
    let (code, _, err) = run(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(env!("CARGO_BIN_EXE_bundle-tool"))
        .args(["--tag", "op:v2", "--layout"])
        .arg(&layout));
    assert_eq!(code, 1);
    assert!(
        err.contains("hint: build static binaries with hack/build-static.sh"),
        "{err}"
    );

    // An invalid name or a directory that is not a layout: refused, nothing written.
    let (code, _, err) = run(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(&bin)
        .args(["--tag", "Bad Name", "--layout"])
        .arg(&layout));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("invalid image name"), "{err}");
    assert_eq!(files(&layout), before);
    let foreign = tmp.path().join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let (code, _, err) = run(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(&bin)
        .args(["--tag", "op:v1", "--layout"])
        .arg(&foreign));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not an OCI image layout"), "{err}");
    assert_eq!(files(&foreign).len(), 1);

    // Inspecting a name the layout does not have lists what it has.
    let (code, _, err) = run(bundle_tool()
        .args(["image", "inspect"])
        .arg(format!("{}:op:v9", layout.display())));
    assert_eq!(code, 1);
    assert!(
        err.contains("no image named \"op:v9\"") && err.contains("op:v1"),
        "{err}"
    );

    // Unreadable SOURCE_DATE_EPOCH.
    let (code, _, err) = run(bundle_tool()
        .env("SOURCE_DATE_EPOCH", "yesterday")
        .args(["image", "build", "operator", "--binary"])
        .arg(&bin)
        .args(["--tag", "op:v3", "--layout"])
        .arg(&layout));
    assert_eq!(code, 1);
    assert!(err.contains("SOURCE_DATE_EPOCH"), "{err}");
    assert_eq!(files(&layout), before);
}

/// The set of top-level paths (files and dirs, with parents) of all layers of an image.
fn image_paths(layout: &Path, name: &str) -> BTreeSet<String> {
    layer_blobs(layout, name)
        .iter()
        .flat_map(|b| gnu_tar_listing(b))
        .map(|e| format!("/{}", e.0.trim_end_matches('/')))
        .collect()
}

#[test]
fn generated_dockerfiles_describe_the_same_images() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let server = static_binary(tmp.path(), "catalog-server");
    let built = json(&ok(bundle_tool()
        .args(["image", "build", "catalog"])
        .arg(fixture_catalog())
        .arg("--server")
        .arg(&server)
        .args(["--output", "json", "--tag", "cat", "--layout"])
        .arg(&layout)));
    let df_path = tmp.path().join("catalog.Dockerfile");
    ok(bundle_tool()
        .args(["image", "dockerfile", "catalog", "-o"])
        .arg(&df_path));
    let df = std::fs::read_to_string(&df_path).unwrap();
    let cfg = skopeo_inspect(&layout, "cat", true);
    let ins = parse_instructions(&df);
    let labels = olmkit_core::dockerfile::parse_labels(&df);
    for (k, v) in &labels {
        assert_eq!(cfg["config"]["Labels"][k], serde_json::json!(v), "{k}");
    }
    let one = |kw: &str| {
        ins.iter()
            .find(|i| i.keyword == kw)
            .unwrap_or_else(|| panic!("{kw} in {df}"))
    };
    assert_eq!(
        serde_json::json!(one("ENTRYPOINT").exec_form().unwrap()),
        cfg["config"]["Entrypoint"]
    );
    assert_eq!(
        serde_json::json!(one("CMD").exec_form().unwrap()),
        cfg["config"]["Cmd"]
    );
    assert_eq!(one("USER").args, cfg["config"]["User"].as_str().unwrap());
    assert!(cfg["config"]["ExposedPorts"][format!("{}/tcp", one("EXPOSE").args)].is_object());
    // Every COPY/ADD destination exists in the image, with the source's content.
    let paths = image_paths(&layout, "cat");
    for i in ins
        .iter()
        .filter(|i| i.keyword == "COPY" || i.keyword == "ADD")
    {
        let (_, dest) = i.copy_paths().unwrap();
        assert!(
            paths.contains(dest.trim_end_matches('/')),
            "{dest} not in {paths:?}"
        );
    }
    // What the image has beyond the Dockerfile is exactly the documented distroless base
    // (passwd, group, nsswitch.conf, /tmp, /home/nonroot).
    let from_base: BTreeSet<&str> = paths
        .iter()
        .map(String::as_str)
        .filter(|p| !p.starts_with("/configs") && !p.starts_with("/bin"))
        .collect();
    assert_eq!(
        from_base,
        BTreeSet::from([
            "/etc",
            "/etc/group",
            "/etc/nsswitch.conf",
            "/etc/passwd",
            "/home",
            "/home/nonroot",
            "/tmp"
        ])
    );
    assert!(one("FROM").args.contains("distroless/static:nonroot"));
    assert_eq!(built["layers"].as_array().unwrap().len(), 3);

    // bundle.Dockerfile as the bundle generator writes it builds what we build.
    let bundle = tmp.path().join("bundle");
    copy_dir(&fixture_bundle(), &bundle);
    let ann: Vec<(String, String)> = olmkit_bundle::load_bundle_dir(&bundle)
        .unwrap()
        .annotations
        .into_iter()
        .collect();
    let bdf = olmkit_bundle::generate::metadata::dockerfile(&ann, true);
    std::fs::write(bundle.join("bundle.Dockerfile"), &bdf).unwrap();
    let (code, _, err) = run(bundle_tool()
        .args(["image", "build", "bundle"])
        .arg(&bundle)
        .args(["--tag", "b", "--layout"])
        .arg(&layout));
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("warning"),
        "generated bundle.Dockerfile drifts: {err}"
    );
    let bpaths = image_paths(&layout, "b");
    for i in parse_instructions(&bdf)
        .iter()
        .filter(|i| i.keyword == "COPY")
    {
        let (_, dest) = i.copy_paths().unwrap();
        assert!(bpaths.contains(dest.trim_end_matches('/')), "{dest}");
    }
    let bcfg = skopeo_inspect(&layout, "b", true);
    for (k, v) in olmkit_core::dockerfile::parse_labels(&bdf) {
        assert_eq!(bcfg["config"]["Labels"][&k], serde_json::json!(v), "{k}");
    }
    // A Dockerfile that drifted is reported (the image follows annotations.yaml).
    std::fs::write(
        bundle.join("bundle.Dockerfile"),
        bdf.replace("channels.v1=stable", "channels.v1=alpha"),
    )
    .unwrap();
    let (code, _, err) = run(bundle_tool()
        .args(["image", "build", "bundle"])
        .arg(&bundle)
        .args(["--tag", "b", "--layout"])
        .arg(&layout));
    assert_eq!(code, 0);
    assert!(
        err.contains(
            "warning: bundle.Dockerfile LABEL operators.operatorframework.io.bundle.channels.v1"
        ),
        "{err}"
    );
}

/// Runs `-v image build bundle` with stderr redirected to a file, with `extra` global flags
/// and environment, and returns what landed in the file.
fn logged_to_file(extra: &[&str], env: &[(&str, &str)]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("stderr.log");
    let mut cmd = bundle_tool();
    cmd.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = cmd
        .arg("-v")
        .args(extra)
        .args(["image", "build", "bundle"])
        .arg(fixture_bundle())
        .args(["--tag", "b:v1", "--layout"])
        .arg(tmp.path().join("images"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("layout written"),
        "the debug log line: {text}"
    );
    text
}

#[test]
fn logs_to_a_file_carry_no_colour_codes_unless_asked() {
    const ESC: char = '\u{1b}';
    // stderr is a file: plain text.
    let plain = logged_to_file(&[], &[]);
    assert!(!plain.contains(ESC), "{plain:?}");
    assert!(!logged_to_file(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]).contains(ESC));
    // Asked for: colour even in a file.
    assert!(logged_to_file(&["--color", "always"], &[("NO_COLOR", "1")]).contains(ESC));
    assert!(logged_to_file(&[], &[("CLICOLOR_FORCE", "1")]).contains(ESC));
    // NO_COLOR wins over CLICOLOR_FORCE.
    assert!(!logged_to_file(&[], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]).contains(ESC));
}
