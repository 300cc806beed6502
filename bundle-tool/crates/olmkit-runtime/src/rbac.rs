//! RBAC roles generated from a declared table of the API calls an operator makes.
//!
//! An operator lists every (API group, resource) it calls in a table of [`Permission`]s: the
//! kinds of request it sends ([`Request`]) and why. The verbs come from how kube-apiserver
//! authorizes each kind of request (a server-side apply that may create needs `create` as well
//! as `patch`), so a role can neither fall behind the code nor grant more than it needs; the
//! operator's end-to-end tests run it under exactly these roles against an API server that
//! authorizes with RBAC. The runtime's own calls have tables of their own:
//! [`LEADER_ELECTION`] (the Role in the operator's namespace), [`METRICS_AUTH`] (kubebuilder's
//! `metrics-auth-role`) and [`EVENTS`] (a row for the operator's manager table).
//!
//! `<binary> rbac --role manager|leader-election|metrics-auth` prints them
//! ([`crate::cli::Operator`]); `make manifests` writes them into `config/rbac/`.
//!
//! ```
//! use olmkit_runtime::rbac::{self, Permission, Request, RoleScope};
//! const PERMISSIONS: &[Permission] = &[
//!     Permission {
//!         group: "apps",
//!         resource: "deployments",
//!         requests: &[Request::List, Request::Watch, Request::ApplyMayCreate],
//!         scope: RoleScope::Manager,
//!         purpose: "own the Deployment",
//!         admission_only: false,
//!     },
//!     rbac::EVENTS,
//! ];
//! let role = rbac::manager_role(PERMISSIONS);
//! assert!(rbac::allows(&role.rules.unwrap(), "apps", "deployments", "create"));
//! ```

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

/// A kind of API request an operator sends, as the API server authorizes it.
///
/// The verbs are not the HTTP method: kube-apiserver maps each request to a verb in its
/// `RequestInfoFactory` (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go, documented in
/// <https://kubernetes.io/docs/reference/access-authn-authz/authorization/#determine-the-request-verb>),
/// and some handlers authorize a second verb themselves. A server-side apply is a PATCH, so it
/// needs `patch`; when the object does not exist yet the patch handler creates it and first
/// authorizes `create` with the create attributes (`patchResource` in
/// k8s.io/apiserver/pkg/endpoints/handlers/patch.go wraps the create validation in
/// `withAuthorization`). Missing that second verb is how the Memcached operator's 0.1.0 to 0.3.0
/// shipped a role under which it could not create a Deployment on a real cluster.
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

/// One resource an operator calls, with the requests it sends.
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

/// Events the runtime's recorder publishes on the operator's objects (a row for the operator's
/// manager table).
pub const EVENTS: Permission = Permission {
    group: "events.k8s.io",
    resource: "events",
    requests: &[Request::Create, Request::Patch],
    scope: RoleScope::Manager,
    purpose: "publish events on the reconciled objects (patch updates the series of a repeated event)",
    admission_only: false,
};

/// The runtime's leader election (`crate::leader`): compare-and-swap merge patches on one Lease.
pub const LEADER_ELECTION: &[Permission] = &[Permission {
    group: "coordination.k8s.io",
    resource: "leases",
    requests: &[Request::Create, Request::Get, Request::Patch],
    scope: RoleScope::LeaderElection,
    purpose: "leader election: create the Lease once, read it, acquire/renew/release it",
    admission_only: false,
}];

