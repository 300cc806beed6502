//! The manifests `install` generates validate against the real OLM CRD schemas
//! (tests/fixtures/olm-crds for OLM v0, tests/fixtures/cluster/olmv1-crds for OLM v1) and the
//! strict Kubernetes schemas (RBAC, ServiceAccount); unknown fields count as errors, since the
//! API server would silently prune them. Snapshots pin the generated YAML, and the OLM v1
//! support check is run on the real community bundles.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use olmkit_cluster::catalog_view::PackageView;
use olmkit_cluster::install::{InstallRequest, plan_install};
use olmkit_cluster::install_mode::OperatorGroupMode;
use olmkit_cluster::manifests::{Approval, render_yaml};
use olmkit_cluster::olmv1::BundleFacts;
use olmkit_cluster::olmv1::manifests::{V1Params, v1_manifests};
use olmkit_cluster::olmv1::support::check_olmv1_support;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures")
}

/// A CRD's `openAPIV3Schema` as a draft-4 JSON schema: `nullable` becomes a `null` type,
/// `x-kubernetes-*` keywords are dropped, int-or-string accepts both, and objects with declared
/// properties reject unknown ones (the API server would prune them).
fn to_json_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, val) in m {
                if k.starts_with("x-kubernetes-") || k == "description" || k == "default" {
                    continue;
                }
                let val = match k.as_str() {
                    "properties" | "patternProperties" => Value::Object(
                        val.as_object()
                            .unwrap()
                            .iter()
                            .map(|(pk, pv)| (pk.clone(), to_json_schema(pv)))
                            .collect(),
                    ),
                    _ => to_json_schema(val),
                };
                out.insert(k.clone(), val);
            }
            if m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                out.remove("type");
            }
            if m.get("nullable") == Some(&Value::Bool(true)) {
                out.remove("nullable");
                if let Some(Value::String(t)) = out.get("type").cloned() {
                    out.insert("type".into(), serde_json::json!([t, "null"]));
                }
            }
            let preserve =
                m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if out.contains_key("properties")
                && !out.contains_key("additionalProperties")
                && !preserve
            {
                out.insert("additionalProperties".into(), Value::Bool(false));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_json_schema).collect()),
        other => other.clone(),
    }
}

fn crd_schema(path: &Path, version: &str) -> Value {
    let text = std::fs::read(path).unwrap();
    let docs = olmkit_core::docs::parse_documents(&path.display().to_string(), &text).unwrap();
    let crd = &docs[0];
    let v = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .unwrap();
    to_json_schema(&v["schema"]["openAPIV3Schema"])
}

fn kube_schema(file: &str) -> Value {
    let p = fixtures()
        .join("kube-schemas/v1.36.0-standalone-strict")
        .join(file);
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn schema_for(obj: &Value) -> Option<Value> {
    let olm = fixtures().join("olm-crds");
    let v1 = fixtures().join("cluster/olmv1-crds");
    Some(match obj["kind"].as_str().unwrap() {
        "CatalogSource" => crd_schema(
            &olm.join("operators.coreos.com_catalogsources.yaml"),
            "v1alpha1",
        ),
        "Subscription" => crd_schema(
            &olm.join("operators.coreos.com_subscriptions.yaml"),
            "v1alpha1",
        ),
        "OperatorGroup" => crd_schema(&olm.join("operators.coreos.com_operatorgroups.yaml"), "v1"),
        "ClusterCatalog" => crd_schema(
            &v1.join("olm.operatorframework.io_clustercatalogs.yaml"),
            "v1",
        ),
        "ClusterExtension" => crd_schema(
            &v1.join("olm.operatorframework.io_clusterextensions.yaml"),
            "v1",
        ),
        "ServiceAccount" => kube_schema("serviceaccount-v1.json"),
        "ClusterRole" => kube_schema("clusterrole-rbac-v1.json"),
        "ClusterRoleBinding" => kube_schema("clusterrolebinding-rbac-v1.json"),
        "Role" => kube_schema("role-rbac-v1.json"),
        "RoleBinding" => kube_schema("rolebinding-rbac-v1.json"),
        "Namespace" => return None,
        other => panic!("no schema for {other}"),
    })
}

fn assert_valid(objects: &[Value]) {
    let mut checked = 0;
    for obj in objects {
        let Some(schema) = schema_for(obj) else {
            continue;
        };
        let validator = jsonschema::draft4::new(&schema).expect("schema compiles");
        let errors: Vec<String> = validator
            .iter_errors(obj)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} {} is invalid:\n{}",
            obj["kind"],
            obj["metadata"]["name"],
            errors.join("\n")
        );
        checked += 1;
    }
    assert!(checked > 0);
}

