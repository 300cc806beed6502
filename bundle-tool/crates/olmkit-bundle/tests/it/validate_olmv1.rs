//! Every OLM v1 support rule (the `olm-v1` suite, `validate::olmv1`), proven by a mutation of
//! the generated memcached bundle that breaks it: the rule fires with its severity, file, field
//! path and message, and the unmutated bundle only gets the certificate-provider warning its
//! conversion webhook calls for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use olmkit_bundle::load::bundle_from_files;
use olmkit_bundle::validate::olmv1::{Olmv1Bundle, Olmv1Property, check_olmv1_support};
use olmkit_core::docs::{parse_document, to_yaml};
use olmkit_core::{Finding, Report, Severity};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

const CSV: &str = "manifests/memcached-operator.clusterserviceversion.yaml";
const CRD: &str = "manifests/cache.example.com_memcacheds.yaml";
const DEPS: &str = "metadata/dependencies.yaml";
const PACKAGE: &str = "memcached-operator";

type Files = BTreeMap<String, Vec<u8>>;

fn files() -> Files {
    common::generated()
        .files
        .into_iter()
        .map(|(p, b)| (p.display().to_string(), b))
        .collect()
}

fn edit(files: &mut Files, path: &str, f: impl FnOnce(&mut Value)) {
    let mut v = parse_document(path, &files[path]).unwrap();
    f(&mut v);
    files.insert(path.to_string(), to_yaml(path, &v).unwrap().into_bytes());
}

fn add(files: &mut Files, path: &str, v: &Value) {
    files.insert(path.to_string(), to_yaml(path, v).unwrap().into_bytes());
}

/// Runs the checks on `files` (a bundle rooted at `b`) with the FBC `properties` a catalog
/// would carry for it.
fn check_with(files: &Files, package: &str, properties: &[(&str, Value)]) -> Report {
    let bundle = bundle_from_files(Path::new("b"), files).unwrap();
    let props = properties
        .iter()
        .map(|(t, v)| Olmv1Property { type_: t, value: v })
        .collect();
    let view = Olmv1Bundle::from_bundle(&bundle, package, props).unwrap();
    check_olmv1_support(&view)
}

fn check(files: &Files) -> Report {
    check_with(files, PACKAGE, &[])
}

/// The finding of `rule` with this severity, file and path whose message contains `needle`.
fn expect<'r>(
    r: &'r Report,
    rule: &str,
    severity: Severity,
    file: &str,
    path: Option<&str>,
    needle: &str,
) -> &'r Finding {
    r.findings
        .iter()
        .find(|f| {
            f.rule == rule
                && f.severity == severity
                && f.file.as_deref() == Some(file)
                && f.path.as_deref() == path
                && f.message.contains(needle)
        })
        .unwrap_or_else(|| {
            panic!(
                "no {severity:?} {rule} at {file}:{path:?} containing {needle:?} in\n{}",
                r.render_text()
            )
        })
}

const WEBHOOK_WARNING: &str = "the bundle defines 1 webhook(s); OLM v1 installs them only with a certificate provider (cert-manager upstream, the service CA on OpenShift); older OLM v1 releases reject such bundles (\"webhookDefinitions are not supported\")";

#[test]
fn the_generated_bundle_only_needs_a_certificate_provider() {
    let r = check(&files());
    assert_eq!(r.findings.len(), 1, "{}", r.render_text());
    let f = expect(
        &r,
        "olmv1-webhooks",
        Severity::Warning,
        CSV,
        Some("spec.webhookdefinitions"),
        WEBHOOK_WARNING,
    );
    assert_eq!(f.message, WEBHOOK_WARNING);
    assert_eq!(
        f.hint.as_deref(),
        Some("install cert-manager on the cluster before the ClusterExtension")
    );
}

#[test]
fn a_bundle_without_a_csv_has_no_view() {
    let mut f = files();
    f.remove(CSV);
    let bundle = bundle_from_files(Path::new("b"), &f).unwrap();
    assert!(Olmv1Bundle::from_bundle(&bundle, PACKAGE, Vec::new()).is_none());
}

#[test]
fn package_name_is_required() {
    let r = check_with(&files(), "", &[]);
    let f = expect(&r, "olmv1-package", Severity::Error, "b", None, "");
    assert_eq!(f.message, "the bundle has no package name");
}

