//! Names: bundle file names, CSV names, Kubernetes name syntax and API version ordering.
//!
//! File names follow operator-sdk so that a bundle generated here diffs cleanly against one
//! generated there: `<name>_<group>_<version>_<kind>.yaml` (group left out for the core group),
//! `<group>_<plural>.yaml` for CRDs and `<package>.clusterserviceversion.yaml` for the CSV.

use olmkit_core::k8s_name;
use serde_json::Value;

/// `<package>.v<version>`, the CSV name convention operator-sdk and OperatorHub use.
pub fn csv_name(package: &str, version: &str) -> String {
    format!("{package}.v{version}")
}

/// File name of the CSV in `manifests/`.
pub fn csv_file_name(package: &str) -> String {
    format!("{}.clusterserviceversion.yaml", package.to_lowercase())
}

/// File name of a CRD: `<group>_<plural>.yaml` (controller-gen's convention, which
/// operator-sdk keeps in bundles).
pub fn crd_file_name(group: &str, plural: &str) -> String {
    format!("{group}_{plural}.yaml")
}

/// File name of any other object: `<name>_<group>_<version>_<kind>.yaml`, or
/// `<name>_<version>_<kind>.yaml` for the core group. Characters that cannot appear in a file
/// name are replaced (a `:` in `system:auth-delegator` style names, a `/`).
pub fn object_file_name(api_version: &str, kind: &str, name: &str) -> String {
    let safe = |s: &str| s.replace(['/', ':', '\\'], "-");
    let kind = kind.to_lowercase();
    match api_version.split_once('/') {
        Some((group, version)) => format!(
            "{}_{}_{}_{}.yaml",
            safe(name),
            safe(group),
            safe(version),
            kind
        ),
        None => format!("{}_{}_{}.yaml", safe(name), safe(api_version), kind),
    }
}

/// The bundle file name of `object` (CSV, CRD or other), given the package name.
pub fn manifest_file_name(object: &Value, package: &str) -> String {
    let s = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
    match s("/kind") {
        "ClusterServiceVersion" => csv_file_name(package),
        "CustomResourceDefinition" if !s("/spec/group").is_empty() => {
            crd_file_name(s("/spec/group"), s("/spec/names/plural"))
        }
        kind => object_file_name(s("/apiVersion"), kind, s("/metadata/name")),
    }
}

/// Why `name` is not a DNS-1123 subdomain, or `None` when it is one: apimachinery
/// `IsDNS1123Subdomain`'s messages ([`olmkit_core::k8s_name`]), joined with "," as
/// operator-framework/api joins them. Kept for the bundle generator; validators call
/// `olmkit_core::k8s_name` directly.
pub fn dns1123_subdomain_problem(name: &str) -> Option<String> {
    joined(k8s_name::dns1123_subdomain_errors(name))
}

fn joined(problems: Vec<String>) -> Option<String> {
    (!problems.is_empty()).then(|| problems.join(","))
}

/// Splits a CSV name `<operator>.(v)X.Y.Z` into operator name and version, as
/// operator-framework/api `parseCSVNameFormat` does (everything after the first dot, with
/// leading `v`s trimmed, must be semver).
pub fn parse_csv_name(name: &str) -> Result<(String, semver::Version), String> {
    if let Some(p) = dns1123_subdomain_problem(name) {
        return Err(format!("{name:?} is invalid: {p}"));
    }
    let Some((operator, rest)) = name.split_once('.') else {
        return Err(format!(
            "{name:?} must have format: {{operator name}}.(v)X.Y.Z"
        ));
    };
    let version = rest.trim_start_matches('v');
    semver::Version::parse(version)
        .map(|v| (operator.to_string(), v))
        .map_err(|_| format!("{name:?} contains an invalid semver {rest:?}"))
}

/// The package part of a CSV name: everything before `.v<semver>` (or before the first dot).
pub fn package_of_csv_name(name: &str) -> &str {
    if let Some(idx) = name.find(".v")
        && semver::Version::parse(&name[idx + 2..]).is_ok()
    {
        return &name[..idx];
    }
    name.split('.').next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_names_match_operator_sdk() {
        assert_eq!(
            object_file_name("v1", "Service", "authorino-webhooks"),
            "authorino-webhooks_v1_service.yaml"
        );
        assert_eq!(
            object_file_name(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "authorino-manager-role"
            ),
            "authorino-manager-role_rbac.authorization.k8s.io_v1_clusterrole.yaml"
        );
        let crd = json!({"kind": "CustomResourceDefinition", "spec": {"group": "cache.example.com", "names": {"plural": "memcacheds"}}});
        assert_eq!(
            manifest_file_name(&crd, "x"),
            "cache.example.com_memcacheds.yaml"
        );
        let csv = json!({"kind": "ClusterServiceVersion"});
        assert_eq!(
            manifest_file_name(&csv, "memcached-operator"),
            "memcached-operator.clusterserviceversion.yaml"
        );
    }

    #[test]
    fn csv_names() {
        assert_eq!(
            parse_csv_name("memcached-operator.v0.1.0").unwrap(),
            ("memcached-operator".into(), semver::Version::new(0, 1, 0))
        );
        assert!(parse_csv_name("memcached-operator").is_err());
        assert!(parse_csv_name("Memcached.v1.0.0").is_err());
        assert!(parse_csv_name("memcached.v1.0").is_err());
        assert_eq!(package_of_csv_name("a.b.v1.2.3"), "a.b");
        assert_eq!(
            package_of_csv_name("skupper-operator.v1.4.0-rc2"),
            "skupper-operator"
        );
    }

    #[test]
    fn dns_names() {
        assert!(dns1123_subdomain_problem("memcacheds.cache.example.com").is_none());
        assert!(dns1123_subdomain_problem("Bad").is_some());
        assert!(dns1123_subdomain_problem("-a").is_some());
        // A subdomain may be 253 characters, with no 63-character limit between dots
        // (ServiceMonitor names like "<operator>-controller-manager-metrics-monitor").
        assert!(dns1123_subdomain_problem(&"a".repeat(64)).is_none());
        assert!(dns1123_subdomain_problem(&"a".repeat(254)).is_some());
    }
}
