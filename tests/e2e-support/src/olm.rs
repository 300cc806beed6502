//! What OLM v0 creates from a ClusterServiceVersion's install strategy so that the operator's
//! ServiceAccount gets the CSV's permissions, for the end-to-end tests that run a real operator
//! binary under exactly those permissions (the Memcached operator's suites in `operator/tests/`,
//! the example operators' OLM installs in `bundle-tool/tests/it/e2e_examples.rs`).
//!
//! Mirrors `RBACForClusterServiceVersion` (pkg/controller/registry/resolver/rbac.go in
//! operator-framework/operator-lifecycle-manager): for each `spec.install.spec.permissions`
//! entry a Role and a RoleBinding of the same name in the operator's namespace; for each
//! `clusterPermissions` entry a ClusterRole and a ClusterRoleBinding; subjects are the entry's
//! ServiceAccount in the operator's namespace. Then `ensureRBACInTargetNamespace`
//! (pkg/controller/operators/olm/operatorgroup.go) scopes the namespaced `permissions` by the
//! OperatorGroup: for an AllNamespaces group each Role is lifted to a ClusterRole (plus get,
//! list and watch on namespaces) and each RoleBinding to a ClusterRoleBinding
//! (`ensureSingletonRBAC`); for other groups they are copied into each target namespace
//! (`ensureTenantRBAC`). `clusterPermissions` are cluster-wide whatever the OperatorGroup.
//! Names are `<csv>-<serviceAccount>-<hash>` (Roles) and `<csv>-<hash>` (ClusterRoles) like
//! upstream's `generateName`; the hash is ours (upstream hashes Go structs with FNV), which only
//! changes the names.

use std::path::Path;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const RBAC: &str = "rbac.authorization.k8s.io";
const MAX_NAME: usize = 63;

fn semver(v: &str) -> Option<(u64, u64, u64)> {
    let mut it = v.split('.').map(|p| p.parse::<u64>().ok());
    let out = (it.next()??, it.next()??, it.next()??);
    it.next().is_none().then_some(out)
}

/// The highest released version in `package_dir` (`bundle/<package>/`, one directory per
/// version).
///
/// # Panics
/// When the directory cannot be read or holds no version.
pub fn newest_released_version(package_dir: &Path) -> String {
    std::fs::read_dir(package_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", package_dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| semver(n).is_some())
        .max_by_key(|n| semver(n))
        .unwrap_or_else(|| panic!("no released bundle in {}", package_dir.display()))
}

/// The manifests of a released bundle (`bundle/<package>/<version>/`), parsed, sorted by file name.
///
/// # Panics
/// When the bundle cannot be read.
pub fn bundle_manifests(bundle_dir: &Path) -> Vec<(String, Value)> {
    let dir = bundle_dir.join("manifests");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let value: Value =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, value)
        })
        .collect()
}

/// The ClusterServiceVersion of a released bundle (`bundle/<package>/<version>/`).
///
/// # Panics
/// When the bundle has no CSV.
pub fn bundle_csv(bundle_dir: &Path) -> Value {
    bundle_manifests(bundle_dir)
        .into_iter()
        .find(|(name, _)| name.ends_with(".clusterserviceversion.yaml"))
        .map(|(_, csv)| csv)
        .unwrap_or_else(|| panic!("no CSV in {}/manifests", bundle_dir.display()))
}

/// The objects of a CSV's `metadata.annotations["alm-examples"]` (the samples OLM's console
/// offers).
///
/// # Panics
/// When the annotation is missing or is not a JSON array.
pub fn alm_examples(csv: &Value) -> Vec<Value> {
    let text = csv["metadata"]["annotations"]["alm-examples"]
        .as_str()
        .expect("the CSV has alm-examples");
    serde_json::from_str(text).expect("alm-examples is a JSON array")
}

/// The ServiceAccount the CSV's (first) deployment runs as.
pub fn deployment_service_account(csv: &Value) -> String {
    csv.pointer("/spec/install/spec/deployments/0/spec/template/spec/serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string()
}

/// Which namespaces the OperatorGroup targets.
#[derive(Clone, Debug)]
pub enum TargetNamespaces {
    /// Every namespace (an AllNamespaces OperatorGroup).
    All,
    /// These namespaces (OwnNamespace, SingleNamespace, MultiNamespace).
    Some(Vec<String>),
}

/// `generateName(base, hashed)`: base, `-`, a short hash of `hashed`, at most 63 characters.
fn generate_name(base: &str, hashed: &Value) -> String {
    let digest = Sha256::digest(hashed.to_string().as_bytes());
    let hash: String = hex::encode(&digest[..5]);
    let room = MAX_NAME - hash.len() - 1;
    let base = if base.len() > room {
        &base[..room]
    } else {
        base
    };
    format!("{base}-{hash}")
}

fn permissions(csv: &Value, field: &str) -> Vec<(String, Value)> {
    csv.pointer(&format!("/spec/install/spec/{field}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["serviceAccountName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["rules"].clone(),
            )
        })
        .collect()
}

fn object(kind: &str, name: &str, ns: Option<&str>) -> Value {
    let mut meta = json!({"name": name});
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": format!("{RBAC}/v1"), "kind": kind, "metadata": meta})
}

fn binding(
    kind: &str,
    name: &str,
    ns: Option<&str>,
    role_kind: &str,
    sa: &str,
    sa_ns: &str,
) -> Value {
    let mut b = object(kind, name, ns);
    b["roleRef"] = json!({"apiGroup": RBAC, "kind": role_kind, "name": name});
    b["subjects"] = json!([{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}]);
    b
}

