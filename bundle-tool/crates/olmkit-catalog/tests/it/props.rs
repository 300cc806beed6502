//! Property tests: the validator against an independent oracle on random graphs, loaders never
//! panic (that release sequences always validate is olmkit-release's `catalog_plan` test).
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, LoadOptions, Package, load_bytes,
};
use olmkit_catalog::graph;
use olmkit_catalog::property::Property;
use olmkit_catalog::validate::{rules, validate};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

fn name(i: usize) -> String {
    format!("op.v0.{i}.0")
}

fn catalog(entries: Vec<ChannelEntry>) -> DeclarativeConfig {
    let bundles = entries
        .iter()
        .map(|e| {
            let v = e.name.trim_start_matches("op.v").to_string();
            Bundle {
                schema: "olm.bundle".into(),
                name: e.name.clone(),
                package: "op".into(),
                image: format!("quay.io/x/op-bundle:v{v}"),
                properties: vec![Property::package("op", &v)],
                related_images: vec![],
                omitted_objects: 0,
            }
        })
        .collect();
    DeclarativeConfig {
        packages: vec![Package {
            schema: "olm.package".into(),
            name: "op".into(),
            default_channel: "stable".into(),
            icon: None,
            description: String::new(),
            properties: vec![],
        }],
        channels: vec![Channel {
            schema: "olm.channel".into(),
            name: "stable".into(),
            package: "op".into(),
            entries,
            properties: vec![],
        }],
        bundles,
        ..Default::default()
    }
}

/// Random channel: n entries, each with an optional replaces and a set of skips, both
/// pointing at any entry (or at a name outside the channel).
fn arb_channel() -> impl Strategy<Value = Vec<ChannelEntry>> {
    (1usize..7).prop_flat_map(|n| {
        proptest::collection::vec(
            (
                proptest::option::of(0usize..n + 1),
                proptest::collection::btree_set(0usize..n + 1, 0..3),
            ),
            n,
        )
        .prop_map(move |edges| {
            edges
                .into_iter()
                .enumerate()
                .map(|(i, (r, skips))| ChannelEntry {
                    name: name(i),
                    replaces: r.filter(|r| *r != i).map(name).unwrap_or_default(),
                    skips: skips.into_iter().filter(|s| *s != i).map(name).collect(),
                    skip_range: String::new(),
                })
                .collect()
        })
    })
}

/// Independent statement of operator-registry's rule (`validateReplacesChain`): exactly one
/// entry without incoming replaces/skips edges; following replaces from it, stopping before a
/// bundle that any entry skips, never revisits a name; every entry is on that walk or skipped
/// by some entry of the channel.
fn oracle_valid(entries: &[ChannelEntry]) -> bool {
    let names: HashSet<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let targeted: HashSet<&str> = entries
        .iter()
        .flat_map(|e| {
            std::iter::once(e.replaces.as_str()).chain(e.skips.iter().map(String::as_str))
        })
        .filter(|t| !t.is_empty())
        .collect();
    let heads: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !targeted.contains(n))
        .collect();
    if heads.len() != 1 {
        return false;
    }
    let by: HashMap<&str, &ChannelEntry> = entries.iter().map(|e| (e.name.as_str(), e)).collect();
    let skipped: HashSet<&str> = entries
        .iter()
        .flat_map(|e| e.skips.iter().map(String::as_str))
        .collect();
    let mut walk: Vec<&str> = vec![heads[0]];
    let mut cur = by.get(heads[0]);
    while let Some(e) = cur {
        let next = e.replaces.as_str();
        if skipped.contains(next) {
            break;
        }
        if walk.contains(&next) {
            return false; // cycle
        }
        walk.push(next);
        cur = by.get(next);
    }
    names
        .iter()
        .all(|n| walk.contains(n) || skipped.contains(n))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn validation_accepts_exactly_the_sound_graphs(entries in arb_channel()) {
        let want = oracle_valid(&entries);
        let report = validate(&catalog(entries.clone()), None);
        let graph_rules = [rules::CHANNEL_HEAD.id, rules::REPLACES_CYCLE.id, rules::STRANDED_BUNDLE.id];
        let got = !report.findings.iter().any(|f| graph_rules.contains(&f.rule.as_str()));
        prop_assert_eq!(got, want, "{:?}\n{}", entries, report.render_text());
        // nothing else is wrong with these catalogs
        prop_assert!(report.findings.iter().all(|f| graph_rules.contains(&f.rule.as_str())), "{}", report.render_text());
    }

    #[test]
    fn loaders_never_panic_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Err(e) = load_bytes("fuzz.bin", &bytes, &LoadOptions::default()) {
            prop_assert!(e.to_string().contains("fuzz.bin"), "{}", e);
        }
    }

    #[test]
    fn loaders_never_panic_on_json(v in arb_json()) {
        let text = serde_json::to_string(&v).unwrap();
        if let Err(e) = load_bytes("fuzz.json", text.as_bytes(), &LoadOptions::graph_only()) {
            prop_assert!(e.to_string().contains("fuzz.json"), "{}", e);
        }
        let yaml = olmkit_core::docs::to_yaml("v", &v).unwrap();
        if let Err(e) = load_bytes("fuzz.yaml", yaml.as_bytes(), &LoadOptions::default()) {
            prop_assert!(e.to_string().contains("fuzz.yaml"), "{}", e);
        }
    }

    #[test]
    fn validator_never_panics_on_loaded_blobs(v in arb_blob()) {
        let text = serde_json::to_string(&v).unwrap();
        if let Ok(blobs) = load_bytes("b.json", text.as_bytes(), &LoadOptions::default()) {
            let mut cfg = DeclarativeConfig::default();
            for b in blobs { cfg.push(b.blob); }
            let _ = validate(&cfg, None);
            let _ = graph::package_graphs(&cfg);
        }
    }
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i32>().prop_map(serde_json::Value::from),
        "[a-z.]{0,8}".prop_map(serde_json::Value::from),
        prop_oneof![
            Just("olm.package"),
            Just("olm.channel"),
            Just("olm.bundle"),
            Just("olm.deprecations"),
            Just("x")
        ]
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("schema".to_string()),
                    Just("name".to_string()),
                    Just("package".to_string()),
                    Just("entries".to_string()),
                    Just("properties".to_string()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_blob() -> impl Strategy<Value = serde_json::Value> {
    (
        prop_oneof![Just("olm.package"), Just("olm.channel"), Just("olm.bundle"), Just("olm.deprecations")],
        arb_json(),
        arb_json(),
    )
        .prop_map(|(schema, a, b)| {
            serde_json::json!({
                "schema": schema, "name": "p", "package": "p", "defaultChannel": "c",
                "entries": [{"name": "p", "replaces": "q", "skips": ["r"], "skipRange": "<1.0.0", "reference": {"schema": "olm.bundle", "name": "p"}, "message": "m"}],
                "properties": [{"type": "olm.package", "value": a}, {"type": "olm.gvk", "value": b}],
                "image": "quay.io/x/y:v1"
            })
        })
}
