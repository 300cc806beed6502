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
        group: "consumer.example.com",
        resource: "pulsarconsumers",
        requests: &[
            rbac::Request::List,
            rbac::Request::Watch,
            rbac::Request::Patch,
        ],
        scope: rbac::RoleScope::Manager,
        purpose: "PulsarConsumer controller: watch PulsarConsumer objects, add and remove its finalizer",
        admission_only: false,
    },
    Permission {
        group: "consumer.example.com",
        resource: "pulsarconsumers/status",
        requests: &[rbac::Request::Patch],
        scope: rbac::RoleScope::Manager,
        purpose: "PulsarConsumer controller: server-side apply the status",
        admission_only: false,
    },
    Permission {
        group: "consumer.example.com",
        resource: "pulsarconsumers/finalizers",
        requests: &[rbac::Request::Update],
        scope: rbac::RoleScope::Manager,
        purpose: "PulsarConsumer controller: owner references with blockOwnerDeletion on its Deployments (OwnerReferencesPermissionEnforcement checks update on the owner's finalizers)",
        admission_only: true,
    },
    Permission {
        group: "apps",
        resource: "deployments",
        requests: &[
            rbac::Request::List,
            rbac::Request::Watch,
            rbac::Request::ApplyMayCreate,
        ],
        scope: rbac::RoleScope::Manager,
        purpose: "deploy-image controllers: watch and server-side apply the Deployments they own",
        admission_only: false,
    },
    Permission {
        group: "",
        resource: "pods",
        requests: &[rbac::Request::List, rbac::Request::Watch],
        scope: rbac::RoleScope::Manager,
        purpose: "PulsarConsumer controller: status.pods (cache of the consumer pods, selected by label)",
        admission_only: false,
    },
    // +olmkit:scaffold:permissions
];
