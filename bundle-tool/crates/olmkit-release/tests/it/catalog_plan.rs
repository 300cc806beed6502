//! Release planning and promotion: graphs stay valid (for any release sequence, and explain
//! reaches the head), refusals are precise, re-runs are no-ops and failed writes leave the
//! catalog byte-for-byte unchanged.

use olmkit_catalog::catalog_dir::{CatalogDir, write_package_update};
use olmkit_catalog::change::Change;
use olmkit_catalog::declcfg::{Bundle, DeclarativeConfig, LoadOptions, load_dir};
use olmkit_catalog::property::Property;
use olmkit_catalog::validate::validate;
use olmkit_catalog::{explain, graph};
use olmkit_core::fsio::read_tree;
use olmkit_release::catalog_plan::{
    Outcome, PlanReleaseError, ReleaseRequest, SkipRangeMode, csv_edges, plan_promote, plan_release,
};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn bundle(v: &str) -> Bundle {
    Bundle {
        schema: "olm.bundle".into(),
        name: format!("memcached-operator.v{v}"),
        package: "memcached-operator".into(),
        image: format!("quay.io/example/memcached-operator-bundle:v{v}"),
        properties: vec![
            Property::gvk("cache.example.com", "Memcached", "v1"),
            Property::package("memcached-operator", v),
        ],
        related_images: vec![],
        omitted_objects: 0,
    }
}

fn req(v: &str, channels: &[&str]) -> ReleaseRequest {
    ReleaseRequest {
        bundle: bundle(v),
        channels: channels.iter().map(|s| s.to_string()).collect(),
        default_channel: None,
        skip_range: SkipRangeMode::None,
    }
}

fn release(cfg: &DeclarativeConfig, v: &str, channels: &[&str]) -> DeclarativeConfig {
    plan_release(cfg, &req(v, channels)).unwrap().catalog
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/catalog/graph-demo")
}

#[test]
fn first_release_creates_package_and_channel() {
    let plan = plan_release(&DeclarativeConfig::default(), &req("0.1.0", &["alpha"])).unwrap();
    assert_eq!(plan.outcome, Outcome::Changed);
    assert_eq!(plan.catalog.packages[0].default_channel, "alpha");
    assert!(plan.render_text().contains("+ package memcached-operator"));
    assert!(!validate(&plan.catalog, None).has_errors());
}

