//! Every validation rule, proven by a mutation of the (valid) generated memcached bundle that
//! breaks it: the rule must fire with its severity, file and field path, and the unmutated
//! bundle must produce no finding at all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use olmkit_bundle::load::bundle_from_files;
use olmkit_bundle::{Suite, ValidateOptions, validate_bundle};
use olmkit_core::docs::{parse_document, to_yaml};
use olmkit_core::{Report, Severity};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

const CSV: &str = "manifests/memcached-operator.clusterserviceversion.yaml";
const CRD: &str = "manifests/cache.example.com_memcacheds.yaml";
const SVC: &str = "manifests/memcached-operator-webhook-service_v1_service.yaml";
const ANN: &str = "metadata/annotations.yaml";

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

fn add(files: &mut Files, path: &str, v: Value) {
    files.insert(path.to_string(), to_yaml(path, &v).unwrap().into_bytes());
}

fn run_with(files: &Files, previous: Option<&Files>, suites: &[Suite]) -> Report {
    let b = bundle_from_files(Path::new("b"), files).unwrap();
    let p = previous.map(|p| bundle_from_files(Path::new("p"), p).unwrap());
    validate_bundle(
        &b,
        p.as_ref(),
        &ValidateOptions {
            suites: suites.iter().copied().collect(),
            ..Default::default()
        },
    )
}

/// Runs the default suite plus `strict`, so that bundle-tool's own checks (warnings without
/// it) show as errors; upstream's errors are errors either way.
/// `stricter_rules_are_warnings_by_default` covers the default severities.
fn run(files: &Files) -> Report {
    run_with(files, None, &[Suite::Strict])
}

fn run_default(files: &Files) -> Report {
    run_with(files, None, &[])
}

#[track_caller]
fn expect(report: &Report, rule: &str, severity: Severity, file: &str, path_prefix: &str) {
    let hit = report.findings.iter().any(|f| {
        f.rule == rule
            && f.severity == severity
            && f.file.as_deref() == Some(file)
            && f.path.as_deref().unwrap_or("").starts_with(path_prefix)
    });
    assert!(
        hit,
        "expected {severity}[{rule}] {file}: {path_prefix}..., got:\n{}",
        report.render_text()
    );
}

#[test]
fn the_generated_bundle_is_clean_in_every_suite() {
    let r = run_with(
        &files(),
        Some(&files()),
        &[Suite::OperatorHub, Suite::GoodPractices],
    );
    // `upgrade-edge` is the only thing to say: the same bundle twice is no upgrade.
    assert!(
        r.findings.iter().all(|f| f.rule == "upgrade-edge"),
        "{}",
        r.render_text()
    );
    let r = run(&files());
    assert!(r.findings.is_empty(), "{}", r.render_text());
}

