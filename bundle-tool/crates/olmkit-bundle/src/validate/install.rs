//! Install strategy checks: what OLM needs to create the operator's pods.
//!
//! OLM creates one Deployment per `spec.install.spec.deployments` entry and one ServiceAccount
//! per account named in `permissions`/`clusterPermissions`; the bundle's other manifests are
//! created as they are. A deployment whose account nobody creates never gets pods, and
//! operator-framework/api `validateServiceAccounts` rejects a bundled ServiceAccount named
//! like a deployment's `serviceAccountName` (an error, as upstream). Everything else here is
//! bundle-tool's own judgement of what OLM would fail on: warnings, errors with `suite=strict`.

use super::rules::{INSTALL_DEPLOYMENTS, INSTALL_PERMISSIONS, INSTALL_SERVICE_ACCOUNTS};
use super::{Ctx, name_problem};
use crate::json::{arr_at, string_map};
use crate::schemas;
use olmkit_core::csv::str_at;
use olmkit_core::csv::{Csv, CsvDeployment, DeploymentSpec};
use olmkit_core::k8s_name;
use std::collections::BTreeSet;

/// The service account a deployment's pods run as (`default` when unset).
fn deployment_sa(spec: &serde_json::Value) -> String {
    DeploymentSpec::new(spec)
        .pod_spec()
        .service_account()
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string()
}

/// Fields of a DeploymentSpec the API server requires to be non-negative
/// (`ValidateDeploymentSpec` in k8s.io/kubernetes/pkg/apis/apps/validation).
const NON_NEGATIVE: &[&str] = &[
    "replicas",
    "minReadySeconds",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
];

/// The Deployment spec as Go decodes it and as the API server validates it. A value Go cannot
/// decode into the typed spec (`"3"`, `1e23` or `1.5` for `replicas`) fails operator-framework/
/// api's bundle loader (it decodes the CSV into the typed `ClusterServiceVersion`,
/// `pkg/manifests/bundleloader.go`) and OLM: an error. A value that decodes but that the API
/// server refuses when OLM creates the Deployment (a negative `replicas`) is only caught at
/// install time, and operator-sdk does not look: a warning (an error with `suite=strict`).
fn decode_and_range(
    ctx: &mut Ctx,
    f: Option<&str>,
    base: &str,
    name: &str,
    spec: &serde_json::Value,
) -> BTreeSet<String> {
    // The paths reported as undecodable: the schema check's findings there would repeat them.
    let mut undecodable = BTreeSet::new();
    for p in schemas::deployment_spec_decode_problems(spec) {
        undecodable.insert(p.path.clone());
        ctx.at(f, Some(&format!("{base}.spec.{}", p.path))).error(&INSTALL_DEPLOYMENTS, format!("deployment {name}: {} (Go's decoder, and so operator-sdk and OLM, cannot read this CSV)", p.message));
    }
    for field in NON_NEGATIVE {
        let Some(n) = spec.get(*field).and_then(serde_json::Value::as_f64) else {
            continue;
        };
        if n < 0.0 {
            ctx.at(f, Some(&format!("{base}.spec.{field}"))).stricter(&INSTALL_DEPLOYMENTS, format!("deployment {name}: {field} is {n}; the API server refuses a negative value, so OLM could not create the Deployment"));
        }
    }
    undecodable
}

