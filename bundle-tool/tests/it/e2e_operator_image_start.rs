//! End to end: operator images that start the way their CSV runs them (issue #25, item 5).
//!
//! A kubebuilder / operator-sdk project (`tests/fixtures/sdk-project/memcached-operator`: the
//! `config/` of `operator-sdk init` + `create api`, whose manager container runs
//! `command: [/manager]`) is released with a real static binary: the operator image's
//! entrypoint and the binary's path are the CSV's command (read back with skopeo, GNU tar and
//! umoci), and the unpacked image starts the command with the CSV's args, as the kubelet would.
//! `image build operator --path` and `--bundle-dir` do the same; a CSV command the image lacks,
//! a shell command and a placeholder manager image without `--operator-repo` are refused (exit
//! 1, nothing written) with hints that name only flags the command has; and this repository's
//! own release (no command: the entrypoint is `/usr/local/bin/operator`) is unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::image_harness as harness;

use e2e_support::registry::{gnu_tar_listing, require_tool, skopeo};
use harness::*;
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;

const PKG: &str = "memcached-operator";
const CSV_FIELD: &str =
    "spec.install.spec.deployments[0].spec.template.spec.containers[0].command[0]";
const PLACEHOLDER_HINT: &str =
    "hint: pass --operator-repo REGISTRY/NAME (the image the CSV should reference)";

/// A scratch copy of the operator-sdk go/v4 project fixture (its `config/manager` sets the
/// image to quay.io/example/memcached-operator, as `make bundle` does).
fn kubebuilder_project(tmp: &Path) -> PathBuf {
    let p = tmp.join("project");
    copy_dir(
        &root().join("tests/fixtures/sdk-project/memcached-operator"),
        &p,
    );
    p
}

/// This repository's project: its `config/` (no manager command).
fn memcached_project(tmp: &Path) -> PathBuf {
    let p = tmp.join("memcached");
    copy_dir(&root().join("config"), &p.join("config"));
    p
}

fn tool_in<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> (i32, String, String) {
    run(bundle_tool().current_dir(dir).args(args))
}

fn ok_in(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = tool_in(dir, args);
    assert_eq!(code, 0, "{args:?} failed:\n{out}\n{err}");
    out
}

/// Runs a command that must be refused: exit 1, stderr naming each of `needles`; returns stderr.
fn refused_in<S: AsRef<OsStr> + Debug>(dir: &Path, args: &[S], needles: &[&str]) -> String {
    let (code, out, err) = tool_in(dir, args);
    assert_eq!(code, 1, "{args:?} should be refused:\n{out}\n{err}");
    for n in needles {
        assert!(err.contains(n), "stderr of {args:?} lacks {n:?}:\n{err}");
    }
    err
}

/// Every `--flag` a `hint:` line of `stderr` names must be a flag of `command` (its `--help`).
fn hints_name_real_flags(stderr: &str, command: &[&str]) {
    let mut help_args: Vec<&str> = command.to_vec();
    help_args.push("--help");
    let help = ok(bundle_tool().args(&help_args));
    let mut named = 0;
    for line in stderr.lines().filter(|l| l.starts_with("hint:")) {
        for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if let Some(flag) = word.strip_prefix("--")
                && !flag.is_empty()
            {
                named += 1;
                assert!(
                    help.contains(&format!("--{flag} ")) || help.contains(&format!("--{flag}\n")),
                    "hint names --{flag}, which `{}` does not have:\n{line}",
                    command.join(" ")
                );
            }
        }
    }
    assert!(named > 0, "the hints name a flag:\n{stderr}");
}

fn csv_of(bundle_dir: &Path) -> Value {
    olmkit_bundle::load_bundle_dir(bundle_dir)
        .unwrap()
        .csv()
        .unwrap()
        .object
        .clone()
}

/// The CSV's container named `manager`.
fn manager_of(csv: &Value) -> Value {
    csv.pointer("/spec/install/spec/deployments/0/spec/template/spec/containers")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .find(|c| c["name"] == "manager")
        .unwrap()
        .clone()
}

fn image_config(layout: &Path, name: &str) -> Value {
    json(&skopeo(&[
        "inspect",
        "--config",
        &format!("oci:{}:{name}", layout.display()),
    ]))["config"]
        .clone()
}

/// Every entry of the image's layers as GNU tar lists it: (path, mode string).
fn layer_entries(layout: &Path, name: &str) -> Vec<(String, String)> {
    layer_blobs(layout, name)
        .iter()
        .flat_map(|b| gnu_tar_listing(b))
        .map(|(p, mode, _)| (p.trim_start_matches("./").to_string(), mode))
        .collect()
}

