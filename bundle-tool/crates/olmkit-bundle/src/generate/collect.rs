//! Sorting input manifests by the role they play in a bundle.
//!
//! Like operator-sdk's collector: CRDs, Deployments, RBAC, Services, ServiceAccounts, webhook
//! configurations, the base CSV, custom resources of the operator's own CRDs (samples for
//! `alm-examples`) and a scorecard configuration. Objects of other kinds that OLM can install
//! from a bundle ([`super::supported`]) are passed through; the rest (Namespace, cert-manager
//! objects, ...) are dropped with a note, since OLM would refuse the bundle. Every field later steps rely on is checked
//! here, so their errors can name the document and field.

use super::GenerateBundleError;
use super::supported::{bundle_kinds_list, is_bundle_kind};
use crate::json::{arr_at, type_name};
use crate::kinds;
use crate::model::Manifest;
use olmkit_core::csv::DeploymentSpec;
use olmkit_core::csv::str_at;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// A CRD version as generation needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct CrdVersion {
    /// Version name (`v1beta1`).
    pub name: String,
    /// Served by the API server.
    pub served: bool,
    /// The storage version.
    pub storage: bool,
    /// `schema.openAPIV3Schema.description`: the type's doc comment, which controller-gen
    /// puts there and which makes a good CSV description.
    pub description: Option<String>,
}

/// A CRD's conversion webhook reference.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversionRef {
    /// `clientConfig.service.name`.
    pub service: String,
    /// `clientConfig.service.path` (`/` when absent, as Kubernetes defaults it).
    pub path: String,
    /// `clientConfig.service.port` (443 when absent).
    pub port: i64,
    /// `conversionReviewVersions`.
    pub review_versions: Vec<String>,
}

