//! Kubernetes APIs removed in 1.22, 1.25 and 1.26, as the operatorhub suite reports them
//! (operator-framework/api `validateDeprecatedAPIS` in `removed_apis.go`).
//!
//! For each of those releases, objects of a removed API make a finding: an error when the
//! bundle targets that release or a later one (`--optional-values k8s-version=...` or
//! `spec.minKubeVersion`), a warning otherwise. For 1.25, permission rules of the CSV that
//! grant access to a removed resource (PodSecurityPolicy, v1beta1 PodDisruptionBudget...)
//! are always warnings.

use super::Ctx;
use super::format::parse_tolerant;
use super::rules::REMOVED_API;
use crate::json::arr_at;
use olmkit_core::csv::Csv;
use olmkit_core::csv::str_at;
use serde_json::Value;
use std::collections::BTreeMap;

/// apiVersion/kind pairs removed in 1.22 (besides v1beta1 CRDs).
const REMOVED_1_22: &[(&str, &[&str])] = &[
    ("scheduling.k8s.io/v1beta1", &["PriorityClass"]),
    (
        "rbac.authorization.k8s.io/v1beta1",
        &["Role", "ClusterRoleBinding", "RoleBinding", "ClusterRole"],
    ),
    ("apiregistration.k8s.io/v1beta1", &["APIService"]),
    ("authentication.k8s.io/v1beta1", &["TokenReview"]),
    (
        "authorization.k8s.io/v1beta1",
        &[
            "LocalSubjectAccessReview",
            "SelfSubjectAccessReview",
            "SubjectAccessReview",
        ],
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        &[
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ],
    ),
    ("coordination.k8s.io/v1beta1", &["Lease"]),
    ("extensions/v1beta1", &["Ingress"]),
    ("networking.k8s.io/v1beta1", &["Ingress", "IngressClass"]),
    (
        "storage.k8s.io/v1beta1",
        &["CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"],
    ),
    (
        "certificates.k8s.io/v1beta1",
        &["CertificateSigningRequest"],
    ),
];

