//! Bundle generation from the memcached fixture project: snapshots of the generated
//! artifacts, OLM schema conformance, idempotence, preservation of the base CSV's content,
//! and errors that name the input document and field. Then operator-sdk compatibility: each
//! improvement turned off follows operator-sdk's rule, extra service accounts, every kind
//! operator-registry accepts, base and version choice, `upstream_compat` shapes, the sdk file
//! layout and its writer (foreign files and metadata kept).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use olmkit_bundle::Manifest;
use olmkit_bundle::generate::{GenerateBundleError, GenerateInputs, generate_bundle};
use olmkit_bundle::load::load_manifest_stream;
use olmkit_bundle::{ValidateOptions, schemas, validate_bundle};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn file(b: &olmkit_bundle::GeneratedBundle, p: &str) -> String {
    String::from_utf8(b.files[&PathBuf::from(p)].clone()).unwrap()
}

fn csv_of(b: &olmkit_bundle::GeneratedBundle) -> Value {
    olmkit_core::docs::parse_document(
        "csv",
        &b.files[&PathBuf::from("manifests/memcached-operator.clusterserviceversion.yaml")],
    )
    .unwrap()
}

#[test]
fn snapshots_of_generated_artifacts() {
    let b = generated();
    let files: Vec<String> = b.files.keys().map(|p| p.display().to_string()).collect();
    insta::assert_yaml_snapshot!("files", files);
    insta::assert_yaml_snapshot!("notes", b.notes);
    insta::assert_snapshot!(
        "csv",
        file(
            &b,
            "manifests/memcached-operator.clusterserviceversion.yaml"
        )
    );
    insta::assert_snapshot!("annotations", file(&b, "metadata/annotations.yaml"));
    insta::assert_snapshot!("dockerfile", file(&b, "bundle.Dockerfile"));
    insta::assert_snapshot!(
        "webhook_service",
        file(
            &b,
            "manifests/memcached-operator-webhook-service_v1_service.yaml"
        )
    );
}

#[test]
fn generated_csv_matches_olm_csv_crd_schema_and_validates() {
    let b = generated();
    assert_eq!(schemas::validate_csv(&csv_of(&b)).unwrap(), vec![]);
    let report = validate_bundle(&generated_bundle(), None, &ValidateOptions::default());
    assert_eq!(report.findings, vec![], "{}", report.render_text());
}