fn catalog(package: &str) -> PackageView {
    PackageView::load(&fixtures().join("cluster/catalog"), package).unwrap()
}

fn request(package: &str, channel: Option<&str>) -> InstallRequest {
    InstallRequest {
        catalog_image: "localhost:5000/memcached-catalog:v0.3.0".into(),
        package: package.into(),
        channel: channel.map(String::from),
        namespace: "operators".into(),
        approval: Approval::Automatic,
        starting_csv: None,
        target_namespaces: None,
        catalog_source_name: None,
        subscription_name: None,
        operator_group_name: None,
        display_name: None,
        publisher: None,
        poll_interval: "10m".into(),
        security_context_config: None,
        // These tests check the OperatorGroup too, in namespace operators.
        operator_group_mode: OperatorGroupMode::Create,
    }
}

/// `install --print` knows nothing of the cluster: in `operators` (upstream OLM) and
/// `openshift-operators` (OpenShift), which come with OperatorGroup `global-operators`, it
/// prints none and says so; elsewhere it prints ours; `create`/`skip` force either way.
#[test]
fn printing_for_a_well_known_namespace_leaves_the_operator_group_out() {
    let cat = catalog("memcached-operator");
    let kinds = |req: &InstallRequest| -> (Vec<String>, Vec<String>) {
        let plan = plan_install(req, Some(&cat), None).unwrap();
        let kinds = plan
            .objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect();
        (kinds, plan.notes)
    };
    for ns in ["operators", "openshift-operators"] {
        let mut req = request("memcached-operator", None);
        req.namespace = ns.into();
        req.operator_group_mode = OperatorGroupMode::Auto;
        let (k, notes) = kinds(&req);
        assert_eq!(k, ["Namespace", "CatalogSource", "Subscription"]);
        assert!(
            notes[0].contains("OperatorGroup global-operators"),
            "{notes:?}"
        );
        assert!(
            notes[1].contains("--operator-group-mode create"),
            "{notes:?}"
        );
        req.operator_group_mode = OperatorGroupMode::Create;
        assert!(kinds(&req).0.contains(&"OperatorGroup".to_string()));
    }
    let mut req = request("memcached-operator", None);
    req.namespace = "memcached".into();
    req.operator_group_mode = OperatorGroupMode::Auto;
    assert!(kinds(&req).0.contains(&"OperatorGroup".to_string()));
    req.operator_group_mode = OperatorGroupMode::Skip;
    let (k, notes) = kinds(&req);
    assert!(!k.contains(&"OperatorGroup".to_string()));
    assert!(
        notes.iter().any(|n| n.contains("must have exactly one")),
        "{notes:?}"
    );
    // An operator that global-operators cannot run (OwnNamespace only) is refused, not
    // printed with manifests OLM would not install.
    let own = catalog("ownns-operator");
    let mut req = request("ownns-operator", None);
    req.operator_group_mode = OperatorGroupMode::Auto;
    let err = plan_install(&req, Some(&own), None).unwrap_err();
    assert!(err.to_string().contains("global-operators"), "{err}");
    // Applying with skip into a namespace without one is refused.
    let mut req = request("memcached-operator", None);
    req.operator_group_mode = OperatorGroupMode::Skip;
    let err = plan_install(&req, Some(&cat), Some(&[][..])).unwrap_err();
    assert!(err.to_string().contains("no OperatorGroup"), "{err}");
}