#[test]
fn release_replaces_the_head_and_refuses_older_versions() {
    let mut cfg = release(&DeclarativeConfig::default(), "0.1.0", &["alpha"]);
    cfg = release(&cfg, "0.2.0", &["alpha", "stable"]);
    let alpha = cfg.channels.iter().find(|c| c.name == "alpha").unwrap();
    assert_eq!(alpha.entries[1].replaces, "memcached-operator.v0.1.0");
    // a new channel bridges from the newest older bundle, so alpha users can switch
    let stable = cfg.channels.iter().find(|c| c.name == "stable").unwrap();
    assert_eq!(stable.entries[0].replaces, "memcached-operator.v0.1.0");
    let e = plan_release(&cfg, &req("0.1.5", &["alpha"])).unwrap_err();
    assert!(matches!(e, PlanReleaseError::NotGreater { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("not greater than memcached-operator.v0.2.0")
    );
}

#[test]
fn rerun_is_a_noop_and_changed_content_is_refused() {
    let cfg = release(&DeclarativeConfig::default(), "0.1.0", &["alpha"]);
    let again = plan_release(&cfg, &req("0.1.0", &["alpha"])).unwrap();
    assert_eq!(again.outcome, Outcome::NoOp);
    assert!(again.changes.is_empty());
    assert!(again.render_text().contains("nothing to do"));
    let mut changed = req("0.1.0", &["alpha"]);
    changed.bundle.image = "quay.io/example/other:v0.1.0".into();
    let e = plan_release(&cfg, &changed).unwrap_err();
    assert!(matches!(e, PlanReleaseError::AlreadyReleased { .. }), "{e}");
    let e = plan_release(&cfg, &req("0.1.0", &["beta"])).unwrap_err();
    assert!(e.to_string().contains("bundle-tool promote"), "{e}");
}

#[test]
fn skip_range_modes() {
    let cfg = release(&DeclarativeConfig::default(), "0.1.0", &["alpha"]);
    let mut r = req("0.2.0", &["alpha"]);
    r.skip_range = SkipRangeMode::BelowNew;
    let plan = plan_release(&cfg, &r).unwrap();
    let e = plan
        .catalog
        .channels
        .iter()
        .flat_map(|c| &c.entries)
        .find(|e| e.name.ends_with("0.2.0"))
        .unwrap();
    assert_eq!(e.skip_range, "<0.2.0");
    r.skip_range = SkipRangeMode::Explicit("<0.3.0".into());
    assert!(
        plan_release(&cfg, &r)
            .unwrap_err()
            .to_string()
            .contains("contains the new version")
    );
    r.skip_range = SkipRangeMode::Explicit("banana".into());
    assert!(plan_release(&cfg, &r).is_err());
}

#[test]
fn promote_joins_the_target_channel_at_its_head() {
    let mut cfg = release(&DeclarativeConfig::default(), "0.1.0", &["alpha", "stable"]);
    cfg = release(&cfg, "0.2.0", &["alpha"]);
    let plan = plan_promote(&cfg, "memcached-operator", "0.2.0", "stable").unwrap();
    assert!(
        matches!(plan.changes.as_slice(), [Change::AddEntry { old_head, .. }] if old_head == "memcached-operator.v0.1.0")
    );
    assert!(!validate(&plan.catalog, None).has_errors());
    // again: nothing to do
    let again = plan_promote(&plan.catalog, "memcached-operator", "v0.2.0", "stable").unwrap();
    assert_eq!(again.outcome, Outcome::NoOp);
    // an older version would fork the channel
    let cfg3 = release(&plan.catalog, "0.3.0", &["stable"]);
    let cfg3 = release(&cfg3, "0.3.1", &["beta"]);
    let e = plan_promote(&cfg3, "memcached-operator", "0.2.0", "beta").unwrap_err();
    assert!(matches!(e, PlanReleaseError::WouldFork { .. }), "{e}");
    let e = plan_promote(&cfg3, "memcached-operator", "9.9.9", "beta").unwrap_err();
    assert!(
        e.to_string()
            .contains("released: 0.1.0, 0.2.0, 0.3.0, 0.3.1"),
        "{e}"
    );
}

#[test]
fn promote_writes_the_package_file_atomically() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("catalog");
    std::fs::create_dir_all(dir.join("memcached-operator")).unwrap();
    std::fs::copy(
        demo().join("memcached-operator/catalog.yaml"),
        dir.join("memcached-operator/catalog.yaml"),
    )
    .unwrap();
    let catalog = CatalogDir::open(&dir).unwrap();
    // 0.3.0-rc.1 is older than stable's head 0.4.0: refused, nothing written.
    let before = read_tree(&dir).unwrap();
    assert!(
        plan_promote(
            &catalog.config,
            "memcached-operator",
            "0.3.0-rc.1",
            "stable"
        )
        .is_err()
    );
    assert_eq!(read_tree(&dir).unwrap(), before);
    // 0.4.0 into alpha: written as opm would, and valid.
    let plan = plan_promote(&catalog.config, "memcached-operator", "0.4.0", "alpha").unwrap();
    write_package_update(
        &catalog,
        "memcached-operator",
        &plan.changes,
        catalog.format_of("memcached-operator"),
    )
    .unwrap();
    let after = load_dir(&dir, &LoadOptions::default()).unwrap();
    assert!(!validate(&after, None).has_errors());
    let alpha = after.channels.iter().find(|c| c.name == "alpha").unwrap();
    assert_eq!(
        alpha.entries.last().unwrap().replaces,
        "memcached-operator.v0.3.0-rc.1"
    );
    assert_eq!(after.bundles.len(), 5);
    assert_eq!(after.deprecations.len(), 1, "other blobs are kept");
    // the staging directory is gone
    let files: Vec<PathBuf> = read_tree(&dir).unwrap().into_keys().collect();
    assert_eq!(
        files,
        vec![PathBuf::from("memcached-operator/catalog.yaml")]
    );
}

#[test]
fn failed_write_leaves_the_tree_unchanged() {
    // A release stages the catalog update together with other files (the bundle); when any
    // part fails at commit time, every file stays as it was.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let dir = root.join("catalog");
    std::fs::create_dir_all(dir.join("memcached-operator")).unwrap();
    let text = std::fs::read_to_string(demo().join("memcached-operator/catalog.yaml")).unwrap();
    let (head, tail) = text.split_at(text.find("---\nschema: olm.bundle").unwrap());
    std::fs::write(dir.join("memcached-operator/index.yaml"), head).unwrap();
    std::fs::write(dir.join("memcached-operator/bundles.yaml"), tail).unwrap();
    std::fs::write(root.join("blocker"), b"a file where a directory is needed").unwrap();
    let catalog = CatalogDir::open(&dir).unwrap();
    let before = read_tree(root).unwrap();
    let plan = plan_promote(&catalog.config, "memcached-operator", "0.4.0", "alpha").unwrap();
    let mut cs = olmkit_core::fsio::Changeset::new(root).unwrap();
    olmkit_catalog::catalog_dir::stage_package_update(
        &mut cs,
        Path::new("catalog"),
        &catalog,
        "memcached-operator",
        &plan.changes,
        olmkit_catalog::declcfg::WriteFormat::CatalogYaml,
    )
    .unwrap();
    cs.put_file("blocker/bundle.yaml", b"x").unwrap();
    assert!(cs.commit().is_err());
    assert_eq!(
        read_tree(root).unwrap(),
        before,
        "a failed update must leave every file as it was"
    );
    // The same update alone succeeds and merges the two files into catalog.yaml.
    write_package_update(
        &catalog,
        "memcached-operator",
        &plan.changes,
        olmkit_catalog::declcfg::WriteFormat::CatalogYaml,
    )
    .unwrap();
    let files: Vec<PathBuf> = read_tree(&dir).unwrap().into_keys().collect();
    assert_eq!(
        files,
        vec![PathBuf::from("memcached-operator/catalog.yaml")]
    );
}

#[test]
fn release_into_a_catalog_loaded_without_objects_then_written_in_full() {
    // Plan on the graph-only model, apply to the full file: bundle objects survive.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("catalog");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/fixtures/fbc-examples/valid/opm-index-declcfgs-latest/index.yaml");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&src, dir.join("index.yaml")).unwrap();
    let full_before = load_dir(&dir, &LoadOptions::default()).unwrap();
    let catalog = CatalogDir::open(&dir).unwrap();
    let mut b = full_before
        .bundles
        .iter()
        .find(|b| b.name == "foo.v0.2.0")
        .unwrap()
        .clone();
    b.name = "foo.v0.9.0".into();
    b.image = "test.registry/foo-operator/foo-bundle:v0.9.0".into();
    for p in &mut b.properties {
        if p.type_ == "olm.package" {
            *p = Property::package("foo", "0.9.0");
        }
    }
    let plan = plan_release(
        &catalog.config,
        &ReleaseRequest {
            bundle: b,
            channels: vec!["beta".into()],
            default_channel: None,
            skip_range: SkipRangeMode::None,
        },
    )
    .unwrap();
    write_package_update(
        &catalog,
        "foo",
        &plan.changes,
        olmkit_catalog::declcfg::WriteFormat::CatalogYaml,
    )
    .unwrap();
    let after = load_dir(&dir, &LoadOptions::default()).unwrap();
    assert!(
        !validate(&after, None).has_errors(),
        "{}",
        validate(&after, None).render_text()
    );
    let objects = |c: &DeclarativeConfig| {
        c.bundles
            .iter()
            .flat_map(|b| &b.properties)
            .filter(|p| p.type_ == "olm.bundle.object")
            .count()
    };
    assert!(objects(&after) > objects(&full_before));
    // bar and baz stayed in index.yaml; foo moved to foo/catalog.yaml
    let files: Vec<PathBuf> = read_tree(&dir).unwrap().into_keys().collect();
    assert_eq!(
        files,
        vec![
            PathBuf::from("foo/catalog.yaml"),
            PathBuf::from("index.yaml")
        ]
    );
    assert_eq!(after.packages.len(), full_before.packages.len());
}

/// The CSV's `replaces` (computed before the bundle exists) is always the edge the plan then
/// gives the first target channel; a released version gets its recorded edges back.
#[test]
fn csv_edges_agree_with_the_plan() {
    let v = |s: &str| semver::Version::parse(s).unwrap();
    let ch = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let empty = DeclarativeConfig::default();
    assert_eq!(
        csv_edges(&empty, "memcached-operator", &ch(&["alpha"]), &v("0.1.0")).unwrap(),
        None
    );
    let mut cfg = release(&empty, "0.1.0", &["alpha"]);
    cfg = release(&cfg, "0.2.0", &["alpha"]);
    for (version, channels, want) in [
        ("0.3.0", vec!["alpha"], "memcached-operator.v0.2.0"),
        // A new channel bridges from the highest lower release.
        (
            "0.3.0",
            vec!["stable", "alpha"],
            "memcached-operator.v0.2.0",
        ),
        ("0.1.5", vec!["candidate"], "memcached-operator.v0.1.0"),
    ] {
        let e = csv_edges(&cfg, "memcached-operator", &ch(&channels), &v(version))
            .unwrap()
            .unwrap();
        assert_eq!(e.replaces, want, "{version} {channels:?}");
        let plan = plan_release(&cfg, &req(version, &channels)).unwrap();
        let first = plan
            .catalog
            .channels
            .iter()
            .find(|c| c.name == channels[0])
            .unwrap();
        let entry = first
            .entries
            .iter()
            .find(|x| x.name.ends_with(version))
            .unwrap();
        assert_eq!(entry.replaces, e.replaces);
    }
    // Released: the recorded entry, whatever channels are asked for.
    let e = csv_edges(&cfg, "memcached-operator", &ch(&["stable"]), &v("0.2.0"))
        .unwrap()
        .unwrap();
    assert_eq!(e.name, "memcached-operator.v0.2.0");
    assert_eq!(e.replaces, "memcached-operator.v0.1.0");
    // A broken channel is reported, not guessed around.
    let mut broken = cfg.clone();
    broken.channels[0].entries[1].replaces.clear();
    assert!(matches!(
        csv_edges(&broken, "memcached-operator", &ch(&["alpha"]), &v("0.3.0")),
        Err(PlanReleaseError::BrokenChannel { .. })
    ));
}

/// A catalog whose channel and bundles are listed without their `olm.package` blob (opm
/// refuses it): a release adds the blob and extends the listed channel instead of adding a
/// second channel of the same name; a promotion does not repair it and says why.
#[test]
fn release_repairs_a_missing_package_blob_promotion_does_not() {
    let mut cfg = release(&DeclarativeConfig::default(), "0.1.0", &["alpha"]);
    cfg.packages.clear();
    assert!(validate(&cfg, None).has_errors());

    let plan = plan_release(&cfg, &req("0.2.0", &["alpha"])).unwrap();
    assert!(matches!(plan.changes[0], Change::AddPackage(_)));
    assert!(
        plan.changes.iter().any(|c| matches!(
            c,
            Change::AddEntry { channel, old_head, .. }
                if channel == "alpha" && old_head == "memcached-operator.v0.1.0"
        )),
        "{:?}",
        plan.changes
    );
    assert_eq!(plan.catalog.channels.len(), 1);
    assert!(!validate(&plan.catalog, None).has_errors());

    let e = plan_promote(&cfg, "memcached-operator", "0.1.0", "stable").unwrap_err();
    assert!(matches!(e, PlanReleaseError::Invalid(_)), "{e}");
    assert!(e.to_string().contains("unknown package"), "{e}");
    assert_eq!(
        csv_edges(
            &cfg,
            "memcached-operator",
            &["alpha".to_string()],
            &semver::Version::new(0, 2, 0)
        )
        .unwrap()
        .unwrap()
        .replaces,
        "memcached-operator.v0.1.0"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_release_sequence_validates_and_explain_reaches_the_head(
        steps in proptest::collection::vec((0u64..4, 0u64..4, proptest::sample::subsequence(vec!["alpha", "beta", "stable"], 1..3), any::<bool>()), 1..12)
    ) {
        let mut cfg = DeclarativeConfig::default();
        let mut released: Vec<semver::Version> = Vec::new();
        for (minor, patch, channels, skip_range) in steps {
            let v = semver::Version::new(0, minor, patch);
            let bundle = Bundle {
                schema: "olm.bundle".into(),
                name: format!("op.v{v}"),
                package: "op".into(),
                image: format!("quay.io/x/op-bundle:v{v}"),
                properties: vec![Property::package("op", &v.to_string())],
                related_images: vec![],
                omitted_objects: 0,
            };
            let req = ReleaseRequest {
                bundle,
                channels: channels.iter().map(|s| s.to_string()).collect(),
                default_channel: None,
                skip_range: if skip_range { SkipRangeMode::BelowNew } else { SkipRangeMode::None },
            };
            match plan_release(&cfg, &req) {
                Ok(plan) => {
                    let report = validate(&plan.catalog, None);
                    prop_assert!(!report.has_errors(), "{}", report.render_text());
                    if plan.outcome == Outcome::Changed {
                        released.push(v.clone());
                    }
                    cfg = plan.catalog;
                }
                Err(e) => {
                    // refusals only for versions not above a head, or already released
                    let msg = e.to_string();
                    prop_assert!(msg.contains("not greater") || msg.contains("already released"), "{}", msg);
                }
            }
        }
        for pg in graph::package_graphs(&cfg) {
            for ch in &pg.channels {
                let head = ch.head().unwrap().to_string();
                for n in ch.nodes.iter().filter(|n| n.in_channel) {
                    for path in [explain::explain_v0(&pg, &ch.name, &n.name).unwrap(), explain::explain_v1(&pg, &ch.name, &n.name).unwrap()] {
                        prop_assert_eq!(path.final_csv(), head.as_str());
                        prop_assert!(path.reaches_head && path.missing.is_none());
                    }
                }
            }
        }
    }

}
