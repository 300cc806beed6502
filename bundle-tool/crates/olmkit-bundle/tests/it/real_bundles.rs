//! Any operator, not only ours: every version of the three real community operators in
//! tests/fixtures/real-bundles validates with the outcome their README/GRAPH.md state, their
//! upgrade chains get the `--previous` verdicts of OLM v1's CRD upgrade safety check (see
//! `OLM_V1_REFUSES`), and authorino 0.13.0 regenerated from its own
//! manifests matches the published bundle except for documented differences.
//!
//! Decisions per rule for real-world quirks (all match what `operator-sdk bundle validate`
//! says about them):
//! - `csv-examples` warning: authorino 0.0.1-0.10.0 ship owned CRD versions without an
//!   `alm-examples` entry ("provided API should have an example annotation" is a warning
//!   upstream too).
//! - `csv-annotations` warning: authorino 0.11.1 sets `olm.properties` in the CSV; upstream
//!   warns and OLM still reads it.
//! - `crd-upgrade` warning: authorino 0.4.0 stops shipping the `authorino.3scale.net` CRD of
//!   0.0.1 (the API group was renamed); OLM leaves it on the cluster, so it is not an error.
//! - Optional suites only warn about them (channel names such as `alpha`, missing resource
//!   requests of sidecars, missing minKubeVersion in skupper): OperatorHub accepted them all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use olmkit_bundle::generate::{GenerateInputs, GenerateOptions, generate_bundle};
use olmkit_bundle::model::Manifest;
use olmkit_bundle::{Bundle, Suite, ValidateOptions, load_bundle_dir, validate_bundle};
use olmkit_core::Severity;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn label(d: &Path) -> String {
    let op = d.parent().unwrap().file_name().unwrap().to_str().unwrap();
    format!("{op}/{}", d.file_name().unwrap().to_str().unwrap())
}

/// Default-suite warnings each real bundle is expected to produce, by rule.
fn expected_default_warnings() -> BTreeMap<String, Vec<&'static str>> {
    let mut m: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    for v in [
        "0.0.1", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "0.9.0", "0.10.0",
    ] {
        m.insert(format!("authorino-operator/{v}"), vec!["csv-examples"]);
    }
    m.insert("authorino-operator/0.11.1".into(), vec!["csv-annotations"]);
    m
}

#[test]
fn every_real_bundle_validates_without_errors_in_every_suite() {
    let dirs = real_bundle_dirs();
    assert_eq!(dirs.len(), 29);
    let expected = expected_default_warnings();
    for d in &dirs {
        let b = load_bundle_dir(d).unwrap();
        let r = validate_bundle(&b, None, &ValidateOptions::default());
        assert!(!r.has_errors(), "{}:\n{}", label(d), r.render_text());
        let rules: BTreeSet<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
        let mut want: BTreeSet<&str> = expected
            .get(&label(d))
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .collect();
        // operator-sdk warns about every CSV without spec.minKubeVersion, and so do we.
        if b.csv()
            .and_then(|c| c.object.pointer("/spec/minKubeVersion"))
            .is_none()
        {
            want.insert("csv-min-kube-version");
        }
        assert_eq!(rules, want, "{}:\n{}", label(d), r.render_text());

        let all = ValidateOptions {
            suites: [Suite::OperatorHub, Suite::GoodPractices].into(),
            ..Default::default()
        };
        let r = validate_bundle(&b, None, &all);
        assert!(
            !r.has_errors(),
            "{} (all suites):\n{}",
            label(d),
            r.render_text()
        );
    }
}

/// The GRAPH.md table of an operator: dir → (csv name, channels, default, replaces, skips,
/// skipRange, webhook types, owned CRDs).
fn graph_rows(operator: &str) -> BTreeMap<String, Vec<String>> {
    let text =
        std::fs::read_to_string(fixtures().join(format!("real-bundles/{operator}/GRAPH.md")))
            .unwrap();
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("| dir |") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        if !line.starts_with('|') {
            if !rows.is_empty() {
                break;
            }
            continue;
        }
        if line.starts_with("|---") {
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        rows.insert(cells[0].clone(), cells[1..].to_vec());
    }
    rows
}

