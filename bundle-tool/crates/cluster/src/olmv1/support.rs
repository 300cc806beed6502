//! Can OLM v1 install this bundle? The registry+v1 features OLM v1 rejects or handles
//! differently, checked before a ClusterExtension fails on the cluster.
//!
//! Sources (operator-controller's docs "OLM v1 limitations" / "Supported extensions" and its
//! registry+v1 renderer's validators): the bundle must support the `AllNamespaces` install mode
//! (Single/OwnNamespace only through the `watchNamespace` configuration, which not every
//! release serves); it must not declare dependencies (`olm.gvk.required`,
//! `olm.package.required`, `olm.constraint`, which is also what required CRDs and APIServices
//! in the CSV become); the OperatorConditions API does not exist under OLM v1; bundles with
//! APIService definitions are rejected; webhooks need a certificate provider (cert-manager
//! upstream, the service CA on OpenShift) and, for conversion webhooks, AllNamespaces only;
//! webhook rules may not target all API groups, OLM's own group or admission webhook
//! configurations; and only the manifest kinds operator-registry lists as supported may ship
//! in the bundle. Structural rules the renderer enforces (unique deployment, CRD and webhook
//! names, webhooks pointing at existing deployments and owned CRDs) are checked too.
//!
//! The check is pure and reports every problem (errors block an install, warnings need a
//! feature or configuration on the cluster).

use super::BundleFacts;
use olmkit_catalog::property;
use olmkit_core::findings::{Finding, Report};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Manifest kinds OLM v1's registry+v1 renderer accepts besides the CSV (operator-registry
/// `IsSupported`).
pub const SUPPORTED_KINDS: &[&str] = &[
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
];