#[test]
fn csv_content_is_derived_from_the_manifests() {
    let csv = csv_of(&generated());
    assert_eq!(csv["metadata"]["name"], "memcached-operator.v0.1.0");
    assert_eq!(csv["spec"]["version"], "0.1.0");
    assert_eq!(
        csv["metadata"]["annotations"]["createdAt"],
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(
        csv["metadata"]["annotations"]["containerImage"],
        "quay.io/example/memcached-operator:0.1.0"
    );
    // Every served version is owned, newest first, with the base's descriptors kept on v1.
    let owned: Vec<&str> = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["version"].as_str().unwrap())
        .collect();
    assert_eq!(owned, ["v1alpha1", "v1beta1", "v1"]);
    assert_eq!(
        csv["spec"]["customresourcedefinitions"]["owned"][2]["specDescriptors"][0]["path"],
        "replicas"
    );
    // The ClusterRole bound by the ClusterRoleBinding became clusterPermissions, the
    // leader-election Role became permissions; both bindings are gone.
    let install = &csv["spec"]["install"]["spec"];
    assert_eq!(
        install["clusterPermissions"][0]["serviceAccountName"],
        "memcached-operator-controller-manager"
    );
    assert_eq!(
        install["permissions"][0]["rules"][0]["resources"][0],
        "leases"
    );
    // The conversion webhook: CRD → Service → Deployment, port 443 → 9443.
    let w = &csv["spec"]["webhookdefinitions"][0];
    assert_eq!(w["type"], "ConversionWebhook");
    assert_eq!(w["deploymentName"], "memcached-operator-controller-manager");
    assert_eq!(w["containerPort"], 443);
    assert_eq!(w["targetPort"], 9443);
    assert_eq!(w["conversionCRDs"][0], "memcacheds.cache.example.com");
    assert_eq!(w["generateName"], "cmemcacheds.kb.io");
    assert_eq!(w["webhookPath"], "/convert");
    // AllNamespaces forced.
    let modes: Vec<(&str, bool)> = csv["spec"]["installModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["type"].as_str().unwrap(),
                m["supported"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        modes,
        [
            ("OwnNamespace", false),
            ("SingleNamespace", false),
            ("MultiNamespace", false),
            ("AllNamespaces", true)
        ]
    );
    // Every image, named; the operand from RELATED_IMAGE_MEMCACHED.
    assert_eq!(
        csv["spec"]["relatedImages"],
        json!([
            {"image": "quay.io/example/memcached-operator:0.1.0", "name": "manager"},
            {"image": "docker.io/library/memcached:1.6.39-alpine", "name": "memcached"},
        ])
    );
    // WATCH_NAMESPACE wired to OLM's target namespaces; the cert-manager volume removed.
    let ctr = &install["deployments"][0]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        ctr["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['olm.targetNamespaces']"
    );
    assert!(ctr.get("volumeMounts").is_none());
    assert!(
        install["deployments"][0]["spec"]["template"]["spec"]
            .get("volumes")
            .is_none()
    );
}

#[test]
fn operator_service_account_is_not_shipped_and_namespaces_are_stripped() {
    let b = generated();
    assert!(
        !b.files
            .keys()
            .any(|p| p.to_string_lossy().contains("serviceaccount"))
    );
    for (p, bytes) in &b.files {
        if p.starts_with("manifests") {
            let v = olmkit_core::docs::parse_document("x", bytes).unwrap();
            assert!(
                v.pointer("/metadata/namespace").is_none() || v["kind"] == "ClusterServiceVersion",
                "{}",
                p.display()
            );
        }
    }
}

#[test]
fn byte_identical_twice_and_after_a_round_trip_through_disk() {
    let a = generated();
    let b = generated();
    assert_eq!(a, b);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle/memcached-operator/0.1.0");
    olmkit_bundle::write::write_bundle(&out, &a).unwrap();
    let on_disk = olmkit_core::fsio::read_tree(&out).unwrap();
    assert_eq!(on_disk, a.files);
    // Regenerating over the written bundle replaces it with the same bytes.
    olmkit_bundle::write::write_bundle(&out, &b).unwrap();
    assert_eq!(olmkit_core::fsio::read_tree(&out).unwrap(), a.files);
}

#[test]
fn user_edits_of_the_base_csv_are_kept() {
    let mut docs = stream();
    let base = docs
        .iter_mut()
        .find(|d| d.kind() == "ClusterServiceVersion")
        .unwrap();
    let o = &mut base.object;
    o["spec"]["description"] = json!("Edited by hand.");
    o["spec"]["keywords"] = json!(["edited"]);
    o["spec"]["maintainers"] = json!([{"name": "Ann", "email": "ann@example.com"}]);
    o["spec"]["links"] = json!([{"name": "Docs", "url": "https://docs.example.com"}]);
    o["spec"]["icon"] = json!([{"base64data": "aGk=", "mediatype": "image/png"}]);
    o["metadata"]["annotations"]["example.com/custom"] = json!("kept");
    o["metadata"]["labels"]["team"] = json!("cache");
    o["spec"]["customresourcedefinitions"]["owned"][0]["statusDescriptors"][0]["displayName"] =
        json!("Pods");
    assert_eq!(
        o["spec"]["customresourcedefinitions"]["owned"][0]["version"],
        "v1"
    );
    o["spec"]["minKubeVersion"] = json!("1.27.0");
    let csv = csv_of(&generate_with(docs, &options()));
    assert_eq!(csv["spec"]["description"], "Edited by hand.");
    assert_eq!(csv["spec"]["keywords"], json!(["edited"]));
    assert_eq!(csv["spec"]["maintainers"][0]["name"], "Ann");
    assert_eq!(csv["spec"]["links"][0]["url"], "https://docs.example.com");
    assert_eq!(csv["spec"]["icon"][0]["mediatype"], "image/png");
    assert_eq!(csv["metadata"]["annotations"]["example.com/custom"], "kept");
    assert_eq!(csv["metadata"]["labels"]["team"], "cache");
    assert_eq!(csv["spec"]["minKubeVersion"], "1.27.0");
    assert_eq!(
        csv["spec"]["customresourcedefinitions"]["owned"][2]["statusDescriptors"][0]["displayName"],
        "Pods"
    );
}

#[test]
fn flags_set_upgrade_edges_and_channels() {
    let mut o = options();
    o.replaces = Some("memcached-operator.v0.0.9".into());
    o.skips = vec!["memcached-operator.v0.0.8".into()];
    o.skip_range = Some(">=0.0.1 <0.1.0".into());
    o.channels = vec!["stable".into(), "fast".into()];
    o.default_channel = Some("stable".into());
    let b = generate_with(stream(), &o);
    let csv = csv_of(&b);
    assert_eq!(csv["spec"]["replaces"], "memcached-operator.v0.0.9");
    assert_eq!(csv["spec"]["skips"], json!(["memcached-operator.v0.0.8"]));
    assert_eq!(
        csv["metadata"]["annotations"]["olm.skipRange"],
        ">=0.0.1 <0.1.0"
    );
    let ann = file(&b, "metadata/annotations.yaml");
    assert!(ann.contains("operators.operatorframework.io.bundle.channels.v1: stable,fast"));
    assert!(ann.contains("operators.operatorframework.io.bundle.channel.default.v1: stable"));
    let report = validate_bundle(
        &b.to_bundle(Path::new("b")).unwrap(),
        None,
        &ValidateOptions::default(),
    );
    assert!(!report.has_errors(), "{}", report.render_text());

    for (field, bad) in [("skip_range", ">=1.0"), ("replaces", "not a csv")] {
        let mut o = options();
        match field {
            "skip_range" => o.skip_range = Some(bad.into()),
            _ => o.replaces = Some(bad.into()),
        }
        let err = generate_bundle(
            &GenerateInputs {
                manifests: stream(),
                ..Default::default()
            },
            &o,
        )
        .unwrap_err();
        assert!(matches!(err, GenerateBundleError::Option { .. }), "{err}");
        assert!(err.to_string().contains(bad), "{err}");
    }
}

/// `--version` is parsed once, where the flag is read: a leading `v` is dropped, anything but
/// `MAJOR.MINOR.PATCH[-pre][+build]` is an error naming the flag and its text.
#[test]
fn the_version_flag_is_a_semantic_version_with_or_without_v() {
    use olmkit_bundle::generate::parse_version_flag;
    assert_eq!(
        parse_version_flag("v0.2.0-rc.1").unwrap(),
        semver::Version::parse("0.2.0-rc.1").unwrap()
    );
    assert_eq!(
        parse_version_flag("1.2.3").unwrap(),
        semver::Version::new(1, 2, 3)
    );
    for bad in ["1.0", "one", "", "1.2.3.4"] {
        let err = parse_version_flag(bad).unwrap_err();
        assert!(matches!(err, GenerateBundleError::Option { .. }), "{err}");
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        assert!(err.to_string().contains("not a semantic version"), "{err}");
    }
}

fn stream_with(
    edit: impl FnOnce(&mut Vec<Manifest>),
) -> Result<olmkit_bundle::GeneratedBundle, GenerateBundleError> {
    let mut docs = stream();
    edit(&mut docs);
    generate_bundle(
        &GenerateInputs {
            manifests: docs,
            ..Default::default()
        },
        &options(),
    )
}

#[test]
fn errors_name_the_document_and_field() {
    let err = stream_with(|docs| {
        let d = docs.iter_mut().find(|d| d.kind() == "Deployment").unwrap();
        d.object["spec"]["template"]["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("image");
    })
    .unwrap_err();
    let pos = stream()
        .iter()
        .position(|d| d.kind() == "Deployment")
        .unwrap();
    let index = stream()[pos].doc_index + 1;
    assert_eq!(
        err.to_string(),
        format!(
            "<stdin> document {index} (Deployment memcached-operator-controller-manager): spec.template.spec.containers[0].image: is required and must be a non-empty string"
        )
    );

    let err = stream_with(|docs| {
        let d = docs
            .iter_mut()
            .find(|d| d.kind() == "CustomResourceDefinition")
            .unwrap();
        d.object["spec"]["versions"][1]["served"] = json!("yes");
    })
    .unwrap_err();
    assert!(err.to_string().contains("(CustomResourceDefinition memcacheds.cache.example.com): spec.versions[1].served: must be true or false"), "{err}");

    let err = stream_with(|docs| {
        let d = docs.iter_mut().find(|d| d.kind() == "Service").unwrap();
        d.object["spec"]["selector"] = json!({"app": "nothing"});
    })
    .unwrap_err();
    assert!(
        err.to_string().contains(
            "(Service memcached-operator-webhook-service): spec.selector: selects no Deployment"
        ),
        "{err}"
    );

    let err = stream_with(|docs| docs.retain(|d| d.kind() != "Deployment")).unwrap_err();
    assert!(matches!(err, GenerateBundleError::NoDeployment));
    assert!(err.hint().is_some());

    let err = stream_with(|docs| {
        let mut dup = docs
            .iter()
            .find(|d| d.kind() == "ClusterRole")
            .unwrap()
            .clone();
        dup.doc_index = 98;
        dup.object["rules"] = json!([]);
        docs.push(dup);
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("defined twice, differently"),
        "{err}"
    );
    assert!(err.to_string().contains("<stdin> document 99"), "{err}");
}

#[test]
fn admission_webhooks_become_definitions_and_leave_the_service() {
    let mut docs = stream();
    let hook = load_manifest_stream(
        "hooks.yaml",
        br#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: memcached-operator-validating-webhook-configuration
webhooks:
- name: vmemcached.kb.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig:
    service:
      name: memcached-operator-webhook-service
      namespace: memcached-operator-system
      path: /validate-cache-example-com-v1-memcached
  rules:
  - apiGroups: [cache.example.com]
    apiVersions: [v1]
    operations: [CREATE, UPDATE]
    resources: [memcacheds]
"#,
    )
    .unwrap();
    docs.extend(hook);
    let b = generate_with(docs, &options());
    let csv = csv_of(&b);
    let defs = csv["spec"]["webhookdefinitions"].as_array().unwrap();
    assert_eq!(defs.len(), 2);
    let v = defs
        .iter()
        .find(|d| d["type"] == "ValidatingAdmissionWebhook")
        .unwrap();
    assert_eq!(v["generateName"], "vmemcached.kb.io");
    assert_eq!(v["webhookPath"], "/validate-cache-example-com-v1-memcached");
    assert_eq!(v["deploymentName"], "memcached-operator-controller-manager");
    // Port 443 served only webhooks, so OLM's own Service replaces the bundled one.
    assert!(!b.files.contains_key(&PathBuf::from(
        "manifests/memcached-operator-webhook-service_v1_service.yaml"
    )));
    let report = validate_bundle(
        &b.to_bundle(Path::new("b")).unwrap(),
        None,
        &ValidateOptions::default(),
    );
    assert!(!report.has_errors(), "{}", report.render_text());
}

#[test]
fn rbac_not_for_the_operator_stays_a_manifest() {
    let mut docs = stream();
    docs.extend(
        load_manifest_stream(
            "extra.yaml",
            br#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: editors}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: memcached-operator-memcached-editor-role}
subjects:
- {kind: Group, name: cache-editors, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: shared}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: memcached-operator-metrics-reader}
subjects:
- {kind: ServiceAccount, name: memcached-operator-controller-manager, namespace: x}
- {kind: ServiceAccount, name: prometheus, namespace: monitoring}
"#,
        )
        .unwrap(),
    );
    let b = generate_with(docs, &options());
    let names: Vec<String> = b.files.keys().map(|p| p.display().to_string()).collect();
    assert!(
        names.iter().any(|n| n.starts_with("manifests/editors_")),
        "{names:?}"
    );
    // The shared binding keeps only the prometheus subject; the role it references stays.
    let shared = olmkit_core::docs::parse_document(
        "x",
        &b.files[&PathBuf::from(
            "manifests/shared_rbac.authorization.k8s.io_v1_clusterrolebinding.yaml",
        )],
    )
    .unwrap();
    assert_eq!(shared["subjects"].as_array().unwrap().len(), 1);
    assert_eq!(shared["subjects"][0]["name"], "prometheus");
    assert!(
        names.iter().any(|n| n.contains("metrics-reader")),
        "{names:?}"
    );
    let csv = csv_of(&b);
    let rules = csv["spec"]["install"]["spec"]["clusterPermissions"][0]["rules"]
        .as_array()
        .unwrap();
    assert!(rules.iter().any(|r| r["nonResourceURLs"][0] == "/metrics"));
}

#[test]
fn missing_base_csv_gives_a_minimal_valid_csv_with_a_note() {
    let mut docs = stream();
    docs.retain(|d| d.kind() != "ClusterServiceVersion");
    let mut o = options();
    o.package = Some("memcached-operator".into());
    let b = generate_with(docs, &o);
    assert!(
        b.notes.iter().any(|n| n.contains("no base CSV")),
        "{:?}",
        b.notes
    );
    let report = validate_bundle(
        &b.to_bundle(Path::new("b")).unwrap(),
        None,
        &ValidateOptions::default(),
    );
    assert!(!report.has_errors(), "{}", report.render_text());
    let mut docs = stream();
    docs.retain(|d| d.kind() != "ClusterServiceVersion");
    let err = generate_bundle(
        &GenerateInputs {
            manifests: docs,
            ..Default::default()
        },
        &options(),
    )
    .unwrap_err();
    assert!(matches!(err, GenerateBundleError::NoPackage));
}

#[test]
fn committed_stream_is_what_kubectl_kustomize_prints() {
    // The crate tests use the committed `kustomized.yaml`; this keeps it in sync with the
    // fixture project by running the real kustomize.
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(project().join("config/manifests"))
        .output()
        .expect("kubectl (with kustomize) must be installed to run the test suite");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = std::fs::read(project().join("kustomized.yaml")).unwrap();
    assert!(
        out.stdout == committed,
        "regenerate tests/fixtures/bundle/memcached-project/kustomized.yaml with `kubectl kustomize config/manifests`"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-zA-Z0-9./-]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("apiVersion".to_string()),
                        Just("kind".to_string()),
                        Just("metadata".to_string()),
                        Just("spec".to_string()),
                        Just("name".to_string()),
                        "[a-z]{1,8}"
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn arbitrary_bytes_never_panic_and_name_the_input(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            if let Err(e) = load_manifest_stream("fuzz-input", &bytes) {
                prop_assert!(e.to_string().starts_with("fuzz-input"), "{}", e);
            }
        }

        #[test]
        fn arbitrary_yaml_text_never_panics(s in "([a-z]{1,6}: [a-z0-9{}\\[\\],-]{0,8}\n|---\n|- [a-z]{0,4}\n){0,12}") {
            if let Err(e) = load_manifest_stream("fuzz.yaml", s.as_bytes()) {
                prop_assert!(e.to_string().starts_with("fuzz.yaml"), "{}", e);
            }
        }

        #[test]
        fn arbitrary_objects_never_panic_generation(objs in prop::collection::vec(arb_json(), 0..6), keep_stream in any::<bool>()) {
            let mut docs: Vec<Manifest> = if keep_stream { stream() } else { Vec::new() };
            for (i, o) in objs.into_iter().enumerate() {
                docs.push(Manifest::new("fuzz", i, o));
            }
            let _ = generate_bundle(&GenerateInputs { manifests: docs, ..Default::default() }, &options());
        }

        #[test]
        fn arbitrary_bundle_files_never_panic_loading_or_validation(
            csv in arb_json(),
            ann in prop::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut files = std::collections::BTreeMap::new();
            files.insert("manifests/csv.yaml".to_string(), serde_json::to_vec(&csv).unwrap());
            files.insert("metadata/annotations.yaml".to_string(), ann);
            if let Ok(b) = olmkit_bundle::load::bundle_from_files(Path::new("fuzz"), &files) {
                let _ = validate_bundle(&b, Some(&b), &ValidateOptions { suites: [olmkit_bundle::Suite::OperatorHub, olmkit_bundle::Suite::GoodPractices].into(), ..Default::default() });
            }
        }
    }
}

// --- operator-sdk compatibility: settings, improvements, layouts, writing ---

use olmkit_bundle::generate::{
    FileLayout, GenerateOptions, Improvement, Improvements, Settings, generate_bundle_with,
};
use olmkit_bundle::write::{SdkWrite, metadata_exists};

/// A small operator: two containers with RELATED_IMAGE_ variables, a Role bound twice to the
/// operator's account, and a binding shared with another account.
const SMALL: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: op, labels: {app: op}}
spec:
  selector: {matchLabels: {app: op}}
  template:
    metadata: {labels: {app: op}}
    spec:
      serviceAccountName: op-sa
      containers:
      - name: manager
        image: quay.io/x/op:1
        env:
        - {name: RELATED_IMAGE_DB, value: "quay.io/x/db:1"}
        - {name: RELATED_IMAGE_CACHE, value: "quay.io/x/cache:1"}
      - name: sidecar
        image: quay.io/x/side:1
        env:
        - {name: RELATED_IMAGE_DB, value: "quay.io/x/db:2"}
        - {name: RELATED_IMAGE_STORE, value: "quay.io/x/cache:1"}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: op-sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: op-role}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: op-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: op-role}
