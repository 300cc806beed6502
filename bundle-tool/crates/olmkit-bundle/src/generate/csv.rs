//! Assembling the ClusterServiceVersion.
//!
//! Starts from the base CSV, so everything a person wrote there (description, icon, keywords,
//! maintainers, links, provider, maturity, descriptors, extra annotations and labels) is kept,
//! and overwrites only what is derived from the manifests or the flags:
//! `metadata.name`, `spec.version`, the install strategy (deployments, permissions), owned CRDs,
//! `webhookdefinitions`, `relatedImages`, and the `alm-examples`, `containerImage`, `createdAt`
//! and builder annotations. Keys are sorted on output (see [`super::metadata`]), as
//! operator-sdk's serializer does, so the base's key order does not matter.

use super::GenerateBundleError;
use super::collect::{Collected, Crd};
use super::rbac::{Permission, RbacSplit};
use super::webhooks::{OLM_CERT_MOUNT_PATHS, Webhooks};
use super::{GenerateOptions, Improvement, Settings};
use crate::json::{as_obj_mut, child_obj, string_map};
use crate::naming::csv_name;
use olmkit_core::csv::str_at;
use olmkit_core::csv::{
    ALM_EXAMPLES, CrdDescription, Csv, DeploymentSpec, InstallMode, SKIP_RANGE,
};
use olmkit_core::gojson::sorted_keys;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// Install modes of operator-sdk's default base CSV.
fn default_install_modes() -> Value {
    json!([
        {"supported": true, "type": "OwnNamespace"},
        {"supported": true, "type": "SingleNamespace"},
        {"supported": false, "type": "MultiNamespace"},
        {"supported": true, "type": "AllNamespaces"},
    ])
}

fn all_namespaces_only() -> Value {
    json!([
        {"supported": false, "type": "OwnNamespace"},
        {"supported": false, "type": "SingleNamespace"},
        {"supported": false, "type": "MultiNamespace"},
        {"supported": true, "type": "AllNamespaces"},
    ])
}

fn minimal_base(package: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "annotations": {"capabilities": "Basic Install"},
            "name": csv_name(package, "0.0.0"),
            "namespace": "placeholder",
        },
        "spec": {
            "apiservicedefinitions": {},
            "customresourcedefinitions": {},
            "displayName": package,
            "installModes": default_install_modes(),
        },
    })
}

fn permissions_value(perms: &[Permission]) -> Value {
    Value::Array(
        perms
            .iter()
            .map(|p| json!({"rules": p.rules, "serviceAccountName": p.service_account}))
            .collect(),
    )
}

/// Sets `WATCH_NAMESPACE` to OLM's target namespaces wherever a container declares it, as
/// operator-sdk does for namespace-scoped operators.
fn set_watch_namespace(spec: &mut Value) {
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec
            .pointer_mut(&format!("/template/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in containers {
            let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) else {
                continue;
            };
            for e in env {
                if str_at(e, "/name") == Some("WATCH_NAMESPACE") {
                    *e = json!({
                        "name": "WATCH_NAMESPACE",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}},
                    });
                }
            }
        }
    }
}