fn set_modes(files: &mut Files, supported: &[&str]) {
    edit(files, CSV, |v| {
        for m in v["spec"]["installModes"].as_array_mut().unwrap() {
            let t = m["type"].as_str().unwrap().to_string();
            m["supported"] = json!(supported.contains(&t.as_str()));
        }
    });
}

#[test]
fn install_modes_need_all_namespaces() {
    // Own/SingleNamespace: installable with a watchNamespace configuration, a warning.
    let mut f = files();
    set_modes(&mut f, &["OwnNamespace", "SingleNamespace"]);
    let r = check(&f);
    let w = expect(
        &r,
        "olmv1-install-modes",
        Severity::Warning,
        CSV,
        Some("spec.installModes"),
        "memcached-operator.v0.1.0 does not support AllNamespaces; OLM v1 installs it only with a watchNamespace configuration",
    );
    assert!(
        w.hint
            .as_deref()
            .unwrap()
            .starts_with("support AllNamespaces")
    );

    // MultiNamespace only: not installable at all.
    let mut f = files();
    set_modes(&mut f, &["MultiNamespace"]);
    let r = check(&f);
    expect(
        &r,
        "olmv1-install-modes",
        Severity::Error,
        CSV,
        Some("spec.installModes"),
        "supports neither AllNamespaces nor Own/SingleNamespace; OLM v1 cannot install it (MultiNamespace is not supported)",
    );

    // A list Go cannot decode counts as no install modes.
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["installModes"][3]["supported"] = json!("true")
    });
    let r = check(&f);
    expect(
        &r,
        "olmv1-install-modes",
        Severity::Error,
        CSV,
        Some("spec.installModes"),
        "supports neither",
    );
}

#[test]
fn declared_dependencies_are_refused() {
    let gvk = json!({"group": "example.com", "kind": "Foo", "version": "v1"});
    let pkg = json!({"packageName": "other", "versionRange": ">=1.0.0"});
    // From the CSV's properties (no dependencies.yaml): reported at the CSV.
    let r = check_with(
        &files(),
        PACKAGE,
        &[
            ("olm.package.required", pkg.clone()),
            ("olm.gvk", gvk.clone()),
        ],
    );
    let f = expect(
        &r,
        "olmv1-dependencies",
        Severity::Error,
        CSV,
        Some("properties"),
        "",
    );
    assert_eq!(
        f.message,
        "OLM v1 does not resolve dependencies; the bundle declares olm.package.required {\"packageName\":\"other\",\"versionRange\":\">=1.0.0\"}"
    );
    assert_eq!(r.findings.len(), 2, "provided GVKs are no dependency");

    // With metadata/dependencies.yaml: reported there.
    let mut f = files();
    add(
        &mut f,
        DEPS,
        &json!({"dependencies": [{"type": "olm.gvk", "value": gvk.clone()}]}),
    );
    let r = check_with(
        &f,
        PACKAGE,
        &[
            ("olm.gvk.required", gvk.clone()),
            ("olm.constraint", json!({"failureMessage": "x"})),
        ],
    );
    expect(
        &r,
        "olmv1-dependencies",
        Severity::Error,
        DEPS,
        Some("dependencies"),
        "declares olm.gvk.required {\"group\":\"example.com\",\"kind\":\"Foo\",\"version\":\"v1\"}",
    );
    expect(
        &r,
        "olmv1-dependencies",
        Severity::Error,
        DEPS,
        Some("dependencies"),
        "declares olm.constraint {\"failureMessage\":\"x\"}",
    );
}

