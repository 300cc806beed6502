//! OLM v1 manifests: ClusterCatalog, ClusterExtension, and the installer ServiceAccount with the
//! least RBAC OLM v1 needs to install the bundle with it.
//!
//! The RBAC follows operator-controller's "Derive minimal ServiceAccount required for
//! ClusterExtension Installation and Management": the installer must manage the bundle's CRDs,
//! its Deployments and ServiceAccounts, the other manifests it ships, the (Cluster)Roles and
//! bindings OLM v1 generates for the operator (their names carry a hash, so they cannot be
//! scoped by name), update the ClusterExtension's finalizers (OwnerReferencesPermissionEnforcement),
//! and hold every permission the CSV grants (Kubernetes RBAC forbids granting what one does not
//! hold). Under AllNamespaces, OLM v1 promotes the CSV's namespaced `permissions` to
//! ClusterRoles with an extra namespaces get/list/watch rule, so the installer needs those
//! cluster-wide too. Recent operator-controller releases ignore `spec.serviceAccount` and run
//! with their own cluster-admin account; the ServiceAccount and RBAC are still what every
//! release that honours the field requires, and harmless for the others.

use super::BundleFacts;
use crate::install_mode::{InstallModeType, supported_modes};
use crate::names::is_digest_ref;
use crate::olm::MANAGED_BY_LABEL;
use olmkit_core::csv::Csv;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// Parameters of the OLM v1 manifests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V1Params {
    /// ClusterExtension name.
    pub extension_name: String,
    /// Package to install.
    pub package: String,
    /// Install namespace.
    pub namespace: String,
    /// ClusterCatalog name.
    pub catalog_name: String,
    /// Catalog image.
    pub catalog_image: String,
    /// `pollIntervalMinutes` (ignored for digest references, which CEL forbids polling).
    pub poll_interval_minutes: Option<u64>,
    /// Channel to follow.
    pub channel: Option<String>,
    /// Version or range to install.
    pub version: Option<String>,
    /// Installer ServiceAccount name.
    pub service_account: String,
}

fn labels() -> Value {
    json!({ MANAGED_BY_LABEL: "bundle-tool" })
}

/// The ClusterCatalog serving the catalog image.
pub fn cluster_catalog(p: &V1Params) -> Value {
    let mut image = Map::new();
    image.insert("ref".into(), json!(p.catalog_image));
    if let Some(m) = p.poll_interval_minutes
        && !is_digest_ref(&p.catalog_image)
    {
        image.insert("pollIntervalMinutes".into(), json!(m.max(1)));
    }
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterCatalog",
        "metadata": { "name": p.catalog_name, "labels": labels() },
        "spec": { "source": { "type": "Image", "image": image } },
    })
}

/// The ClusterExtension. `watch_namespace` is set for bundles without AllNamespaces support.
pub fn cluster_extension(p: &V1Params, watch_namespace: Option<&str>) -> Value {
    let mut catalog = Map::new();
    catalog.insert("packageName".into(), json!(p.package));
    if let Some(c) = &p.channel {
        catalog.insert("channels".into(), json!([c]));
    }
    if let Some(v) = &p.version {
        catalog.insert("version".into(), json!(v));
    }
    // Pin resolution to our catalog: another ClusterCatalog may carry the same package.
    catalog.insert(
        "selector".into(),
        json!({ "matchLabels": { "olm.operatorframework.io/metadata.name": p.catalog_name } }),
    );
    catalog.insert("upgradeConstraintPolicy".into(), json!("CatalogProvided"));
    let mut spec = Map::new();
    spec.insert("namespace".into(), json!(p.namespace));
    spec.insert(
        "serviceAccount".into(),
        json!({ "name": p.service_account }),
    );
    spec.insert(
        "source".into(),
        json!({ "sourceType": "Catalog", "catalog": catalog }),
    );
    if let Some(ns) = watch_namespace {
        spec.insert(
            "config".into(),
            json!({ "configType": "Inline", "inline": { "watchNamespace": ns } }),
        );
    }
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": { "name": p.extension_name, "labels": labels() },
        "spec": spec,
    })
}

/// An RBAC policy rule with only the fields Kubernetes defines (CSV rules are copied through
/// this so stray keys cannot make the Role invalid).
fn clean_rule(rule: &Value) -> Option<Value> {
    let mut out = Map::new();
    for key in [
        "apiGroups",
        "resources",
        "resourceNames",
        "nonResourceURLs",
        "verbs",
    ] {
        if let Some(v) = rule.get(key).and_then(Value::as_array)
            && !v.is_empty()
        {
            let list: Vec<Value> = v.iter().filter(|x| x.is_string()).cloned().collect();
            if !list.is_empty() {
                out.insert(key.into(), Value::Array(list));
            }
        }
    }
    out.contains_key("verbs").then_some(Value::Object(out))
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str], names: &[String]) -> Value {
    let mut m = Map::new();
    m.insert("apiGroups".into(), json!(groups));
    m.insert("resources".into(), json!(resources));
    if !names.is_empty() {
        m.insert("resourceNames".into(), json!(names));
    }
    m.insert("verbs".into(), json!(verbs));
    Value::Object(m)
}

