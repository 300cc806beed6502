//! The {{kind}} kind, `{{plural}}.{{full_group}}`: its versions and its CRD.{{conversion_summary}}
//!
//! Written by `bundle-tool create api`, and rewritten when it adds a version of {{kind}}: put
//! your code in the version modules{{conversion_file}}, not here.

{{modules}}

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
{{#if multi}}
use olmkit_runtime::conversion::HubAndSpoke;
{{/if}}

/// The storage version's types: what the controller reads and writes.
{{reexport}}

/// The API group.
pub const GROUP: &str = "{{full_group}}";
/// The kind.
pub const KIND: &str = "{{kind}}";
/// The plural resource name.
pub const PLURAL: &str = "{{plural}}";
/// The version stored in etcd{{hub_note}}.
pub const STORAGE_VERSION: &str = "{{storage}}";
/// Every served version, oldest first.
pub const VERSIONS: &[&str] = &[{{versions}}];
/// The finalizer of {{kind}}s: a deploy-image controller puts it on every one; a plain
/// controller that must clean up outside the cluster adds it with kube-runtime's `finalizer`
/// helper (and the `patch` and `finalizers` rows in `src/rbac.rs`).
pub const FINALIZER: &str = "{{full_group}}/finalizer";

{{#if multi}}
/// The CustomResourceDefinition: every version, `{{storage}}` stored.
pub fn crd() -> CustomResourceDefinition {
    {{crd_parts}}
    olmkit_runtime::crd::merge(parts, STORAGE_VERSION, VERSIONS)
        .expect("the versions of {{kind}} share group, kind, scope and names")
}

/// The conversion webhook's converter: every version to and from the hub `{{storage}}` (the
/// `Spoke` implementations are in `conversion.rs`).
pub fn converter() -> HubAndSpoke<{{storage}}::{{kind}}> {
    {{spokes}}
}
{{else}}
/// The CustomResourceDefinition.
pub fn crd() -> CustomResourceDefinition {
    {{storage}}::{{kind}}::crd()
}
{{/if}}