/// (group, version, kind) removed in 1.25, with the resource name permission rules use.
const REMOVED_1_25: &[(&str, &str, &str, &str)] = &[
    ("batch", "v1beta1", "CronJob", "cronjobs"),
    (
        "discovery.k8s.io",
        "v1beta1",
        "EndpointSlice",
        "endpointslices",
    ),
    ("events.k8s.io", "v1beta1", "Event", "events"),
    (
        "autoscaling",
        "v2beta1",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
    ),
    (
        "policy",
        "v1beta1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    ),
    (
        "policy",
        "v1beta1",
        "PodSecurityPolicy",
        "podsecuritypolicies",
    ),
    ("node.k8s.io", "v1beta1", "RuntimeClass", "runtimeclasses"),
];

/// Names found per kind (or per resource), sorted, as upstream lists them.
type Found = BTreeMap<String, Vec<String>>;

fn split_api_version(api: &str) -> (&str, &str) {
    api.split_once('/').unwrap_or(("", api))
}

fn removed_1_22(ctx: &Ctx) -> Found {
    let mut found = Found::new();
    for m in &ctx.bundle.manifests {
        let (api, kind) = (m.api_version(), m.kind());
        if kind == crate::kinds::CRD && api == "apiextensions.k8s.io/v1beta1" {
            found.entry("CRD".into()).or_default().push(m.name().into());
        } else if REMOVED_1_22
            .iter()
            .any(|(a, kinds)| *a == api && kinds.contains(&kind))
        {
            found.entry(kind.into()).or_default().push(m.name().into());
        }
    }
    found
}

fn is_removed_1_25(api: &str, kind: &str) -> bool {
    let (g, v) = split_api_version(api);
    REMOVED_1_25
        .iter()
        .any(|(rg, rv, rk, _)| *rg == g && *rv == v && *rk == kind)
}

/// CSV permission rules granting a resource removed in 1.25 (upstream `permCheck`), unless
/// the resource is one of the CSV's own CRD resources (`resInCsvCrds`).
fn permission_warnings(csv: Csv<'_>, found: &mut Found, warn: &mut Found) {
    let mut csv_resources = Vec::new();
    for (field, descs) in [
        ("Owned", csv.owned_crds().collect::<Vec<_>>()),
        ("Required", csv.required_crds().collect()),
    ] {
        for desc in descs {
            let i = desc.index;
            for (j, res) in arr_at(desc.raw, "/resources").iter().enumerate() {
                let kind = str_at(res, "/kind").unwrap_or("");
                csv_resources.push(format!("{}s", kind.to_lowercase()));
                if is_removed_1_25(str_at(res, "/version").unwrap_or(""), kind) {
                    found.entry(kind.into()).or_default().push(format!(
                        "ClusterServiceVersion.Spec.CustomResourceDefinitions.{field}[{i}].Resource[{j}]"
                    ));
                }
            }
        }
    }
    for (field, perms) in [
        (
            "ClusterPermissions",
            csv.cluster_permissions().collect::<Vec<_>>(),
        ),
        ("Permissions", csv.permissions().collect()),
    ] {
        for perm in perms {
            let i = perm.index;
            for (j, rule) in perm.rules().iter().enumerate() {
                let strs = |p: &str| -> Vec<String> {
                    arr_at(rule, p)
                        .iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                };
                for group in strs("/apiGroups") {
                    for res in strs("/resources") {
                        if csv_resources.contains(&res) {
                            continue;
                        }
                        if REMOVED_1_25
                            .iter()
                            .any(|(g, _, _, r)| *g == group && *r == res)
                        {
                            warn.entry(res.clone()).or_default().push(format!(
                                "ClusterServiceVersion.Spec.InstallStrategy.StrategySpec.{field}[{i}].Rules[{j}]"
                            ));
                        }
                    }
                }
            }
        }
    }
}

fn removed_1_25(ctx: &Ctx) -> (Found, Found) {
    let (mut found, mut warn) = (Found::new(), Found::new());
    for m in &ctx.bundle.manifests {
        if m.api_version() == "operators.coreos.com/v1alpha1" {
            if m.kind() == crate::kinds::CSV {
                permission_warnings(m.csv_view(), &mut found, &mut warn);
            }
        } else if is_removed_1_25(m.api_version(), m.kind()) {
            found
                .entry(m.kind().into())
                .or_default()
                .push(m.name().into());
        }
    }
    (found, warn)
}

fn removed_1_26(ctx: &Ctx) -> Found {
    let mut found = Found::new();
    for m in &ctx.bundle.manifests {
        if m.api_version() == "autoscaling/v2beta2" && m.kind() == "HorizontalPodAutoscaler" {
            found
                .entry(m.kind().into())
                .or_default()
                .push(m.name().into());
        }
    }
    found
}

/// Upstream's message: `this bundle is using APIs which were deprecated and removed in
/// v1.25...`, listing `kind: (["name" ...])` sorted by kind.
fn message(minor: u64, found: &Found) -> String {
    let list: Vec<String> = found
        .iter()
        .map(|(k, names)| {
            let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
            format!("{k}: ([{}])", quoted.join(" "))
        })
        .collect();
    format!(
        "this bundle is using APIs which were deprecated and removed in v1.{minor}. More info: https://kubernetes.io/docs/reference/using-api/deprecation-guide/#v1-{minor}. Migrate the API(s) for {}",
        list.join(",")
    )
}

/// Runs the removed-APIs check of the operatorhub suite on the bundle of CSV `file`.
pub(crate) fn check(ctx: &mut Ctx, file: &str) {
    let f = Some(file);
    let rule = &REMOVED_API;
    let zero = semver::Version::new(0, 0, 0);
    let mut target = zero.clone();
    if let Some(v) = ctx.options.k8s_version.clone().filter(|v| !v.is_empty()) {
        match parse_tolerant(&v) {
            Some(p) => target = p,
            None => {
                ctx.at(None, None).error(
                    rule,
                    format!("invalid value informed via the k8s key option : {v}"),
                );
            }
        }
    }
    let mut min_kube = zero;
    if let Some(v) = ctx.csv_view().min_kube_version().filter(|v| !v.is_empty()) {
        match parse_tolerant(v) {
            Some(p) => min_kube = p,
            None => {
                ctx.at(f, Some("spec.minKubeVersion")).error(rule, format!("unable to use csv.Spec.MinKubeVersion to verify the CRD/Webhook apis because it has an invalid value: {v}"));
            }
        }
    }
    let (found_25, warn_25) = removed_1_25(ctx);
    let checks = [
        (22, removed_1_22(ctx), Found::new()),
        (25, found_25, warn_25),
        (26, removed_1_26(ctx), Found::new()),
    ];
    for (minor, found, warn) in checks {
        let removal = semver::Version::new(1, minor, 0);
        if !found.is_empty() {
            let msg = message(minor, &found);
            if target >= removal || min_kube >= removal {
                ctx.at(f, None).error(rule, msg);
            } else {
                ctx.at(f, None).warning(rule, msg);
            }
        }
        if !warn.is_empty() {
            ctx.at(f, Some("spec.install.spec"))
                .warning(rule, message(minor, &warn));
        }
    }
}
