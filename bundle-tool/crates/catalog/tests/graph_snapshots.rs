//! Snapshots of `bundle-tool graph` output for a catalog with every graph feature.
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{LoadOptions, load_dir};
use olmkit_catalog::graph::package_graphs;
use olmkit_catalog::graph_render::{GraphFormat, render};
use std::path::Path;

fn graphs() -> Vec<olmkit_catalog::graph::PackageGraph> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/catalog/graph-demo");
    package_graphs(&load_dir(&dir, &LoadOptions::graph_only()).unwrap())
}

#[test]
fn text() {
    insta::assert_snapshot!(render(&graphs(), GraphFormat::Text));
}

#[test]
fn mermaid() {
    insta::assert_snapshot!(render(&graphs(), GraphFormat::Mermaid));
}

#[test]
fn dot() {
    insta::assert_snapshot!(render(&graphs(), GraphFormat::Dot));
}

#[test]
fn svg() {
    let svg = render(&graphs(), GraphFormat::Svg);
    // well-formed enough for browsers: one root, balanced groups
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
    insta::assert_snapshot!(svg);
}

#[test]
fn graph_model_facts() {
    let g = &graphs()[0];
    let stable = g.channel("stable").unwrap();
    assert_eq!(stable.head(), Some("memcached-operator.v0.4.0"));
    assert!(stable.is_default);
    // external replaces target and skipRange edges are present
    assert!(
        stable
            .nodes
            .iter()
            .any(|n| n.name == "memcached-operator.v0.1.0" && !n.in_channel)
    );
    assert!(
        stable
            .edges
            .iter()
            .any(|e| e.kind == olmkit_catalog::graph::EdgeKind::SkipRange
                && e.from == "memcached-operator.v0.2.0"
                && e.to == "memcached-operator.v0.4.0")
    );
    let alpha = g.channel("alpha").unwrap();
    assert!(alpha.deprecated.is_some());
    assert!(
        alpha
            .node("memcached-operator.v0.1.0")
            .unwrap()
            .deprecated
            .is_some()
    );
}
