//! Authoring an operator: `bundle-tool init` and `bundle-tool create api` end to end, from an
//! empty directory to a project that builds, passes its own tests (its manager against the API-server stand-in),
//! `make verify`, `make lint`, and whose OLM bundle generates and validates.
//!
//! One project per mode, reused across the checks: a deploy-image kind (then a second version
//! of it, with its conversion webhook), and plain kinds (namespaced, cluster-scoped, API only).
//! The projects depend on this checkout (`--toolkit-path`) and build in this repository's target
//! directory (`CARGO_TARGET_DIR`), so they share its compiled dependencies. They need `make`,
//! `kubectl` (kustomize) and the toolchain, like `make test-unit`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

use crate::shared_target::{one_project_at_a_time, project_command};

fn bundle_tool() -> &'static str {
    env!("CARGO_BIN_EXE_bundle-tool")
}

/// Runs a command in `dir`, failing the test with its output when it fails.
fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    run_command(program, args, project_command(dir, program))
}

/// Runs this bundle-tool in `dir` at a fixed time (`SOURCE_DATE_EPOCH` for bundle-tool only:
/// the projects' builds must see the value this repository's do, see [`project_command`]).
fn bt(dir: &Path, args: &[&str]) -> String {
    let mut command = project_command(dir, bundle_tool());
    command.env("SOURCE_DATE_EPOCH", "1700000000");
    run_command(bundle_tool(), args, command)
}

fn run_command(program: &str, args: &[&str], mut command: Command) -> String {
    let started = Instant::now();
    let out = command
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{program} {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        out.status
    );
    eprintln!(
        "ok ({:.1?}): {program} {}",
        started.elapsed(),
        args.join(" ")
    );
    stdout
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// `make manifests`, checking that the roles `init`/`create api` wrote in-process are what the
/// manager generates.
fn manifests(dir: &Path) {
    let roles = [
        "role.yaml",
        "leader_election_role.yaml",
        "metrics_auth_role.yaml",
    ];
    let before: Vec<String> = roles
        .iter()
        .map(|r| read(dir, &format!("config/rbac/{r}")))
        .collect();
    run(dir, "make", &["manifests"]);
    for (role, before) in roles.iter().zip(before) {
        assert_eq!(read(dir, &format!("config/rbac/{role}")), before, "{role}");
    }
}

/// `make manifests` and `make test` (the project's unit, property and end-to-end tests).
fn build_and_test(dir: &Path) {
    manifests(dir);
    run(dir, "make", &["test"]);
}

/// The checks a finished project passes: verify, lint, a bundle that validates. (Every cargo
/// run waits for this repository's target directory, shared with its other builds: fewer runs,
/// shorter tests.)
fn check(dir: &Path) {
    run(dir, "make", &["verify"]);
    run(dir, "make", &["lint"]);
    bt(
        dir,
        &[
            "generate",
            "bundle",
            "--version",
            "0.1.0",
            "--output-dir",
            "out/bundle",
            "--quiet",
        ],
    );
    bt(dir, &["validate", "out/bundle"]);
}

fn init(parent: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let dir = parent.join(name);
    let toolkit = root();
    let mut args = vec![
        "init",
        "--domain",
        "example.com",
        "--project-dir",
        dir.to_str().unwrap(),
        "--toolkit-path",
        toolkit.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    bt(parent, &args);
    dir
}

/// Both projects in one test: two tests taking turns at the shared target directory kept a
/// second test thread waiting on it, with the other suites queued behind.
#[test]
fn deploy_image_and_plain_projects_build_test_and_release() {
    let _one = one_project_at_a_time();
    deploy_image_project();
    plain_project();
}

fn deploy_image_project() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(
        tmp.path(),
        "whalesay-operator",
        &["--repo", "github.com/example/whalesay-operator"],
    );
    let out = bt(
        &dir,
        &[
            "create",
            "api",
            "--group",
            "demo",
            "--version",
            "v1alpha1",
            "--kind",
            "Whalesay",
            "--image",
            "docker.io/library/busybox:1.36",
            "--image-container-command",
            "sleep,infinity",
            "--image-container-port",
            "8080",
            "--run-as-user",
            "1001",
            "--short-names",
            "ws",
        ],
    );
    assert!(out.contains("create src/controller/whalesay.rs"), "{out}");
    assert!(out.contains("  $ make manifests"), "{out}");
    let project = read(&dir, "PROJECT");
    assert!(
        project.contains("deploy-image.rust.olmkit.io/v1-alpha:"),
        "{project}"
    );
    assert!(
        project.contains("containerCommand: sleep,infinity"),
        "{project}"
    );
    build_and_test(&dir);
    eprintln!(
        "deploy-image: one version done in {:.1?}",
        started.elapsed()
    );

    // A second version: the conversion (with its property tests), the webhook in the manager,
    // in config/ and in the bundle; the project's e2e reads every sample in every version.
    let out = bt(
        &dir,
        &[
            "create",
            "api",
            "--group",
            "demo",
            "--version",
            "v1",
            "--kind",
            "Whalesay",
            "-o",
            "json",
        ],
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    let files: Vec<&str> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"whalesay-api/src/whalesay/conversion.rs"),
        "{out}"
    );
    assert!(files.contains(&"config/webhook/service.yaml"), "{out}");
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .contains("has a controller already"),
        "{out}"
    );
    build_and_test(&dir);
    check(&dir);
    let csv = read(
        &dir,
        "out/bundle/manifests/whalesay-operator.clusterserviceversion.yaml",
    );
    assert!(csv.contains("kind: Whalesay"), "{csv}");
    let image = "value: docker.io/library/busybox:1.36";
    assert!(csv.contains(image), "{csv}");
    assert!(
        csv.contains("conversionCRDs:\n    - whalesays.demo.example.com"),
        "{csv}"
    );
    assert!(csv.contains("type: ConversionWebhook"), "{csv}");
    eprintln!(
        "deploy-image: two versions done in {:.1?}",
        started.elapsed()
    );
}

