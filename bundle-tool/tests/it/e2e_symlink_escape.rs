//! No input path leaves its root: a bundle, manifest folder or catalog with a symbolic link to
//! a file outside it (here a stand-in for `~/.docker/config.json` holding a credential) is
//! refused by every command that reads it — `validate`, `render` (with `--bundle-object`, which
//! would embed the file), `catalog from-bundles`, `generate bundle --manifests`, `image build
//! bundle`, `release` (its existing bundles), and for a catalog `catalog validate` and `render`
//! — with exit 1, an error naming the link, nothing written, and the secret nowhere in the
//! output. (`serve` loads catalogs through the same `catalog_files`; a catalog it cannot load
//! keeps it NOT_SERVING with the reason, as `registry_serve` tests.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::image_harness as harness;

use harness::*;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

const SECRET: &str = "c2VjcmV0OnBhc3N3b3Jk";

/// A copy of the repo's newest bundle with `manifests/leak.yaml` linked to a file outside.
struct Fixture {
    tmp: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("home/.docker");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(
            outside.join("config.json"),
            format!("{{\"auths\": {{\"quay.io\": {{\"auth\": \"{SECRET}\"}}}}}}"),
        )
        .unwrap();
        let bundle = tmp.path().join("work/bundle");
        copy_dir(&newest_bundle(), &bundle);
        symlink(
            outside.join("config.json"),
            bundle.join("manifests/leak.yaml"),
        )
        .unwrap();
        Fixture { tmp }
    }
    fn work(&self) -> PathBuf {
        self.tmp.path().join("work")
    }
}

fn newest_bundle() -> PathBuf {
    let pkg = root().join("bundle/memcached-operator");
    let mut versions: Vec<semver::Version> = std::fs::read_dir(&pkg)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.parse().ok())
        .collect();
    versions.sort();
    pkg.join(versions.last().unwrap().to_string())
}

#[track_caller]
fn refused(dir: &Path, args: &[&str]) {
    let before = files(dir);
    let (code, out, err) = run(bundle_tool().current_dir(dir).args(args));
    assert_eq!(code, 1, "{args:?} must be refused:\n{out}\n{err}");
    // Findings go to stdout (validate's report), errors to stderr.
    let all = format!("{out}{err}");
    assert!(
        all.contains("leak.yaml") && all.contains("outside"),
        "{args:?}: the error must name the link:\n{all}"
    );
    assert!(
        !out.contains(SECRET) && !err.contains(SECRET),
        "{args:?} leaked the file"
    );
    assert_eq!(files(dir), before, "{args:?} wrote something");
}

#[test]
fn validate_render_and_from_bundles_refuse_a_link_out_of_the_bundle() {
    let f = Fixture::new();
    refused(&f.work(), &["validate", "bundle"]);
    refused(
        &f.work(),
        &[
            "render",
            "bundle",
            "--bundle-object",
            "--image-ref-template",
            "x/{package}:{version}",
        ],
    );
    refused(
        &f.work(),
        &[
            "catalog",
            "from-bundles",
            "--image-ref-template",
            "x/{package}:{version}",
            "bundle",
        ],
    );
}

#[test]
fn catalog_commands_refuse_a_link_out_of_the_catalog() {
    let f = Fixture::new();
    let cat = f.work().join("catalog/memcached-operator");
    copy_dir(&root().join("catalog/memcached-operator"), &cat);
    symlink(
        f.tmp.path().join("home/.docker/config.json"),
        cat.join("leak.yaml"),
    )
    .unwrap();
    refused(&f.work(), &["catalog", "validate", "catalog"]);
    refused(&f.work(), &["render", "catalog", "-o", "json"]);
}

#[test]
fn generate_and_image_build_refuse_a_link_out_of_their_input() {
    let f = Fixture::new();
    refused(
        &f.work(),
        &[
            "generate",
            "bundle",
            "--version",
            "0.0.1",
            "--package",
            "memcached-operator",
            "--manifests",
            "bundle/manifests",
            "--output-dir",
            "out",
        ],
    );
    refused(
        &f.work(),
        &[
            "image", "build", "bundle", "--tag", "x/b:v1", "--layout", "images", "bundle",
        ],
    );
    assert!(!f.work().join("images").exists());
}

#[test]
fn release_refuses_a_released_bundle_with_a_link_out() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("project");
    copy_dir(&root().join("config"), &p.join("config"));
    let (code, out, err) =
        run(bundle_tool()
            .current_dir(&p)
            .args(["release", "--version", "0.1.0", "--no-images"]));
    assert_eq!(code, 0, "{out}\n{err}");
    std::fs::write(
        tmp.path().join("secret.json"),
        format!("{{\"auth\": \"{SECRET}\"}}"),
    )
    .unwrap();
    symlink(
        tmp.path().join("secret.json"),
        p.join("bundle/memcached-operator/0.1.0/manifests/leak.yaml"),
    )
    .unwrap();
    refused(&p, &["release", "--version", "0.2.0", "--no-images"]);
}