#[test]
fn required_apis_of_the_csv_are_dependencies() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["customresourcedefinitions"]["required"] =
            json!([{"name": "foos.example.com", "kind": "Foo", "version": "v1"}]);
        v["spec"]["apiservicedefinitions"]["required"] =
            json!([{"group": "metrics.example.com", "kind": "Bar", "version": "v1"}]);
    });
    let r = check(&f);
    let crd = expect(
        &r,
        "olmv1-dependencies",
        Severity::Error,
        CSV,
        Some("spec.customresourcedefinitions.required[0]"),
        "",
    );
    assert_eq!(
        crd.message,
        "OLM v1 does not resolve dependencies; the CSV requires Foo (foos.example.com)"
    );
    let api = expect(
        &r,
        "olmv1-dependencies",
        Severity::Error,
        CSV,
        Some("spec.apiservicedefinitions.required[0]"),
        "",
    );
    assert_eq!(
        api.message,
        "OLM v1 does not resolve dependencies; the CSV requires Bar (metrics.example.com)"
    );

    // Already among the properties (as opm renders them): reported once, as a property.
    let r = check_with(
        &f,
        PACKAGE,
        &[
            (
                "olm.gvk.required",
                json!({"group": "example.com", "kind": "Foo", "version": "v1"}),
            ),
            (
                "olm.gvk.required",
                json!({"group": "metrics.example.com", "kind": "Bar", "version": "v1"}),
            ),
        ],
    );
    let deps: Vec<_> = r
        .findings
        .iter()
        .filter(|x| x.rule == "olmv1-dependencies")
        .collect();
    assert_eq!(deps.len(), 2, "{}", r.render_text());
    assert!(deps.iter().all(|x| x.path.as_deref() == Some("properties")));
}

#[test]
fn owned_api_services_are_refused() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["apiservicedefinitions"]["owned"] = json!([
            {"group": "a.example.com", "kind": "A", "name": "as", "version": "v1"},
            {"group": "b.example.com", "kind": "B", "name": "bs", "version": "v1"}
        ]);
    });
    let r = check(&f);
    let x = expect(
        &r,
        "olmv1-apiservices",
        Severity::Error,
        CSV,
        Some("spec.apiservicedefinitions.owned"),
        "",
    );
    assert_eq!(
        x.message,
        "OLM v1 rejects bundles with APIService definitions (\"apiServiceDefintions are not supported\"); this CSV owns 2"
    );
}

#[test]
fn operator_conditions_are_not_provided() {
    const MSG: &str = "the operator uses the OperatorConditions API (operators.coreos.com operatorconditions), which OLM v1 does not provide";
    // A permission on operatorconditions...
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["install"]["spec"]["clusterPermissions"][0]["rules"]
            .as_array_mut()
            .unwrap()
            .push(json!({"apiGroups": ["operators.coreos.com"], "resources": ["operatorconditions/status"], "verbs": ["get"]}));
    });
    let r = check(&f);
    expect(
        &r,
        "olmv1-operator-conditions",
        Severity::Warning,
        CSV,
        Some("spec.install"),
        MSG,
    );
    // ...or a deployment reading OPERATOR_CONDITION_NAME.
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"]
            [0]["env"] = json!([{"name": "OPERATOR_CONDITION_NAME", "value": "x"}]);
    });
    let r = check(&f);
    let w = expect(
        &r,
        "olmv1-operator-conditions",
        Severity::Warning,
        CSV,
        Some("spec.install"),
        MSG,
    );
    assert!(
        w.hint
            .as_deref()
            .unwrap()
            .contains("missing OperatorCondition")
    );
}

#[test]
fn deployment_names_are_unique_subdomains() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        let ds = v["spec"]["install"]["spec"]["deployments"]
            .as_array_mut()
            .unwrap();
        let first = ds[0].clone();
        ds.push(first.clone());
        let mut bad = first.clone();
        bad["name"] = json!("Bad_Name");
        ds.push(bad);
        // `IsDNS1123Subdomain` (which operator-controller calls) limits the whole name to 253
        // characters, not each dot-separated part: a 64-character part is accepted...
        let mut long_part = first.clone();
        long_part["name"] = json!(format!("{}.example", "a".repeat(64)));
        ds.push(long_part);
        // ...and a 254-character name is not.
        let mut too_long = first;
        too_long["name"] = json!(format!("{}.example", "a".repeat(246)));
        ds.push(too_long);
    });
    let r = check(&f);
    expect(
        &r,
        "olmv1-deployments",
        Severity::Error,
        CSV,
        Some("spec.install.spec.deployments[1].name"),
        "cluster service version contains duplicate strategy deployment spec 'memcached-operator-controller-manager'",
    );
    expect(
        &r,
        "olmv1-deployments",
        Severity::Error,
        CSV,
        Some("spec.install.spec.deployments[2].name"),
        "invalid cluster service version strategy deployment name 'Bad_Name': not a DNS-1123 subdomain",
    );
    expect(
        &r,
        "olmv1-deployments",
        Severity::Error,
        CSV,
        Some("spec.install.spec.deployments[4].name"),
        "not a DNS-1123 subdomain",
    );
    assert!(
        !r.findings
            .iter()
            .any(|f| f.path.as_deref() == Some("spec.install.spec.deployments[3].name")),
        "{r:?}"
    );
}

