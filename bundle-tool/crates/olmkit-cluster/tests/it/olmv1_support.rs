//! The OLM v1 support check reached two ways gives the same findings: through this crate's
//! [`BundleFacts`] (what `install --olm-v1` uses) and straight from olmkit-bundle with the
//! properties `opm render` gives the bundle (what `validate --select-optional suite=olm-v1`
//! needs, without a cluster client). Every bundle directory among the fixtures is compared.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use olmkit_bundle::validate::olmv1::{self, Olmv1Bundle, Olmv1Property};
use olmkit_catalog::render::RenderOptions;
use olmkit_catalog::render_opm::render_bundle;
use olmkit_cluster::olmv1::BundleFacts;
use olmkit_cluster::olmv1::support::check_olmv1_support;
use olmkit_core::Report;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The version directories under each operator directory of `dir`.
fn versions(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for op in std::fs::read_dir(dir).unwrap() {
        let op = op.unwrap().path();
        if !op.is_dir() {
            continue;
        }
        for v in std::fs::read_dir(&op).unwrap() {
            let v = v.unwrap().path();
            if v.join("manifests").is_dir() {
                out.push(v);
            }
        }
    }
    out.sort();
    out
}

fn bundle_dirs() -> Vec<PathBuf> {
    let fixtures = root().join("tests/fixtures");
    let mut dirs = versions(&fixtures.join("real-bundles"));
    dirs.extend(versions(&fixtures.join("opm/bundles")));
    dirs.extend(versions(&root().join("bundle")));
    dirs.push(fixtures.join("cluster/bundle"));
    dirs
}

/// The bundle crate's check on a bundle directory, with the properties opm renders for it.
fn direct(bundle: &olmkit_bundle::Bundle) -> Option<Report> {
    let mut options = RenderOptions::opm();
    options.bundle_objects = false;
    let rendered =
        render_bundle(bundle, "bundle-image.invalid/placeholder:latest", &options).ok()?;
    let properties = rendered
        .properties
        .iter()
        .map(|p| Olmv1Property {
            type_: &p.type_,
            value: &p.value,
        })
        .collect();
    let view = Olmv1Bundle::from_bundle(bundle, &rendered.package, properties)?;
    Some(olmv1::check_olmv1_support(&view))
}

#[test]
fn bundle_facts_and_the_bundle_crate_agree_on_every_fixture_bundle() {
    let dirs = bundle_dirs();
    assert!(dirs.len() > 30, "fixtures missing: {dirs:?}");
    let mut with_errors = 0;
    for dir in &dirs {
        let bundle = olmkit_bundle::load_bundle_dir(dir).unwrap();
        let via_facts = BundleFacts::from_bundle_dir(&bundle)
            .ok()
            .map(|f| check_olmv1_support(&f));
        let via_bundle = direct(&bundle);
        assert_eq!(via_facts, via_bundle, "{}", dir.display());
        if via_facts.is_some_and(|r| r.has_errors()) {
            with_errors += 1;
        }
    }
    // Some fixtures declare dependencies or webhooks OLM v1 refuses: the comparison is not
    // only between empty reports.
    assert!(with_errors > 0);
}

#[test]
fn the_cluster_view_borrows_every_fact() {
    let bundle =
        olmkit_bundle::load_bundle_dir(&root().join("tests/fixtures/cluster/bundle")).unwrap();
    let facts = BundleFacts::from_bundle_dir(&bundle).unwrap();
    let view = facts.olmv1_view();
    assert_eq!(view.package, facts.package);
    assert_eq!(view.origin, facts.origin);
    assert_eq!(view.csv_name(), facts.csv_name());
    assert_eq!(view.csv_file(), facts.csv_file());
    assert_eq!(view.objects.len(), facts.objects.len());
    assert_eq!(view.properties.len(), facts.properties.len());
    assert_eq!(view.dependencies_file, facts.dependencies_file.as_deref());
}