#[test]
fn v0_manifests_validate_against_the_olm_crds() {
    let cat = catalog("memcached-operator");
    let plan = plan_install(&request("memcached-operator", None), Some(&cat), None).unwrap();
    assert_eq!(plan.channel, "stable");
    assert_eq!(
        plan.expected.as_ref().unwrap().first_csv,
        "memcached-operator.v0.3.0"
    );
    assert_valid(&plan.objects);
    insta::assert_snapshot!("v0_all_namespaces", render_yaml(&plan.objects).unwrap());
    insta::assert_snapshot!("v0_all_namespaces_notes", plan.notes.join("\n"));

    // Manual approval, a starting CSV, restricted pods, a digest image.
    let mut req = request("memcached-operator", Some("alpha"));
    req.approval = Approval::Manual;
    req.starting_csv = Some("memcached-operator.v0.1.0".into());
    req.security_context_config = Some("restricted".into());
    req.catalog_image = "localhost:5000/memcached-catalog@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into();
    let plan = plan_install(&req, Some(&cat), None).unwrap();
    assert_valid(&plan.objects);
    assert!(
        plan.notes.iter().any(|n| n.contains("each later upgrade")),
        "{:?}",
        plan.notes
    );
    insta::assert_snapshot!(
        "v0_manual_starting_csv",
        render_yaml(&plan.objects).unwrap()
    );

    // OwnNamespace-only operator: the OperatorGroup targets the install namespace.
    let own = catalog("ownns-operator");
    let plan = plan_install(&request("ownns-operator", None), Some(&own), None).unwrap();
    assert_valid(&plan.objects);
    let og = plan
        .objects
        .iter()
        .find(|o| o["kind"] == "OperatorGroup")
        .unwrap();
    assert_eq!(
        og["spec"]["targetNamespaces"],
        serde_json::json!(["operators"])
    );
}

#[test]
fn v0_planning_refuses_bad_input_before_anything_is_applied() {
    let cat = catalog("memcached-operator");
    let e = plan_install(
        &request("memcached-operator", Some("beta")),
        Some(&cat),
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("channel \"beta\" is not in package memcached-operator"),
        "{e}"
    );
    assert_eq!(e.hint().unwrap(), "use one of: alpha, candidate, stable");

    let mut req = request("memcached-operator", Some("stable"));
    req.starting_csv = Some("memcached-operator.v0.1.0".into());
    let e = plan_install(&req, Some(&cat), None).unwrap_err();
    assert!(e.to_string().contains("is not in channel stable"), "{e}");

    let mut req = request("memcached-operator", Some("stable"));
    req.namespace = "Bad_NS".into();
    let e = plan_install(&req, Some(&cat), None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("--namespace \"Bad_NS\" is not valid"),
        "{e}"
    );

    let mut req = request("memcached-operator", Some("stable"));
    req.poll_interval = "ten minutes".into();
    assert!(plan_install(&req, Some(&cat), None).is_err());

    let mut req = request("memcached-operator", Some("stable"));
    req.target_namespaces = Some(vec!["operators".into()]);
    let e = plan_install(&req, Some(&cat), None).unwrap_err();
    assert!(e.to_string().contains("OwnNamespace"), "{e}");

    // No catalog and no channel: nothing to default to.
    let e = plan_install(&request("memcached-operator", None), None, None).unwrap_err();
    assert!(e.to_string().contains("no --channel given"), "{e}");
}

fn v1_params() -> V1Params {
    V1Params {
        extension_name: "memcached-operator".into(),
        package: "memcached-operator".into(),
        namespace: "memcached-system".into(),
        catalog_name: "memcached-operator-catalog".into(),
        catalog_image: "localhost:5000/memcached-catalog:v0.3.0".into(),
        poll_interval_minutes: Some(10),
        channel: Some("stable".into()),
        version: None,
        service_account: "memcached-operator-installer".into(),
    }
}

