//! Catalog templates against operator-registry's goldens (tests/fixtures/fbc-examples/templates).
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{Bundle, Channel};
use olmkit_catalog::property::Property;
use olmkit_catalog::template::{
    self, Archetype, BundlesByImage, SemverOptions, StreamType, parse_semver,
};
use semver::Version;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/fbc-examples/templates")
}

fn doc(rel: &str) -> Value {
    let bytes = std::fs::read(dir().join(rel)).unwrap();
    olmkit_core::docs::parse_document(rel, &bytes).unwrap()
}

#[test]
fn semver_channel_generation_matches_opm_for_all_six_cases() {
    let golden = doc("semver/golden-generate-channels.yaml");
    let package = golden["package"].as_str().unwrap();
    let mut input: BTreeMap<Archetype, Vec<(String, Version)>> = BTreeMap::new();
    for (arch, bundles) in golden["input"].as_object().unwrap() {
        let arch = match arch.as_str() {
            "candidate" => Archetype::Candidate,
            "fast" => Archetype::Fast,
            _ => Archetype::Stable,
        };
        for (name, v) in bundles.as_object().unwrap() {
            input
                .entry(arch)
                .or_default()
                .push((name.clone(), Version::parse(v.as_str().unwrap()).unwrap()));
        }
    }
    let cases = golden["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    for case in cases {
        let opts = SemverOptions {
            generate_minor: case["generateMinorChannels"].as_bool().unwrap(),
            generate_major: case["generateMajorChannels"].as_bool().unwrap(),
            default_preference: match case["defaultChannelTypePreference"].as_str().unwrap() {
                "major" => StreamType::Major,
                _ => StreamType::Minor,
            },
        };
        let (channels, default) = template::generate_channels(package, &input, &opts);
        let name = case["name"].as_str().unwrap();
        assert_eq!(
            default,
            case["expectedDefaultChannel"].as_str().unwrap(),
            "{name}"
        );
        let want: Vec<Channel> = serde_json::from_value(
            golden["expected"][case["expectedChannels"].as_str().unwrap()].clone(),
        )
        .unwrap();
        assert_eq!(channels, want, "{name}");
    }
}

#[test]
fn semver_template_files_parse_as_opm_says() {
    let t = parse_semver("v", &doc("semver/valid-semver-template.yaml")).unwrap();
    assert!(t.options.generate_major && t.options.generate_minor);
    assert_eq!(t.options.default_preference, StreamType::Minor);
    assert_eq!(t.bundles[&Archetype::Candidate].len(), 11);
    assert_eq!(t.bundles[&Archetype::Stable].len(), 1);
    // Go's encoding/json matches keys case-insensitively; so do we.
    let legacy = parse_semver(
        "legacy",
        &doc("semver/valid-semver-template-legacy-capitalized-keys.yaml"),
    )
    .unwrap();
    assert_eq!(legacy.bundles, t.bundles);
    assert_eq!(legacy.options.default_preference, StreamType::Minor);
    for (file, want) in [
        (
            "semver/invalid-unknown-channel-prefix.yaml",
            "unknown field \"invalid\"",
        ),
        (
            "semver/invalid-generate-default-mismatch-minor.yaml",
            "schema attribute mismatch",
        ),
        (
            "semver/invalid-generate-default-mismatch-major.yaml",
            "schema attribute mismatch",
        ),
        (
            "semver/invalid-unknown-default-channel-type-preference.yaml",
            "unknown DefaultChannelTypePreference",
        ),
    ] {
        let e = parse_semver(file, &doc(file)).unwrap_err().to_string();
        assert!(e.contains(want) && e.starts_with(file), "{file}: {e}");
    }
}

fn fake_bundle(image: &str, package: &str, name: &str, version: &str) -> Bundle {
    Bundle {
        schema: "olm.bundle".into(),
        name: name.into(),
        package: package.into(),
        image: image.into(),
        properties: vec![
            Property::gvk("example.com", "App", "v1"),
            Property::package(package, version),
        ],
        related_images: vec![],
        omitted_objects: 0,
    }
}

#[test]
fn basic_template_renders_to_the_documented_fbc() {
    let mut source = BundlesByImage::default();
    for v in ["0.1.0", "0.2.0"] {
        source.extend([fake_bundle(
            &format!("docker.io/example/example-operator-bundle:{v}"),
            "example-operator",
            &format!("example-operator.v{v}"),
            v,
        )]);
    }
    let cfg =
        template::render_template("basic", &doc("basic/basic-template.yaml"), &source).unwrap();
    let want_docs = olmkit_core::docs::parse_documents(
        "expected",
        &std::fs::read(dir().join("basic/basic-template-expected-render.yaml")).unwrap(),
    )
    .unwrap();
    let want = olmkit_catalog::declcfg::load::load_bytes(
        "expected",
        &std::fs::read(dir().join("basic/basic-template-expected-render.yaml")).unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(want.len(), want_docs.len());
    // Same structure: package, channel and the two bundles with the same names and images.
    assert_eq!(cfg.packages.len(), 1);
    assert_eq!(cfg.channels.len(), 1);
    let names: Vec<_> = cfg.bundles.iter().map(|b| (&b.name, &b.image)).collect();
    let want_names: Vec<_> = want
        .iter()
        .filter_map(|b| match &b.blob {
            olmkit_catalog::declcfg::Blob::Bundle(b) => Some((&b.name, &b.image)),
            _ => None,
        })
        .collect();
    assert_eq!(names, want_names);
    assert!(!olmkit_catalog::validate::validate(&cfg, None).has_errors());
    // And back: the catalog converts to the basic template it came from.
    let back = template::convert_to_basic(&cfg);
    assert_eq!(
        back["entries"].as_array().unwrap().len(),
        doc("basic/basic-template.yaml")["entries"]
            .as_array()
            .unwrap()
            .len()
    );
}

#[test]
fn converted_basic_template_parses_and_unknown_images_are_named() {
    let e = template::render_template(
        "converted.json",
        &doc("basic/converted-basic-template.json"),
        &BundlesByImage::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("docker.io/test/hello-kubernetes-operator-bundle:v0.0.1"),
        "{e}"
    );
}

#[test]
fn semver_template_renders_a_valid_catalog() {
    let mut source = BundlesByImage::default();
    for v in [
        "0.1.0", "0.1.1", "0.1.2", "0.1.3", "0.2.0", "0.2.1", "0.2.2", "0.3.0", "1.0.0", "1.0.1",
        "1.1.0",
    ] {
        source.extend([fake_bundle(
            &format!("quay.io/foo/olm:testoperator.v{v}"),
            "testoperator",
            &format!("testoperator.v{v}"),
            v,
        )]);
    }
    let cfg =
        template::render_template("valid", &doc("semver/valid-semver-template.yaml"), &source)
            .unwrap();
    assert_eq!(cfg.packages[0].default_channel, "stable-v1.0");
    let report = olmkit_catalog::validate::validate(&cfg, None);
    assert!(!report.has_errors(), "{}", report.render_text());
    let names: Vec<&str> = cfg.channels.iter().map(|c| c.name.as_str()).collect();
    assert!(
        names.contains(&"candidate-v0.1")
            && names.contains(&"fast-v1")
            && names.contains(&"stable-v1.0")
    );
}
