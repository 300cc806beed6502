//! The operator's RBAC, generated from the one table of API calls it makes.
//!
//! [`PERMISSIONS`] lists every (API group, resource) the operator calls, the kinds of request it
//! sends ([`Request`]) and why; the verbs come from how kube-apiserver authorizes each kind of
//! request (a server-side apply that may create needs `create` as well as `patch`). The
//! ClusterRole `manager-role` and the leader-election Role in `config/rbac/` are printed from it
//! by `operator rbac`, and an end-to-end test runs the operator under the released CSV's
//! permissions against a stand-in that authorizes like kube-apiserver (RBAC, the extra create
//! check of an apply that creates, the OwnerReferencesPermissionEnforcement admission plugin),
//! both ways: every authorization check of its requests must be allowed, and every listed verb
//! must be checked at least once (the admission-only ones by that plugin), so the role can
//! neither fall behind the code nor grant more than it needs. The reviews of the secure metrics
//! endpoint have their own table, [`METRICS_AUTH_PERMISSIONS`], printed as the ClusterRole
//! `metrics-auth-role` (`operator rbac --role metrics-auth`) and checked the same two ways by
//! `memcached-operator/tests/e2e_metrics_auth.rs`.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Which generated role a permission belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleScope {
    /// The ClusterRole `manager-role` (bound cluster-wide, or per namespace by OLM).
    Manager,
    /// The Role `leader-election-role` in the operator's own namespace.
    LeaderElection,
    /// The ClusterRole `metrics-auth-role`: the reviews of the secure `/metrics` filter.
    MetricsAuth,
}

/// A kind of API request the operator sends, as the API server authorizes it.
///
/// The verbs are not the HTTP method: kube-apiserver maps each request to a verb in its
/// `RequestInfoFactory` (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go, documented in
/// <https://kubernetes.io/docs/reference/access-authn-authz/authorization/#determine-the-request-verb>),
/// and some handlers authorize a second verb themselves. A server-side apply is a PATCH, so it
/// needs `patch`; when the object does not exist yet the patch handler creates it and first
/// authorizes `create` with the create attributes (`patchResource` in
/// k8s.io/apiserver/pkg/endpoints/handlers/patch.go wraps the create validation in
/// `withAuthorization`). Missing that second verb is how 0.1.0 to 0.3.0 shipped a role under which
/// the operator could not create a Deployment on a real cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// GET of one object: `get`.
    Get,
    /// GET of a collection: `list`.
    List,
    /// GET with `watch=true`: `watch`.
    Watch,
    /// POST: `create`.
    Create,
    /// PATCH of an object that exists (JSON, merge or apply patch): `patch`.
    Patch,
    /// Server-side apply of an object that may not exist yet: `patch`, plus `create` when the
    /// apply creates it (see the type's documentation).
    ApplyMayCreate,
    /// PUT: `update`.
    Update,
    /// DELETE of one object, whatever its propagation policy: `delete`.
    Delete,
}

impl Request {
    /// The verbs kube-apiserver authorizes for this request (every one must be granted).
    pub const fn verbs(self) -> &'static [&'static str] {
        match self {
            Request::Get => &["get"],
            Request::List => &["list"],
            Request::Watch => &["watch"],
            Request::Create => &["create"],
            Request::Patch => &["patch"],
            Request::ApplyMayCreate => &["create", "patch"],
            Request::Update => &["update"],
            Request::Delete => &["delete"],
        }
    }
}

/// One resource the operator calls, with the requests it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Plural resource, `resource/subresource` for a subresource.
    pub resource: &'static str,
    /// The requests the operator sends (or an admission plugin authorizes on its behalf).
    pub requests: &'static [Request],
    /// Role it goes into.
    pub scope: RoleScope,
    /// Why the operator needs it (and which code path uses it).
    pub purpose: &'static str,
    /// True when no request uses it: an admission plugin checks it on another request.
    pub admission_only: bool,
}

impl Permission {
    /// The verbs to grant: the union of what each request is authorized as, sorted.
    pub fn verbs(&self) -> Vec<&'static str> {
        let mut verbs: Vec<&'static str> = self
            .requests
            .iter()
            .flat_map(|r| r.verbs().iter().copied())
            .collect();
        verbs.sort_unstable();
        verbs.dedup();
        verbs
    }
}