fn sorted_join(mut v: Vec<String>, sep: &str) -> String {
    v.sort();
    v.join(sep)
}

#[test]
fn loaded_bundles_agree_with_graph_md() {
    for op in [
        "authorino-operator",
        "skupper-operator",
        "node-healthcheck-operator",
    ] {
        let rows = graph_rows(op);
        let dirs = versions_of(op);
        assert_eq!(rows.len(), dirs.len(), "{op}");
        for d in dirs {
            let b: Bundle = load_bundle_dir(&d).unwrap();
            let row = &rows[d.file_name().unwrap().to_str().unwrap()];
            assert_eq!(b.csv_name().unwrap(), row[0], "{}", label(&d));
            assert_eq!(
                b.channels().join(", "),
                row[1].replace(',', ", ").replace("  ", " "),
                "{}",
                label(&d)
            );
            assert_eq!(b.default_channel().unwrap_or(""), row[2], "{}", label(&d));
            assert_eq!(b.replaces().unwrap_or(""), row[3], "{}", label(&d));
            let graph_skips: Vec<String> = row[4]
                .split(['<', ','])
                .map(|s| s.trim_start_matches("br>").trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            assert_eq!(
                sorted_join(b.skips(), ","),
                sorted_join(graph_skips, ","),
                "{}",
                label(&d)
            );
            assert_eq!(
                b.skip_range().unwrap_or(""),
                row[5].trim_matches('`'),
                "{}",
                label(&d)
            );
            let csv = &b.csv().unwrap().object;
            let hooks: Vec<String> = csv["spec"]["webhookdefinitions"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|w| w["type"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(sorted_join(hooks, "<br>"), row[6], "{}", label(&d));
            let owned: Vec<String> = csv["spec"]["customresourcedefinitions"]["owned"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|o| {
                            format!(
                                "{}/{}",
                                o["name"].as_str().unwrap(),
                                o["version"].as_str().unwrap()
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(sorted_join(owned, "<br>"), row[7], "{}", label(&d));
        }
    }
}

#[test]
fn authorino_conversion_webhooks_are_wired_and_all_namespaces() {
    for d in versions_of("authorino-operator") {
        let b = load_bundle_dir(&d).unwrap();
        let v = semver::Version::parse(b.version().unwrap()).unwrap();
        if v < semver::Version::new(0, 9, 0) {
            continue;
        }
        let csv = &b.csv().unwrap().object;
        let w = &csv["spec"]["webhookdefinitions"][0];
        assert_eq!(
            w["conversionCRDs"],
            json!(["authconfigs.authorino.kuadrant.io"]),
            "{}",
            label(&d)
        );
        let supported: Vec<&str> = csv["spec"]["installModes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["supported"] == true)
            .map(|m| m["type"].as_str().unwrap())
            .collect();
        assert_eq!(supported, ["AllNamespaces"], "{}", label(&d));
        // The rules that check this wiring pass; break it and they fire.
        let mut broken = b.clone();
        let csv = broken
            .manifests
            .iter_mut()
            .find(|m| m.kind() == "ClusterServiceVersion")
            .unwrap();
        csv.object["spec"]["installModes"][0]["supported"] = json!(true);
        csv.object["spec"]["webhookdefinitions"][0]["conversionCRDs"] = json!([]);
        // operator-sdk accepts the broken wiring, so by default it is a warning; the strict
        // suite makes it an error. The install-mode rule is operator-sdk's own: an error.
        let r = validate_bundle(&broken, None, &ValidateOptions::default());
        assert!(
            r.findings
                .iter()
                .any(|f| f.rule == "crd-conversion" && f.severity == Severity::Warning),
            "{}",
            r.render_text()
        );
        let strict = ValidateOptions {
            suites: [Suite::Strict].into(),
            ..Default::default()
        };
        let r = validate_bundle(&broken, None, &strict);
        assert!(
            r.findings
                .iter()
                .any(|f| f.rule == "crd-conversion" && f.severity == Severity::Error),
            "{}",
            r.render_text()
        );
    }
}

/// The upgrades of the real chains that OLM v1's CRD upgrade safety check refuses, with the
/// validations that refuse them (operator-controller `crdupgradesafety`, crdify's names).
/// Every one is a real schema change: fields made required or removed (authorino 0.4.0),
/// `oneOf` alternatives added or removed (authorino 0.6.0-0.9.0), and changes no rule proves
/// safe (`unhandled`: `x-kubernetes-map-type: atomic` and list-map keys added or dropped by a
/// newer controller-gen, nested map schemas rewritten). OLM v0 installed all of them.
const OLM_V1_REFUSES: &[(&str, &str, &[&str])] = &[
    (
        "authorino-operator/0.0.1",
        "authorino-operator/0.4.0",
        &["existingFieldRemoval", "required"],
    ),
    (
        "authorino-operator/0.5.0",
        "authorino-operator/0.6.0",
        &["oneOf"],
    ),
    (
        "authorino-operator/0.7.0",
        "authorino-operator/0.8.0",
        &["existingFieldRemoval", "oneOf"],
    ),
    (
        "authorino-operator/0.8.0",
        "authorino-operator/0.9.0",
        &["oneOf"],
    ),
    (
        "authorino-operator/0.11.1",
        "authorino-operator/0.12.0",
        &["unhandled"],
    ),
    (
        "node-healthcheck-operator/0.3.2",
        "node-healthcheck-operator/0.4.2",
        &["unhandled"],
    ),
    (
        "node-healthcheck-operator/0.4.2",
        "node-healthcheck-operator/0.5.0",
        &["unhandled"],
    ),
    (
        "node-healthcheck-operator/0.5.0",
        "node-healthcheck-operator/0.6.0",
        &["unhandled"],
    ),
];

/// The validation named in a `crd-upgrade` refusal (`...: <validation>: <detail>`).
fn validation_of(message: &str) -> &'static str {
    [
        "scope",
        "storedVersionRemoval",
        "existingFieldRemoval",
        "enum",
        "required",
        "maximum",
        "maxItems",
        "maxLength",
        "maxProperties",
        "minimum",
        "minItems",
        "minLength",
        "minProperties",
        "default",
        "type",
        "pattern",
        "nullable",
        "oneOf",
        "unhandled",
    ]
    .into_iter()
    .find(|v| message.contains(&format!(": {v}: ")))
    .unwrap_or("?")
}

#[test]
fn upgrade_chains_against_olm_v1() {
    let mut refused = Vec::new();
    for op in [
        "authorino-operator",
        "skupper-operator",
        "node-healthcheck-operator",
    ] {
        let dirs = versions_of(op);
        for pair in dirs.windows(2) {
            let (from, to) = (label(&pair[0]), label(&pair[1]));
            let prev = load_bundle_dir(&pair[0]).unwrap();
            let cur = load_bundle_dir(&pair[1]).unwrap();
            let r = validate_bundle(&cur, Some(&prev), &ValidateOptions::default());
            // Only CRD upgrade safety refuses anything.
            assert!(
                r.findings
                    .iter()
                    .all(|f| f.severity != Severity::Error || f.rule == "crd-upgrade"),
                "{from} -> {to}:\n{}",
                r.render_text()
            );
            let validations: BTreeSet<&str> = r
                .findings
                .iter()
                .filter(|f| f.rule == "crd-upgrade" && f.severity == Severity::Error)
                .map(|f| validation_of(&f.message))
                .collect();
            if !validations.is_empty() {
                refused.push((
                    from.clone(),
                    to.clone(),
                    validations.into_iter().collect::<Vec<_>>(),
                ));
            }
            let warnings: Vec<&str> = r
                .findings
                .iter()
                .filter(|f| {
                    (f.rule == "crd-upgrade" || f.rule == "upgrade-edge")
                        && f.severity == Severity::Warning
                })
                .map(|f| f.message.as_str())
                .collect();
            if to == "authorino-operator/0.4.0" {
                // The API group moved (authorino.3scale.net -> authorino.kuadrant.io): the old
                // CRD stays on the cluster, unowned, with its objects (a warning).
                assert_eq!(warnings.len(), 1, "{warnings:#?}");
                assert!(warnings[0].contains(
                    "authconfigs.authorino.3scale.net of the previous bundle is not shipped"
                ));
            } else {
                assert!(warnings.is_empty(), "{from} -> {to}: {warnings:#?}");
            }
        }
    }
    let want: Vec<(String, String, Vec<&str>)> = OLM_V1_REFUSES
        .iter()
        .map(|(a, b, v)| (a.to_string(), b.to_string(), v.to_vec()))
        .collect();
    assert_eq!(refused, want);
}

/// Turns a published bundle back into what `kubectl kustomize config/manifests` of its project
/// would print: the CSV's deployments and permissions as Deployments, ServiceAccounts,
/// (Cluster)Roles and bindings, the examples as sample CRs, plus the bundle's other manifests.
fn explode(bundle: &Bundle) -> Vec<Manifest> {
    let csv = bundle.csv().unwrap().object.clone();
    let ns = "authorino-operator";
    let mut out = vec![csv.clone()];
    let spec = &csv["spec"]["install"]["spec"];
    let mut accounts = BTreeSet::new();
    for d in spec["deployments"].as_array().unwrap() {
        let mut meta = json!({"name": d["name"], "namespace": ns});
        if let Some(l) = d.get("label") {
            meta["labels"] = l.clone();
        }
        out.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": d["spec"]}));
    }
    for (key, cluster) in [("clusterPermissions", true), ("permissions", false)] {
        for (i, p) in spec[key]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let sa = p["serviceAccountName"].as_str().unwrap();
            accounts.insert(sa.to_string());
            let (role_kind, binding_kind) = if cluster {
                ("ClusterRole", "ClusterRoleBinding")
            } else {
                ("Role", "RoleBinding")
            };
            let name = format!("{sa}-{}-{i}", role_kind.to_lowercase());
            out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role_kind, "metadata": {"name": name, "namespace": ns}, "rules": p["rules"]}));
            out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding_kind, "metadata": {"name": format!("{name}-binding"), "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}));
        }
    }
    for sa in accounts {
        if sa != "default" {
            out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}}));
        }
    }
    for m in &bundle.manifests {
        if m.kind() != "ClusterServiceVersion" {
            out.push(m.object.clone());
        }
    }
    let examples: Value = serde_json::from_str(
        csv["metadata"]["annotations"]["alm-examples"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    out.extend(examples.as_array().unwrap().iter().cloned());
    let scorecard = std::fs::read(bundle.root.join("tests/scorecard/config.yaml")).unwrap();
    out.push(olmkit_core::docs::parse_document("scorecard", &scorecard).unwrap());
    out.into_iter()
        .enumerate()
        .map(|(i, object)| Manifest::new("authorino", i, object))
        .collect()
}

/// Removes the keys in `paths` (JSON pointers) from `v`.
fn without(mut v: Value, paths: &[&str]) -> Value {
    for p in paths {
        let (parent, key) = p.rsplit_once('/').unwrap();
        if let Some(o) = v.pointer_mut(parent).and_then(Value::as_object_mut) {
            o.remove(key);
        }
    }
    v
}

#[test]
fn authorino_0_13_0_regenerated_from_its_own_manifests_matches_the_published_bundle() {
    let dir = fixtures().join("real-bundles/authorino-operator/0.13.0");
    let original = load_bundle_dir(&dir).unwrap();
    let options = GenerateOptions {
        version: Some(semver::Version::new(0, 13, 0)),
        channels: vec!["stable".into()],
        default_channel: Some("stable".into()),
        replaces: Some("authorino-operator.v0.12.0".into()),
        created_at: "2024-10-02T16:41:48Z".into(),
        builder: "operator-sdk-v1.32.0".into(),
        ..Default::default()
    };
    let generated = generate_bundle(
        &GenerateInputs {
            manifests: explode(&original),
            ..Default::default()
        },
        &options,
    )
    .unwrap();
    let regenerated = generated.to_bundle(&dir).unwrap();
    // It validates like the original.
    let r = validate_bundle(&regenerated, None, &ValidateOptions::default());
    assert!(!r.has_errors(), "{}", r.render_text());

    // Same manifest files.
    let names = |b: &Bundle| {
        b.manifests
            .iter()
            .map(|m| m.file.clone())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(names(&regenerated), names(&original));
    // Every non-CSV manifest is the same object (the generator only drops namespaces, and these
    // have none).
    for m in &original.manifests {
        if m.kind() == "ClusterServiceVersion" {
            continue;
        }
        let n = regenerated
            .manifests
            .iter()
            .find(|x| x.file == m.file)
            .unwrap();
        assert_eq!(n.object, m.object, "{}", m.file);
    }

    // The CSV is the same, except for what is explained here:
    // 1. relatedImages: added (the original lists none; OLM and disconnected mirroring need them);
    // 2. the webhook Deployment's cert-manager style `cert` volume is removed, because OLM mounts
    //    its own certificate at /tmp/k8s-webhook-server/serving-certs and the Secret the
    //    original references is never created by the bundle;
    // 3. `metadata.annotations.createdAt`/builder come from the options (set to the original's
    //    values here, so they compare equal).
    let orig_csv = original.csv().unwrap().object.clone();
    let new_csv = regenerated.csv().unwrap().object.clone();
    assert_eq!(
        new_csv["spec"]["relatedImages"],
        json!([
            {"image": "quay.io/kuadrant/authorino-operator:v0.13.0", "name": "manager"},
            {"image": "quay.io/kuadrant/authorino:v0.18.0", "name": "webhooks"},
        ])
    );
    let webhook_pod = "/spec/install/spec/deployments/1/spec/template/spec";
    assert_eq!(
        orig_csv
            .pointer(&format!("{webhook_pod}/volumes/0/name"))
            .unwrap(),
        "cert"
    );
    assert!(new_csv.pointer(&format!("{webhook_pod}/volumes")).is_none());
    assert!(
        new_csv
            .pointer(&format!("{webhook_pod}/containers/0/volumeMounts"))
            .is_none()
    );
    let strip = |v: Value| {
        without(
            v,
            &[
                "/spec/relatedImages",
                "/spec/install/spec/deployments/1/spec/template/spec/volumes",
                "/spec/install/spec/deployments/1/spec/template/spec/containers/0/volumeMounts",
            ],
        )
    };
    let (a, b) = (strip(new_csv), strip(orig_csv));
    let mut diffs = Vec::new();
    diff("", &a, &b, &mut diffs);
    assert!(diffs.is_empty(), "{diffs:#?}");

    // annotations.yaml: the published one also carries a hand-added OpenShift key; everything
    // operator-sdk generated is the same.
    let mut ann = original.annotations.clone();
    assert_eq!(
        ann.remove("com.redhat.openshift.versions").as_deref(),
        Some("v4.12")
    );
    assert_eq!(regenerated.annotations, ann);
    assert!(
        generated
            .files
            .contains_key(Path::new("tests/scorecard/config.yaml"))
    );
}

fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()).collect::<BTreeSet<_>>() {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff(&p, u, v, out),
                    (u, v) => out.push(format!("{p}: {u:?} vs {v:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}/{i}"), u, v, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} vs {b}")),
        _ => {}
    }
}
