//! The Memcached operator's table of API calls, which its RBAC is generated from.
//!
//! [`PERMISSIONS`] lists every (API group, resource) the controller calls, the kinds of request
//! it sends and why; `operator rbac` prints the ClusterRole `manager-role` from it, and the
//! runtime adds its own roles (leader election, metrics auth; see `olmkit_runtime::rbac`). An
//! end-to-end test runs the operator under the released CSV's permissions against a stand-in
//! that authorizes like kube-apiserver (RBAC, the extra create check of an apply that creates,
//! the OwnerReferencesPermissionEnforcement admission plugin), both ways: every authorization
//! check of its requests must be allowed, and every listed verb must be checked at least once
//! (the admission-only ones by that plugin), so the role can neither fall behind the code nor
//! grant more than it needs.

use olmkit_runtime::rbac::{self, Permission, Request, RoleScope};

/// Every API call the Memcached controller makes.
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
    rbac::EVENTS,
];

/// Every table the operator's roles come from: the controller's and the runtime's.
pub fn all_permissions() -> Vec<Permission> {
    PERMISSIONS
        .iter()
        .chain(rbac::LEADER_ELECTION)
        .chain(rbac::METRICS_AUTH)
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use olmkit_runtime::rbac::{allows, leader_election_role, manager_role};

    /// The 0.1.0-0.3.0 bug: an apply that creates a child is authorized as `create` too.
    #[test]
    fn applied_children_can_be_created() {
        let rules = manager_role(PERMISSIONS).rules.unwrap();
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
        assert!(!allows(&rules, "apps", "deployments", "update"));
        assert!(!allows(&rules, "coordination.k8s.io", "leases", "get"));
        assert!(!allows(
            &rules,
            "authentication.k8s.io",
            "tokenreviews",
            "create"
        ));
    }

    #[test]
    fn manager_role_snapshot() {
        insta::assert_yaml_snapshot!(manager_role(PERMISSIONS));
    }

    #[test]
    fn leader_election_role_snapshot() {
        insta::assert_yaml_snapshot!(leader_election_role());
    }
}
