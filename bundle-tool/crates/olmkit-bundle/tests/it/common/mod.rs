//! Shared helpers of olmkit-bundle's integration tests: fixture paths and the memcached
//! fixture project's generated bundle.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use olmkit_bundle::Bundle;
use olmkit_bundle::Manifest;
use olmkit_bundle::generate::{GenerateInputs, GenerateOptions, GeneratedBundle, generate_bundle};
use olmkit_bundle::load::load_manifest_stream;
use std::path::{Path, PathBuf};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures")
}

pub fn project() -> PathBuf {
    fixtures().join("bundle/memcached-project")
}

/// `kubectl kustomize config/manifests` of the fixture project, as committed.
pub fn stream() -> Vec<Manifest> {
    let bytes = std::fs::read(project().join("kustomized.yaml")).unwrap();
    load_manifest_stream("<stdin>", &bytes).unwrap()
}

pub fn options() -> GenerateOptions {
    GenerateOptions {
        version: Some(semver::Version::new(0, 1, 0)),
        channels: vec!["stable".into()],
        created_at: "2023-11-14T22:13:20Z".into(),
        builder: "bundle-tool-v0.1.0".into(),
        ..Default::default()
    }
}

pub fn generate_with(docs: Vec<Manifest>, options: &GenerateOptions) -> GeneratedBundle {
    generate_bundle(
        &GenerateInputs {
            manifests: docs,
            ..Default::default()
        },
        options,
    )
    .unwrap()
}

pub fn generated() -> GeneratedBundle {
    generate_with(stream(), &options())
}

pub fn generated_bundle() -> Bundle {
    generated()
        .to_bundle(Path::new("bundle/memcached-operator/0.1.0"))
        .unwrap()
}

pub fn real_bundle_dirs() -> Vec<PathBuf> {
    let root = fixtures().join("real-bundles");
    let mut dirs = Vec::new();
    for op in std::fs::read_dir(&root).unwrap() {
        let op = op.unwrap().path();
        if !op.is_dir() {
            continue;
        }
        for v in std::fs::read_dir(&op).unwrap() {
            let v = v.unwrap().path();
            if v.join("manifests").is_dir() {
                dirs.push(v);
            }
        }
    }
    dirs.sort();
    dirs
}

/// Semver-ordered version directories of one real operator.
pub fn versions_of(operator: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = real_bundle_dirs()
        .into_iter()
        .filter(|d| {
            d.parent()
                .and_then(|p| p.file_name())
                .and_then(|n| n.to_str())
                == Some(operator)
        })
        .collect();
    v.sort_by_key(|d| semver::Version::parse(d.file_name().unwrap().to_str().unwrap()).unwrap());
    v
}

/// Comparing our verdicts with operator-sdk's (the conformance suites' shared table).
pub mod upstream;