fn plain_project() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(tmp.path(), "notes-operator", &[]);
    for args in [
        &["--group", "notes", "--version", "v1", "--kind", "Note"][..],
        &[
            "--group",
            "notes",
            "--version",
            "v1",
            "--kind",
            "Board",
            "--namespaced=false",
        ],
        &[
            "--group",
            "notes",
            "--version",
            "v1beta1",
            "--kind",
            "Tag",
            "--controller=false",
        ],
    ] {
        let mut all = vec!["create", "api"];
        all.extend_from_slice(args);
        bt(&dir, &all);
    }
    build_and_test(&dir);
    check(&dir);
    // The release pipeline on the scaffolded project (no images: those need `make static`).
    bt(&dir, &["release", "--version", "0.1.0", "--no-images"]);
    assert!(dir.join("bundle/notes-operator/0.1.0/manifests").is_dir());
    assert!(dir.join("catalog/notes-operator").is_dir());
    eprintln!("plain: done in {:.1?}", started.elapsed());
}

#[test]
fn init_refuses_a_directory_with_files_and_create_api_outside_a_project() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), "mine\n").unwrap();
    let out = Command::new(bundle_tool())
        .args(["init", "--project-name", "x-operator", "--project-dir"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the directory is not empty (notes.txt)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: init writes a new project"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        1,
        "nothing written"
    );

    let out = Command::new(bundle_tool())
        .args([
            "create",
            "api",
            "--group",
            "a",
            "--version",
            "v1",
            "--kind",
            "A",
            "--project-dir",
        ])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no PROJECT file"), "{stderr}");

    let out = Command::new(bundle_tool())
        .args(["init", "--toolkit-path", "/nonexistent", "--project-dir"])
        .arg(tmp.path().join("new"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--toolkit-path /nonexistent: not a checkout"),
        "{stderr}"
    );
    assert!(stderr.contains("--toolkit-git URL"), "{stderr}");
}

#[test]
fn flag_errors_name_the_flag_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p-operator");
    let out = Command::new(bundle_tool())
        .args(["init", "--domain", "Example.com", "--project-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: --domain \"Example.com\": "),
        "{stderr}"
    );
    assert!(!dir.exists());

    let git = [
        "--toolkit-git",
        "https://example.com/olmkit.git",
        "--toolkit-rev",
        "v1",
    ];
    let mut args = vec!["init", "--project-dir", dir.to_str().unwrap()];
    args.extend_from_slice(&git);
    bt(tmp.path(), &args);
    let cargo = read(&dir, "Cargo.toml");
    assert!(cargo.contains("olmkit-runtime = { git = \"https://example.com/olmkit.git\", rev = \"v1\", default-features = false }"), "{cargo}");
    let before = olmkit_core::fsio::read_tree(&dir).unwrap();
    let out = Command::new(bundle_tool())
        .args([
            "create",
            "api",
            "--group",
            "demo",
            "--version",
            "v1",
            "--kind",
            "whale",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: --kind \"whale\": must be PascalCase"),
        "{stderr}"
    );
    assert_eq!(
        olmkit_core::fsio::read_tree(&dir).unwrap(),
        before,
        "nothing changed"
    );
}