/// Runs the install checks: each install deployment, then the service accounts.
pub(crate) fn check(ctx: &mut Ctx) {
    let Some(file) = ctx.csv_file() else { return };
    let csv = ctx.csv_view();
    let f = Some(file);
    if csv.install_strategy() != Some("deployment") {
        return;
    }
    let deployments: Vec<CsvDeployment> = csv.deployments().collect();
    if deployments.is_empty() {
        ctx.at(f, Some("spec.install.spec.deployments")).stricter(&INSTALL_DEPLOYMENTS, "the install strategy lists no deployment, so OLM would run nothing").hint("generate the CSV from the operator's manifests (its Deployment) with `bundle-tool generate bundle`");
        return;
    }
    let mut names = BTreeSet::new();
    let mut used_accounts = BTreeSet::new();
    for d in &deployments {
        let base = format!("spec.install.spec.deployments[{}]", d.index);
        let name = d.name().unwrap_or("");
        deployment_name(ctx, f, &base, name, &mut names);
        let Some(spec) = d.raw.get("spec") else {
            ctx.at(f, Some(&format!("{base}.spec")))
                .stricter(&INSTALL_DEPLOYMENTS, "deployment spec is required");
            continue;
        };
        let undecodable = decode_and_range(ctx, f, &base, name, spec);
        deployment_schema(ctx, f, &base, name, spec, &undecodable);
        deployment_selector(ctx, f, &base, name, spec);
        used_accounts.insert(deployment_sa(spec));
    }
    let created = permissions(ctx, f, csv, &used_accounts);
    let bundled = bundled_service_accounts(ctx, &deployments, &used_accounts);
    for sa in &used_accounts {
        if sa == "default" || created.contains(sa) || bundled.iter().any(|n| n == sa) {
            continue;
        }
        ctx.at(f, Some("spec.install.spec.deployments")).stricter(&INSTALL_SERVICE_ACCOUNTS, format!("a deployment runs as service account {sa}, which neither the CSV permissions nor the bundle create; its pods would never start")).hint(format!("add a permissions entry for {sa} (rules may be empty)"));
    }
}

/// A deployment's name is set, unique and a DNS-1123 subdomain (what the API server requires
/// of the Deployment OLM creates; upstream does not look: stricter).
fn deployment_name(
    ctx: &mut Ctx,
    f: Option<&str>,
    base: &str,
    name: &str,
    names: &mut BTreeSet<String>,
) {
    let path = format!("{base}.name");
    let at = ctx.at(f, Some(&path));
    if name.is_empty() {
        at.stricter(&INSTALL_DEPLOYMENTS, "deployment name is required");
    } else if !names.insert(name.to_string()) {
        at.stricter(
            &INSTALL_DEPLOYMENTS,
            format!("deployment {name} is listed twice"),
        );
    } else if let Some(p) = name_problem(k8s_name::dns1123_subdomain_errors(name)) {
        at.stricter(
            &INSTALL_DEPLOYMENTS,
            format!("{name:?} is not a valid Deployment name: {p}"),
        );
    }
}

/// The DeploymentSpec against Kubernetes' apps/v1 schema, as Go decodes it (k8s.io/api
/// `apps/v1.DeploymentSpec`; upstream does not validate it: stricter). `null`s are zero
/// values, unknown fields (a stray `containers` key in a pod template) are dropped: a warning
/// even when strict. Paths Go cannot decode at all were reported already (`undecodable`).
fn deployment_schema(
    ctx: &mut Ctx,
    f: Option<&str>,
    base: &str,
    name: &str,
    spec: &serde_json::Value,
    undecodable: &BTreeSet<String>,
) {
    let violations = match schemas::validate_deployment_spec(
        if name.is_empty() { "deployment" } else { name },
        &crate::json::without_nulls(spec),
    ) {
        Ok(violations) => violations,
        Err(e) => {
            ctx.at(f, Some(&format!("{base}.spec"))).stricter(
                &INSTALL_DEPLOYMENTS,
                format!("cannot check against the Deployment schema: {e}"),
            );
            return;
        }
    };
    for v in violations
        .into_iter()
        .filter(|v| !undecodable.contains(&v.path))
    {
        let path = if v.path.is_empty() {
            format!("{base}.spec")
        } else {
            format!("{base}.spec.{}", v.path)
        };
        let msg = format!("deployment {name}: {}", v.message);
        if crate::json::is_unknown_field(&v.message) {
            let msg = format!("{msg} (ignored: Go drops unknown fields)");
            ctx.at(f, Some(&path)).warning(&INSTALL_DEPLOYMENTS, msg);
        } else {
            ctx.at(f, Some(&path)).stricter(&INSTALL_DEPLOYMENTS, msg);
        }
    }
}