#[test]
fn annotations_and_dockerfile() {
    let mut f = files();
    f.remove(ANN);
    expect(&run(&f), "bundle-annotations", Severity::Error, ANN, "");

    let mut f = files();
    edit(&mut f, ANN, |v| {
        v["annotations"]["operators.operatorframework.io.bundle.mediatype.v1"] = json!("plain");
        v["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("operators.operatorframework.io.bundle.channels.v1");
    });
    let r = run(&f);
    expect(
        &r,
        "bundle-annotations",
        Severity::Error,
        ANN,
        "annotations.operators.operatorframework.io.bundle.mediatype.v1",
    );
    expect(
        &r,
        "bundle-annotations",
        Severity::Error,
        ANN,
        "annotations.operators.operatorframework.io.bundle.channels.v1",
    );

    let mut f = files();
    edit(&mut f, ANN, |v| {
        v["annotations"]["operators.operatorframework.io.bundle.channel.default.v1"] = json!("fast")
    });
    let r = run(&f);
    expect(
        &r,
        "bundle-default-channel",
        Severity::Error,
        ANN,
        "annotations.operators.operatorframework.io.bundle.channel.default.v1",
    );
    // The Dockerfile still says stable: the labels disagree with the annotations.
    expect(
        &r,
        "dockerfile-labels",
        Severity::Error,
        "bundle.Dockerfile",
        "LABEL operators.operatorframework.io.bundle.channel.default.v1",
    );

    let mut f = files();
    let df = String::from_utf8(f["bundle.Dockerfile"].clone()).unwrap();
    f.insert(
        "bundle.Dockerfile".into(),
        df.replace("COPY manifests /manifests/", "COPY manifestz /manifests/")
            .into_bytes(),
    );
    expect(
        &run(&f),
        "dockerfile-copy",
        Severity::Warning,
        "bundle.Dockerfile",
        "COPY manifestz",
    );
    // operator-sdk's own layout builds from the project root: `bundle/manifests` resolves.
    let mut f = files();
    f.insert(
        "bundle.Dockerfile".into(),
        df.replace(
            "COPY manifests /manifests/",
            "COPY bundle/manifests /manifests/",
        )
        .into_bytes(),
    );
    assert!(
        run(&f).findings.iter().all(|x| x.rule != "dockerfile-copy"),
        "{}",
        run(&f).render_text()
    );
}

#[test]
fn manifests_kinds_metadata_namespace_sizes_and_removed_apis() {
    let mut f = files();
    add(
        &mut f,
        "manifests/d.yaml",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
    );
    add(
        &mut f,
        "manifests/cm.yaml",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name", "namespace": "x"}}),
    );
    add(
        &mut f,
        "manifests/nokind.yaml",
        json!({"apiVersion": "v1", "metadata": {"name": "x"}}),
    );
    let r = run(&f);
    expect(
        &r,
        "manifest-kind",
        Severity::Error,
        "manifests/d.yaml",
        "kind",
    );
    expect(
        &r,
        "manifest-metadata",
        Severity::Error,
        "manifests/cm.yaml",
        "metadata.name",
    );
    expect(
        &r,
        "manifest-namespace",
        Severity::Warning,
        "manifests/cm.yaml",
        "metadata.namespace",
    );
    expect(
        &r,
        "manifest-metadata",
        Severity::Error,
        "manifests/nokind.yaml",
        "kind",
    );

    let mut f = files();
    add(
        &mut f,
        "manifests/pdb.yaml",
        json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}, "spec": {"minAvailable": 1}}),
    );
    expect(
        &run(&f),
        "deprecated-api",
        Severity::Warning,
        "manifests/pdb.yaml",
        "apiVersion",
    );
    edit(&mut f, CSV, |v| {
        v["spec"]["minKubeVersion"] = json!("1.25.0")
    });
    expect(
        &run(&f),
        "deprecated-api",
        Severity::Error,
        "manifests/pdb.yaml",
        "apiVersion",
    );

    // Incompressible data: a pseudo-random hex blob.
    let mut x: u64 = 0x2545F4914F6CDD1D;
    let mut blob = |n: usize| -> String {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from_digit((x % 16) as u32, 16).unwrap_or('0')
            })
            .collect()
    };
    let mut f = files();
    add(
        &mut f,
        "manifests/big.yaml",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"x": blob(1_100_000)}}),
    );
    expect(
        &run(&f),
        "manifest-size",
        Severity::Error,
        "manifests/big.yaml",
        "",
    );
    let mut f = files();
    for i in 0..9 {
        add(
            &mut f,
            &format!("manifests/part{i}.yaml"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("part{i}")}, "data": {"x": blob(1_000_000)}}),
        );
    }
    let r = run(&f);
    expect(&r, "bundle-size", Severity::Error, "manifests/", "");
    assert!(
        !r.findings.iter().any(|f| f.rule == "manifest-size"),
        "{}",
        r.render_text()
    );
}

#[test]
fn csv_presence_schema_names_and_versions() {
    let mut f = files();
    f.remove(CSV);
    expect(&run(&f), "csv-missing", Severity::Error, "manifests/", "");

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["installModes"][0]["supported"] = json!("yes")
    });
    expect(
        &run(&f),
        "csv-schema",
        Severity::Error,
        CSV,
        "spec.installModes[0].supported",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["metadata"]["name"] = json!("Memcached_Operator")
    });
    expect(&run(&f), "csv-name", Severity::Error, CSV, "metadata.name");

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["metadata"]["name"] = json!(format!("{}.v0.1.0", "m".repeat(60)))
    });
    expect(&run(&f), "csv-name", Severity::Error, CSV, "metadata.name");

    let mut f = files();
    edit(&mut f, CSV, |v| v["spec"]["version"] = json!("one"));
    expect(
        &run(&f),
        "csv-version",
        Severity::Error,
        CSV,
        "spec.version",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| v["spec"]["version"] = json!("0.2.0"));
    expect(
        &run(&f),
        "csv-version",
        Severity::Warning,
        CSV,
        "spec.version",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["metadata"]["name"] = json!("other.v0.1.0")
    });
    expect(
        &run(&f),
        "csv-package",
        Severity::Warning,
        CSV,
        "metadata.name",
    );
}