/// Removes volume mounts where OLM mounts its own webhook certificate, and the volumes only
/// those mounts used. OLM replaces a mount at the same path, but the user's volume (a Secret
/// cert-manager would have made) would stay and keep the pod from starting; operator-sdk's
/// scaffolded `config/manifests` kustomization removes them with a patch for the same reason.
fn drop_cert_mounts(name: &str, spec: &mut Value, notes: &mut Vec<String>) {
    let mut removed: BTreeSet<String> = BTreeSet::new();
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec
            .pointer_mut(&format!("/template/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in containers {
            let Some(obj) = c.as_object_mut() else {
                continue;
            };
            if let Some(mounts) = obj.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                mounts.retain(|m| {
                    let hit = str_at(m, "/mountPath")
                        .is_some_and(|p| OLM_CERT_MOUNT_PATHS.contains(&p.trim_end_matches('/')));
                    if hit && let Some(n) = str_at(m, "/name") {
                        removed.insert(n.to_string());
                    }
                    !hit
                });
            }
            if obj
                .get("volumeMounts")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty)
            {
                obj.remove("volumeMounts");
            }
        }
    }
    if removed.is_empty() {
        return;
    }
    let still_used = |spec: &Value, vol: &str| {
        DeploymentSpec::new(spec)
            .pod_spec()
            .all_containers()
            .any(|c| {
                c.volume_mounts()
                    .iter()
                    .any(|m| str_at(m, "/name") == Some(vol))
            })
    };
    let unused: Vec<String> = removed
        .iter()
        .filter(|v| !still_used(spec, v))
        .cloned()
        .collect();
    if let Some(vols) = spec
        .pointer_mut("/template/spec/volumes")
        .and_then(Value::as_array_mut)
    {
        vols.retain(|v| !str_at(v, "/name").is_some_and(|n| unused.iter().any(|u| u == n)));
    }
    if let Some(t) = spec
        .pointer_mut("/template/spec")
        .and_then(Value::as_object_mut)
        && t.get("volumes")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
    {
        t.remove("volumes");
    }
    notes.push(format!(
        "Deployment {name}: removed the webhook certificate mount(s) {} at {}: OLM generates the serving certificate and mounts it there itself",
        removed.into_iter().collect::<Vec<_>>().join(", "),
        OLM_CERT_MOUNT_PATHS[0]
    ));
}

/// The image of the operator's main container ([`super::manager_image`] of the Deployments).
fn operator_image(c: &Collected) -> Option<String> {
    super::manager_image(c.deployments.iter().map(|d| &d.object)).map(str::to_string)
}

/// Every image the install deployments run, named, plus images referenced through
/// `RELATED_IMAGE_*` environment variables (operator-sdk's convention for operand images),
/// plus entries of the base CSV for images not found otherwise.
fn related_images(c: &Collected, base: &Value) -> Value {
    let mut out: Vec<(String, String)> = Vec::new();
    let add = |name: String, image: &str, out: &mut Vec<(String, String)>| {
        if image.is_empty() || out.iter().any(|(_, i)| i == image) {
            return;
        }
        let name = if out.iter().any(|(n, _)| *n == name) {
            let mut k = 2;
            while out.iter().any(|(n, _)| *n == format!("{name}-{k}")) {
                k += 1;
            }
            format!("{name}-{k}")
        } else {
            name
        };
        out.push((name, image.to_string()));
    };
    for d in &c.deployments {
        let pod = DeploymentSpec::of_object(&d.object).pod_spec();
        for ctr in pod.init_containers().chain(pod.containers()) {
            let cname = ctr.name().unwrap_or("image").to_string();
            add(cname, ctr.image().unwrap_or(""), &mut out);
            for (n, v) in ctr.env() {
                if let (Some(n), Some(v)) = (n, v)
                    && let Some(rest) = n.strip_prefix("RELATED_IMAGE_")
                {
                    add(rest.to_lowercase().replace('_', "-"), v, &mut out);
                }
            }
        }
    }
    for e in Csv::new(base).related_images() {
        if let Some(image) = e.image() {
            let name = e.name().unwrap_or("image").to_string();
            add(name, image, &mut out);
        }
    }
    Value::Array(
        out.into_iter()
            .map(|(name, image)| json!({"image": image, "name": name}))
            .collect(),
    )
}

/// Whether the string field `key` of `m` (a CSV part being built) is missing or empty (a
/// non-string counts as missing).
fn blank(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).and_then(Value::as_str).is_none_or(str::is_empty)
}

fn first_paragraph(s: &str) -> String {
    s.split("\n\n")
        .next()
        .unwrap_or(s)
        .trim()
        .replace('\n', " ")
}