/// A CustomResourceDefinition of the input.
#[derive(Clone, Debug, PartialEq)]
pub struct Crd {
    /// The document.
    pub doc: Manifest,
    /// `metadata.name`.
    pub name: String,
    /// `spec.group`.
    pub group: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.names.plural`.
    pub plural: String,
    /// `spec.versions`, in order.
    pub versions: Vec<CrdVersion>,
    /// Conversion webhook, when `spec.conversion.strategy` is `Webhook`.
    pub conversion: Option<ConversionRef>,
}

/// One webhook of a Validating/MutatingWebhookConfiguration.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionWebhook {
    /// The configuration document.
    pub doc: Manifest,
    /// Index in `webhooks`.
    pub index: usize,
    /// `true` for mutating.
    pub mutating: bool,
    /// The webhook object.
    pub webhook: Value,
}

/// Input documents sorted by role.
#[derive(Clone, Debug, Default)]
pub struct Collected {
    /// The base CSV, when one was given.
    pub base_csv: Option<Manifest>,
    /// CRDs.
    pub crds: Vec<Crd>,
    /// Deployments (become the CSV install strategy).
    pub deployments: Vec<Manifest>,
    /// Roles.
    pub roles: Vec<Manifest>,
    /// ClusterRoles.
    pub cluster_roles: Vec<Manifest>,
    /// RoleBindings.
    pub role_bindings: Vec<Manifest>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<Manifest>,
    /// ServiceAccounts.
    pub service_accounts: Vec<Manifest>,
    /// Services.
    pub services: Vec<Manifest>,
    /// Admission webhooks (validating and mutating), in input order.
    pub admission_webhooks: Vec<AdmissionWebhook>,
    /// Custom resources of the input's CRDs: `alm-examples`.
    pub samples: Vec<Manifest>,
    /// A scorecard `Configuration`.
    pub scorecard: Option<Manifest>,
    /// Other objects OLM installs from bundles (ConfigMaps, Secrets, ...).
    pub others: Vec<Manifest>,
}

impl Collected {
    /// Service accounts the install deployments run as (`default` when unset), sorted.
    pub fn deployment_service_accounts(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .deployments
            .iter()
            .map(|d| deployment_service_account(&d.object))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The CRD whose (group, served version, kind) matches `api_version`/`kind`.
    pub fn crd_for(&self, api_version: &str, kind: &str) -> Option<&Crd> {
        let (group, version) = api_version.split_once('/')?;
        self.crds.iter().find(|c| {
            c.group == group && c.kind == kind && c.versions.iter().any(|v| v.name == version)
        })
    }
}

/// `spec.template.spec.serviceAccountName` of a Deployment, `default` when unset (the account
/// Kubernetes uses, and the one operator-sdk assumes).
pub fn deployment_service_account(deployment: &Value) -> String {
    DeploymentSpec::of_object(deployment)
        .pod_spec()
        .service_account()
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string()
}

fn require_str<'a>(
    doc: &'a Manifest,
    pointer: &str,
    field: &str,
) -> Result<&'a str, GenerateBundleError> {
    match doc.object.pointer(pointer) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(GenerateBundleError::invalid(
            doc,
            field,
            "must not be empty",
        )),
        Some(other) => Err(GenerateBundleError::invalid(
            doc,
            field,
            format!("must be a string, found {}", type_name(other)),
        )),
        None => Err(GenerateBundleError::invalid(doc, field, "is required")),
    }
}

fn require_array<'a>(
    doc: &'a Manifest,
    pointer: &str,
    field: &str,
) -> Result<&'a [Value], GenerateBundleError> {
    match doc.object.pointer(pointer) {
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(GenerateBundleError::invalid(
            doc,
            field,
            format!("must be a list, found {}", type_name(other)),
        )),
        None => Err(GenerateBundleError::invalid(doc, field, "is required")),
    }
}

fn optional_bool(
    doc: &Manifest,
    v: &Value,
    key: &str,
    field: &str,
) -> Result<bool, GenerateBundleError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(GenerateBundleError::invalid(
            doc,
            field,
            format!("must be true or false, found {}", type_name(other)),
        )),
    }
}

fn parse_crd(doc: &Manifest) -> Result<Crd, GenerateBundleError> {
    if doc.api_version() != "apiextensions.k8s.io/v1" {
        return Err(GenerateBundleError::invalid(
            doc,
            "apiVersion",
            format!(
                "{:?} is not supported: OLM and Kubernetes >= 1.22 only accept apiextensions.k8s.io/v1 CRDs (regenerate them with controller-gen crd:crdVersions=v1)",
                doc.api_version()
            ),
        ));
    }
    let name = require_str(doc, "/metadata/name", "metadata.name")?.to_string();
    let group = require_str(doc, "/spec/group", "spec.group")?.to_string();
    let kind = require_str(doc, "/spec/names/kind", "spec.names.kind")?.to_string();
    let plural = require_str(doc, "/spec/names/plural", "spec.names.plural")?.to_string();
    let versions_raw = require_array(doc, "/spec/versions", "spec.versions")?;
    if versions_raw.is_empty() {
        return Err(GenerateBundleError::invalid(
            doc,
            "spec.versions",
            "must list at least one version",
        ));
    }
    Ok(Crd {
        versions: crd_versions(doc, versions_raw)?,
        conversion: conversion_ref(doc)?,
        doc: doc.clone(),
        name,
        group,
        kind,
        plural,
    })
}

/// The CRD's `spec.versions`: each needs a name; `served` and `storage` must be booleans.
fn crd_versions(
    doc: &Manifest,
    versions_raw: &[Value],
) -> Result<Vec<CrdVersion>, GenerateBundleError> {
    let mut versions = Vec::new();
    for (i, v) in versions_raw.iter().enumerate() {
        let field = |f: &str| format!("spec.versions[{i}].{f}");
        let vname = match v.get("name") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(GenerateBundleError::invalid(
                    doc,
                    field("name"),
                    "is required and must be a non-empty string",
                ));
            }
        };
        versions.push(CrdVersion {
            served: optional_bool(doc, v, "served", &field("served"))?,
            storage: optional_bool(doc, v, "storage", &field("storage"))?,
            // kube-derive writes "Auto-generated derived type for ..." when the type has no
            // doc comment; that says nothing to a user browsing OperatorHub.
            description: str_at(v, "/schema/openAPIV3Schema/description")
                .filter(|s| !s.trim().is_empty() && !s.starts_with("Auto-generated derived type"))
                .map(str::to_string),
            name: vname,
        });
    }
    Ok(versions)
}

/// The CRD's conversion webhook, when `spec.conversion.strategy` is `Webhook`: served through
/// a Service (OLM cannot express a URL in a CSV), with its review versions.
fn conversion_ref(doc: &Manifest) -> Result<Option<ConversionRef>, GenerateBundleError> {
    Ok(match str_at(&doc.object, "/spec/conversion/strategy") {
        Some("Webhook") => {
            let hook = "spec.conversion.webhook";
            if doc
                .object
                .pointer("/spec/conversion/webhook/clientConfig/url")
                .is_some()
            {
                return Err(GenerateBundleError::invalid(
                    doc,
                    format!("{hook}.clientConfig.url"),
                    "OLM only wires conversion webhooks served by a Deployment of the bundle through a Service; a URL cannot be expressed in a CSV",
                ));
            }
            let service = require_str(
                doc,
                "/spec/conversion/webhook/clientConfig/service/name",
                "spec.conversion.webhook.clientConfig.service.name",
            )?
            .to_string();
            let path = str_at(
                &doc.object,
                "/spec/conversion/webhook/clientConfig/service/path",
            )
            .unwrap_or("/")
            .to_string();
            let port = match doc
                .object
                .pointer("/spec/conversion/webhook/clientConfig/service/port")
            {
                None | Some(Value::Null) => 443,
                Some(p) => p
                    .as_i64()
                    .filter(|p| (1..=65535).contains(p))
                    .ok_or_else(|| {
                        GenerateBundleError::invalid(
                            doc,
                            format!("{hook}.clientConfig.service.port"),
                            "must be a port number (1-65535)",
                        )
                    })?,
            };
            let review = require_array(
                doc,
                "/spec/conversion/webhook/conversionReviewVersions",
                "spec.conversion.webhook.conversionReviewVersions",
            )?;
            let review_versions: Vec<String> = review
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            if review_versions.is_empty() || review_versions.len() != review.len() {
                return Err(GenerateBundleError::invalid(
                    doc,
                    "spec.conversion.webhook.conversionReviewVersions",
                    "must be a non-empty list of strings (e.g. [v1])",
                ));
            }
            Some(ConversionRef {
                service,
                path,
                port,
                review_versions,
            })
        }
        _ => None,
    })
}

fn check_deployment(doc: &Manifest) -> Result<(), GenerateBundleError> {
    if doc.api_version() != "apps/v1" {
        return Err(GenerateBundleError::invalid(
            doc,
            "apiVersion",
            format!("{:?} is not supported; use apps/v1", doc.api_version()),
        ));
    }
    match doc.object.pointer("/spec/selector") {
        Some(Value::Object(_)) => {}
        _ => {
            return Err(GenerateBundleError::invalid(
                doc,
                "spec.selector",
                "is required (a label selector matching spec.template.metadata.labels)",
            ));
        }
    }
    let containers = require_array(
        doc,
        "/spec/template/spec/containers",
        "spec.template.spec.containers",
    )?;
    if containers.is_empty() {
        return Err(GenerateBundleError::invalid(
            doc,
            "spec.template.spec.containers",
            "must list at least one container",
        ));
    }
    for (list, ptr) in [
        ("containers", "/spec/template/spec/containers"),
        ("initContainers", "/spec/template/spec/initContainers"),
    ] {
        for (i, c) in arr_at(&doc.object, ptr).iter().enumerate() {
            for key in ["name", "image"] {
                match c.get(key) {
                    Some(Value::String(s)) if !s.is_empty() => {}
                    _ => {
                        return Err(GenerateBundleError::invalid(
                            doc,
                            format!("spec.template.spec.{list}[{i}].{key}"),
                            "is required and must be a non-empty string",
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

fn check_binding(doc: &Manifest) -> Result<(), GenerateBundleError> {
    require_str(doc, "/roleRef/kind", "roleRef.kind")?;
    require_str(doc, "/roleRef/name", "roleRef.name")?;
    if let Some(s) = doc.object.get("subjects")
        && !s.is_array()
        && !s.is_null()
    {
        return Err(GenerateBundleError::invalid(
            doc,
            "subjects",
            format!("must be a list, found {}", type_name(s)),
        ));
    }
    Ok(())
}

fn is_scorecard(doc: &Manifest) -> bool {
    doc.kind() == "Configuration"
        && doc
            .api_version()
            .starts_with("scorecard.operatorframework.io/")
}

/// Adds the `--samples` custom resources to the stream's, each of a served version of one of
/// the manifests' CRDs (else OLM could not show it).
fn add_samples(c: &mut Collected, samples: &[Manifest]) -> Result<(), GenerateBundleError> {
    for doc in samples {
        if doc.kind().is_empty() || doc.api_version().is_empty() {
            return Err(GenerateBundleError::invalid(
                doc,
                "apiVersion/kind",
                "a sample must be a custom resource with apiVersion and kind",
            ));
        }
        if c.crd_for(doc.api_version(), doc.kind()).is_none() {
            return Err(GenerateBundleError::invalid(
                doc,
                "apiVersion/kind",
                format!(
                    "{} {} is not a served version of any CRD in the manifests, so OLM could not show it as an example",
                    doc.api_version(),
                    doc.kind()
                ),
            ));
        }
        if !c.samples.iter().any(|s| s.object == doc.object) {
            c.samples.push(doc.clone());
        }
    }
    Ok(())
}

/// The base CSV: `--base-csv`, else the only CSV of the stream, else among several the first
/// named `<package>.*` (operator-sdk's `Generator.generate`). Its `metadata` and `spec` must be
/// mappings.
fn choose_base(
    inputs: &super::GenerateInputs,
    mut csvs: Vec<Manifest>,
    package: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<Option<Manifest>, GenerateBundleError> {
    let mut chosen = None;
    match (&inputs.base_csv, csvs.len()) {
        (Some(base), _) => {
            if base.kind() != kinds::CSV {
                return Err(GenerateBundleError::invalid(
                    base,
                    "kind",
                    format!(
                        "the base CSV must be a ClusterServiceVersion, found {:?}",
                        base.kind()
                    ),
                ));
            }
            if !csvs.is_empty() {
                notes.push(format!(
                    "using --base-csv {}; ignored the ClusterServiceVersion in the stream ({})",
                    base.file,
                    csvs.iter()
                        .map(Manifest::label)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            chosen = Some(base.clone());
        }
        (None, 0) => {}
        (None, 1) => chosen = csvs.pop(),
        (None, _) => {
            let prefix = package.map(|p| format!("{p}."));
            let matching = prefix
                .as_deref()
                .and_then(|pre| csvs.iter().position(|d| d.name().starts_with(pre)));
            match matching {
                Some(i) => {
                    let base = csvs.remove(i);
                    notes.push(format!(
                        "using {} as the base CSV; ignored {}",
                        base.label(),
                        csvs.iter()
                            .map(Manifest::label)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    chosen = Some(base);
                }
                None => {
                    return Err(GenerateBundleError::ManyBaseCsvs(
                        csvs.iter()
                            .map(Manifest::label)
                            .collect::<Vec<_>>()
                            .join(", "),
                    ));
                }
            }
        }
    }
    if let Some(base) = &chosen {
        for (ptr, field) in [("/metadata", "metadata"), ("/spec", "spec")] {
            if let Some(v) = base.object.pointer(ptr)
                && !v.is_object()
                && !v.is_null()
            {
                return Err(GenerateBundleError::invalid(
                    base,
                    field,
                    format!("must be a mapping, found {}", type_name(v)),
                ));
            }
        }
    }
    Ok(chosen)
}

/// Sorts `inputs` by role. Notes say what was dropped and why. `package`, when known, picks
/// the base among several ClusterServiceVersions: the first named `<package>.*`, as
/// operator-sdk's `Generator.generate` does.
pub fn collect(
    inputs: &super::GenerateInputs,
    package: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<Collected, GenerateBundleError> {
    let unique = unique_documents(&inputs.manifests)?;
    let mut c = Collected::default();
    // CRDs first: whether another object is a sample depends on every CRD of the input.
    for doc in &unique {
        if doc.kind() == kinds::CRD {
            c.crds.push(parse_crd(doc)?);
        }
    }
    let mut csvs: Vec<Manifest> = Vec::new();
    let mut dropped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for doc in unique {
        sort_document(&mut c, doc, &mut csvs, &mut dropped)?;
    }
    for (kind, names) in dropped {
        let why = if kind == "Namespace" {
            "OLM installs the operator into the namespace of its OperatorGroup".to_string()
        } else {
            format!(
                "OLM cannot install {kind} objects from a bundle (supported: {})",
                bundle_kinds_list()
            )
        };
        notes.push(format!("left out {kind} {}: {why}", names.join(", ")));
    }
    add_samples(&mut c, &inputs.samples)?;
    c.base_csv = choose_base(inputs, csvs, package, notes)?;
    if c.deployments.is_empty() {
        return Err(GenerateBundleError::NoDeployment);
    }
    Ok(c)
}

/// The documents with identity fields checked and identical duplicates dropped (kustomize
/// bases can repeat an object); different ones are an error, since only one of them could be
/// installed.
fn unique_documents(manifests: &[Manifest]) -> Result<Vec<Manifest>, GenerateBundleError> {
    let mut seen: HashMap<(String, String, String, String), usize> = HashMap::new();
    let mut unique: Vec<Manifest> = Vec::new();
    for doc in manifests {
        if doc.api_version().is_empty() {
            return Err(GenerateBundleError::invalid(
                doc,
                "apiVersion",
                "is required",
            ));
        }
        if doc.kind().is_empty() {
            return Err(GenerateBundleError::invalid(doc, "kind", "is required"));
        }
        require_str(doc, "/metadata/name", "metadata.name")?;
        let key = (
            doc.api_version().to_string(),
            doc.kind().to_string(),
            str_at(&doc.object, "/metadata/namespace")
                .unwrap_or("")
                .to_string(),
            doc.name().to_string(),
        );
        if let Some(&i) = seen.get(&key) {
            if unique[i].object != doc.object {
                return Err(GenerateBundleError::Duplicate {
                    what: format!("{} {}", doc.kind(), doc.name()),
                    first: unique[i].position(),
                    second: doc.position(),
                });
            }
            continue;
        }
        seen.insert(key, unique.len());
        unique.push(doc.clone());
    }
    Ok(unique)
}

/// Files one document under its role: CSVs go to `csvs` (the base is chosen later), kinds OLM
/// cannot install to `dropped` (kind to names), CRDs are already parsed.
fn sort_document(
    c: &mut Collected,
    doc: Manifest,
    csvs: &mut Vec<Manifest>,
    dropped: &mut BTreeMap<String, Vec<String>>,
) -> Result<(), GenerateBundleError> {
    match doc.kind() {
        kinds::CRD => {}
        kinds::CSV => csvs.push(doc),
        "Deployment" => {
            check_deployment(&doc)?;
            c.deployments.push(doc);
        }
        "Role" => c.roles.push(doc),
        "ClusterRole" => c.cluster_roles.push(doc),
        "RoleBinding" => {
            check_binding(&doc)?;
            c.role_bindings.push(doc);
        }
        "ClusterRoleBinding" => {
            check_binding(&doc)?;
            c.cluster_role_bindings.push(doc);
        }
        "ServiceAccount" => c.service_accounts.push(doc),
        "Service" => c.services.push(doc),
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            let hooks = admission_webhooks(&doc)?;
            c.admission_webhooks.extend(hooks);
        }
        _ if is_scorecard(&doc) => {
            if let Some(first) = &c.scorecard {
                return Err(GenerateBundleError::Duplicate {
                    what: "the scorecard Configuration".into(),
                    first: first.position(),
                    second: doc.position(),
                });
            }
            c.scorecard = Some(doc);
        }
        kind => {
            if c.crd_for(doc.api_version(), kind).is_some() {
                c.samples.push(doc);
            } else if is_bundle_kind(kind) {
                c.others.push(doc);
            } else {
                dropped
                    .entry(kind.to_string())
                    .or_default()
                    .push(doc.name().to_string());
            }
        }
    }
    Ok(())
}

/// The webhooks of a Validating/MutatingWebhookConfiguration, each with a name and a
/// `clientConfig`.
fn admission_webhooks(doc: &Manifest) -> Result<Vec<AdmissionWebhook>, GenerateBundleError> {
    let mutating = doc.kind() == "MutatingWebhookConfiguration";
    let hooks = match doc.object.get("webhooks") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(other) => {
            return Err(GenerateBundleError::invalid(
                doc,
                "webhooks",
                format!("must be a list, found {}", type_name(other)),
            ));
        }
    };
    let mut out = Vec::new();
    for (index, webhook) in hooks.into_iter().enumerate() {
        if str_at(&webhook, "/name").is_none_or(str::is_empty) {
            return Err(GenerateBundleError::invalid(
                doc,
                format!("webhooks[{index}].name"),
                "is required",
            ));
        }
        if !webhook.get("clientConfig").is_some_and(Value::is_object) {
            return Err(GenerateBundleError::invalid(
                doc,
                format!("webhooks[{index}].clientConfig"),
                "is required",
            ));
        }
        out.push(AdmissionWebhook {
            doc: doc.clone(),
            index,
            mutating,
            webhook,
        });
    }
    Ok(out)
}