#[test]
fn v1_manifests_validate_and_derive_the_installer_rbac() {
    let dir = olmkit_bundle::load_bundle_dir(&fixtures().join("cluster/bundle")).unwrap();
    let facts = BundleFacts::from_bundle_dir(&dir).unwrap();
    let objects = v1_manifests(&v1_params(), &facts);
    assert_valid(&objects);
    insta::assert_snapshot!("v1_memcached", render_yaml(&objects).unwrap());

    let cr = objects.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
    let rules = cr["rules"].as_array().unwrap();
    // Scoped CRD management, finalizer update on the extension, and the CSV's own rules
    // (namespaced permissions promoted cluster-wide under AllNamespaces).
    assert!(
        rules
            .iter()
            .any(|r| r["resources"][0] == "customresourcedefinitions"
                && r["resourceNames"] == serde_json::json!(["memcacheds.cache.example.com"]))
    );
    assert!(
        rules
            .iter()
            .any(|r| r["resources"][0] == "clusterextensions/finalizers")
    );
    assert!(rules.iter().any(|r| r["resources"][0] == "leases"));
    assert!(rules.iter().any(|r| r["resources"][0] == "namespaces"));
    let role = objects.iter().find(|o| o["kind"] == "Role").unwrap();
    let ns_rules = role["rules"].as_array().unwrap();
    assert!(ns_rules.iter().any(|r| r["resources"][0] == "deployments"
        && r["resourceNames"] == serde_json::json!(["memcached-operator-controller-manager"])));
    assert!(
        ns_rules
            .iter()
            .any(|r| r["resources"][0] == "serviceaccounts"
                && r["resourceNames"]
                    == serde_json::json!(["memcached-operator-controller-manager"]))
    );

    let report = check_olmv1_support(&facts);
    assert!(!report.has_errors(), "{}", report.render_text());
    insta::assert_snapshot!("v1_memcached_support", report.render_text());

    // A digest reference cannot be polled (a CEL rule of the ClusterCatalog CRD).
    let mut p = v1_params();
    p.catalog_image = "localhost:5000/memcached-catalog@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into();
    let objects = v1_manifests(&p, &facts);
    let cc = objects
        .iter()
        .find(|o| o["kind"] == "ClusterCatalog")
        .unwrap();
    assert!(
        cc["spec"]["source"]["image"]
            .get("pollIntervalMinutes")
            .is_none()
    );
}

fn real_bundle(operator: &str, version: &str) -> BundleFacts {
    let dir = olmkit_bundle::load_bundle_dir(
        &fixtures().join("real-bundles").join(operator).join(version),
    )
    .unwrap();
    BundleFacts::from_bundle_dir(&dir).unwrap()
}

#[test]
fn olmv1_support_check_on_real_bundles() {
    // node-healthcheck: a dependency (dependencies.yaml) and a validating webhook.
    let nhc = check_olmv1_support(&real_bundle("node-healthcheck-operator", "0.7.0"));
    assert!(nhc.has_errors());
    assert!(nhc.findings.iter().any(|f| f.rule == "olmv1-dependencies"));
    assert!(nhc.findings.iter().any(|f| f.rule == "olmv1-webhooks"));
    insta::assert_snapshot!("olmv1_node_healthcheck", nhc.render_text());

    // authorino: AllNamespaces only, a conversion webhook: installable with a cert provider.
    let auth = check_olmv1_support(&real_bundle("authorino-operator", "0.13.0"));
    assert!(!auth.has_errors(), "{}", auth.render_text());
    assert!(auth.findings.iter().any(|f| f.rule == "olmv1-webhooks"));

    // skupper: plain CSV, AllNamespaces supported: nothing to say.
    let sk = check_olmv1_support(&real_bundle("skupper-operator", "1.8.1"));
    assert!(sk.findings.is_empty(), "{}", sk.render_text());

    // And the generated v1 manifests of every real bundle validate.
    for (op, v) in [
        ("authorino-operator", "0.13.0"),
        ("skupper-operator", "1.8.1"),
        ("node-healthcheck-operator", "0.7.0"),
    ] {
        let facts = real_bundle(op, v);
        let mut p = v1_params();
        p.extension_name = facts.package.clone();
        p.package = facts.package.clone();
        p.service_account = format!("{}-installer", facts.package);
        assert_valid(&v1_manifests(&p, &facts));
    }
}
