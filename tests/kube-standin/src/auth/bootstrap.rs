//! The default ClusterRoles and ClusterRoleBindings kube-apiserver's RBAC post-start hook
//! creates, limited to those clients rely on (`ClusterRoles()` and `ClusterRoleBindings()` in
//! plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go; listed in
//! <https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings>):
//! `cluster-admin` bound to `system:masters`, `system:discovery` and `system:basic-user` bound
//! to `system:authenticated`, `system:public-info-viewer` bound to `system:authenticated` and
//! `system:unauthenticated`. The user-facing `admin`/`edit`/`view` aggregated roles and the
//! controller roles are not created.

use serde_json::{Value, json};

use super::{AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP};

fn meta(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": meta(name), "rules": rules})
}

fn binding_to_groups(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": meta(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subjects})
}

/// The default ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    vec![
        cluster_role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz",
                "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"],
                "verbs": ["get"]}]),
        ),
        cluster_role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                 "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
                 "verbs": ["create"]},
            ]),
        ),
        cluster_role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                "verbs": ["get"]}]),
        ),
    ]
}

/// The default ClusterRoleBindings.
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding_to_groups("cluster-admin", &[MASTERS_GROUP]),
        binding_to_groups("system:discovery", &[AUTHENTICATED_GROUP]),
        binding_to_groups("system:basic-user", &[AUTHENTICATED_GROUP]),
        binding_to_groups(
            "system:public-info-viewer",
            &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP],
        ),
    ]
}