/// Rules to create and manage named objects of one resource: create/list/watch cannot be
/// scoped by name in Kubernetes RBAC; the rest can.
fn manage_named(group: &str, resource: &str, names: &BTreeSet<String>) -> Vec<Value> {
    if names.is_empty() {
        return Vec::new();
    }
    let names: Vec<String> = names.iter().cloned().collect();
    vec![
        rule(&[group], &[resource], &["create", "list", "watch"], &[]),
        rule(
            &[group],
            &[resource],
            &["delete", "get", "patch", "update"],
            &names,
        ),
    ]
}

const ALL_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

fn push_unique(rules: &mut Vec<Value>, r: Value) {
    if !rules.contains(&r) {
        rules.push(r);
    }
}

/// (group, plural) of the namespaced kinds a bundle may ship.
fn namespaced_resource(kind: &str) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        "Service" => ("", "services"),
        "ConfigMap" => ("", "configmaps"),
        "Secret" => ("", "secrets"),
        "ServiceAccount" => ("", "serviceaccounts"),
        "Role" => ("rbac.authorization.k8s.io", "roles"),
        "RoleBinding" => ("rbac.authorization.k8s.io", "rolebindings"),
        "PrometheusRule" => ("monitoring.coreos.com", "prometheusrules"),
        "ServiceMonitor" => ("monitoring.coreos.com", "servicemonitors"),
        _ => return None,
    })
}

/// The installer's rules: (cluster-wide rules, rules in the install namespace).
pub fn installer_rules(p: &V1Params, facts: &BundleFacts) -> (Vec<Value>, Vec<Value>) {
    let all_namespaces =
        supported_modes(&facts.install_modes()).contains(&InstallModeType::AllNamespaces);
    let mut cluster = Vec::new();
    let mut ns = Vec::new();

    cluster.push(rule(
        &["olm.operatorframework.io"],
        &["clusterextensions/finalizers"],
        &["update"],
        std::slice::from_ref(&p.extension_name),
    ));
    let crds: BTreeSet<String> = facts.crds().map(|c| c.name().to_string()).collect();
    cluster.extend(manage_named(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &crds,
    ));
    cluster.push(rule(
        &["rbac.authorization.k8s.io"],
        &["clusterrolebindings", "clusterroles"],
        ALL_VERBS,
        &[],
    ));
    cluster.extend(webhook_configuration_rules(facts.csv_view()));
    granted_rules(facts, all_namespaces, &mut cluster, &mut ns);
    let has_webhooks = facts.csv_view().webhook_definitions().next().is_some();
    ns.extend(namespaced_object_rules(facts, has_webhooks));
    (cluster, ns)
}

/// The rules for the bundle's webhook configurations, by their names.
fn webhook_configuration_rules(csv: Csv<'_>) -> Vec<Value> {
    let mut hook_resources = BTreeSet::new();
    let mut hook_names = BTreeSet::new();
    for wh in csv.webhook_definitions() {
        let t = wh.webhook_type().unwrap_or("");
        let name = wh
            .generate_name()
            .unwrap_or("")
            .trim_end_matches('-')
            .to_string();
        match t {
            "ValidatingAdmissionWebhook" => {
                hook_resources.insert("validatingwebhookconfigurations");
                hook_names.insert(name);
            }
            "MutatingAdmissionWebhook" => {
                hook_resources.insert("mutatingwebhookconfigurations");
                hook_names.insert(name);
            }
            _ => {}
        }
    }
    if hook_resources.is_empty() {
        return Vec::new();
    }
    let res: Vec<&str> = hook_resources.into_iter().collect();
    vec![
        rule(
            &["admissionregistration.k8s.io"],
            &res,
            &["create", "list", "watch"],
            &[],
        ),
        rule(
            &["admissionregistration.k8s.io"],
            &res,
            &["delete", "get", "patch", "update"],
            &hook_names.into_iter().collect::<Vec<_>>(),
        ),
    ]
}