#[test]
fn crds_are_unique_and_owned_ones_shipped() {
    let mut f = files();
    let crd = parse_document(CRD, &f[CRD]).unwrap();
    add(&mut f, "manifests/copy.yaml", &crd);
    edit(&mut f, CSV, |v| {
        let owned = v["spec"]["customresourcedefinitions"]["owned"]
            .as_array_mut()
            .unwrap();
        let mut missing = owned[0].clone();
        missing["name"] = json!("widgets.cache.example.com");
        owned.push(missing);
    });
    let r = check(&f);
    expect(
        &r,
        "olmv1-crds",
        Severity::Error,
        "manifests/copy.yaml",
        None,
        "bundle contains duplicate custom resource definition 'memcacheds.cache.example.com'",
    );
    let owned = r
        .findings
        .iter()
        .find(|x| x.rule == "olmv1-crds" && x.message.contains("widgets.cache.example.com"));
    let owned = owned.unwrap();
    assert_eq!(
        owned.message,
        "cluster service definition references owned custom resource definition 'widgets.cache.example.com' not found in bundle"
    );
    assert!(
        owned
            .path
            .as_deref()
            .unwrap()
            .starts_with("spec.customresourcedefinitions.owned[")
    );
}

#[test]
fn only_the_kinds_olm_v1_installs_may_ship() {
    let mut f = files();
    add(
        &mut f,
        "manifests/pdb.yaml",
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "memcached-pdb"}, "spec": {"minAvailable": 1}}),
    );
    let r = check(&f);
    let x = expect(
        &r,
        "olmv1-unsupported-object",
        Severity::Error,
        "manifests/pdb.yaml",
        None,
        "",
    );
    assert_eq!(
        x.message,
        "bundle contains unsupported resource: Name: memcached-pdb, Kind: PodDisruptionBudget"
    );
    assert_eq!(
        x.hint.as_deref(),
        Some(
            "OLM v1 installs only these kinds from a bundle: ClusterServiceVersion, CustomResourceDefinition, ClusterRole, ClusterRoleBinding, Service, ServiceAccount, Role, RoleBinding, PrometheusRule, ServiceMonitor, Secret, ConfigMap"
        )
    );
}

fn webhook(t: &str, name: &str, deployment: &str) -> Value {
    json!({
        "type": t,
        "generateName": name,
        "deploymentName": deployment,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "containerPort": 443,
    })
}

#[test]
fn conversion_webhooks_need_all_namespaces_only_and_owned_unshared_crds() {
    let mut f = files();
    set_modes(&mut f, &["AllNamespaces", "OwnNamespace"]);
    edit(&mut f, CSV, |v| {
        let hooks = v["spec"]["webhookdefinitions"].as_array_mut().unwrap();
        let mut second = hooks[0].clone();
        second["generateName"] = json!("second.kb.io");
        second["conversionCRDs"] = json!(["memcacheds.cache.example.com", "others.example.com"]);
        hooks.push(second);
    });
    let r = check(&f);
    expect(
        &r,
        "olmv1-webhooks",
        Severity::Error,
        CSV,
        Some("spec.webhookdefinitions[0]"),
        "conversion webhook 'cmemcacheds.kb.io': OLM v1 (like OLM v0) requires a bundle with conversion webhooks to support only AllNamespaces",
    );
    expect(
        &r,
        "olmv1-webhooks",
        Severity::Error,
        CSV,
        Some("spec.webhookdefinitions[1].conversionCRDs"),
        "conversion webhook 'second.kb.io' references custom resource definition 'others.example.com' not owned bundle",
    );
    expect(
        &r,
        "olmv1-webhooks",
        Severity::Error,
        CSV,
        Some("spec.webhookdefinitions"),
        "conversion webhooks [cmemcacheds.kb.io,second.kb.io] reference same custom resource definition 'memcacheds.cache.example.com'",
    );
}

