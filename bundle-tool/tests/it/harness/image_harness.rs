//! Shared by the image e2e suites (`e2e_image_layout.rs`, `e2e_image_registry.rs`,
//! `e2e_release.rs`, `e2e_symlink_escape.rs`): run the real `bundle-tool` binary, make a real
//! statically linked executable to put into images, and read layouts back with independent
//! tools.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fixed build time, so digests are comparable across runs.
pub const EPOCH: &str = "1700000000";

/// The freshly built CLI.
pub fn bundle_tool() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bundle-tool"));
    c.env("SOURCE_DATE_EPOCH", EPOCH)
        .env_remove("BUNDLE_TOOL_REGISTRY_USERNAME")
        .env_remove("BUNDLE_TOOL_REGISTRY_PASSWORD")
        .env_remove("REGISTRY_AUTH_FILE")
        .env("NO_COLOR", "1");
    c
}

/// Runs `cmd`, returning (exit code, stdout, stderr).
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out: Output = cmd.output().expect("run bundle-tool");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `cmd` and fails the test unless it exits 0; returns stdout.
pub fn ok(cmd: &mut Command) -> String {
    let (code, out, err) = run(cmd);
    assert_eq!(
        code, 0,
        "command failed ({code}):\nstdout: {out}\nstderr: {err}"
    );
    out
}

/// Workspace root.
pub fn root() -> PathBuf {
    e2e_support::paths::workspace_root()
}

/// A real bundle from the fixtures.
pub fn fixture_bundle() -> PathBuf {
    root().join("tests/fixtures/real-bundles/authorino-operator/0.13.0")
}

/// A valid FBC from the fixtures.
pub fn fixture_catalog() -> PathBuf {
    root().join("tests/fixtures/fbc-examples/valid/hand-written-baseline")
}

/// Compiles a small statically linked (glibc static-pie) program printing `hello from <argv0>`
/// into `dir/name`: a real binary that runs from an unpacked image with no libc.
pub fn static_binary(dir: &Path, name: &str) -> PathBuf {
    let src = dir.join(format!("{name}.rs"));
    std::fs::write(
        &src,
        "fn main() { let a: Vec<String> = std::env::args().collect(); println!(\"hello from {} {:?}\", a[0], &a[1..]); }\n",
    )
    .unwrap();
    let out = dir.join(name);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let status = Command::new(rustc)
        .args([
            "-O",
            "-C",
            "target-feature=+crt-static",
            "-C",
            "strip=symbols",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run rustc");
    assert!(status.success(), "rustc failed to build a static binary");
    out
}

/// `kubectl kustomize <project>/config/manifests`: the stream `generate bundle --manifests -`
/// and `release --manifests` read.
pub fn kustomized(project: &Path) -> Vec<u8> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(project.join("config/manifests"))
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    for (rel, bytes) in olmkit_core::fsio::read_tree(from).unwrap() {
        let target = to.join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(&target, bytes).unwrap();
    }
}

/// Parses JSON output.
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Every regular file under `dir`, relative path → bytes.
pub fn files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    olmkit_core::fsio::read_tree(dir)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k.to_string_lossy().into_owned(), v))
        .collect()
}

/// Layer blob paths of image `name` in `layout`, base first (from the manifest).
pub fn layer_blobs(layout: &Path, name: &str) -> Vec<PathBuf> {
    let image = olmkit_image::layout::read_from_layout(layout, Some(name)).unwrap();
    image
        .layers
        .iter()
        .map(|b| layout.join("blobs/sha256").join(b.digest.hex()))
        .collect()
}
