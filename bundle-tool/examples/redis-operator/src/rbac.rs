//! The table of every API call the operator makes: `manager rbac` (`make manifests`) generates
//! `config/rbac/role.yaml` from it, so the role can neither fall behind the code nor grant more
//! than it needs: the end-to-end tests run the manager with this role only, against an API
//! server that authorizes with RBAC. Add a row when a controller starts calling something new
//! (`olmkit_runtime::rbac` says how requests map to verbs).
//!
//! `bundle-tool create api` adds rows at the `+olmkit:scaffold:permissions` marker: keep it.

use olmkit_runtime::rbac::{self, Permission};

/// The manager role's permissions.
pub const PERMISSIONS: &[Permission] = &[
    rbac::EVENTS,
    Permission {
        group: "cache.example.com",
        resource: "redisclusters",
        requests: &[
            rbac::Request::List,
            rbac::Request::Watch,
            rbac::Request::Patch,
        ],
        scope: rbac::RoleScope::Manager,
        purpose: "RedisCluster controller: watch RedisCluster objects, add and remove its finalizer",
        admission_only: false,
    },
    Permission {
        group: "cache.example.com",
        resource: "redisclusters/status",
        requests: &[rbac::Request::Patch],
        scope: rbac::RoleScope::Manager,
        purpose: "RedisCluster controller: server-side apply the status",
        admission_only: false,
    },
    Permission {
        group: "cache.example.com",
        resource: "redisclusters/finalizers",
        requests: &[rbac::Request::Update],
        scope: rbac::RoleScope::Manager,
        purpose: "RedisCluster controller: owner references with blockOwnerDeletion on its Services and StatefulSets (OwnerReferencesPermissionEnforcement checks update on the owner's finalizers)",
        admission_only: true,
    },
    Permission {
        group: "apps",
        resource: "statefulsets",
        requests: &[
            rbac::Request::List,
            rbac::Request::Watch,
            rbac::Request::ApplyMayCreate,
        ],
        scope: rbac::RoleScope::Manager,
        purpose: "RedisCluster controller: watch and server-side apply the StatefulSets of the Redis nodes",
        admission_only: false,
    },
    Permission {
        group: "",
        resource: "services",
        requests: &[
            rbac::Request::List,
            rbac::Request::Watch,
            rbac::Request::ApplyMayCreate,
        ],
        scope: rbac::RoleScope::Manager,
        purpose: "RedisCluster controller: watch and server-side apply the headless Services of the Redis nodes",
        admission_only: false,
    },
    Permission {
        group: "",
        resource: "pods",
        requests: &[rbac::Request::List, rbac::Request::Watch],
        scope: rbac::RoleScope::Manager,
        purpose: "RedisCluster controller: the Redis nodes' pods, for status.nodes and failing nodes (cache)",
        admission_only: false,
    },
    // +olmkit:scaffold:permissions
];