/// Unpacks the image with umoci and starts `container` from it as the kubelet would: its
/// `command` (else the image's entrypoint) with its `args` (else, without a command, the
/// image's `Cmd`), the program found in the rootfs (a bare name through the image's `PATH`).
/// Returns the program's in-image path and its stdout.
fn start_like_a_pod(
    layout: &Path,
    name: &str,
    container: &Value,
    scratch: &Path,
) -> (String, String) {
    require_tool("umoci");
    let unpacked = scratch.join(format!("unpacked-{}", name.replace(['/', ':'], "_")));
    let st = Command::new("umoci")
        .args(["unpack", "--rootless", "--image"])
        .arg(format!("{}:{name}", layout.display()))
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(st.success(), "umoci unpack {name}");
    let config = image_config(layout, name);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let command = strings(&container["command"]);
    let args = strings(&container["args"]);
    let argv: Vec<String> = if command.is_empty() {
        let mut v = strings(&config["Entrypoint"]);
        v.extend(if args.is_empty() {
            strings(&config["Cmd"])
        } else {
            args
        });
        v
    } else {
        command.into_iter().chain(args).collect()
    };
    let program = if argv[0].starts_with('/') {
        argv[0].clone()
    } else {
        let path = strings(&config["Env"])
            .into_iter()
            .find_map(|e| e.strip_prefix("PATH=").map(str::to_string))
            .unwrap_or_default();
        path.split(':')
            .map(|d| format!("{d}/{}", argv[0]))
            .find(|p| unpacked.join("rootfs").join(&p[1..]).is_file())
            .unwrap_or_else(|| panic!("{} is on no PATH directory ({path}) of the image", argv[0]))
    };
    let exe = unpacked.join("rootfs").join(&program[1..]);
    assert!(exe.is_file(), "{program} is not a file in the image");
    let out = Command::new(&exe).args(&argv[1..]).output().unwrap();
    assert!(out.status.success(), "{program} did not run: {out:?}");
    (program, String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_kubebuilder_release_puts_the_binary_where_the_csv_command_points() {
    require_tool("skopeo");
    let tmp = tempfile::tempdir().unwrap();
    let p = kubebuilder_project(tmp.path());
    let bin = static_binary(tmp.path(), "whalesay-manager");
    let bin = bin.to_str().unwrap();
    let layout = p.join("images");
    // 0.1.0 by tag; 0.2.0 pinned by digest (the operator image is built before the CSV).
    for (version, extra) in [("0.1.0", None), ("0.2.0", Some("--use-image-digests"))] {
        let mut args = vec!["release", "--version", version, "--operator-binary", bin];
        args.extend(extra);
        ok_in(&p, &args);
        let csv = csv_of(&p.join("bundle").join(PKG).join(version));
        let manager = manager_of(&csv);
        assert_eq!(
            manager["command"],
            json!(["/manager"]),
            "the CSV keeps its command"
        );
        let name = format!("quay.io/example/memcached-operator:{version}");
        let config = image_config(&layout, &name);
        assert_eq!(config["Entrypoint"], json!(["/manager"]), "{version}");
        if extra.is_some() {
            let digest = json(&skopeo(&[
                "inspect",
                &format!("oci:{}:{name}", layout.display()),
            ]))["Digest"]
                .as_str()
                .unwrap()
                .to_string();
            assert_eq!(
                manager["image"],
                format!("quay.io/example/memcached-operator@{digest}")
            );
        }
        let entries = layer_entries(&layout, &name);
        assert!(
            entries
                .iter()
                .any(|(p, mode)| p == "manager" && mode == "-rwxr-xr-x"),
            "the binary is /manager, executable: {entries:?}"
        );
        assert!(
            !entries.iter().any(|(p, _)| p.contains("whalesay-manager")),
            "{entries:?}"
        );
        let (program, out) = start_like_a_pod(&layout, &name, &manager, tmp.path());
        assert_eq!(program, "/manager");
        assert!(
            out.starts_with("hello from") && out.contains("\"--leader-elect\""),
            "{out}"
        );
    }
}

#[test]
fn image_build_operator_path_and_bundle_dir_put_the_binary_there() {
    require_tool("skopeo");
    let tmp = tempfile::tempdir().unwrap();
    let bin = static_binary(tmp.path(), "whalesay");
    let layout = tmp.path().join("images");
    let build = |tag: &str, extra: &[&str]| {
        ok(bundle_tool()
            .args(["image", "build", "operator", "--binary"])
            .arg(&bin)
            .args(["--tag", tag, "--layout"])
            .arg(&layout)
            .args(extra))
    };
    build("example.com/whalesay:path", &["--path", "/manager"]);
    let config = image_config(&layout, "example.com/whalesay:path");
    assert_eq!(config["Entrypoint"], json!(["/manager"]));
    let entries = layer_entries(&layout, "example.com/whalesay:path");
    assert!(
        entries
            .iter()
            .any(|(p, m)| p == "manager" && m == "-rwxr-xr-x"),
        "{entries:?}"
    );
    let kubebuilder =
        json!({"name": "manager", "command": ["/manager"], "args": ["--leader-elect"]});
    let (_, out) = start_like_a_pod(
        &layout,
        "example.com/whalesay:path",
        &kubebuilder,
        tmp.path(),
    );
    assert!(out.contains("\"--leader-elect\""), "{out}");

    // With the project's bundle, the binary goes where its CSV's command points.
    let p = kubebuilder_project(tmp.path());
    ok_in(&p, &["release", "--version", "0.1.0", "--no-images"]);
    let bundle = p.join("bundle").join(PKG).join("0.1.0");
    build(
        "example.com/whalesay:csv",
        &["--bundle-dir", bundle.to_str().unwrap()],
    );
    let config = image_config(&layout, "example.com/whalesay:csv");
    assert_eq!(config["Entrypoint"], json!(["/manager"]));

    // A bare command name is found through the image's PATH: /usr/local/bin/<name>.
    let bare = tmp.path().join("bare-bundle");
    copy_dir(&bundle, &bare);
    let csv_file = bare.join(format!("manifests/{PKG}.clusterserviceversion.yaml"));
    let text = std::fs::read_to_string(&csv_file).unwrap();
    std::fs::write(&csv_file, text.replacen("- /manager", "- manager", 1)).unwrap();
    build(
        "example.com/whalesay:bare",
        &["--bundle-dir", bare.to_str().unwrap()],
    );
    let config = image_config(&layout, "example.com/whalesay:bare");
    assert_eq!(config["Entrypoint"], json!(["/usr/local/bin/manager"]));
    let bare_manager = json!({"name": "manager", "command": ["manager"]});
    let (program, _) = start_like_a_pod(
        &layout,
        "example.com/whalesay:bare",
        &bare_manager,
        tmp.path(),
    );
    assert_eq!(program, "/usr/local/bin/manager");
}

#[test]
fn a_csv_command_the_image_lacks_and_bad_paths_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = static_binary(tmp.path(), "manager");
    let p = kubebuilder_project(tmp.path());
    ok_in(&p, &["release", "--version", "0.1.0", "--no-images"]);
    let bundle = tmp.path().join("bin-manager-bundle");
    copy_dir(&p.join("bundle").join(PKG).join("0.1.0"), &bundle);
    let csv_file = bundle.join(format!("manifests/{PKG}.clusterserviceversion.yaml"));
    let text = std::fs::read_to_string(&csv_file).unwrap();
    std::fs::write(&csv_file, text.replacen("- /manager", "- /bin/manager", 1)).unwrap();

    let layout = tmp.path().join("images");
    let (b, l, c) = (
        bin.to_str().unwrap(),
        layout.to_str().unwrap(),
        bundle.to_str().unwrap(),
    );
    let build = [
        "image",
        "build",
        "operator",
        "--binary",
        b,
        "--tag",
        "x.io/op:1",
        "--layout",
        l,
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        build.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let err = refused_in(
        tmp.path(),
        &with(&["--path", "/manager", "--bundle-dir", c]),
        &[
            &csv_file.display().to_string(),
            &format!("field {CSV_FIELD} is \"/bin/manager\""),
            "no executable file at /bin/manager",
            "the image's binary is at /manager",
            "hint: leave out --path",
        ],
    );
    hints_name_real_flags(&err, &["image", "build", "operator"]);
    assert!(!layout.exists(), "nothing is written");

    // --name is a file name; a path goes with --path.
    let err = refused_in(
        tmp.path(),
        &with(&["--name", "/manager"]),
        &["--name \"/manager\"", "hint: pass --path /manager"],
    );
    hints_name_real_flags(&err, &["image", "build", "operator"]);
    for (path, why) in [
        ("manager", "is relative"),
        ("/a/../manager", "contains `..`"),
        ("/tmp/manager", "/tmp belongs to the image's base layer"),
    ] {
        refused_in(tmp.path(), &with(&["--path", path]), &[why]);
    }
    assert!(!layout.exists(), "nothing is written");

    // A release whose manager runs a shell: the image has none. Refused before anything is
    // written.
    let manager_yaml = p.join("config/manager/manager.yaml");
    let text = std::fs::read_to_string(&manager_yaml).unwrap();
    std::fs::write(
        &manager_yaml,
        text.replacen(
            "- command:\n        - /manager",
            "- command:\n        - /bin/sh\n        - -c\n        - exec /manager",
            1,
        ),
    )
    .unwrap();
    let before = files(&p.join("bundle"));
    let err = refused_in(
        &p,
        &["release", "--version", "0.2.0", "--operator-binary", b],
        &[
            "spec.template.spec.containers[0].command[0]",
            "\"/bin/sh\"",
            "a shell",
        ],
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(files(&p.join("bundle")), before);
    assert!(!p.join("bundle").join(PKG).join("0.2.0").exists());
    assert!(!p.join("images").exists());
}

#[test]
fn a_placeholder_manager_image_needs_operator_repo() {
    let tmp = tempfile::tempdir().unwrap();
    let p = kubebuilder_project(tmp.path());
    // What `operator-sdk init` scaffolds: no `images:`, so the manager runs controller:latest.
    std::fs::write(
        p.join("config/manager/kustomization.yaml"),
        "resources:\n- manager.yaml\n",
    )
    .unwrap();
    let bin = static_binary(tmp.path(), "manager");
    let b = bin.to_str().unwrap();
    for args in [
        vec!["release", "--version", "0.1.0", "--operator-binary", b],
        vec!["release", "--version", "0.1.0", "--no-images"],
        vec!["release", "--version", "0.1.0", "--plan"],
    ] {
        let err = refused_in(
            &p,
            &args,
            &[
                "\"controller:latest\" names no registry host",
                "controller:0.1.0",
                PLACEHOLDER_HINT,
            ],
        );
        hints_name_real_flags(&err, &["release"]);
        for gone in ["bundle", "catalog", "images"] {
            assert!(!p.join(gone).exists(), "{args:?} wrote {gone}");
        }
    }
    ok_in(
        &p,
        &[
            "release",
            "--version",
            "0.1.0",
            "--operator-binary",
            b,
            "--operator-repo",
            "quay.io/example/whalesay",
        ],
    );
    let csv = csv_of(&p.join("bundle").join(PKG).join("0.1.0"));
    assert_eq!(manager_of(&csv)["image"], "quay.io/example/whalesay:0.1.0");
}

#[test]
fn the_memcached_release_is_unchanged() {
    require_tool("skopeo");
    let tmp = tempfile::tempdir().unwrap();
    let p = memcached_project(tmp.path());
    let op = static_binary(tmp.path(), "operator");
    let op_s = op.to_str().unwrap();
    ok_in(&p, &["release", "--version", "0.1.0", "--no-images"]);
    let out = ok_in(
        &p,
        &["release", "--version", "0.2.0", "--operator-binary", op_s],
    );
    let layout = p.join("images");
    let name = "quay.io/example/memcached-operator:0.2.0";
    let released = json(&skopeo(&[
        "inspect",
        &format!("oci:{}:{name}", layout.display()),
    ]))["Digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(out.contains(&format!("{name} {released}")), "{out}");
    let config = image_config(&layout, name);
    assert_eq!(config["Entrypoint"], json!(["/usr/local/bin/operator"]));
    let bundle = p.join("bundle").join(PKG).join("0.2.0");
    let manager = manager_of(&csv_of(&bundle));
    assert!(manager.get("command").is_none(), "{manager}");
    // The pod runs the entrypoint with the CSV's args.
    let (program, stdout) = start_like_a_pod(&layout, name, &manager, tmp.path());
    assert_eq!(program, "/usr/local/bin/operator");
    assert!(stdout.contains("[\"run\", \"--leader-elect\""), "{stdout}");

    // The same image as `image build operator` builds from the binary alone (the operator image
    // as it always was), and with the bundle whose CSV runs it.
    let standalone = tmp.path().join("standalone");
    let labels = [
        "--title",
        PKG,
        "--image-version",
        "0.2.0",
        "--output",
        "json",
    ];
    for extra in [vec![], vec!["--bundle-dir", bundle.to_str().unwrap()]] {
        let built = json(&ok(bundle_tool()
            .args([
                "image", "build", "operator", "--binary", op_s, "--tag", name, "--layout",
            ])
            .arg(&standalone)
            .args(labels)
            .args(&extra)));
        assert_eq!(built["digest"], released.as_str(), "{extra:?}");
    }
}
