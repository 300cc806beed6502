//! `graph` and `explain` read one set of upgrade edges (the catalog model's): for random
//! packages, the edges `graph` draws from a bundle are exactly the steps `explain` can take
//! from it, both equal an independent oracle of OLM's successor rule (an entry replaces the
//! installed bundle, skips it, or its skipRange contains the installed bundle's version,
//! wherever that bundle is), and every step of an explained path is a drawn edge.
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package};
use olmkit_catalog::graph::{EdgeKind, package_graphs};
use olmkit_catalog::property::Property;
use olmkit_catalog::{explain, graph};
use olmkit_core::version_range::VersionRange;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const RANGES: &[&str] = &[
    "",
    "<0.2.0",
    ">=0.1.0 <0.3.0",
    ">=0.0.0 <0.4.0",
    ">0.2.0 <0.6.0",
    "<0.1.0 || >=0.4.0 <0.5.0",
    "not a range",
];

fn name(i: usize) -> String {
    format!("op.v0.{i}.0")
}

fn bundle(i: usize) -> Bundle {
    Bundle {
        schema: "olm.bundle".into(),
        name: name(i),
        package: "op".into(),
        image: format!("quay.io/x/op-bundle:v0.{i}.0"),
        properties: vec![Property::package("op", &format!("0.{i}.0"))],
        related_images: vec![],
        omitted_objects: 0,
    }
}

/// One channel entry: (bundle index, replaces, skips, skipRange), indices up to 7 (7 and
/// above name bundles that do not exist).
type RawEntry = (usize, Option<usize>, Vec<usize>, usize);

fn arb_channel() -> impl Strategy<Value = Vec<RawEntry>> {
    proptest::collection::vec(
        (
            0usize..7,
            proptest::option::of(0usize..8),
            proptest::collection::vec(0usize..8, 0..3),
            0..RANGES.len(),
        ),
        0..6,
    )
}

/// A package with bundles 0.0.0..0.6.0 (each blob present) and up to three channels.
fn package(channels: &[Vec<RawEntry>]) -> DeclarativeConfig {
    let channels = channels
        .iter()
        .enumerate()
        .map(|(ci, entries)| {
            let mut seen = BTreeSet::new();
            Channel {
                schema: "olm.channel".into(),
                name: format!("ch{ci}"),
                package: "op".into(),
                entries: entries
                    .iter()
                    .filter(|e| seen.insert(e.0))
                    .map(|(n, r, s, range)| ChannelEntry {
                        name: name(*n),
                        replaces: r.map(name).unwrap_or_default(),
                        skips: s.iter().map(|i| name(*i)).collect(),
                        skip_range: RANGES[*range].to_string(),
                    })
                    .collect(),
                properties: vec![],
            }
        })
        .collect();
    DeclarativeConfig {
        packages: vec![Package {
            schema: "olm.package".into(),
            name: "op".into(),
            default_channel: "ch0".into(),
            icon: None,
            description: String::new(),
            properties: vec![],
        }],
        channels,
        bundles: (0..7).map(bundle).collect(),
        ..Default::default()
    }
}

/// OLM's successor rule, written independently of the model: the entries of `channel` that
/// replace `installed`, skip it, or whose skipRange contains its version, with the strongest
/// reason.
fn oracle(channel: &Channel, installed: &str) -> BTreeMap<String, EdgeKind> {
    let version = installed
        .strip_prefix("op.v")
        .and_then(|v| semver::Version::parse(v).ok())
        .filter(|v| v.minor < 7);
    let mut out = BTreeMap::new();
    for e in &channel.entries {
        if e.name == installed || out.contains_key(&e.name) {
            continue;
        }
        let kind = if e.replaces == installed {
            Some(EdgeKind::Replaces)
        } else if e.skips.iter().any(|s| s == installed) {
            Some(EdgeKind::Skips)
        } else if let (Some(v), Ok(r)) = (&version, VersionRange::parse(&e.skip_range))
            && r.contains(v)
        {
            Some(EdgeKind::SkipRange)
        } else {
            None
        };
        if let Some(k) = kind {
            out.insert(e.name.clone(), k);
        }
    }
    out
}

