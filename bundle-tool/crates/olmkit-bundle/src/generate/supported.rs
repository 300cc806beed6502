//! The kinds generation carries from the manifests into a bundle.
//!
//! operator-sdk's `GetManifestObjects` writes every collected object whose kind operator-registry's
//! `bundle.IsSupported` accepts (`pkg/lib/bundle/supported_resources.go`), so this is that table,
//! at operator-registry's current revision: the console extensions (ConsoleYAMLSample,
//! ConsoleQuickStart, ConsoleCLIDownload, ConsoleLink, ConsolePlugin), NetworkPolicy and
//! PodMonitor included. It is kept here rather than in [`crate::kinds`] (the validator's table)
//! so that generation never drops an object OLM would install; the validator may lag behind.

/// Kinds OLM installs from a registry+v1 bundle.
pub const BUNDLE_KINDS: &[&str] = &[
    "ClusterServiceVersion",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Service",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "Secret",
    "ConfigMap",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
    "NetworkPolicy",
    "PodMonitor",
];

/// True if OLM installs objects of `kind` from a bundle (operator-registry `IsSupported`).
pub fn is_bundle_kind(kind: &str) -> bool {
    BUNDLE_KINDS.contains(&kind)
}

/// Comma-separated list of [`BUNDLE_KINDS`], for notes.
pub fn bundle_kinds_list() -> String {
    BUNDLE_KINDS.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_kinds_are_bundle_kinds() {
        for k in [
            "ConsoleLink",
            "ConsoleQuickStart",
            "ConsoleCLIDownload",
            "ConsoleYAMLSample",
        ] {
            assert!(is_bundle_kind(k), "{k}");
        }
        assert!(!is_bundle_kind("Namespace"));
        assert!(!is_bundle_kind("Deployment"));
    }
}