/// Every API call the operator makes.
pub const PERMISSIONS: &[Permission] = &[
    Permission {
        group: "cache.example.com",
        resource: "memcacheds",
        requests: &[Request::List, Request::Watch, Request::Patch],
        scope: RoleScope::Manager,
        purpose: "watch Memcached objects (controller cache); add and remove the finalizer (JSON patch)",
        admission_only: false,
    },
    Permission {
        group: "cache.example.com",
        resource: "memcacheds/status",
        // The status subresource of an object that does not exist is a 404, never a create.
        requests: &[Request::Patch],
        scope: RoleScope::Manager,
        purpose: "server-side apply of the status subresource",
        admission_only: false,
    },
    Permission {
        group: "cache.example.com",
        resource: "memcacheds/finalizers",
        requests: &[Request::Update],
        scope: RoleScope::Manager,
        purpose: "OwnerReferencesPermissionEnforcement: owner references with blockOwnerDeletion on Deployments and Services need update on the owner's finalizers",
        admission_only: true,
    },
    Permission {
        group: "apps",
        resource: "deployments",
        requests: &[
            Request::List,
            Request::Watch,
            Request::Get,
            Request::ApplyMayCreate,
            Request::Delete,
        ],
        scope: RoleScope::Manager,
        purpose: "watch owned Deployments; read one missing from the cache; server-side apply (creates it the first time); delete in the finalizer (foreground propagation is still the delete verb)",
        admission_only: false,
    },
    Permission {
        group: "",
        resource: "services",
        requests: &[
            Request::List,
            Request::Watch,
            Request::Get,
            Request::ApplyMayCreate,
            Request::Delete,
        ],
        scope: RoleScope::Manager,
        purpose: "watch owned Services; read one missing from the cache; server-side apply (creates it the first time); delete in the finalizer",
        admission_only: false,
    },
    Permission {
        group: "",
        resource: "pods",
        requests: &[Request::List, Request::Watch],
        scope: RoleScope::Manager,
        purpose: "status.nodes and failing-pod detection (cache of the operator's pods)",
        admission_only: false,
    },
    Permission {
        group: "events.k8s.io",
        resource: "events",
        requests: &[Request::Create, Request::Patch],
        scope: RoleScope::Manager,
        purpose: "publish events on Memcached objects (patch updates the series of a repeated event)",
        admission_only: false,
    },
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        requests: &[Request::Create, Request::Get, Request::Patch],
        scope: RoleScope::LeaderElection,
        purpose: "leader election: create the Lease once, read it, acquire/renew/release it",
        admission_only: false,
    },
];

/// The API calls of the secure `/metrics` filter (`--metrics-secure`, [`crate::http::auth`]),
/// kubebuilder's `metrics-auth-role`. A table and a role of their own, as in kubebuilder, because
/// they serve the metrics endpoint rather than reconciling: a cluster that scrapes metrics over
/// plain HTTP (`--metrics-secure=false`) can leave the role out, and the operator end-to-end
/// tests that run under a released CSV without it (0.4.0 and older) check [`PERMISSIONS`] only.
/// `memcached-operator/tests/e2e_metrics_auth.rs` checks this table both ways instead.
pub const METRICS_AUTH_PERMISSIONS: &[Permission] = &[
    Permission {
        group: "authentication.k8s.io",
        resource: "tokenreviews",
        requests: &[Request::Create],
        scope: RoleScope::MetricsAuth,
        purpose: "authenticate the bearer token of a /metrics request (TokenReview)",
        admission_only: false,
    },
    Permission {
        group: "authorization.k8s.io",
        resource: "subjectaccessreviews",
        requests: &[Request::Create],
        scope: RoleScope::MetricsAuth,
        purpose: "authorize the caller of /metrics for get on the non-resource URL (SubjectAccessReview)",
        admission_only: false,
    },
];

/// Name of the generated ClusterRole (before kustomize's name prefix).
pub const MANAGER_ROLE: &str = "manager-role";
/// Name of the generated metrics-auth ClusterRole (before kustomize's name prefix).
pub const METRICS_AUTH_ROLE: &str = "metrics-auth-role";
/// Name of the generated leader-election Role (before kustomize's name prefix).
pub const LEADER_ELECTION_ROLE: &str = "leader-election-role";

fn rules(scope: RoleScope) -> Vec<PolicyRule> {
    let mut perms: Vec<&Permission> = PERMISSIONS
        .iter()
        .chain(METRICS_AUTH_PERMISSIONS)
        .filter(|p| p.scope == scope)
        .collect();
    perms.sort_by_key(|p| (p.group, p.resource));
    perms
        .into_iter()
        .map(|p| PolicyRule {
            api_groups: Some(vec![p.group.to_string()]),
            resources: Some(vec![p.resource.to_string()]),
            verbs: p.verbs().into_iter().map(String::from).collect(),
            ..Default::default()
        })
        .collect()
}