/// `spec.customresourcedefinitions.owned`: one entry per served version of every CRD, keeping
/// the base's entry (descriptors, display name, description) when it names the same CRD,
/// version and kind. Order: CRDs as in the input, versions as the CRD lists them, which is
/// what current operator-sdk writes (its older releases sorted newest-first; authorino's
/// published bundles show the current order).
fn owned_crds(crds: &[Crd], base: &Value, notes: &mut Vec<String>) -> Value {
    let base_owned: Vec<CrdDescription<'_>> = Csv::new(base).owned_crds().collect();
    let matches = |e: &CrdDescription<'_>, name: &str, version: Option<&str>, kind: &str| {
        e.name() == Some(name)
            && e.kind() == Some(kind)
            && version.is_none_or(|v| e.version() == Some(v))
    };
    let mut owned: Vec<Value> = Vec::new();
    for crd in crds {
        for v in crd.versions.iter().filter(|v| v.served) {
            let exact = base_owned
                .iter()
                .find(|e| matches(e, &crd.name, Some(&v.name), &crd.kind));
            let sibling = base_owned
                .iter()
                .find(|e| matches(e, &crd.name, None, &crd.kind));
            let mut entry = exact.map_or_else(|| json!({}), |e| e.raw.clone());
            let m = as_obj_mut(&mut entry);
            m.insert("name".into(), Value::from(crd.name.clone()));
            m.insert("version".into(), Value::from(v.name.clone()));
            m.insert("kind".into(), Value::from(crd.kind.clone()));
            if blank(m, "displayName") {
                let dn = sibling
                    .and_then(|s| s.display_name())
                    .unwrap_or(&crd.kind)
                    .to_string();
                m.insert("displayName".into(), Value::from(dn));
            }
            if blank(m, "description") {
                let desc = sibling
                    .and_then(|s| s.description())
                    .map(str::to_string)
                    .or_else(|| v.description.as_deref().map(first_paragraph));
                if let Some(d) = desc {
                    m.insert("description".into(), Value::from(d));
                }
            }
            owned.push(entry);
        }
    }
    for e in base_owned {
        let name = e.name().unwrap_or("");
        if !crds.iter().any(|c| c.name == name) {
            notes.push(format!(
                "dropped owned CRD {name} {} of the base CSV: no such CRD in the manifests",
                e.version().unwrap_or("")
            ));
        }
    }
    Value::Array(owned)
}

/// The lowest Kubernetes version that serves every API the bundle relies on: `apps/v1`
/// Deployments (1.9), `apiextensions.k8s.io/v1` CRDs and `admissionregistration.k8s.io/v1`
/// webhooks (1.16), `policy/v1` PodDisruptionBudgets (1.21).
fn implied_min_kube_version(c: &Collected, hooks: &Webhooks) -> &'static str {
    let mut v = "1.9.0";
    if !c.crds.is_empty() || !hooks.definitions.is_empty() {
        v = "1.16.0";
    }
    if c.others
        .iter()
        .any(|o| o.kind() == "PodDisruptionBudget" && o.api_version() == "policy/v1")
    {
        v = "1.21.0";
    }
    v
}

/// The CSV to start from: the base, or a generated one when the input has none (operator-sdk's
/// `bases.New` under `upstream_compat`, a smaller one otherwise).
fn starting_csv(
    c: &Collected,
    settings: &Settings,
    package: &str,
    notes: &mut Vec<String>,
) -> Value {
    match &c.base_csv {
        Some(b) => b.object.clone(),
        None if settings.upstream_compat => {
            notes.push(format!(
                "no base CSV in the input: generated operator-sdk's default base; add config/manifests/bases/{package}.clusterserviceversion.yaml with a description, icon, maintainers and links"
            ));
            super::upstream::default_base(package)
        }
        None => {
            notes.push(format!(
                "no base CSV in the input: generated a minimal one (display name {package:?}); add config/manifests/bases/{package}.clusterserviceversion.yaml with a description, icon, maintainers and links"
            ));
            minimal_base(package)
        }
    }
}