fn dns1123_subdomain(s: &str) -> bool {
    crate::names::check_dns1123_subdomain("", s).is_ok()
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Checks a bundle against OLM v1's rules; every problem is reported.
pub fn check_olmv1_support(facts: &BundleFacts) -> Report {
    let mut report = Report::new();
    let csv_file = facts.csv_file();
    let err = |rule: &str, path: &str, msg: String| {
        Finding::error(rule, msg)
            .file(csv_file.clone())
            .path(path.to_string())
    };
    let warn = |rule: &str, path: &str, msg: String| {
        Finding::warning(rule, msg)
            .file(csv_file.clone())
            .path(path.to_string())
    };

    if facts.package.is_empty() {
        report.push(
            Finding::error("olmv1-package", "the bundle has no package name")
                .file(facts.origin.clone()),
        );
    }

    // Install modes.
    let modes = crate::install_mode::supported_modes(&facts.install_modes());
    use crate::install_mode::InstallModeType as M;
    let all = modes.contains(&M::AllNamespaces);
    if !all {
        if modes.contains(&M::OwnNamespace) || modes.contains(&M::SingleNamespace) {
            report.push(
                warn(
                    "olmv1-install-modes",
                    "spec.installModes",
                    format!(
                        "{} does not support AllNamespaces; OLM v1 installs it only with a watchNamespace configuration (ClusterExtension spec.config.inline.watchNamespace), which needs an OLM v1 release that serves it",
                        facts.csv_name()
                    ),
                )
                .hint("support AllNamespaces if the operator can watch every namespace; OLM v1 treats APIs as cluster-wide"),
            );
        } else {
            report.push(
                err(
                    "olmv1-install-modes",
                    "spec.installModes",
                    format!(
                        "{} supports neither AllNamespaces nor Own/SingleNamespace; OLM v1 cannot install it (MultiNamespace is not supported)",
                        facts.csv_name()
                    ),
                )
                .hint("mark AllNamespaces as supported in spec.installModes"),
            );
        }
    }

    // Dependencies.
    for p in &facts.properties {
        if matches!(
            p.type_.as_str(),
            property::GVK_REQUIRED | property::PACKAGE_REQUIRED | property::CONSTRAINT
        ) {
            report.push(
                Finding::error(
                    "olmv1-dependencies",
                    format!(
                        "OLM v1 does not resolve dependencies; the bundle declares {} {}",
                        p.type_,
                        serde_json::to_string(&p.value).unwrap_or_default()
                    ),
                )
                .file(
                    facts
                        .dependencies_file
                        .clone()
                        .unwrap_or_else(|| facts.csv_file()),
                )
                .path(if facts.dependencies_file.as_deref() == Some("metadata/dependencies.yaml") {
                    "dependencies"
                } else {
                    "properties"
                })
                .hint("install the dependency separately and drop it from metadata/dependencies.yaml and the CSV's required APIs"),
            );
        }
    }
    let required_gvks: BTreeSet<String> = facts
        .properties
        .iter()
        .filter(|p| p.type_ == property::GVK_REQUIRED)
        .filter_map(|p| {
            Some(format!(
                "{}/{}",
                p.value.get("group")?.as_str()?,
                p.value.get("kind")?.as_str()?
            ))
        })
        .collect();
    for (path, list) in [
        (
            "spec.customresourcedefinitions.required",
            facts.csv_at("/spec/customresourcedefinitions/required"),
        ),
        (
            "spec.apiservicedefinitions.required",
            facts.csv_at("/spec/apiservicedefinitions/required"),
        ),
    ] {
        for (i, r) in list
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = str_of(r, "name");
            let group = str_of(r, "group");
            let group = if group.is_empty() {
                name.split_once('.').map(|(_, g)| g).unwrap_or("")
            } else {
                group
            };
            let key = format!("{group}/{}", str_of(r, "kind"));
            if !required_gvks.contains(&key) {
                report.push(err(
                    "olmv1-dependencies",
                    &format!("{path}[{i}]"),
                    format!(
                        "OLM v1 does not resolve dependencies; the CSV requires {} ({})",
                        str_of(r, "kind"),
                        if name.is_empty() { group } else { name }
                    ),
                ));
            }
        }
    }

    // APIServices.
    if let Some(owned) = facts
        .csv_at("/spec/apiservicedefinitions/owned")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        report.push(err(
            "olmv1-apiservices",
            "spec.apiservicedefinitions.owned",
            format!(
                "OLM v1 rejects bundles with APIService definitions (\"apiServiceDefintions are not supported\"); this CSV owns {}",
                owned.len()
            ),
        ));
    }

    // OperatorConditions: a CSV that asks for permission on them, or deployments reading
    // OPERATOR_CONDITION_NAME, relies on an API OLM v1 does not provide.
    let mut uses_conditions = false;
    for which in ["permissions", "clusterPermissions"] {
        for p in facts.permissions(which) {
            for rule in p
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let groups = strings(rule.get("apiGroups"));
                let resources = strings(rule.get("resources"));
                if groups.iter().any(|g| g == "operators.coreos.com")
                    && resources
                        .iter()
                        .any(|r| r.starts_with("operatorconditions"))
                {
                    uses_conditions = true;
                }
            }
        }
    }
    for d in facts.deployments() {
        if d.to_string().contains("OPERATOR_CONDITION_NAME") {
            uses_conditions = true;
        }
    }
    if uses_conditions {
        report.push(
            warn(
                "olmv1-operator-conditions",
                "spec.install",
                "the operator uses the OperatorConditions API (operators.coreos.com operatorconditions), which OLM v1 does not provide; it may fail at start or when reporting upgradeability".into(),
            )
            .hint("make the operator tolerate a missing OperatorCondition, or pin the ClusterExtension to a version"),
        );
    }

    // Deployments.
    let mut deployment_names = BTreeSet::new();
    for (i, d) in facts.deployments().iter().enumerate() {
        let name = str_of(d, "name");
        if !deployment_names.insert(name.to_string()) {
            report.push(err(
                "olmv1-deployments",
                &format!("spec.install.spec.deployments[{i}].name"),
                format!(
                    "cluster service version contains duplicate strategy deployment spec '{name}'"
                ),
            ));
        }
        if !dns1123_subdomain(name) {
            report.push(err(
                "olmv1-deployments",
                &format!("spec.install.spec.deployments[{i}].name"),
                format!("invalid cluster service version strategy deployment name '{name}': not a DNS-1123 subdomain"),
            ));
        }
    }

    // CRDs.
    let mut crd_names = BTreeSet::new();
    for c in facts.crds() {
        if !crd_names.insert(c.name().to_string()) {
            report.push(
                Finding::error(
                    "olmv1-crds",
                    format!(
                        "bundle contains duplicate custom resource definition '{}'",
                        c.name()
                    ),
                )
                .file(c.file.clone().unwrap_or_else(|| facts.origin.clone())),
            );
        }
    }
    let owned: Vec<String> = facts
        .csv_at("/spec/customresourcedefinitions/owned")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|o| str_of(o, "name").to_string())
        .collect();
    let owned_set: BTreeSet<&str> = owned.iter().map(String::as_str).collect();
    for (i, name) in owned.iter().enumerate() {
        if !crd_names.contains(name) {
            report.push(err(
                "olmv1-crds",
                &format!("spec.customresourcedefinitions.owned[{i}]"),
                format!("cluster service definition references owned custom resource definition '{name}' not found in bundle"),
            ));
        }
    }

    // Other manifests.
    for o in &facts.objects {
        let kind = o.kind();
        if !SUPPORTED_KINDS.contains(&kind) {
            report.push(
                Finding::error(
                    "olmv1-unsupported-object",
                    format!(
                        "bundle contains unsupported resource: Name: {}, Kind: {kind}",
                        o.name()
                    ),
                )
                .file(o.file.clone().unwrap_or_else(|| facts.origin.clone()))
                .hint(format!(
                    "OLM v1 installs only these kinds from a bundle: ClusterServiceVersion, {}",
                    SUPPORTED_KINDS.join(", ")
                )),
            );
        }
    }

    // Webhooks.
    let webhooks = facts.webhooks();
    if !webhooks.is_empty() {
        report.push(
            warn(
                "olmv1-webhooks",
                "spec.webhookdefinitions",
                format!(
                    "the bundle defines {} webhook(s); OLM v1 installs them only with a certificate provider (cert-manager upstream, the service CA on OpenShift); older OLM v1 releases reject such bundles (\"webhookDefinitions are not supported\")",
                    webhooks.len()
                ),
            )
            .hint("install cert-manager on the cluster before the ClusterExtension"),
        );
    }
    let mut names_by_type: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut conversion_crds: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, wh) in webhooks.iter().enumerate() {
        let path = format!("spec.webhookdefinitions[{i}]");
        let t = str_of(wh, "type");
        let name = str_of(wh, "generateName");
        if !names_by_type
            .entry(t.to_string())
            .or_default()
            .insert(name.to_string())
        {
            report.push(err(
                "olmv1-webhooks",
                &path,
                format!("duplicate webhook '{name}' of type '{t}'"),
            ));
        }
        if !dns1123_subdomain(name) {
            report.push(err(
                "olmv1-webhooks",
                &format!("{path}.generateName"),
                format!(
                    "webhook of type '{t}' has invalid name '{name}': not a DNS-1123 subdomain"
                ),
            ));
        }
        let dep = str_of(wh, "deploymentName");
        if !deployment_names.contains(dep) {
            report.push(err(
                "olmv1-webhooks",
                &format!("{path}.deploymentName"),
                format!(
                    "webhook of type '{t}' with name '{name}' references non-existent deployment '{dep}'"
                ),
            ));
        }
        if t == "ConversionWebhook" {
            if !all || modes.len() != 1 {
                report.push(err(
                    "olmv1-webhooks",
                    &path,
                    format!(
                        "conversion webhook '{name}': OLM v1 (like OLM v0) requires a bundle with conversion webhooks to support only AllNamespaces"
                    ),
                ));
            }
            for crd in strings(wh.get("conversionCRDs")) {
                if !owned_set.contains(crd.as_str()) {
                    report.push(err(
                        "olmv1-webhooks",
                        &format!("{path}.conversionCRDs"),
                        format!(
                            "conversion webhook '{name}' references custom resource definition '{crd}' not owned bundle"
                        ),
                    ));
                }
                conversion_crds
                    .entry(crd)
                    .or_default()
                    .push(name.to_string());
            }
        } else {
            for (j, rule) in wh
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                for group in strings(rule.get("apiGroups")) {
                    if group == "*" || group == "olm.operatorframework.io" {
                        report.push(err(
                            "olmv1-webhooks",
                            &format!("{path}.rules[{j}]"),
                            format!(
                                "webhook \"{name}\" contains forbidden rule: admission webhook rules cannot reference API group \"{group}\""
                            ),
                        ));
                    }
                    if group == "admissionregistration.k8s.io" {
                        for r in strings(rule.get("resources")) {
                            let lower = r.to_ascii_lowercase();
                            if lower == "*"
                                || lower.starts_with("mutatingwebhookconfiguration")
                                || lower.starts_with("validatingwebhookconfiguration")
                            {
                                report.push(err(
                                    "olmv1-webhooks",
                                    &format!("{path}.rules[{j}]"),
                                    format!(
                                        "webhook \"{name}\" contains forbidden rule: admission webhook rules cannot reference resource \"{r}\" for API group \"{group}\""
                                    ),
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    for (crd, hooks) in conversion_crds {
        if hooks.len() > 1 {
            report.push(err(
                "olmv1-webhooks",
                "spec.webhookdefinitions",
                format!(
                    "conversion webhooks [{}] reference same custom resource definition '{crd}'",
                    hooks.join(",")
                ),
            ));
        }
    }

    report.normalize();
    report
}