/// The successors `graph` draws from `installed`: (to, strongest kind).
fn drawn(ch: &graph::ChannelGraph, installed: &str) -> BTreeMap<String, EdgeKind> {
    let mut out: BTreeMap<String, EdgeKind> = BTreeMap::new();
    for e in ch
        .edges
        .iter()
        .filter(|e| e.from == installed && e.to != installed)
    {
        let k = out.entry(e.to.clone()).or_insert(e.kind);
        *k = (*k).min(e.kind);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn graph_edges_are_explains_steps(channels in proptest::collection::vec(arb_channel(), 1..4)) {
        let cfg = package(&channels);
        let pg = package_graphs(&cfg).pop().unwrap();
        for (ch, blob) in pg.channels.iter().zip(cfg.channels.iter()) {
            prop_assert_eq!(&ch.name, &blob.name);
            // Every bundle of the package, every name an entry points at, and one unknown.
            let mut installed: BTreeSet<String> = (0..8).map(name).collect();
            installed.insert("other.v1.0.0".into());
            for x in &installed {
                let want = oracle(blob, x);
                let graph_steps = drawn(ch, x);
                let explain_steps: BTreeMap<String, EdgeKind> =
                    explain::successors(&pg, ch, x).into_iter().collect();
                prop_assert_eq!(&graph_steps, &want, "graph from {} in {}", x, ch.name);
                prop_assert_eq!(&explain_steps, &want, "explain from {} in {}", x, ch.name);
                // A bundle an edge comes from is drawn as a node of the channel.
                if !want.is_empty() {
                    prop_assert!(ch.node(x).is_some(), "{} has edges but no node in {}", x, ch.name);
                }
                // Every step of an explained path is a drawn edge of its kind.
                for path in [
                    explain::explain_v0(&pg, &ch.name, x),
                    explain::explain_v1(&pg, &ch.name, x),
                ]
                .into_iter()
                .flatten()
                {
                    for s in &path.steps {
                        let from = drawn(ch, &s.from);
                        prop_assert_eq!(from.get(&s.to), Some(&s.edge), "{:?}", path);
                    }
                }
            }
        }
    }
}

/// The case from the issue: `>=0.1.0 <0.3.0` on `stable` covers 0.1.0, which is only in
/// `alpha`. `explain` takes 0.1.0 -> 0.3.0; `graph` draws that edge and lists 0.1.0 as covered.
#[test]
fn a_skip_range_covers_bundles_of_other_channels_in_graph_and_explain() {
    let alpha = vec![(1, None, vec![], 0)];
    let stable = vec![(2, None, vec![], 0), (3, Some(2), vec![], 2)];
    let cfg = package(&[alpha, stable]);
    let pg = package_graphs(&cfg).pop().unwrap();
    let stable = pg.channel("ch1").unwrap();
    let path = explain::explain_v0(&pg, "ch1", "op.v0.1.0").unwrap();
    assert_eq!(path.final_csv(), "op.v0.3.0");
    assert_eq!(path.steps[0].edge, EdgeKind::SkipRange);
    assert!(
        stable
            .edges
            .iter()
            .any(|e| e.from == "op.v0.1.0" && e.to == "op.v0.3.0" && e.kind == EdgeKind::SkipRange)
    );
    let n = stable.node("op.v0.1.0").unwrap();
    assert!(!n.in_channel);
    let text = olmkit_catalog::graph_draw::render(
        std::slice::from_ref(&pg),
        olmkit_catalog::graph_draw::GraphFormat::Text,
    );
    assert!(
        text.contains("skipRange \">=0.1.0 <0.3.0\" (covers op.v0.1.0, op.v0.2.0)"),
        "{text}"
    );
}
