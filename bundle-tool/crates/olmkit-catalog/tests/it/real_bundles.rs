//! The real community operators in tests/fixtures/real-bundles: every bundle renders, and the
//! catalog built from them has the channels, heads and validity their GRAPH.md states.
#![allow(clippy::unwrap_used)]

use olmkit_catalog::catalog_dir::{UpdateGraph, catalog_from_bundles, find_bundle_dirs};
use olmkit_catalog::declcfg::{ChannelEntry, DeclarativeConfig};
use olmkit_catalog::render::{ImageRefTemplate, RenderOptions};
use olmkit_catalog::template::{self, BundlesByImage};
use olmkit_catalog::{graph, model, property, validate};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn real(op: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/fixtures/real-bundles")
        .join(op)
}

fn bundles(op: &str) -> Vec<(olmkit_bundle::Bundle, String)> {
    let t = ImageRefTemplate::parse("quay.io/community/{package}-bundle:v{version}").unwrap();
    find_bundle_dirs(&real(op))
        .unwrap()
        .into_iter()
        .map(|d| {
            let b = olmkit_bundle::load_bundle_dir(&d).unwrap();
            let img = t.expand(
                b.package().unwrap(),
                b.csv_name().unwrap(),
                b.version().unwrap(),
            );
            (b, img)
        })
        .collect()
}

/// The YAML code blocks of GRAPH.md (channel name -> entries), in order.
fn graph_md_blocks(op: &str) -> Vec<BTreeMap<String, Vec<ChannelEntry>>> {
    let text = std::fs::read_to_string(real(op).join("GRAPH.md")).unwrap();
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("```yaml\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").unwrap();
        let doc = olmkit_core::docs::parse_document("GRAPH.md", &body.as_bytes()[..end]).unwrap();
        out.push(serde_json::from_value(doc).unwrap());
        rest = &body[end + 3..];
    }
    out
}

/// GRAPH.md's "Channel heads" lines, in order.
fn graph_md_heads(op: &str) -> Vec<BTreeMap<String, Vec<String>>> {
    let text = std::fs::read_to_string(real(op).join("GRAPH.md")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("Channel heads (entries nobody replaces or skips): "))
        .map(|l| {
            l.split("; ")
                .map(|part| {
                    let (ch, heads) = part.split_once(" -> ").unwrap();
                    (
                        ch.trim_matches('`').to_string(),
                        heads.split(", ").map(String::from).collect(),
                    )
                })
                .collect()
        })
        .collect()
}

fn channels_of(cfg: &DeclarativeConfig) -> BTreeMap<String, Vec<ChannelEntry>> {
    cfg.channels
        .iter()
        .map(|c| {
            let mut entries = c.entries.clone();
            entries.sort_by(|a, b| {
                let v = |n: &str| {
                    cfg.bundles
                        .iter()
                        .find(|x| x.name == n)
                        .and_then(model::bundle_version)
                        .unwrap()
                };
                v(&a.name).cmp_precedence(&v(&b.name))
            });
            (c.name.clone(), entries)
        })
        .collect()
}