/// The selector is set and matches the pod template labels (apps/v1 `ValidateDeploymentSpec`,
/// what the API server refuses when OLM creates the Deployment; stricter).
fn deployment_selector(
    ctx: &mut Ctx,
    f: Option<&str>,
    base: &str,
    name: &str,
    spec: &serde_json::Value,
) {
    let selector = string_map(spec, "/selector/matchLabels");
    let labels = string_map(spec, "/template/metadata/labels");
    let has_expressions = !arr_at(spec, "/selector/matchExpressions").is_empty();
    if selector.is_empty() && !has_expressions {
        ctx.at(f, Some(&format!("{base}.spec.selector"))).stricter(&INSTALL_DEPLOYMENTS, format!("deployment {name} has an empty selector; apps/v1 requires one matching the pod template labels"));
    }
    for (k, v) in &selector {
        if !labels.iter().any(|(lk, lv)| lk == k && lv == v) {
            ctx.at(f, Some(&format!("{base}.spec.selector.matchLabels.{k}"))).stricter(&INSTALL_DEPLOYMENTS, format!("selector {k}={v} does not match the pod template labels, so the API server would reject deployment {name}"));
        }
    }
}

/// `permissions` and `clusterPermissions` name a service account that some deployment runs as
/// (bundle-tool's own: OLM creates the account regardless). Returns the accounts OLM creates.
fn permissions(
    ctx: &mut Ctx,
    f: Option<&str>,
    csv: Csv<'_>,
    used_accounts: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut created: BTreeSet<String> = BTreeSet::new();
    for (key, list) in [
        ("permissions", csv.permissions().collect::<Vec<_>>()),
        ("clusterPermissions", csv.cluster_permissions().collect()),
    ] {
        for p in list {
            let sa = p.service_account_name().unwrap_or("");
            let path = format!("spec.install.spec.{key}[{}].serviceAccountName", p.index);
            if sa.is_empty() {
                ctx.at(f, Some(&path))
                    .stricter(&INSTALL_PERMISSIONS, "serviceAccountName is required");
                continue;
            }
            if !used_accounts.contains(sa) {
                ctx.at(f, Some(&path)).warning(
                    &INSTALL_PERMISSIONS,
                    format!(
                        "service account {sa} is granted {key} but no install deployment runs as it"
                    ),
                );
            }
            created.insert(sa.to_string());
        }
    }
    created
}

/// operator-framework/api `validateServiceAccounts`: no bundled v1 ServiceAccount is named
/// like a deployment's `serviceAccountName` (an error; upstream compares only with that field);
/// one named like the account a deployment runs as otherwise (`serviceAccount`) is stricter.
/// Returns the names of the bundled ServiceAccounts.
fn bundled_service_accounts(
    ctx: &mut Ctx,
    deployments: &[CsvDeployment<'_>],
    used_accounts: &BTreeSet<String>,
) -> Vec<String> {
    let explicit_accounts: BTreeSet<&str> = deployments
        .iter()
        .filter_map(|d| str_at(d.spec().pod_spec().raw, "/serviceAccountName"))
        .filter(|s| !s.is_empty())
        .collect();
    let bundle = ctx.bundle;
    let bundled: Vec<&crate::model::Manifest> = bundle
        .manifests
        .iter()
        .filter(|m| m.kind() == "ServiceAccount" && m.api_version() == "v1")
        .collect();
    for m in &bundled {
        let sa_name = m.name();
        let at = ctx.at(Some(&m.file), Some("metadata.name"));
        if explicit_accounts.contains(sa_name) {
            at.error(&INSTALL_SERVICE_ACCOUNTS, format!("invalid service account found in bundle: {sa_name} is also the serviceAccountName of a CSV deployment, whose account OLM creates")).hint("remove it: OLM creates the accounts named in permissions/clusterPermissions");
        } else if used_accounts.contains(sa_name) {
            at.stricter(&INSTALL_SERVICE_ACCOUNTS, format!("service account {sa_name} in the bundle is also the account a CSV deployment runs as")).hint("remove it: OLM creates the accounts named in permissions/clusterPermissions");
        }
    }
    bundled.iter().map(|m| m.name().to_string()).collect()
}
