//! The WhaleSay kind, `whalesays.devsectim.io`: its versions and its CRD.
//!
//! Written by `bundle-tool create api`, and rewritten when it adds a version of WhaleSay: put
//! your code in the version modules, not here.

pub mod v1alpha1;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The storage version's types: what the controller reads and writes.
pub use v1alpha1::{WhaleSay, WhaleSaySpec, WhaleSayStatus};

/// The API group.
pub const GROUP: &str = "devsectim.io";
/// The kind.
pub const KIND: &str = "WhaleSay";
/// The plural resource name.
pub const PLURAL: &str = "whalesays";
/// The version stored in etcd.
pub const STORAGE_VERSION: &str = "v1alpha1";
/// Every served version, oldest first.
pub const VERSIONS: &[&str] = &["v1alpha1"];
/// The finalizer of WhaleSays: a deploy-image controller puts it on every one; a plain
/// controller that must clean up outside the cluster adds it with kube-runtime's `finalizer`
/// helper (and the `patch` and `finalizers` rows in `src/rbac.rs`).
pub const FINALIZER: &str = "devsectim.io/finalizer";

/// The CustomResourceDefinition.
pub fn crd() -> CustomResourceDefinition {
    v1alpha1::WhaleSay::crd()
}