/// What the CSV grants the operator, which the installer must hold to grant it: its cluster
/// permissions cluster-wide, its namespaced permissions in the namespace (cluster-wide, with
/// reading namespaces, for an install in all namespaces).
fn granted_rules(
    facts: &BundleFacts,
    all_namespaces: bool,
    cluster: &mut Vec<Value>,
    ns: &mut Vec<Value>,
) {
    let csv = facts.csv_view();
    for perm in csv.cluster_permissions() {
        for r in perm.rules() {
            if let Some(r) = clean_rule(r) {
                push_unique(cluster, r);
            }
        }
    }
    let namespaced_perms: Vec<Value> = csv
        .permissions()
        .flat_map(|perm| perm.rules())
        .filter_map(clean_rule)
        .filter(|r| r.get("nonResourceURLs").is_none())
        .collect();
    if all_namespaces {
        for r in namespaced_perms {
            push_unique(cluster, r);
        }
        if csv.permissions().next().is_some() {
            push_unique(
                cluster,
                rule(&[""], &["namespaces"], &["get", "list", "watch"], &[]),
            );
        }
    } else {
        for r in namespaced_perms {
            push_unique(ns, r);
        }
    }
}

/// The service accounts the operator runs as (named by its permissions or deployments), except
/// the namespace's `default`.
fn service_accounts(facts: &BundleFacts) -> BTreeSet<String> {
    let mut service_accounts: BTreeSet<String> = BTreeSet::new();
    let csv = facts.csv_view();
    for perm in csv.permissions().chain(csv.cluster_permissions()) {
        if let Some(sa) = perm.service_account_name() {
            service_accounts.insert(sa.to_string());
        }
    }
    for d in csv.deployments() {
        if let Some(sa) = d.spec().pod_spec().service_account() {
            service_accounts.insert(sa.to_string());
        }
    }
    service_accounts.remove("default");
    service_accounts.remove("");
    service_accounts
}

/// Namespaced objects: deployments, service accounts, shipped manifests, generated RBAC.
fn namespaced_object_rules(facts: &BundleFacts, has_webhooks: bool) -> Vec<Value> {
    let mut ns = Vec::new();
    let deployments: BTreeSet<String> = facts
        .csv_view()
        .deployments()
        .filter_map(|d| d.name())
        .map(String::from)
        .collect();
    ns.extend(manage_named("apps", "deployments", &deployments));
    let mut by_resource: std::collections::BTreeMap<(&str, &str), BTreeSet<String>> =
        Default::default();
    for o in &facts.objects {
        if let Some(key) = namespaced_resource(o.kind()) {
            by_resource
                .entry(key)
                .or_default()
                .insert(o.name().to_string());
        }
    }
    by_resource
        .entry(("", "serviceaccounts"))
        .or_default()
        .extend(service_accounts(facts));
    for ((group, resource), names) in &by_resource {
        if *group == "rbac.authorization.k8s.io" {
            continue; // covered by the unscoped rule below
        }
        if *resource == "services" && has_webhooks {
            continue; // covered by the webhook service rule below
        }
        ns.extend(manage_named(group, resource, names));
    }
    ns.push(rule(
        &["rbac.authorization.k8s.io"],
        &["rolebindings", "roles"],
        ALL_VERBS,
        &[],
    ));
    if has_webhooks {
        // OLM v1 creates one Service per webhook deployment and the certificate objects of its
        // certificate provider (cert-manager upstream).
        ns.push(rule(&[""], &["services"], ALL_VERBS, &[]));
        ns.push(rule(
            &["cert-manager.io"],
            &["certificates", "issuers"],
            ALL_VERBS,
            &[],
        ));
    }
    ns
}

fn role_names(p: &V1Params) -> (String, String) {
    (
        format!("{}-installer", p.extension_name),
        format!("{}-installer-binding", p.extension_name),
    )
}

/// The installer ServiceAccount, its ClusterRole/Role and their bindings.
pub fn installer_rbac(p: &V1Params, facts: &BundleFacts) -> Vec<Value> {
    let (role, binding) = role_names(p);
    let (cluster_rules, ns_rules) = installer_rules(p, facts);
    let subject =
        json!([{ "kind": "ServiceAccount", "name": p.service_account, "namespace": p.namespace }]);
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": { "name": p.service_account, "namespace": p.namespace, "labels": labels() },
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": { "name": role, "labels": labels() },
            "rules": cluster_rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": { "name": binding, "labels": labels() },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
            "subjects": subject,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": { "name": role, "namespace": p.namespace, "labels": labels() },
            "rules": ns_rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": { "name": binding, "namespace": p.namespace, "labels": labels() },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role },
            "subjects": subject,
        }),
    ]
}

/// Everything `install --olm-v1` applies or prints, in apply order: Namespace, installer
/// ServiceAccount and RBAC, ClusterCatalog, ClusterExtension.
pub fn v1_manifests(p: &V1Params, facts: &BundleFacts) -> Vec<Value> {
    let all_namespaces =
        supported_modes(&facts.install_modes()).contains(&InstallModeType::AllNamespaces);
    let mut out = vec![crate::manifests::namespace(&p.namespace)];
    out.extend(installer_rbac(p, facts));
    out.push(cluster_catalog(p));
    out.push(cluster_extension(
        p,
        (!all_namespaces).then_some(p.namespace.as_str()),
    ));
    out
}