#[test]
fn csv_upgrade_fields_annotations_and_min_kube() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["replaces"] = json!("other-operator.v0.0.1");
        v["spec"]["skips"] = json!(["other-operator.v0.0.2", ""]);
        v["metadata"]["annotations"]["olm.skipRange"] = json!(">=0.0.1 <0.1");
        v["metadata"]["annotations"]["olm.skiprange"] = json!(">=0.0.1 <0.1.0");
        v["metadata"]["annotations"]["olm.properties"] = json!("[]");
        v["spec"]["minKubeVersion"] = json!("latest");
    });
    let r = run(&f);
    // CSV names need not start with the package name: another operator name is a warning.
    expect(&r, "csv-replaces", Severity::Warning, CSV, "spec.replaces");
    expect(&r, "csv-skips", Severity::Warning, CSV, "spec.skips[0]");
    expect(&r, "csv-skips", Severity::Error, CSV, "spec.skips[1]");
    expect(
        &r,
        "csv-skip-range",
        Severity::Error,
        CSV,
        "metadata.annotations.olm.skipRange",
    );
    expect(
        &r,
        "csv-annotations",
        Severity::Error,
        CSV,
        "metadata.annotations.olm.skiprange",
    );
    expect(
        &r,
        "csv-annotations",
        Severity::Warning,
        CSV,
        "metadata.annotations.olm.properties",
    );
    expect(
        &r,
        "csv-min-kube-version",
        Severity::Error,
        CSV,
        "spec.minKubeVersion",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["replaces"] = json!("memcached-operator.v0.1.0")
    });
    expect(
        &run(&f),
        "csv-replaces",
        Severity::Error,
        CSV,
        "spec.replaces",
    );
}

