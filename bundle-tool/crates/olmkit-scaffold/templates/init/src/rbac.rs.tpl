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
    // +olmkit:scaffold:permissions
];
