//! Which Kubernetes kinds a registry+v1 bundle may ship, and how they are scoped.
//!
//! OLM's bundle unpacker installs only the kinds in operator-registry's
//! `pkg/lib/bundle/supported_resources.go`; anything else makes `opm`/`operator-sdk bundle
//! validate` fail with "`<Kind> is not supported type for registryV1 bundle`". Generation drops
//! other kinds (with a note) and validation reports them, so both share this one table.

/// `kind` of the ClusterServiceVersion.
pub const CSV: &str = "ClusterServiceVersion";
/// `kind` of a CustomResourceDefinition.
pub const CRD: &str = "CustomResourceDefinition";

/// Kinds OLM accepts in a registry+v1 bundle, with whether each is namespaced.
/// Mirrors operator-registry `supportedResources` (same members, same scopes).
pub const SUPPORTED: &[(&str, bool)] = &[
    (CSV, true),
    (CRD, false),
    ("ClusterRole", false),
    ("ClusterRoleBinding", false),
    ("Service", true),
    ("ServiceAccount", true),
    ("Role", true),
    ("RoleBinding", true),
    ("PrometheusRule", true),
    ("ServiceMonitor", true),
    ("Secret", true),
    ("ConfigMap", true),
    ("PodDisruptionBudget", true),
    ("PriorityClass", false),
    ("VerticalPodAutoscaler", false),
    ("ConsoleYAMLSample", false),
];

/// True if OLM installs objects of `kind` from a bundle.
pub fn is_supported(kind: &str) -> bool {
    SUPPORTED.iter().any(|(k, _)| *k == kind)
}

/// `Some(true)` for a namespaced supported kind, `Some(false)` for a cluster-scoped one, `None`
/// for a kind OLM does not accept.
pub fn is_namespaced(kind: &str) -> Option<bool> {
    SUPPORTED.iter().find(|(k, _)| *k == kind).map(|(_, n)| *n)
}

/// Comma-separated list of the supported kinds, for hints.
pub fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|(k, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert!(is_supported("ConfigMap"));
        assert!(!is_supported("Deployment"));
        assert_eq!(is_namespaced("ClusterRole"), Some(false));
        assert_eq!(is_namespaced("Secret"), Some(true));
        assert_eq!(is_namespaced("Namespace"), None);
        assert!(supported_list().contains("PriorityClass"));
    }
}