#[test]
fn csv_install_modes_examples_required_owned_and_webhooks() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["installModes"][0]["supported"] = json!(true)
    });
    expect(
        &run(&f),
        "csv-install-modes",
        Severity::Error,
        CSV,
        "spec.installModes",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| v["spec"]["installModes"] = json!([]));
    expect(
        &run(&f),
        "csv-install-modes",
        Severity::Error,
        CSV,
        "spec.installModes",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["metadata"]["annotations"]["alm-examples"] = json!("[{")
    });
    expect(
        &run(&f),
        "csv-examples",
        Severity::Error,
        CSV,
        "metadata.annotations.alm-examples",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["metadata"]["annotations"]["alm-examples"] =
            json!(r#"[{"apiVersion": "cache.example.com/v2", "kind": "Memcached"}]"#)
    });
    let r = run(&f);
    expect(
        &r,
        "csv-examples",
        Severity::Error,
        CSV,
        "metadata.annotations.alm-examples[0]",
    );
    expect(
        &r,
        "csv-examples",
        Severity::Warning,
        CSV,
        "metadata.annotations.alm-examples",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["displayName"] = json!("");
        v["spec"]["install"]["strategy"] = json!("helm");
    });
    let r = run(&f);
    expect(&r, "csv-required", Severity::Error, CSV, "spec.displayName");
    expect(
        &r,
        "csv-required",
        Severity::Error,
        CSV,
        "spec.install.strategy",
    );
    // operator-sdk's own required fields are errors without strict too.
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v.as_object_mut().unwrap().remove("apiVersion");
        v["spec"]["install"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("deployments");
    });
    let r = run_default(&f);
    expect(&r, "csv-required", Severity::Error, CSV, "apiVersion");
    expect(
        &r,
        "csv-required",
        Severity::Error,
        CSV,
        "spec.install.spec.deployments",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        let owned = v["spec"]["customresourcedefinitions"]["owned"]
            .as_array_mut()
            .unwrap();
        owned.pop();
        owned.push(json!({"name": "foos.example.com", "version": "v1", "kind": "Foo", "displayName": "Foo", "description": "f"}));
    });
    let r = run(&f);
    expect(
        &r,
        "csv-owned-crds",
        Severity::Error,
        CSV,
        "spec.customresourcedefinitions.owned[2]",
    );
    expect(
        &r,
        "csv-owned-crds",
        Severity::Warning,
        CSV,
        "spec.customresourcedefinitions.owned",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["customresourcedefinitions"] = json!({})
    });
    // operator-framework/api validateOwnedCRDs: a shipped CRD the CSV does not own.
    expect(&run_default(&f), "csv-owned-crds", Severity::Error, CRD, "");

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["webhookdefinitions"][0]["deploymentName"] = json!("nope");
        v["spec"]["webhookdefinitions"].as_array_mut().unwrap().push(json!({
            "type": "ValidatingAdmissionWebhook", "generateName": "vall.kb.io",
            "deploymentName": "memcached-operator-controller-manager", "containerPort": 443,
            "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["*"]}]
        }));
    });
    let r = run(&f);
    expect(
        &r,
        "csv-webhooks",
        Severity::Error,
        CSV,
        "spec.webhookdefinitions[0].deploymentName",
    );
    expect(
        &r,
        "csv-webhooks",
        Severity::Error,
        CSV,
        "spec.webhookdefinitions[1].rules[0]",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["webhookdefinitions"][0]["conversionCRDs"] = json!(["foos.example.com"])
    });
    let r = run(&f);
    expect(
        &r,
        "csv-webhooks",
        Severity::Error,
        CSV,
        "spec.webhookdefinitions[0].conversionCRDs[0]",
    );
    expect(
        &r,
        "crd-conversion",
        Severity::Error,
        CRD,
        "spec.conversion.strategy",
    );
}

#[test]
fn crds_and_kube_schemas() {
    let mut f = files();
    edit(&mut f, CRD, |v| v["spec"]["scope"] = json!(5));
    expect(&run(&f), "crd-schema", Severity::Error, CRD, "spec.scope");

    let mut f = files();
    edit(&mut f, CRD, |v| {
        v["spec"]["versions"][0]["storage"] = json!(true)
    });
    expect(
        &run(&f),
        "crd-versions",
        Severity::Error,
        CRD,
        "spec.versions",
    );

    let mut f = files();
    edit(&mut f, CRD, |v| {
        v["metadata"]["name"] = json!("memcached.cache.example.com")
    });
    expect(
        &run(&f),
        "crd-versions",
        Severity::Error,
        CRD,
        "metadata.name",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]
            .as_object_mut()
            .unwrap()
            .remove("webhookdefinitions");
    });
    expect(
        &run(&f),
        "crd-conversion",
        Severity::Error,
        CRD,
        "spec.conversion.strategy",
    );

    // apiextensions' own spec validation, as operator-sdk runs it: errors by default.
    let mut f = files();
    edit(&mut f, CRD, |v| {
        v["spec"]["scope"] = json!("Global");
        v["spec"]["names"]["shortNames"] = json!(["Mc"]);
    });
    let r = run_default(&f);
    expect(&r, "crd-versions", Severity::Error, CRD, "spec.scope");
    expect(
        &r,
        "crd-versions",
        Severity::Error,
        CRD,
        "spec.names.shortNames[0]",
    );

    let mut f = files();
    edit(&mut f, SVC, |v| v["spec"]["ports"] = json!("443"));
    expect(&run(&f), "kube-schema", Severity::Error, SVC, "spec.ports");
    // Go drops unknown fields when it decodes: a warning even when strict.
    let mut f = files();
    edit(&mut f, SVC, |v| v["spec"]["portz"] = json!([]));
    expect(&run(&f), "kube-schema", Severity::Warning, SVC, "spec");
    assert!(!run(&f).has_errors(), "{}", run(&f).render_text());
}