/// `alm-examples`: the samples as a pretty JSON array (operator-sdk's `applyCustomResources`).
fn alm_examples(c: &Collected, settings: &Settings) -> Result<String, GenerateBundleError> {
    let examples: Vec<Value> = c
        .samples
        .iter()
        .map(|s| sorted_keys(s.object.clone()))
        .collect();
    let text = serde_json::to_string_pretty(&examples).map_err(|e| {
        GenerateBundleError::Render(olmkit_core::docs::RenderDocumentError {
            what: ALM_EXAMPLES.into(),
            message: e.to_string(),
        })
    })?;
    Ok(if settings.upstream_compat {
        olmkit_core::gojson::html_escape(&text)
    } else {
        text
    })
}

/// Sets the metadata annotations generation owns.
fn annotate(
    c: &Collected,
    ann: &mut Map<String, Value>,
    options: &GenerateOptions,
    settings: &Settings,
) -> Result<(), GenerateBundleError> {
    let defaults = settings.improvements.has(Improvement::CsvDefaults);
    if !c.samples.is_empty() || !defaults {
        ann.insert(ALM_EXAMPLES.into(), Value::from(alm_examples(c, settings)?));
    } else if !ann.contains_key(ALM_EXAMPLES) {
        ann.insert(ALM_EXAMPLES.into(), Value::from("[]"));
    }
    if defaults {
        ann.entry("capabilities")
            .or_insert_with(|| Value::from("Basic Install"));
        if let Some(img) = operator_image(c) {
            ann.insert("containerImage".into(), Value::from(img));
        }
    }
    ann.insert("createdAt".into(), Value::from(options.created_at.clone()));
    ann.insert(
        "operators.operatorframework.io/builder".into(),
        Value::from(options.builder.clone()),
    );
    if let Some(layout) = &settings.project_layout {
        ann.insert(
            "operators.operatorframework.io/project_layout".into(),
            Value::from(layout.clone()),
        );
    }
    if let Some(r) = &options.skip_range {
        olmkit_core::version_range::VersionRange::parse(r).map_err(|e| {
            GenerateBundleError::Option {
                flag: "skip-range",
                value: r.clone(),
                message: e.reason,
            }
        })?;
        ann.insert(SKIP_RANGE.into(), Value::from(r.clone()));
    }
    Ok(())
}

/// `spec.install`: the Deployments and the permissions of their service accounts
/// (operator-sdk's `applyDeployments`, `applyRoles`, `applyClusterRoles`).
fn install_strategy(
    c: &Collected,
    rbac: &RbacSplit,
    hooks: &Webhooks,
    settings: &Settings,
    notes: &mut Vec<String>,
) -> Value {
    let mut deployments = Vec::new();
    for d in &c.deployments {
        let mut dspec = d.object.get("spec").cloned().unwrap_or_else(|| json!({}));
        set_watch_namespace(&mut dspec);
        if settings.improvements.has(Improvement::DropCertMounts)
            && hooks.serving_deployments.contains(d.name())
        {
            drop_cert_mounts(d.name(), &mut dspec, notes);
        }
        let mut entry = Map::new();
        let labels = string_map(&d.object, "/metadata/labels");
        if !labels.is_empty() {
            entry.insert(
                "label".into(),
                Value::Object(
                    labels
                        .into_iter()
                        .map(|(k, v)| (k, Value::from(v)))
                        .collect(),
                ),
            );
        }
        entry.insert("name".into(), Value::from(d.name()));
        entry.insert("spec".into(), dspec);
        deployments.push(Value::Object(entry));
    }
    // OLM creates the service accounts named in permissions/clusterPermissions, and a bundle
    // must not ship them itself (operator-framework/api rejects it). An account with no rules
    // at all still has to exist for the pods to start, so it gets an empty entry.
    let mut permissions = rbac.permissions.clone();
    if settings
        .improvements
        .has(Improvement::ServiceAccountEntries)
    {
        for sa in c.deployment_service_accounts() {
            let listed = |p: &[Permission]| p.iter().any(|p| p.service_account == sa);
            if sa != "default" && !listed(&permissions) && !listed(&rbac.cluster_permissions) {
                notes.push(format!(
                    "service account {sa}: no Role or ClusterRole is bound to it; listed in permissions with no rules so that OLM creates it"
                ));
                permissions.push(Permission {
                    service_account: sa,
                    rules: Vec::new(),
                });
            }
        }
    }
    permissions.sort_by(|a, b| a.service_account.cmp(&b.service_account));
    let mut install_spec = Map::new();
    if !rbac.cluster_permissions.is_empty() {
        install_spec.insert(
            "clusterPermissions".into(),
            permissions_value(&rbac.cluster_permissions),
        );
    }
    install_spec.insert("deployments".into(), Value::Array(deployments));
    if !permissions.is_empty() {
        install_spec.insert("permissions".into(), permissions_value(&permissions));
    }
    json!({"spec": Value::Object(install_spec), "strategy": "deployment"})
}