/// The RBAC objects OLM creates for `csv` installed in `operator_ns` under an OperatorGroup
/// targeting `targets`.
#[must_use]
pub fn olm_rbac(csv: &Value, operator_ns: &str, targets: &TargetNamespaces) -> Vec<Value> {
    let csv_name = csv["metadata"]["name"].as_str().unwrap_or_default();
    let mut out = Vec::new();
    for (sa, rules) in permissions(csv, "permissions") {
        let name = generate_name(
            &format!("{csv_name}-{sa}"),
            &json!([csv_name, {"serviceAccountName": sa, "rules": rules}]),
        );
        let mut role = object("Role", &name, Some(operator_ns));
        role["rules"] = rules.clone();
        out.push(role);
        out.push(binding(
            "RoleBinding",
            &name,
            Some(operator_ns),
            "Role",
            &sa,
            operator_ns,
        ));
        match targets {
            TargetNamespaces::All => {
                let mut lifted = rules.as_array().cloned().unwrap_or_default();
                lifted.push(json!({"apiGroups": [""], "resources": ["namespaces"],
                    "verbs": ["get", "list", "watch"]}));
                let mut cr = object("ClusterRole", &name, None);
                cr["rules"] = Value::Array(lifted);
                out.push(cr);
                out.push(binding(
                    "ClusterRoleBinding",
                    &name,
                    None,
                    "ClusterRole",
                    &sa,
                    operator_ns,
                ));
            }
            TargetNamespaces::Some(namespaces) => {
                for ns in namespaces.iter().filter(|ns| *ns != operator_ns) {
                    let mut role = object("Role", &name, Some(ns));
                    role["rules"] = rules.clone();
                    out.push(role);
                    out.push(binding(
                        "RoleBinding",
                        &name,
                        Some(ns),
                        "Role",
                        &sa,
                        operator_ns,
                    ));
                }
            }
        }
    }
    for (sa, rules) in permissions(csv, "clusterPermissions") {
        let name = generate_name(
            csv_name,
            &json!([csv_name, operator_ns, {"serviceAccountName": sa, "rules": rules}]),
        );
        let mut cr = object("ClusterRole", &name, None);
        cr["rules"] = rules;
        out.push(cr);
        out.push(binding(
            "ClusterRoleBinding",
            &name,
            None,
            "ClusterRole",
            &sa,
            operator_ns,
        ));
    }
    out
}

/// Creates the objects of [`olm_rbac`] with `admin` (server-side apply).
///
/// # Panics
/// When a write fails.
pub async fn install_olm_rbac(admin: &Client, objects: &[Value]) {
    for o in objects {
        let kind = o["kind"].as_str().expect("an object with a kind");
        let plural = format!("{}s", kind.to_lowercase());
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(RBAC, "v1", kind), &plural);
        let name = o["metadata"]["name"].as_str().expect("a named object");
        let api: Api<DynamicObject> = match o["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(admin.clone(), ns, &ar),
            None => Api::all_with(admin.clone(), &ar),
        };
        api.patch(name, &PatchParams::apply("olm").force(), &Patch::Apply(o))
            .await
            .unwrap_or_else(|e| panic!("creating {kind} {name}: {e}"));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn csv() -> Value {
        json!({
            "metadata": {"name": "demo-operator.v0.1.0"},
            "spec": {"install": {"strategy": "deployment", "spec": {
                "clusterPermissions": [{"serviceAccountName": "demo-controller-manager",
                    "rules": [{"apiGroups": ["demo.example.com"], "resources": ["demos"], "verbs": ["list", "watch"]}]}],
                "permissions": [{"serviceAccountName": "demo-controller-manager",
                    "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]}],
                "deployments": [{"name": "demo-controller-manager", "spec": {"template": {
                    "spec": {"serviceAccountName": "demo-controller-manager"}}}}],
            }}},
        })
    }

    #[test]
    fn olm_rbac_from_a_csv() {
        let csv = csv();
        let sa = deployment_service_account(&csv);
        assert_eq!(sa, "demo-controller-manager");
        let kinds = |objs: &[Value]| -> Vec<String> {
            objs.iter()
                .map(|o| {
                    format!(
                        "{} {}",
                        o["kind"].as_str().unwrap(),
                        o["metadata"]["namespace"].as_str().unwrap_or("-")
                    )
                })
                .collect()
        };
        let all = olm_rbac(&csv, "op", &TargetNamespaces::All);
        assert_eq!(
            kinds(&all),
            [
                "Role op",
                "RoleBinding op",
                "ClusterRole -",
                "ClusterRoleBinding -",
                "ClusterRole -",
                "ClusterRoleBinding -"
            ]
        );
        // The lifted Role also reads namespaces; every binding names the ServiceAccount.
        assert!(all[2]["rules"].to_string().contains("namespaces"));
        for b in all
            .iter()
            .filter(|o| o["kind"].as_str().unwrap().ends_with("Binding"))
        {
            assert_eq!(
                b["subjects"],
                json!([{"kind": "ServiceAccount", "name": sa, "namespace": "op"}])
            );
            assert!(b["metadata"]["name"].as_str().unwrap().len() <= MAX_NAME);
        }
        let some = olm_rbac(
            &csv,
            "op",
            &TargetNamespaces::Some(vec!["op".into(), "a".into()]),
        );
        assert_eq!(
            kinds(&some),
            [
                "Role op",
                "RoleBinding op",
                "Role a",
                "RoleBinding a",
                "ClusterRole -",
                "ClusterRoleBinding -"
            ]
        );
    }

    #[test]
    fn versions_sort_numerically() {
        assert!(semver("0.10.0") > semver("0.9.1"));
        assert_eq!(semver("latest"), None);
    }
}