#[test]
fn install_deployments_service_accounts_and_permissions() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["install"]["spec"]["deployments"][0]["spec"]["selector"]["matchLabels"] =
            json!({"control-plane": "other"})
    });
    expect(
        &run(&f),
        "install-deployments",
        Severity::Error,
        CSV,
        "spec.install.spec.deployments[0].spec.selector.matchLabels.control-plane",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"]
            [0]["ports"][0]["containerPort"] = json!("x")
    });
    expect(
        &run(&f),
        "install-deployments",
        Severity::Error,
        CSV,
        "spec.install.spec.deployments[0].spec.template.spec.containers[0].ports[0].containerPort",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["install"]["spec"]["deployments"] = json!([])
    });
    expect(
        &run(&f),
        "install-deployments",
        Severity::Error,
        CSV,
        "spec.install.spec.deployments",
    );

    let mut f = files();
    add(
        &mut f,
        "manifests/sa.yaml",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "memcached-operator-controller-manager"}}),
    );
    expect(
        &run(&f),
        "install-service-accounts",
        Severity::Error,
        "manifests/sa.yaml",
        "metadata.name",
    );

    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["serviceAccountName"] =
            json!("ghost")
    });
    let r = run(&f);
    expect(
        &r,
        "install-service-accounts",
        Severity::Error,
        CSV,
        "spec.install.spec.deployments",
    );
    expect(
        &r,
        "install-permissions",
        Severity::Warning,
        CSV,
        "spec.install.spec.permissions[0].serviceAccountName",
    );
}

#[test]
fn optional_suites() {
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"].as_object_mut().unwrap().remove("provider");
        v["metadata"]["annotations"]["categories"] = json!("Bogus");
        v["metadata"]["annotations"]["capabilities"] = json!("Magic");
        v["spec"]["maintainers"][0]["email"] = json!("not-an-email");
        v["spec"]["links"][0]["url"] = json!("example dot com");
        v["spec"]["icon"][0]["mediatype"] = json!("image/bmp");
    });
    edit(&mut f, ANN, |v| {
        v["annotations"]["operators.operatorframework.io.bundle.channels.v1"] = json!("alpha");
        v["annotations"]["operators.operatorframework.io.bundle.channel.default.v1"] =
            json!("alpha");
    });
    // Keep the Dockerfile in line so only the suites speak.
    let df = String::from_utf8(f["bundle.Dockerfile"].clone())
        .unwrap()
        .replace("=stable", "=alpha");
    f.insert("bundle.Dockerfile".into(), df.into_bytes());
    assert!(run(&f).findings.is_empty(), "{}", run(&f).render_text());
    let r = run_with(&f, None, &[Suite::OperatorHub]);
    expect(
        &r,
        "operatorhub",
        Severity::Error,
        CSV,
        "spec.provider.name",
    );
    expect(
        &r,
        "operatorhub",
        Severity::Error,
        CSV,
        "metadata.annotations.categories",
    );
    expect(
        &r,
        "operatorhub",
        Severity::Error,
        CSV,
        "metadata.annotations.capabilities",
    );
    expect(
        &r,
        "operatorhub",
        Severity::Error,
        CSV,
        "spec.maintainers[0].email",
    );
    expect(&r, "operatorhub", Severity::Error, CSV, "spec.links[0].url");
    expect(
        &r,
        "operatorhub",
        Severity::Error,
        CSV,
        "spec.icon[0].mediatype",
    );
    expect(&r, "operatorhub", Severity::Warning, ANN, "annotations");
    assert!(!r.findings.iter().any(|f| f.rule == "good-practices"));

    let mut f = files();
    edit(&mut f, CSV, |v| {
        let c = &mut v["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"]
            [0];
        c.as_object_mut().unwrap().remove("resources");
        v["spec"]["customresourcedefinitions"]["owned"][1]
            .as_object_mut()
            .unwrap()
            .remove("description");
    });
    let r = run_with(&f, None, &[Suite::GoodPractices]);
    expect(
        &r,
        "good-practices",
        Severity::Warning,
        CSV,
        "spec.install.spec.deployments[0].spec.template.spec.containers[0].resources.requests",
    );
    expect(
        &r,
        "good-practices",
        Severity::Warning,
        CSV,
        "spec.customresourcedefinitions.owned[1].description",
    );
}