/// `spec.installModes`: the base's (operator-sdk's defaults when it has none); only
/// AllNamespaces with a conversion webhook ([`Improvement::ConversionInstallModes`]).
fn install_modes(
    spec: &Map<String, Value>,
    hooks: &Webhooks,
    settings: &Settings,
    notes: &mut Vec<String>,
) -> Value {
    let modes = spec
        .get("installModes")
        .filter(|m| m.as_array().is_some_and(|a| !a.is_empty()))
        .cloned()
        .unwrap_or_else(default_install_modes);
    if !hooks.has_conversion()
        || !settings
            .improvements
            .has(Improvement::ConversionInstallModes)
    {
        return modes;
    }
    let forced = all_namespaces_only();
    let supported = |m: &Value| -> BTreeSet<String> {
        InstallMode::list(m)
            .filter(|e| e.supported() == Some(true))
            .filter_map(|e| e.mode_type().map(str::to_string))
            .collect()
    };
    if supported(&modes) != supported(&forced) {
        notes.push(format!(
            "install modes: only AllNamespaces is supported, because {} use(s) a conversion webhook: a CRD is cluster-wide, so OLM requires the operator converting it to serve all namespaces (operator-framework/api: \"only AllNamespaces InstallModeType is supported when conversionCRDs is present\")",
            hooks.conversion_crds.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    forced
}

/// Builds the CSV.
#[allow(clippy::too_many_arguments)]
pub fn build(
    c: &Collected,
    rbac: &RbacSplit,
    hooks: &Webhooks,
    options: &GenerateOptions,
    settings: &Settings,
    package: &str,
    version: &semver::Version,
    notes: &mut Vec<String>,
) -> Result<Value, GenerateBundleError> {
    let on = |i: Improvement| settings.improvements.has(i);
    let mut csv = starting_csv(c, settings, package, notes);
    let base = csv.clone();
    let root = as_obj_mut(&mut csv);
    root.insert(
        "apiVersion".into(),
        Value::from("operators.coreos.com/v1alpha1"),
    );
    root.insert("kind".into(), Value::from("ClusterServiceVersion"));
    root.remove("status");

    let meta = child_obj(root, "metadata");
    meta.insert(
        "name".into(),
        Value::from(csv_name(package, &version.to_string())),
    );
    for k in ["creationTimestamp", "resourceVersion", "uid", "generation"] {
        meta.remove(k);
    }
    annotate(c, child_obj(meta, "annotations"), options, settings)?;

    let spec = child_obj(root, "spec");
    set_version_and_edges(spec, options, version)?;
    if on(Improvement::CsvDefaults) && blank(spec, "displayName") {
        spec.insert("displayName".into(), Value::from(package));
    }
    spec.insert(
        "install".into(),
        install_strategy(c, rbac, hooks, settings, notes),
    );
    set_owned_crds(spec, c, &base, settings, notes);
    set_webhook_definitions(spec, hooks, settings, notes);
    let modes = install_modes(spec, hooks, settings, notes);
    spec.insert("installModes".into(), modes);
    set_related_images(spec, c, &base, settings, notes);
    if on(Improvement::MinKubeVersion) && blank(spec, "minKubeVersion") {
        let v = implied_min_kube_version(c, hooks);
        spec.insert("minKubeVersion".into(), Value::from(v));
        notes.push(format!(
            "minKubeVersion: set to {v}, the lowest Kubernetes serving every API the bundle uses; set spec.minKubeVersion in the base CSV to choose another"
        ));
    }
    if !spec
        .get("apiservicedefinitions")
        .is_some_and(Value::is_object)
    {
        spec.insert("apiservicedefinitions".into(), json!({}));
    }
    if settings.upstream_compat {
        super::upstream::typed_csv(&mut csv);
    }
    Ok(sorted_keys(csv))
}

/// `spec.version`, and the upgrade edges `spec.replaces` (checked to be a CSV name) and
/// `spec.skips` from the options.
fn set_version_and_edges(
    spec: &mut Map<String, Value>,
    options: &GenerateOptions,
    version: &semver::Version,
) -> Result<(), GenerateBundleError> {
    spec.insert("version".into(), Value::from(version.to_string()));
    if let Some(r) = &options.replaces {
        crate::naming::parse_csv_name(r).map_err(|m| GenerateBundleError::Option {
            flag: "replaces",
            value: r.clone(),
            message: m,
        })?;
        spec.insert("replaces".into(), Value::from(r.clone()));
    }
    if !options.skips.is_empty() {
        spec.insert(
            "skips".into(),
            Value::Array(options.skips.iter().cloned().map(Value::from).collect()),
        );
    }
    Ok(())
}

/// `spec.customresourcedefinitions.owned`, left out when empty.
fn set_owned_crds(
    spec: &mut Map<String, Value>,
    c: &Collected,
    base: &Value,
    settings: &Settings,
    notes: &mut Vec<String>,
) {
    let crds = child_obj(spec, "customresourcedefinitions");
    let owned = if settings.improvements.has(Improvement::CrdDescriptions) {
        owned_crds(&c.crds, base, notes)
    } else {
        super::upstream::owned_crds(&c.crds, base)
    };
    crds.insert("owned".into(), owned);
    if crds
        .get("owned")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        crds.remove("owned");
    }
}

/// `spec.webhookdefinitions`: the derived ones; without any, the base's are kept (with
/// [`Improvement::CsvDefaults`]) or dropped (operator-sdk).
fn set_webhook_definitions(
    spec: &mut Map<String, Value>,
    hooks: &Webhooks,
    settings: &Settings,
    notes: &mut Vec<String>,
) {
    if !hooks.definitions.is_empty() {
        spec.insert(
            "webhookdefinitions".into(),
            Value::Array(hooks.definitions.clone()),
        );
    } else if !settings.improvements.has(Improvement::CsvDefaults) {
        // operator-sdk's `applyWebhooks` always replaces the list.
        spec.remove("webhookdefinitions");
    } else if spec.get("webhookdefinitions").is_some_and(|w| !w.is_null()) {
        notes.push(
            "kept webhookdefinitions of the base CSV: the manifests define no webhook configuration and no conversion webhook".into(),
        );
    }
}

/// `spec.relatedImages` ([`related_images`], or operator-sdk's, which leaves an empty list out).
fn set_related_images(
    spec: &mut Map<String, Value>,
    c: &Collected,
    base: &Value,
    settings: &Settings,
    notes: &mut Vec<String>,
) {
    let ours = settings.improvements.has(Improvement::RelatedImages);
    let images = if ours {
        related_images(c, base)
    } else {
        super::upstream::related_images(c, notes)
    };
    if images.as_array().is_some_and(Vec::is_empty) && !ours {
        spec.remove("relatedImages");
    } else {
        spec.insert("relatedImages".into(), images);
    }
}