#[test]
fn webhooks_have_unique_valid_names_and_existing_deployments() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        let hooks = v["spec"]["webhookdefinitions"].as_array_mut().unwrap();
        let manager = "memcached-operator-controller-manager";
        hooks.push(webhook("ValidatingAdmissionWebhook", "v.kb.io", manager));
        hooks.push(webhook("ValidatingAdmissionWebhook", "v.kb.io", manager));
        // The same name with another type is fine.
        hooks.push(webhook("MutatingAdmissionWebhook", "v.kb.io", manager));
        hooks.push(webhook("MutatingAdmissionWebhook", "Bad_Name", "gone"));
    });
    let r = check(&f);
    expect(
        &r,
        "olmv1-webhooks",
        Severity::Error,
        CSV,
        Some("spec.webhookdefinitions[2]"),
        "duplicate webhook 'v.kb.io' of type 'ValidatingAdmissionWebhook'",
    );
    expect(
        &r,
        "olmv1-webhooks",
        Severity::Error,
        CSV,
        Some("spec.webhookdefinitions[4].generateName"),
        "webhook of type 'MutatingAdmissionWebhook' has invalid name 'Bad_Name': not a DNS-1123 subdomain",
    );
    expect(
        &r,
        "olmv1-webhooks",
        Severity::Error,
        CSV,
        Some("spec.webhookdefinitions[4].deploymentName"),
        "webhook of type 'MutatingAdmissionWebhook' with name 'Bad_Name' references non-existent deployment 'gone'",
    );
    assert!(
        !r.findings
            .iter()
            .any(|x| x.path.as_deref() == Some("spec.webhookdefinitions[3]")),
        "{}",
        r.render_text()
    );
    expect(
        &r,
        "olmv1-webhooks",
        Severity::Warning,
        CSV,
        Some("spec.webhookdefinitions"),
        "the bundle defines 5 webhook(s)",
    );
}

#[test]
fn admission_webhook_rules_stay_off_olm_and_webhook_configurations() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        let mut hook = webhook(
            "ValidatingAdmissionWebhook",
            "v.kb.io",
            "memcached-operator-controller-manager",
        );
        hook["rules"] = json!([
            {"apiGroups": ["*"], "resources": ["pods"]},
            {"apiGroups": ["olm.operatorframework.io"], "resources": ["clusterextensions"]},
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["ValidatingWebhookConfigurations", "*", "other"]},
        ]);
        // Conversion webhooks have no rules to judge.
        let conversion = &mut v["spec"]["webhookdefinitions"][0];
        conversion["rules"] = json!([{"apiGroups": ["*"], "resources": ["*"]}]);
        v["spec"]["webhookdefinitions"]
            .as_array_mut()
            .unwrap()
            .push(hook);
    });
    let r = check(&f);
    let at = |i: usize| Some(format!("spec.webhookdefinitions[1].rules[{i}]"));
    for (i, msg) in [
        (
            0,
            "webhook \"v.kb.io\" contains forbidden rule: admission webhook rules cannot reference API group \"*\"",
        ),
        (
            1,
            "webhook \"v.kb.io\" contains forbidden rule: admission webhook rules cannot reference API group \"olm.operatorframework.io\"",
        ),
        (
            2,
            "webhook \"v.kb.io\" contains forbidden rule: admission webhook rules cannot reference resource \"ValidatingWebhookConfigurations\" for API group \"admissionregistration.k8s.io\"",
        ),
        (
            2,
            "webhook \"v.kb.io\" contains forbidden rule: admission webhook rules cannot reference resource \"*\" for API group \"admissionregistration.k8s.io\"",
        ),
    ] {
        let x = expect(
            &r,
            "olmv1-webhooks",
            Severity::Error,
            CSV,
            at(i).as_deref(),
            msg,
        );
        assert_eq!(x.message, msg);
    }
    let rule_findings = r
        .findings
        .iter()
        .filter(|x| x.message.contains("forbidden rule"))
        .count();
    assert_eq!(rule_findings, 4, "{}", r.render_text());
}

/// A bundle that does not render cannot be checked further: one `olmv1-render` error, with the
/// file when known (olmkit-catalog's `olmv1` tests drive it from a real bundle directory).
#[test]
fn a_bundle_that_does_not_render_is_one_error() {
    let f = olmkit_bundle::validate::olmv1::render_failed(
        Some("metadata/properties.yaml"),
        "b: metadata/properties.yaml: properties: missing field `type`".into(),
    );
    assert_eq!(f.rule, "olmv1-render");
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.file.as_deref(), Some("metadata/properties.yaml"));
}