#[test]
fn upgrade_from_a_previous_bundle() {
    let previous = files();
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["metadata"]["name"] = json!("memcached-operator.v0.2.0");
        v["spec"]["version"] = json!("0.2.0");
        v["spec"]["replaces"] = json!("memcached-operator.v0.1.0");
    });
    let r = run_with(&f, Some(&previous), &[]);
    assert!(r.findings.is_empty(), "{}", r.render_text());

    // Drop the v1 storage version and v1alpha1 (served); tighten v1beta1.
    let mut bad = f.clone();
    edit(&mut bad, CRD, |v| {
        let versions = v["spec"]["versions"].as_array_mut().unwrap();
        versions.retain(|x| x["name"] == "v1beta1");
        versions[0]["storage"] = json!(true);
        let spec = &mut versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["required"] = json!(["replicas"]);
        spec["properties"]["replicas"]["maximum"] = json!(3);
    });
    edit(&mut bad, CSV, |v| {
        v["spec"]["customresourcedefinitions"]["owned"]
            .as_array_mut()
            .unwrap()
            .retain(|o| o["version"] == "v1beta1");
        v["metadata"]["annotations"]["alm-examples"] = json!("[]");
    });
    let r = run_with(&bad, Some(&previous), &[]);
    let msgs = r.render_text();
    expect(&r, "crd-upgrade", Severity::Error, CRD, "spec.versions");
    // OLM v1's CRD upgrade safety (operator-controller crdupgradesafety) refuses all of these.
    assert!(
        msgs.contains("storedVersionRemoval: stored versions removed : [v1]"),
        "{msgs}"
    );
    assert!(msgs.contains("removes served version v1alpha1"), "{msgs}");
    assert!(
        msgs.contains("v1beta1: ^.spec: required: new required fields: [replicas]"),
        "{msgs}"
    );
    assert!(
        msgs.contains("v1beta1: ^.spec.replicas: maximum: maximum decreased : 1000 -> 3"),
        "{msgs}"
    );
    expect(
        &r,
        "crd-upgrade",
        Severity::Error,
        CRD,
        "spec.versions[0].schema.openAPIV3Schema",
    );

    let mut no_edge = f.clone();
    edit(&mut no_edge, CSV, |v| {
        v["spec"].as_object_mut().unwrap().remove("replaces");
    });
    expect(
        &run_with(&no_edge, Some(&previous), &[]),
        "upgrade-edge",
        Severity::Warning,
        CSV,
        "spec.replaces",
    );
    let r = run_with(&previous, Some(&f), &[]);
    expect(&r, "upgrade-edge", Severity::Error, CSV, "spec.version");
}

#[test]
fn a_folder_inside_manifests_is_an_error_as_upstream() {
    let mut f = files();
    add(
        &mut f,
        "manifests/extra/cm.yaml",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}),
    );
    expect(
        &run_default(&f),
        "manifest-kind",
        Severity::Error,
        "manifests/extra",
        "",
    );
    // A ServiceMonitor name longer than 63 characters is a valid DNS-1123 subdomain.
    let mut f = files();
    let long = "global-load-balancer-operator-controller-manager-metrics-monitor";
    add(
        &mut f,
        "manifests/sm.yaml",
        json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
               "metadata": {"name": long}, "spec": {"endpoints": []}}),
    );
    let r = run(&f);
    assert!(
        r.findings.iter().all(|x| x.rule != "manifest-metadata"),
        "{}",
        r.render_text()
    );
}

#[test]
fn stricter_rules_are_warnings_by_default() {
    // Things operator-sdk accepts: warnings by default, errors only with suite=strict.
    let mut f = files();
    edit(&mut f, ANN, |v| {
        v["annotations"]["operators.operatorframework.io.bundle.channel.default.v1"] = json!("fast")
    });
    edit(&mut f, CSV, |v| {
        v["metadata"]["annotations"]["olm.skipRange"] = json!("<=v0.0.1");
        // Decodes (a string would not: operator-framework/api's loader decodes the CSV into the
        // typed ClusterServiceVersion and fails), but the API server would refuse it.
        v["spec"]["install"]["spec"]["deployments"][0]["spec"]["replicas"] = json!(-2);
    });
    let r = run_default(&f);
    assert!(!r.has_errors(), "{}", r.render_text());
    for (rule, file, path) in [
        ("bundle-default-channel", ANN, "annotations."),
        ("dockerfile-labels", "bundle.Dockerfile", "LABEL "),
        ("csv-skip-range", CSV, "metadata.annotations.olm.skipRange"),
        (
            "install-deployments",
            CSV,
            "spec.install.spec.deployments[0]",
        ),
    ] {
        expect(&r, rule, Severity::Warning, file, path);
        expect(&run(&f), rule, Severity::Error, file, path);
    }
}