fn heads_of(cfg: &DeclarativeConfig) -> BTreeMap<String, Vec<String>> {
    cfg.channels
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                model::channel_heads(c)
                    .into_iter()
                    .map(String::from)
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn every_real_bundle_renders_like_opm() {
    for op in [
        "authorino-operator",
        "skupper-operator",
        "node-healthcheck-operator",
    ] {
        for (dir, image) in bundles(op) {
            for objects in [false, true] {
                let b = olmkit_catalog::render_opm::render_bundle(
                    &dir,
                    &image,
                    &RenderOptions {
                        bundle_objects: objects,
                    },
                )
                .unwrap();
                let pkgs = property::packages(&b.properties);
                assert_eq!(pkgs.len(), 1, "{}", b.name);
                assert_eq!(pkgs[0].as_ref().unwrap().version, dir.version().unwrap());
                assert_eq!(b.image, image);
                assert!(b.related_images.iter().any(|r| r.image == image));
                let objs = b
                    .properties
                    .iter()
                    .filter(|p| p.type_ == property::BUNDLE_OBJECT)
                    .count();
                if objects {
                    assert_eq!(objs, dir.manifests.len(), "{}", b.name);
                } else {
                    assert_eq!(objs, 0);
                    assert!(
                        b.properties
                            .iter()
                            .any(|p| p.type_ == property::CSV_METADATA)
                    );
                }
                // exactly one olm.gvk per version of every shipped CRD (no APIServices here)
                let want: std::collections::BTreeSet<(String, String, String)> = dir
                    .crds()
                    .flat_map(|c| {
                        let g = c.object["spec"]["group"].as_str().unwrap().to_string();
                        let k = c.object["spec"]["names"]["kind"]
                            .as_str()
                            .unwrap()
                            .to_string();
                        c.object["spec"]["versions"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(move |v| {
                                (
                                    g.clone(),
                                    k.clone(),
                                    v["name"].as_str().unwrap().to_string(),
                                )
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect();
                let got: std::collections::BTreeSet<(String, String, String)> =
                    property::gvks(&b.properties)
                        .into_iter()
                        .map(|g| (g.group, g.kind, g.version))
                        .collect();
                assert_eq!(got, want, "{}", b.name);
            }
        }
    }
}

#[test]
fn authorino_multi_version_crd_gets_both_gvks_and_webhook_data() {
    let (dir, image) = bundles("authorino-operator")
        .into_iter()
        .find(|(d, _)| d.version() == Some("0.13.0"))
        .unwrap();
    let b =
        olmkit_catalog::render_opm::render_bundle(&dir, &image, &RenderOptions::default()).unwrap();
    let gvks = property::gvks(&b.properties);
    let authconfig: Vec<&str> = gvks
        .iter()
        .filter(|g| g.kind == "AuthConfig")
        .map(|g| g.version.as_str())
        .collect();
    assert_eq!(authconfig, vec!["v1beta1", "v1beta2"]);
}

#[test]
fn replaces_mode_graphs_match_graph_md() {
    for op in [
        "authorino-operator",
        "skupper-operator",
        "node-healthcheck-operator",
    ] {
        let cfg = catalog_from_bundles(
            &bundles(op),
            &RenderOptions::default(),
            UpdateGraph::ReplacesMode,
        )
        .unwrap();
        let blocks = graph_md_blocks(op);
        assert_eq!(channels_of(&cfg), blocks[0], "{op}: channels");
        assert_eq!(heads_of(&cfg), graph_md_heads(op)[0], "{op}: heads");
        let report = validate::validate(&cfg, None);
        if op == "node-healthcheck-operator" {
            let text = report.render_text();
            assert!(
                text.contains("channel \"stable\": multiple channel heads found in graph: node-healthcheck-operator.v0.3.2, node-healthcheck-operator.v0.4.2, node-healthcheck-operator.v0.5.0, node-healthcheck-operator.v0.6.0, node-healthcheck-operator.v0.6.1, node-healthcheck-operator.v0.7.0"),
                "{text}"
            );
            // The hint names the missing edge: the skipRange-only mistake.
            assert!(text.contains("only by skipRange"), "{text}");
        } else {
            assert!(!report.has_errors(), "{op}: {}", report.render_text());
        }
    }
}

#[test]
fn node_healthcheck_semver_mode_matches_graph_md() {
    let op = "node-healthcheck-operator";
    assert_eq!(
        UpdateGraph::from_ci_yaml(&real(op)),
        Some(UpdateGraph::SemverMode)
    );
    let cfg = catalog_from_bundles(
        &bundles(op),
        &RenderOptions::default(),
        UpdateGraph::SemverMode,
    )
    .unwrap();
    assert_eq!(channels_of(&cfg), graph_md_blocks(op)[1]);
    assert_eq!(heads_of(&cfg), graph_md_heads(op)[1]);
    let report = validate::validate(&cfg, None);
    assert!(!report.has_errors(), "{}", report.render_text());
}

#[test]
fn node_healthcheck_through_the_semver_template() {
    // The same bundles through an olm.semver template (every bundle in `stable`, the one the
    // candidate annotation lists in `candidate`): major channels with heads 0.7.0 and 0.3.2.
    let op = "node-healthcheck-operator";
    let all = bundles(op);
    let mut source = BundlesByImage::default();
    let mut stable = Vec::new();
    let mut candidate = Vec::new();
    for (dir, image) in &all {
        source.extend([olmkit_catalog::render_opm::render_bundle(
            dir,
            image,
            &RenderOptions::default(),
        )
        .unwrap()]);
        if dir.channels().iter().any(|c| c == "stable") {
            stable.push(serde_json::json!({"image": image}));
        }
        if dir.channels().iter().any(|c| c == "candidate") {
            candidate.push(serde_json::json!({"image": image}));
        }
    }
    let doc = serde_json::json!({
        "schema": "olm.semver",
        "generateMajorChannels": true,
        "generateMinorChannels": false,
        "candidate": {"bundles": candidate},
        "stable": {"bundles": stable},
    });
    let cfg = template::render_template("semver.yaml", &doc, &source).unwrap();
    let report = validate::validate(&cfg, None);
    assert!(!report.has_errors(), "{}", report.render_text());
    let graphs = graph::package_graphs(&cfg);
    let g = &graphs[0];
    assert_eq!(g.default_channel, "stable-v0");
    assert_eq!(
        g.channel("stable-v0").unwrap().head(),
        Some("node-healthcheck-operator.v0.7.0")
    );
    assert_eq!(
        g.channel("candidate-v0").unwrap().head(),
        Some("node-healthcheck-operator.v0.3.2")
    );
}
