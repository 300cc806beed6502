//! `config/`: the kustomize layouts render with the real `kubectl kustomize`, every rendered object
//! of a kind with a strict Kubernetes JSON schema validates against it, the CSV validates against
//! OLM's CSV CRD schema, the samples against the Memcached CRD schema of their version, and the
//! generated files (CRD base, RBAC roles) are what the operator binary prints today.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn kustomize(dir: &str) -> Vec<Value> {
    let out = Command::new("kubectl")
        .args(["kustomize"])
        .arg(root().join(dir))
        .output()
        .expect("kubectl runs (it is installed by tests/scripts/setup.sh)");
    assert!(
        out.status.success(),
        "kubectl kustomize {dir} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn strict_schema(kind: &str, api_version: &str) -> Option<PathBuf> {
    let file = match (kind, api_version) {
        ("CustomResourceDefinition", "apiextensions.k8s.io/v1") => {
            "customresourcedefinition-apiextensions-v1.json"
        }
        ("Deployment", "apps/v1") => "deployment-apps-v1.json",
        ("Namespace", "v1") => "namespace-v1.json",
        ("Service", "v1") => "service-v1.json",
        ("ServiceAccount", "v1") => "serviceaccount-v1.json",
        ("ConfigMap", "v1") => "configmap-v1.json",
        ("ClusterRole", "rbac.authorization.k8s.io/v1") => "clusterrole-rbac-v1.json",
        ("ClusterRoleBinding", "rbac.authorization.k8s.io/v1") => "clusterrolebinding-rbac-v1.json",
        ("Role", "rbac.authorization.k8s.io/v1") => "role-rbac-v1.json",
        ("RoleBinding", "rbac.authorization.k8s.io/v1") => "rolebinding-rbac-v1.json",
        ("ValidatingWebhookConfiguration", "admissionregistration.k8s.io/v1") => {
            "validatingwebhookconfiguration-admissionregistration-v1.json"
        }
        ("MutatingWebhookConfiguration", "admissionregistration.k8s.io/v1") => {
            "mutatingwebhookconfiguration-admissionregistration-v1.json"
        }
        _ => return None,
    };
    Some(
        root()
            .join("tests/fixtures/kube-schemas/v1.36.0-standalone-strict")
            .join(file),
    )
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Turns an OpenAPI v3 (CRD) schema into JSON Schema draft 4: `nullable: true` becomes a null
/// type (the validator knows no `nullable`), `x-kubernetes-int-or-string` accepts both types.
fn openapi_to_draft4(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let nullable = map.remove("nullable") == Some(Value::Bool(true));
            if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                map.remove("type");
                map.insert("type".into(), serde_json::json!(["integer", "string"]));
            }
            if nullable && let Some(Value::String(t)) = map.get("type").cloned() {
                map.insert("type".into(), serde_json::json!([t, "null"]));
            }
            for v in map.values_mut() {
                openapi_to_draft4(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(openapi_to_draft4),
        _ => {}
    }
}

fn errors(validator: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn id(doc: &Value) -> String {
    format!(
        "{} {}",
        doc["kind"].as_str().unwrap_or("?"),
        doc["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Validates every object: a strict schema where one exists, else the basic shape. Returns the
/// kinds seen, with counts.
fn validate_all(docs: &[Value]) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    let mut problems = Vec::new();
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap_or_default();
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        *kinds.entry(kind.to_string()).or_insert(0) += 1;
        assert!(
            !kind.is_empty() && !api_version.is_empty(),
            "no apiVersion/kind: {doc}"
        );
        assert!(
            doc["metadata"]["name"]
                .as_str()
                .is_some_and(|n| !n.is_empty()),
            "{kind} without metadata.name"
        );
        if let Some(path) = strict_schema(kind, api_version) {
            let schema = read_json(&path);
            let v = jsonschema::draft202012::new(&schema).unwrap();
            for e in errors(&v, doc) {
                problems.push(format!("{}: {e}", id(doc)));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "schema violations:\n{}",
        problems.join("\n")
    );
    kinds
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the output"))
}

#[test]
fn default_renders_and_every_object_validates() {
    let docs = kustomize("config/default");
    let kinds = validate_all(&docs);
    for k in [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
        "Certificate",
        "Issuer",
    ] {
        assert!(
            kinds.contains_key(k),
            "config/default renders no {k}: {kinds:?}"
        );
    }
    for d in &docs {
        if d["kind"] != "Namespace" && d["kind"] != "CustomResourceDefinition" {
            let cluster_scoped = matches!(
                d["kind"].as_str(),
                Some("ClusterRole" | "ClusterRoleBinding")
            );
            assert_eq!(
                d["metadata"]["namespace"].as_str(),
                (!cluster_scoped).then_some("memcached-operator-system"),
                "{}",
                id(d)
            );
        }
    }
}

#[test]
fn webhook_service_deployment_and_certificate_are_wired() {
    let docs = kustomize("config/default");
    let crd = find(
        &docs,
        "CustomResourceDefinition",
        "memcacheds.cache.example.com",
    );
    let conv = &crd["spec"]["conversion"];
    assert_eq!(conv["strategy"], "Webhook");
    let svc_ref = &conv["webhook"]["clientConfig"]["service"];
    assert_eq!(svc_ref["path"], memcached_api::crd::CONVERSION_PATH);
    let wiring = memcached_api::crd::wiring();
    assert_eq!(svc_ref["name"], wiring.service_name.as_str());
    assert_eq!(svc_ref["namespace"], wiring.service_namespace.as_str());
    assert_eq!(svc_ref["port"], 443);

    // Service → targetPort → the manager's webhook container port.
    let svc = find(&docs, "Service", svc_ref["name"].as_str().unwrap());
    let port = &svc["spec"]["ports"][0];
    assert_eq!(port["port"], 443);
    assert_eq!(port["targetPort"], memcached_api::crd::WEBHOOK_PORT);
    let dep = find(&docs, "Deployment", "memcached-operator-controller-manager");
    let selector = svc["spec"]["selector"].as_object().unwrap();
    let pod_labels = dep["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    for (k, v) in selector {
        assert_eq!(
            pod_labels.get(k),
            Some(v),
            "Service selector {k} does not select the pods"
        );
    }
    let container = &dep["spec"]["template"]["spec"]["containers"][0];
    let ports = container["ports"].as_array().unwrap();
    assert!(
        ports
            .iter()
            .any(|p| p["containerPort"] == memcached_api::crd::WEBHOOK_PORT),
        "manager does not expose the webhook port"
    );
    assert_eq!(
        container["image"],
        "quay.io/example/memcached-operator:0.1.0"
    );

    // The certificate: cert-manager's CA injection, SANs, secret mounted where the webhook looks.
    assert_eq!(
        crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "memcached-operator-system/memcached-operator-serving-cert"
    );
    let cert = find(&docs, "Certificate", "memcached-operator-serving-cert");
    assert_eq!(
        cert["spec"]["dnsNames"][0],
        "memcached-operator-webhook-service.memcached-operator-system.svc"
    );
    assert_eq!(
        cert["spec"]["issuerRef"]["name"],
        "memcached-operator-selfsigned-issuer"
    );
    let secret = cert["spec"]["secretName"].as_str().unwrap();
    let volumes = dep["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    let cert_volume = volumes
        .iter()
        .find(|v| v["secret"]["secretName"] == secret)
        .expect("the certificate's secret is mounted");
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == cert_volume["name"])
        .unwrap();
    assert_eq!(
        mount["mountPath"],
        olmkit_runtime::webhook::OLM_WEBHOOK_CERT_DIR
    );

    // OLM's target namespaces reach the operator; the manager runs the real flags.
    let env = container["env"].as_array().unwrap();
    let watch = env.iter().find(|e| e["name"] == "WATCH_NAMESPACE").unwrap();
    assert_eq!(
        watch["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['olm.targetNamespaces']"
    );
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_operator"))
        .args(&args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "manager args are not accepted: {args:?}"
    );
}

#[test]
fn manifests_render_for_olm_without_cert_manager() {
    let docs = kustomize("config/manifests");
    let kinds = validate_all(&docs);
    assert!(!kinds.contains_key("Certificate") && !kinds.contains_key("Issuer"));
    assert_eq!(kinds.get("ClusterServiceVersion"), Some(&1));
    assert_eq!(kinds.get("Memcached"), Some(&3));
    assert_eq!(kinds.get("Configuration"), Some(&1));
    let crd = find(
        &docs,
        "CustomResourceDefinition",
        "memcacheds.cache.example.com",
    );
    assert!(crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].is_null());
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");
    let dep = find(&docs, "Deployment", "memcached-operator-controller-manager");
    let mounts = &dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"];
    assert!(
        mounts.as_array().is_none_or(|m| m.is_empty()),
        "OLM mounts the webhook certificate itself: {mounts}"
    );

    // The base CSV against OLM's own CSV schema.
    let csv = docs
        .iter()
        .find(|d| d["kind"] == "ClusterServiceVersion")
        .unwrap();
    let csv_crd = serde_saphyr::from_str::<Value>(
        &std::fs::read_to_string(
            root().join("tests/fixtures/olm-crds/operators.coreos.com_clusterserviceversions.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut schema = csv_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    openapi_to_draft4(&mut schema);
    let v = jsonschema::draft4::new(&schema).unwrap();
    let errs = errors(&v, csv);
    assert!(
        errs.is_empty(),
        "CSV violates the OLM schema:\n{}",
        errs.join("\n")
    );

    // Every owned version has a described entry with spec and status descriptors.
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .unwrap();
    for version in memcached_api::SERVED_VERSIONS {
        let e = owned
            .iter()
            .find(|o| o["version"] == version)
            .unwrap_or_else(|| panic!("no owned entry for {version}"));
        assert_eq!(e["name"], memcached_api::CRD_NAME);
        assert!(!e["specDescriptors"].as_array().unwrap().is_empty());
        assert!(!e["statusDescriptors"].as_array().unwrap().is_empty());
    }
    let modes = csv["spec"]["installModes"].as_array().unwrap();
    let all = modes.iter().find(|m| m["type"] == "AllNamespaces").unwrap();
    assert_eq!(all["supported"], true);
    let icon = csv["spec"]["icon"][0]["base64data"].as_str().unwrap();
    let svg = base64_decode(icon);
    assert!(svg.starts_with(b"<svg"), "icon is not an SVG");
}

fn base64_decode(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = A.iter().position(|a| *a == c).expect("base64 character") as u32;
        buf = (buf << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

#[test]
fn samples_validate_against_their_version_and_run() {
    let docs = kustomize("config/samples");
    let crd = serde_json::to_value(memcached_api::crd()).unwrap();
    let mut seen = Vec::new();
    for doc in &docs {
        let version = doc["apiVersion"]
            .as_str()
            .unwrap()
            .strip_prefix("cache.example.com/")
            .unwrap();
        seen.push(version.to_string());
        let v = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == version)
            .unwrap();
        let mut schema = v["schema"]["openAPIV3Schema"].clone();
        openapi_to_draft4(&mut schema);
        let validator = jsonschema::draft4::new(&schema).unwrap();
        let errs = errors(&validator, doc);
        assert!(errs.is_empty(), "{}: {}", id(doc), errs.join("; "));
    }
    seen.sort();
    assert_eq!(seen, ["v1", "v1alpha1", "v1beta1"]);
    // The v1 sample is one the operator runs as is.
    let v1 = docs
        .iter()
        .find(|d| d["apiVersion"] == "cache.example.com/v1")
        .unwrap();
    let mc: memcached_api::v1::Memcached = serde_json::from_value(v1.clone()).unwrap();
    assert_eq!(memcached_api::validation::validate_spec(&mc.spec), []);
    assert_eq!(
        memcached_api::validation::validate_name(mc.metadata.name.as_deref().unwrap()),
        []
    );
}

fn run_operator(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_operator"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "operator {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn generated_files_are_current() {
    for (file, args) in [
        (
            "config/crd/bases/cache.example.com_memcacheds.yaml",
            &["crd"][..],
        ),
        ("config/rbac/role.yaml", &["rbac"][..]),
        (
            "config/rbac/leader_election_role.yaml",
            &["rbac", "--role", "leader-election"][..],
        ),
        (
            "config/rbac/metrics_auth_role.yaml",
            &["rbac", "--role", "metrics-auth"][..],
        ),
    ] {
        let committed = std::fs::read_to_string(root().join(file)).unwrap();
        assert_eq!(
            committed,
            run_operator(args),
            "{file} is stale: regenerate it with `operator {}`",
            args.join(" ")
        );
    }
}