#[test]
fn yaml_only_go_reads_is_a_warning_with_file_and_line() {
    let mut f = files();
    let csv = String::from_utf8(f[CSV].clone()).unwrap();
    // A duplicate key: Go's decoder keeps the last value, and so do we.
    let dup = csv.replacen(
        "kind: ClusterServiceVersion\n",
        "kind: ClusterServiceVersion\nkind: ClusterServiceVersion\n",
        1,
    );
    f.insert(CSV.into(), dup.into_bytes());
    let r = run_default(&f);
    assert!(!r.has_errors(), "{}", r.render_text());
    expect(&r, "yaml-syntax", Severity::Warning, CSV, "line ");
}

#[test]
fn removed_apis_in_the_operatorhub_suite() {
    let mut f = files();
    add(
        &mut f,
        "manifests/pdb.yaml",
        json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "pdb"}, "spec": {"minAvailable": 1}}),
    );
    edit(&mut f, CSV, |v| {
        v["spec"]["install"]["spec"]["clusterPermissions"][0]["rules"]
            .as_array_mut()
            .unwrap()
            .push(json!({"apiGroups": ["policy"], "resources": ["podsecuritypolicies"], "verbs": ["use"]}));
    });
    let r = run_with(&f, None, &[Suite::OperatorHub]);
    expect(&r, "removed-api", Severity::Warning, CSV, "");
    assert!(!r.has_errors(), "{}", r.render_text());
    // Targeting 1.25 (operator-sdk --optional-values k8s-version=1.25) makes the object an
    // error; the permission rule stays a warning, as upstream.
    let b = bundle_from_files(Path::new("b"), &f).unwrap();
    let options = ValidateOptions {
        suites: [Suite::OperatorHub].into(),
        k8s_version: Some("1.25".into()),
        ..Default::default()
    };
    let r = validate_bundle(&b, None, &options);
    expect(&r, "removed-api", Severity::Error, CSV, "");
    expect(
        &r,
        "removed-api",
        Severity::Warning,
        CSV,
        "spec.install.spec",
    );
    assert!(
        r.findings
            .iter()
            .any(|x| x.message.contains("podsecuritypolicies: ([\"ClusterServiceVersion.Spec.InstallStrategy.StrategySpec.ClusterPermissions[0].Rules[")),
        "{}",
        r.render_text()
    );
}

#[test]
fn every_documented_rule_is_exercised_here() {
    // Keeps RULES and the tests in step: each rule id appears in a test above (or, for the
    // `olm-v1` suite, in validate_olmv1.rs).
    let src = concat!(
        include_str!("validate_rules.rs"),
        include_str!("validate_olmv1.rs")
    );
    let mut ids = std::collections::BTreeSet::new();
    for r in olmkit_bundle::validate::RULES {
        let rule = r.id;
        assert!(ids.insert(rule), "rule {rule} is listed twice");
        assert!(
            src.contains(&format!("\"{rule}\"")),
            "rule {rule} has no test"
        );
        assert!(
            [
                "default",
                "operatorhub",
                "good-practices",
                "previous",
                "olm-v1"
            ]
            .contains(&r.suite),
            "rule {rule}: unknown suite {}",
            r.suite
        );
    }
}

