//! The operator's RBAC, generated from the one table of API calls it makes.
//!
//! [`PERMISSIONS`] lists every (API group, resource, verb) the operator uses and why. The
//! ClusterRole `manager-role` and the leader-election Role in `config/rbac/` are printed from it
//! by `operator rbac`, and an end-to-end test compares the requests the operator really sends
//! with it both ways: every request must be allowed, and every listed verb must be used (or be
//! marked as needed by admission only), so the role can neither fall behind the code nor grant
//! more than it needs.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Which generated role a permission belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleScope {
    /// The ClusterRole `manager-role` (bound cluster-wide, or per namespace by OLM).
    Manager,
    /// The Role `leader-election-role` in the operator's own namespace.
    LeaderElection,
}

/// One resource the operator calls, with the verbs it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Plural resource, `resource/subresource` for a subresource.
    pub resource: &'static str,
    /// Verbs, sorted.
    pub verbs: &'static [&'static str],
    /// Role it goes into.
    pub scope: RoleScope,
    /// Why the operator needs it (and which code path uses it).
    pub purpose: &'static str,
    /// True when no request uses it: an admission plugin checks it on another request.
    pub admission_only: bool,
}

/// Every API call the operator makes.
pub const PERMISSIONS: &[Permission] = &[
    Permission {
        group: "cache.example.com",
        resource: "memcacheds",
        verbs: &["list", "patch", "watch"],
        scope: RoleScope::Manager,
        purpose: "watch Memcached objects (controller cache); add and remove the finalizer (JSON patch)",
        admission_only: false,
    },
    Permission {
        group: "cache.example.com",
        resource: "memcacheds/status",
        verbs: &["patch"],
        scope: RoleScope::Manager,
        purpose: "server-side apply of the status subresource",
        admission_only: false,
    },
    Permission {
        group: "cache.example.com",
        resource: "memcacheds/finalizers",
        verbs: &["update"],
        scope: RoleScope::Manager,
        purpose: "OwnerReferencesPermissionEnforcement: owner references with blockOwnerDeletion on Deployments and Services need update on the owner's finalizers",
        admission_only: true,
    },
    Permission {
        group: "apps",
        resource: "deployments",
        verbs: &["delete", "get", "list", "patch", "watch"],
        scope: RoleScope::Manager,
        purpose: "watch owned Deployments; read one missing from the cache; server-side apply; delete in the finalizer",
        admission_only: false,
    },
    Permission {
        group: "",
        resource: "services",
        verbs: &["delete", "get", "list", "patch", "watch"],
        scope: RoleScope::Manager,
        purpose: "watch owned Services; read one missing from the cache; server-side apply; delete in the finalizer",
        admission_only: false,
    },
    Permission {
        group: "",
        resource: "pods",
        verbs: &["list", "watch"],
        scope: RoleScope::Manager,
        purpose: "status.nodes and failing-pod detection (cache of the operator's pods)",
        admission_only: false,
    },
    Permission {
        group: "events.k8s.io",
        resource: "events",
        verbs: &["create", "patch"],
        scope: RoleScope::Manager,
        purpose: "publish events on Memcached objects (patch updates the series of a repeated event)",
        admission_only: false,
    },
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["create", "get", "patch"],
        scope: RoleScope::LeaderElection,
        purpose: "leader election: create the Lease once, read it, acquire/renew/release it",
        admission_only: false,
    },
];

/// Name of the generated ClusterRole (before kustomize's name prefix).
pub const MANAGER_ROLE: &str = "manager-role";
/// Name of the generated leader-election Role (before kustomize's name prefix).
pub const LEADER_ELECTION_ROLE: &str = "leader-election-role";

fn rules(scope: RoleScope) -> Vec<PolicyRule> {
    let mut perms: Vec<&Permission> = PERMISSIONS.iter().filter(|p| p.scope == scope).collect();
    perms.sort_by_key(|p| (p.group, p.resource));
    perms
        .into_iter()
        .map(|p| PolicyRule {
            api_groups: Some(vec![p.group.to_string()]),
            resources: Some(vec![p.resource.to_string()]),
            verbs: p.verbs.iter().map(|v| v.to_string()).collect(),
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
pub const GENERATED_HEADER: &str =
    "# Generated by `operator rbac` from memcached_operator::rbac::PERMISSIONS. Do not edit.\n";

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
            let mut v = p.verbs.to_vec();
            v.sort();
            v.dedup();
            assert_eq!(v, p.verbs, "{}", p.resource);
        }
    }

    #[test]
    fn manager_role_snapshot() {
        insta::assert_yaml_snapshot!(manager_role());
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