subjects: [{kind: ServiceAccount, name: op-sa}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: op-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: op-role}
subjects: [{kind: ServiceAccount, name: op-sa}, {kind: ServiceAccount, name: other}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: helper}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: helper-role}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: helper-binding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: helper-role}
subjects: [{kind: ServiceAccount, name: helper, namespace: ns}]
"#;

fn small(settings: &Settings) -> olmkit_bundle::GeneratedBundle {
    let docs = load_manifest_stream("<small>", SMALL.as_bytes()).unwrap();
    generate_bundle_with(
        &GenerateInputs {
            manifests: docs,
            ..Default::default()
        },
        &GenerateOptions {
            package: Some("op".into()),
            ..options()
        },
        settings,
    )
    .unwrap()
}

fn small_csv(b: &olmkit_bundle::GeneratedBundle) -> Value {
    olmkit_core::docs::parse_document(
        "csv",
        &b.files[&PathBuf::from("manifests/op.clusterserviceversion.yaml")],
    )
    .unwrap()
}

fn upstream() -> Settings {
    Settings {
        improvements: Improvements::none(),
        ..Default::default()
    }
}

#[test]
fn improvements_off_follow_operator_sdk_rules() {
    let ours = small(&Settings::default());
    let theirs = small(&upstream());
    let (oc, tc) = (small_csv(&ours), small_csv(&theirs));
    // applyRoles appends the rules of every binding; ours lists them once.
    assert_eq!(
        tc["spec"]["install"]["spec"]["permissions"][0]["rules"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        oc["spec"]["install"]["spec"]["permissions"][0]["rules"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // SplitCSVPermissionsObjects ships the shared binding unmodified and drops its role.
    let binding = |b: &olmkit_bundle::GeneratedBundle| {
        olmkit_core::docs::parse_document(
            "b",
            &b.files
                [&PathBuf::from("manifests/op-b_rbac.authorization.k8s.io_v1_rolebinding.yaml")],
        )
        .unwrap()
    };
    assert_eq!(binding(&theirs)["subjects"].as_array().unwrap().len(), 2);
    assert_eq!(binding(&ours)["subjects"].as_array().unwrap().len(), 1);
    let role = PathBuf::from("manifests/op-role_rbac.authorization.k8s.io_v1_role.yaml");
    assert!(!theirs.files.contains_key(&role));
    assert!(ours.files.contains_key(&role));
    // FindRelatedImages: RELATED_IMAGE_ only; a name for two images gets the container
    // prefix; an image under two names is listed once, unnamed.
    assert_eq!(
        tc["spec"]["relatedImages"],
        json!([
            {"image": "quay.io/x/db:1", "name": "op-manager-db"},
            {"image": "quay.io/x/cache:1", "name": ""},
            {"image": "quay.io/x/db:2", "name": "op-sidecar-db"},
        ])
    );
    assert!(
        oc["spec"]["relatedImages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["image"] == "quay.io/x/side:1")
    );
    assert!(tc["spec"].get("minKubeVersion").is_none());
    assert!(
        tc["metadata"]["annotations"]
            .get("containerImage")
            .is_none()
    );
    assert!(oc["spec"].get("minKubeVersion").is_some());
    // No default channel without --default-channel.
    let ann = |b: &olmkit_bundle::GeneratedBundle| {
        String::from_utf8(b.files[&PathBuf::from("metadata/annotations.yaml")].clone()).unwrap()
    };
    assert!(!ann(&theirs).contains("channel.default"));
    assert!(ann(&ours).contains("channel.default.v1: stable"));
    // Each improvement is named for the command line.
    for i in Improvement::ALL {
        assert_eq!(Improvement::from_name(i.name()), Some(i));
    }
}

#[test]
fn extra_service_accounts_get_csv_permissions_and_are_not_shipped() {
    let plain = small(&Settings::default());
    assert!(
        plain
            .files
            .contains_key(&PathBuf::from("manifests/helper_v1_serviceaccount.yaml"))
    );
    let b = small(&Settings {
        extra_service_accounts: vec!["helper".into()],
        ..Default::default()
    });
    let csv = small_csv(&b);
    let cperms = csv["spec"]["install"]["spec"]["clusterPermissions"]
        .as_array()
        .unwrap();
    assert_eq!(cperms[0]["serviceAccountName"], "helper");
    assert_eq!(cperms[0]["rules"][0]["resources"][0], "secrets");
    for f in [
        "manifests/helper_v1_serviceaccount.yaml",
        "manifests/helper-role_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        "manifests/helper-binding_rbac.authorization.k8s.io_v1_clusterrolebinding.yaml",
    ] {
        assert!(!b.files.contains_key(&PathBuf::from(f)), "{f}");
    }
}

#[test]
fn every_kind_operator_registry_supports_is_kept() {
    let b = stream_with(|docs| {
        for (kind, api) in [
            ("ConsoleLink", "console.openshift.io/v1"),
            ("ConsoleQuickStart", "console.openshift.io/v1"),
            ("ConsoleCLIDownload", "console.openshift.io/v1"),
            ("ConsoleYAMLSample", "console.openshift.io/v1"),
            ("ConsolePlugin", "console.openshift.io/v1"),
            ("NetworkPolicy", "networking.k8s.io/v1"),
            ("PodMonitor", "monitoring.coreos.com/v1"),
            ("PrometheusRule", "monitoring.coreos.com/v1"),
        ] {
            let obj = json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x", "namespace": "ns"}, "spec": {}});
            docs.push(Manifest::new("<extra>", docs.len(), obj));
        }
    })
    .unwrap();
    for f in [
        "x_console.openshift.io_v1_consolelink.yaml",
        "x_console.openshift.io_v1_consolequickstart.yaml",
        "x_console.openshift.io_v1_consoleclidownload.yaml",
        "x_console.openshift.io_v1_consoleyamlsample.yaml",
        "x_console.openshift.io_v1_consoleplugin.yaml",
        "x_networking.k8s.io_v1_networkpolicy.yaml",
        "x_monitoring.coreos.com_v1_podmonitor.yaml",
        "x_monitoring.coreos.com_v1_prometheusrule.yaml",
    ] {
        let text = file(&b, &format!("manifests/{f}"));
        assert!(!text.contains("namespace:"), "{f}: namespace stripped");
    }
}

#[test]
fn version_comes_from_the_base_when_not_given_and_base_is_chosen_by_package() {
    let b = generate_with(
        stream(),
        &GenerateOptions {
            version: None,
            ..options()
        },
    );
    // The fixture's base CSV is memcached-operator.v0.0.0 with no spec.version... or has one.
    let base_version = stream()
        .iter()
        .find(|d| d.kind() == "ClusterServiceVersion")
        .and_then(|d| {
            d.object
                .pointer("/spec/version")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| "0.0.0".into());
    assert_eq!(b.csv_name, format!("memcached-operator.v{base_version}"));

    // Two CSVs in the stream: the one named <package>.* is the base, as in operator-sdk.
    let mut docs = stream();
    let mut other = docs
        .iter()
        .find(|d| d.kind() == "ClusterServiceVersion")
        .unwrap()
        .clone();
    other.object["metadata"]["name"] = json!("someone-else.v1.0.0");
    other.object["spec"]["displayName"] = json!("Not ours");
    docs.insert(0, other);
    let b = generate_bundle(
        &GenerateInputs {
            manifests: docs.clone(),
            ..Default::default()
        },
        &GenerateOptions {
            package: Some("memcached-operator".into()),
            ..options()
        },
    )
    .unwrap();
    assert_ne!(csv_of(&b)["spec"]["displayName"], "Not ours");
    assert!(
        b.notes
            .iter()
            .any(|n| n.contains("ignored") && n.contains("someone-else"))
    );
    // Without a package to choose by, two bases are an error.
    let err = generate_bundle(
        &GenerateInputs {
            manifests: docs,
            ..Default::default()
        },
        &options(),
    )
    .unwrap_err();
    assert!(matches!(err, GenerateBundleError::ManyBaseCsvs(_)), "{err}");
}

#[test]
fn upstream_compat_writes_typed_object_shapes_and_sdk_layout_puts_dockerfile_at_root() {
    let settings = Settings {
        improvements: Improvements::none(),
        upstream_compat: true,
        layout: FileLayout::Sdk {
            copy_dir: "bundle".into(),
        },
        project_layout: Some("go.kubebuilder.io/v4".into()),
        ..Default::default()
    };
    let docs = stream();
    let b = generate_bundle_with(
        &GenerateInputs {
            manifests: docs,
            ..Default::default()
        },
        &options(),
        &settings,
    )
    .unwrap();
    let svc = file(
        &b,
        "manifests/memcached-operator-webhook-service_v1_service.yaml",
    );
    assert!(svc.contains("  creationTimestamp: null\n"), "{svc}");
    assert!(svc.ends_with("status:\n  loadBalancer: {}\n"), "{svc}");
    let crd = file(&b, "manifests/cache.example.com_memcacheds.yaml");
    assert!(crd.contains("status:\n  acceptedNames:\n    kind: \"\"\n    plural: \"\"\n  conditions: null\n  storedVersions: null\n"), "{crd}");
    let csv = csv_of(&b);
    assert_eq!(
        csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["strategy"],
        json!({})
    );
    assert_eq!(
        csv["metadata"]["annotations"]["operators.operatorframework.io/project_layout"],
        "go.kubebuilder.io/v4"
    );
    assert!(!b.files.contains_key(&PathBuf::from("bundle.Dockerfile")));
    let df = String::from_utf8(b.root_files[&PathBuf::from("bundle.Dockerfile")].clone()).unwrap();
    assert!(df.contains("COPY bundle/manifests /manifests/\nCOPY bundle/metadata /metadata/\n"));
    assert!(df.contains(
        "LABEL operators.operatorframework.io.metrics.project_layout=go.kubebuilder.io/v4\n"
    ));
    let ann = file(&b, "metadata/annotations.yaml");
    assert!(
        ann.starts_with("annotations:\n  # Core bundle annotations.\n"),
        "{ann}"
    );
    let sc = file(&b, "tests/scorecard/config.yaml");
    assert!(
        sc.ends_with("storage:\n  spec:\n    mountPath: {}\n"),
        "{sc}"
    );
}

#[test]
fn sdk_write_keeps_foreign_files_and_optionally_the_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let dir = root.join("bundle");
    let settings = Settings {
        layout: FileLayout::Sdk {
            copy_dir: "bundle".into(),
        },
        ..Default::default()
    };
    let b = generate_bundle_with(
        &GenerateInputs {
            manifests: stream(),
            ..Default::default()
        },
        &options(),
        &settings,
    )
    .unwrap();
    assert!(!metadata_exists(&dir).unwrap());
    let w = SdkWrite::new(&b, true);
    w.commit(root, &dir).unwrap();
    assert!(metadata_exists(&dir).unwrap());
    assert!(root.join("bundle.Dockerfile").is_file());
    std::fs::write(dir.join("metadata/properties.yaml"), "properties: []\n").unwrap();
    std::fs::write(
        dir.join("metadata/annotations.yaml"),
        "annotations:\n  a: b\n",
    )
    .unwrap();
    std::fs::write(root.join("bundle.Dockerfile"), "FROM scratch\n").unwrap();
    let keep = SdkWrite::new(&b, false);
    assert!(!keep.root_files.contains_key(Path::new("bundle.Dockerfile")));
    let merged = keep.merged_tree(&dir).unwrap();
    assert!(merged.contains_key(Path::new("metadata/properties.yaml")));
    keep.commit(root, &dir).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("metadata/annotations.yaml")).unwrap(),
        "annotations:\n  a: b\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("bundle.Dockerfile")).unwrap(),
        "FROM scratch\n"
    );
    assert!(dir.join("metadata/properties.yaml").is_file());
    w.commit(root, &dir).unwrap();
    assert_eq!(
        std::fs::read(dir.join("metadata/annotations.yaml")).unwrap(),
        b.files[&PathBuf::from("metadata/annotations.yaml")]
    );
    assert!(dir.join("metadata/properties.yaml").is_file());
}

#[test]
fn unroutable_webhooks_fail_by_default_and_follow_operator_sdk_with_upstream_compat() {
    let add_hook = |docs: &mut Vec<Manifest>| {
        docs.push(Manifest::new(
            "<extra>",
            98,
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "vcfg"},
                "webhooks": [
                    {"name": "vmissing.kb.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                     "clientConfig": {"service": {"name": "gone-service", "namespace": "x", "path": "/validate"}}},
                    {"name": "vurl.kb.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                     "clientConfig": {"url": "https://example.com/validate"}},
                ],
            }),
        ));
    };
    let err = stream_with(add_hook).unwrap_err();
    assert!(
        err.to_string().contains(
            "<extra> document 99 (ValidatingWebhookConfiguration vcfg): webhooks[0].clientConfig.service: Service \"gone-service\" is not in the manifests"
        ),
        "{err}"
    );
    let mut docs = stream();
    add_hook(&mut docs);
    let b = generate_bundle_with(
        &GenerateInputs {
            manifests: docs,
            ..Default::default()
        },
        &options(),
        &Settings {
            upstream_compat: true,
            improvements: Improvements::none(),
            ..Default::default()
        },
    )
    .unwrap();
    let defs = csv_of(&b)["spec"]["webhookdefinitions"].clone();
    let find = |name: &str| {
        defs.as_array()
            .unwrap()
            .iter()
            .find(|d| d["generateName"] == name)
            .cloned()
            .unwrap()
    };
    let missing = find("vmissing.kb.io");
    assert_eq!(missing["deploymentName"], "gone");
    assert_eq!(missing["webhookPath"], "/validate");
    assert!(missing.get("containerPort").is_none());
    let url = find("vurl.kb.io");
    assert!(url.get("deploymentName").is_none());
    assert!(b.notes.iter().any(|n| n.contains("gone-service")));
}