/// The embedded Deployment as Kubernetes decodes it: what Go cannot decode into the typed spec
/// fails upstream's loader too (an error in the default suite); what decodes but the API server
/// refuses (a negative replica count) is a warning, an error with `strict`.
#[test]
fn embedded_deployment_types_and_ranges() {
    const REPLICAS: &str = "spec.install.spec.deployments[0].spec.replicas";
    for bad in [json!(1e23), json!(2_147_483_648u64), json!(1.5), json!("3")] {
        let mut f = files();
        edit(&mut f, CSV, |v| {
            v["spec"]["install"]["spec"]["deployments"][0]["spec"]["replicas"] = bad.clone()
        });
        let r = run_default(&f);
        expect(&r, "install-deployments", Severity::Error, CSV, REPLICAS);
        // One finding of this rule there (the CSV CRD schema may add its own warning).
        let at_replicas: Vec<_> = r
            .findings
            .iter()
            .filter(|x| x.path.as_deref() == Some(REPLICAS) && x.rule == "install-deployments")
            .collect();
        assert_eq!(
            at_replicas.len(),
            1,
            "one finding for {bad}: {at_replicas:?}"
        );
    }
    let mut f = files();
    edit(&mut f, CSV, |v| {
        v["spec"]["install"]["spec"]["deployments"][0]["spec"]["replicas"] = json!(-5)
    });
    expect(
        &run_default(&f),
        "install-deployments",
        Severity::Warning,
        CSV,
        REPLICAS,
    );
    expect(
        &run(&f),
        "install-deployments",
        Severity::Error,
        CSV,
        REPLICAS,
    );
    assert!(
        !run_default(&f).has_errors(),
        "{}",
        run_default(&f).render_text()
    );
}

/// operator-framework/api `validateV1Beta1CRD` applies apiextensions/v1beta1 defaulting
/// (`SetDefaults_CustomResourceDefinitionSpec`) before `ValidateCustomResourceDefinition`: a
/// v1beta1 CRD without `spec.scope` (or with `scope: ""`) is `Namespaced`, and valid; a v1
/// CRD gets no such default. `singular` and `listKind` default from the kind in both, and are
/// checked as such.
#[test]
fn v1beta1_crd_defaults_apply_before_validation() {
    const BETA: &str = "manifests/etcdclusters.crd.yaml";
    let upstream = common::fixtures().join("crd-defaulting/v1beta1.crd.yaml");
    let crd = parse_document(BETA, &std::fs::read(upstream).unwrap()).unwrap();
    let crd_findings = |crd: Value| -> Vec<String> {
        let mut f = files();
        add(&mut f, BETA, crd);
        run_default(&f)
            .findings
            .into_iter()
            .filter(|x| x.file.as_deref() == Some(BETA) && x.rule == "crd-versions")
            .map(|x| format!("{} {}", x.severity, x.message))
            .collect()
    };
    // Upstream's valid v1beta1 CRD, as written, without a scope, with an empty one.
    assert_eq!(crd_findings(crd.clone()), Vec::<String>::new());
    let mut no_scope = crd.clone();
    no_scope["spec"].as_object_mut().unwrap().remove("scope");
    assert_eq!(crd_findings(no_scope.clone()), Vec::<String>::new());
    let mut empty_scope = crd.clone();
    empty_scope["spec"]["scope"] = json!("");
    assert_eq!(crd_findings(empty_scope), Vec::<String>::new());
    // Defaulted names are validated: an invalid kind makes singular and listKind invalid too.
    let mut bad_kind = no_scope;
    let names = bad_kind["spec"]["names"].as_object_mut().unwrap();
    names.remove("singular");
    names.remove("listKind");
    names.insert("kind".into(), json!("Etcd_Cluster"));
    let got = crd_findings(bad_kind).join("\n");
    for field in [
        "spec.names.kind",
        "spec.names.singular",
        "spec.names.listKind",
    ] {
        assert!(got.contains(&format!("{field}: ")), "{field}:\n{got}");
    }
    assert!(!got.contains("spec.scope"), "{got}");
    // apiextensions/v1 does not default the scope.
    let mut f = files();
    edit(&mut f, CRD, |v| {
        v["spec"].as_object_mut().unwrap().remove("scope");
    });
    let r = run_default(&f);
    assert!(
        r.findings.iter().any(|x| x.rule == "crd-versions"
            && x.severity == Severity::Error
            && x.message.contains("spec.scope: Unsupported value: \"\"")),
        "{}",
        r.render_text()
    );
}