/// The reviews of the secure `/metrics` filter (`--metrics-secure`), kubebuilder's
/// `metrics-auth-role`: a role of its own, as in kubebuilder, because it serves the metrics
/// endpoint rather than reconciling (a cluster that scrapes over plain HTTP can leave it out).
pub const METRICS_AUTH: &[Permission] = &[
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

/// Name of the generated manager ClusterRole (before kustomize's name prefix).
pub const MANAGER_ROLE: &str = "manager-role";
/// Name of the generated metrics-auth ClusterRole (before kustomize's name prefix).
pub const METRICS_AUTH_ROLE: &str = "metrics-auth-role";
/// Name of the generated leader-election Role (before kustomize's name prefix).
pub const LEADER_ELECTION_ROLE: &str = "leader-election-role";

/// The rules of the permissions of `scope`, one per (group, resource), sorted.
pub fn rules<'a>(
    permissions: impl IntoIterator<Item = &'a Permission>,
    scope: RoleScope,
) -> Vec<PolicyRule> {
    let mut perms: Vec<&Permission> = permissions
        .into_iter()
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

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        ..Default::default()
    }
}

/// The ClusterRole `manager-role` of an operator's table.
pub fn manager_role(permissions: &[Permission]) -> ClusterRole {
    ClusterRole {
        metadata: named(MANAGER_ROLE),
        rules: Some(rules(permissions, RoleScope::Manager)),
        aggregation_rule: None,
    }
}

/// The ClusterRole `metrics-auth-role` (kubebuilder's config/rbac/metrics_auth_role.yaml).
pub fn metrics_auth_role() -> ClusterRole {
    ClusterRole {
        metadata: named(METRICS_AUTH_ROLE),
        rules: Some(rules(METRICS_AUTH, RoleScope::MetricsAuth)),
        aggregation_rule: None,
    }
}

/// The Role `leader-election-role`.
pub fn leader_election_role() -> Role {
    Role {
        metadata: named(LEADER_ELECTION_ROLE),
        rules: Some(rules(LEADER_ELECTION, RoleScope::LeaderElection)),
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

/// YAML of a generated role, with a header naming the command that printed it.
pub fn to_yaml<T: serde::Serialize>(
    role: &T,
    command: &str,
) -> Result<String, serde_saphyr::ser::Error> {
    Ok(format!(
        "# Generated by `{command}` from the operator's table of API calls. Do not edit.\n{}",
        serde_saphyr::to_string(role)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[Permission] = &[
        Permission {
            group: "apps",
            resource: "deployments",
            requests: &[Request::List, Request::ApplyMayCreate, Request::Get],
            scope: RoleScope::Manager,
            purpose: "test",
            admission_only: false,
        },
        Permission {
            group: "demo.example.com",
            resource: "widgets/status",
            requests: &[Request::Patch],
            scope: RoleScope::Manager,
            purpose: "test",
            admission_only: false,
        },
        EVENTS,
    ];

    #[test]
    fn verbs_are_the_union_sorted_and_unique() {
        assert_eq!(TABLE[0].verbs(), ["create", "get", "list", "patch"]);
    }

    /// The Memcached 0.1.0-0.3.0 bug: an apply that creates is authorized as `create` too.
    #[test]
    fn an_apply_that_may_create_grants_create() {
        let rules = manager_role(TABLE).rules.unwrap();
        assert!(allows(&rules, "apps", "deployments", "create"));
        assert!(!allows(
            &rules,
            "demo.example.com",
            "widgets/status",
            "create"
        ));
        assert!(!allows(&rules, "", "deployments", "patch"));
    }

    #[test]
    fn runtime_roles_grant_only_what_the_runtime_calls() {
        let le = leader_election_role().rules.unwrap();
        assert_eq!(le.len(), 1);
        assert_eq!(le[0].verbs, ["create", "get", "patch"]);
        let ma = metrics_auth_role().rules.unwrap();
        assert!(allows(
            &ma,
            "authentication.k8s.io",
            "tokenreviews",
            "create"
        ));
        assert!(!allows(
            &ma,
            "authorization.k8s.io",
            "subjectaccessreviews",
            "get"
        ));
    }

    #[test]
    fn yaml_names_the_command() {
        let text = to_yaml(&leader_election_role(), "operator rbac").unwrap();
        assert!(text.starts_with("# Generated by `operator rbac`"), "{text}");
        assert!(text.contains("name: leader-election-role"));
    }
}