/// The ClusterRole `manager-role`.
pub fn manager_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(MANAGER_ROLE.to_string()),
            ..Default::default()
        },
        rules: Some(rules(RoleScope::Manager)),
        aggregation_rule: None,
    }
}

/// The ClusterRole `metrics-auth-role` (kubebuilder's config/rbac/metrics_auth_role.yaml).
pub fn metrics_auth_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(METRICS_AUTH_ROLE.to_string()),
            ..Default::default()
        },
        rules: Some(rules(RoleScope::MetricsAuth)),
        aggregation_rule: None,
    }
}

/// The Role `leader-election-role`.
pub fn leader_election_role() -> Role {
    Role {
        metadata: ObjectMeta {
            name: Some(LEADER_ELECTION_ROLE.to_string()),
            ..Default::default()
        },
        rules: Some(rules(RoleScope::LeaderElection)),
    }
}

/// True when `rules` allow `verb` on `group`/`resource` (wildcards honoured).
pub fn allows(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    let has = |list: &Option<Vec<String>>, want: &str| {
        list.iter().flatten().any(|x| x == "*" || x == want)
    };
    rules.iter().any(|r| {
        has(&r.api_groups, group)
            && has(&r.resources, resource)
            && r.verbs.iter().any(|v| v == "*" || v == verb)
    })
}

/// The header line put on generated files.
pub const GENERATED_HEADER: &str = "# Generated by `operator rbac` from the permission tables in memcached_operator::rbac. Do not edit.\n";

/// YAML of a generated role, with the header.
pub fn to_yaml<T: serde::Serialize>(role: &T) -> Result<String, serde_saphyr::ser::Error> {
    Ok(format!(
        "{GENERATED_HEADER}{}",
        serde_saphyr::to_string(role)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_are_sorted_and_unique() {
        for p in PERMISSIONS {
            let v = p.verbs();
            let mut sorted = v.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(v, sorted, "{}", p.resource);
        }
    }

    /// The 0.1.0-0.3.0 bug: an apply that creates a child is authorized as `create` too.
    #[test]
    fn applied_children_can_be_created() {
        let rules = rules(RoleScope::Manager);
        for (group, resource) in [("apps", "deployments"), ("", "services")] {
            for verb in ["create", "patch"] {
                assert!(
                    allows(&rules, group, resource, verb),
                    "{verb} {group}/{resource}"
                );
            }
        }
        // A status apply never creates: no create on the subresource.
        assert!(!allows(
            &rules,
            "cache.example.com",
            "memcacheds/status",
            "create"
        ));
    }

    #[test]
    fn manager_role_snapshot() {
        insta::assert_yaml_snapshot!(manager_role());
    }

    #[test]
    fn metrics_auth_role_grants_only_the_reviews() {
        let rules = metrics_auth_role().rules.unwrap();
        assert_eq!(rules.len(), 2);
        assert!(allows(
            &rules,
            "authentication.k8s.io",
            "tokenreviews",
            "create"
        ));
        assert!(allows(
            &rules,
            "authorization.k8s.io",
            "subjectaccessreviews",
            "create"
        ));
        assert!(!allows(
            &rules,
            "authorization.k8s.io",
            "subjectaccessreviews",
            "get"
        ));
        // Not in the manager role: the released-CSV end-to-end tests check that one alone.
        let manager = manager_role().rules.unwrap();
        assert!(!allows(
            &manager,
            "authentication.k8s.io",
            "tokenreviews",
            "create"
        ));
    }

    #[test]
    fn leader_election_role_snapshot() {
        insta::assert_yaml_snapshot!(leader_election_role());
    }

    #[test]
    fn allows_matches_exactly() {
        let rules = rules(RoleScope::Manager);
        assert!(allows(&rules, "apps", "deployments", "patch"));
        assert!(!allows(&rules, "apps", "deployments", "update"));
        assert!(!allows(&rules, "", "deployments", "patch"));
        assert!(allows(
            &rules,
            "cache.example.com",
            "memcacheds/status",
            "patch"
        ));
        assert!(!allows(
            &rules,
            "cache.example.com",
            "memcacheds/status",
            "update"
        ));
        assert!(!allows(&rules, "coordination.k8s.io", "leases", "get"));
    }
}
