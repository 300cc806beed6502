//! Bundle format: annotations, Dockerfile, kinds, object metadata, sizes, removed APIs.
//!
//! Follows operator-registry's `ValidateBundleFormat`/`ValidateBundleContent` (required
//! annotations with fixed values, only supported kinds, kubectl-able metadata) and
//! operator-framework/api's bundle size check (OLM unpacks a bundle into a ConfigMap, whose
//! data is limited, so the compressed manifests must stay under ~4 MiB; warning from 85%).

use super::{Ctx, hint};
use crate::json::str_at;
use crate::kinds;
use crate::model::keys;
use crate::naming::dns1123_subdomain_problem;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::collections::BTreeMap;
use std::io::Write;

/// Largest gzip-compressed bundle OLM can unpack (operator-framework/api `max_bundle_size`).
pub const MAX_BUNDLE_COMPRESSED: u64 = 4 << 20;
/// Largest single manifest: Kubernetes refuses objects near etcd's 1.5 MiB request limit and
/// OLM copies each manifest into a ConfigMap (1 MiB data limit).
pub const MAX_MANIFEST_BYTES: usize = 1 << 20;

/// Kubernetes APIs removed from the API server, and the release that removed them.
const REMOVED_APIS: &[(&str, &str, &str)] = &[
    ("extensions/v1beta1", "", "1.16.0"),
    ("apps/v1beta1", "", "1.16.0"),
    ("apps/v1beta2", "", "1.16.0"),
    ("apiextensions.k8s.io/v1beta1", "", "1.22.0"),
    ("admissionregistration.k8s.io/v1beta1", "", "1.22.0"),
    ("rbac.authorization.k8s.io/v1beta1", "", "1.22.0"),
    ("rbac.authorization.k8s.io/v1alpha1", "", "1.22.0"),
    ("scheduling.k8s.io/v1beta1", "", "1.22.0"),
    ("scheduling.k8s.io/v1alpha1", "", "1.22.0"),
    ("apiregistration.k8s.io/v1beta1", "", "1.22.0"),
    ("coordination.k8s.io/v1beta1", "", "1.22.0"),
    ("networking.k8s.io/v1beta1", "", "1.22.0"),
    ("certificates.k8s.io/v1beta1", "", "1.22.0"),
    ("storage.k8s.io/v1beta1", "CSIDriver", "1.22.0"),
    ("storage.k8s.io/v1beta1", "StorageClass", "1.22.0"),
    ("storage.k8s.io/v1beta1", "VolumeAttachment", "1.22.0"),
    ("storage.k8s.io/v1beta1", "CSINode", "1.22.0"),
    ("policy/v1beta1", "", "1.25.0"),
    ("batch/v1beta1", "", "1.25.0"),
    ("autoscaling/v2beta1", "", "1.25.0"),
    ("discovery.k8s.io/v1beta1", "", "1.25.0"),
    ("events.k8s.io/v1beta1", "", "1.25.0"),
    ("node.k8s.io/v1beta1", "", "1.25.0"),
    ("autoscaling/v2beta2", "", "1.26.0"),
    ("flowcontrol.apiserver.k8s.io/v1beta1", "", "1.26.0"),
    ("storage.k8s.io/v1beta1", "CSIStorageCapacity", "1.27.0"),
    ("flowcontrol.apiserver.k8s.io/v1beta2", "", "1.29.0"),
    ("flowcontrol.apiserver.k8s.io/v1beta3", "", "1.32.0"),
];

/// Parses a Kubernetes version leniently (`1.25`, `v1.25.0`, `1.25.0-rc.1`), like blang's
/// `ParseTolerant` that operator-framework/api uses for `minKubeVersion`.
pub fn parse_tolerant(v: &str) -> Option<semver::Version> {
    let v = v.trim().trim_start_matches('v');
    if let Ok(x) = semver::Version::parse(v) {
        return Some(x);
    }
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (v, None),
    };
    let mut parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty()
        || parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    while parts.len() < 3 {
        parts.push("0");
    }
    let normalized: Vec<String> = parts
        .iter()
        .map(|p| p.trim_start_matches('0'))
        .map(|p| {
            if p.is_empty() {
                "0".to_string()
            } else {
                p.to_string()
            }
        })
        .collect();
    let mut s = normalized.join(".");
    if let Some(p) = pre {
        s.push('-');
        s.push_str(p);
    }
    semver::Version::parse(&s).ok()
}

fn annotations(ctx: &mut Ctx) {
    let b = ctx.bundle;
    let Some(file) = b.annotations_file.clone() else {
        let f = ctx.error(
            "bundle-annotations",
            Some("metadata/annotations.yaml"),
            None,
            "could not find the annotations file metadata/annotations.yaml",
        );
        hint(
            f,
            "`bundle-tool generate bundle` writes it; OLM and opm read the package and channels from it",
        );
        return;
    };
    let file = Some(file.as_str());
    let expected = [
        (keys::MEDIATYPE, Some("registry+v1")),
        (keys::MANIFESTS, Some("manifests/")),
        (keys::METADATA, Some("metadata/")),
        (keys::PACKAGE, None),
        (keys::CHANNELS, None),
    ];
    for (key, value) in expected {
        let path = format!("annotations.{key}");
        match (b.annotations.get(key), value) {
            (None, _) => {
                ctx.error(
                    "bundle-annotations",
                    file,
                    Some(&path),
                    format!("missing annotation {key:?}"),
                );
            }
            (Some(v), Some(want)) if v != want => {
                ctx.error(
                    "bundle-annotations",
                    file,
                    Some(&path),
                    format!("expecting annotation {key:?} to have value {want:?} instead of {v:?}"),
                );
            }
            (Some(v), _) if v.trim().is_empty() => {
                ctx.error(
                    "bundle-annotations",
                    file,
                    Some(&path),
                    format!("expecting annotation {key:?} to have non-empty value"),
                );
            }
            _ => {}
        }
    }
    if let Some(p) = b.package()
        && let Some(problem) = dns1123_subdomain_problem(p)
    {
        ctx.error(
            "bundle-annotations",
            file,
            Some(&format!("annotations.{}", keys::PACKAGE)),
            format!("package name {p:?} is invalid: {problem}"),
        );
    }
    let channels = b.channels();
    if let Some(raw) = b.annotations.get(keys::CHANNELS)
        && raw.split(',').any(|c| c.trim().is_empty())
        && !raw.trim().is_empty()
    {
        ctx.error(
            "bundle-annotations",
            file,
            Some(&format!("annotations.{}", keys::CHANNELS)),
            format!("channel list {raw:?} has an empty entry"),
        );
    }
    if let Some(d) = b.annotations.get(keys::DEFAULT_CHANNEL) {
        let path = format!("annotations.{}", keys::DEFAULT_CHANNEL);
        if d.trim().is_empty() {
            ctx.error(
                "bundle-annotations",
                file,
                Some(&path),
                format!(
                    "expecting annotation {:?} to have non-empty value",
                    keys::DEFAULT_CHANNEL
                ),
            );
        } else if !channels.is_empty() && !channels.iter().any(|c| c == d) {
            let f = ctx.error(
                "bundle-default-channel",
                file,
                Some(&path),
                format!(
                    "default channel {d:?} is not one of the bundle's channels ({})",
                    channels.join(",")
                ),
            );
            hint(
                f,
                "add it to operators.operatorframework.io.bundle.channels.v1 or pick one of the listed channels",
            );
        }
    }
}

fn dockerfile(ctx: &mut Ctx) {
    let b = ctx.bundle;
    let Some(labels) = &b.dockerfile_labels else {
        return;
    };
    let file = Some("bundle.Dockerfile");
    for (k, v) in &b.annotations {
        if !k.starts_with("operators.operatorframework.io.") {
            continue;
        }
        match labels.get(k) {
            None => {
                ctx.error(
                    "dockerfile-labels",
                    file,
                    Some(&format!("LABEL {k}")),
                    format!("missing LABEL {k}={v} (annotations.yaml has it)"),
                );
            }
            Some(l) if l != v => {
                ctx.error(
                    "dockerfile-labels",
                    file,
                    Some(&format!("LABEL {k}")),
                    format!("LABEL {k}={l:?} differs from annotations.yaml ({v:?})"),
                );
            }
            _ => {}
        }
    }
    for (k, v) in labels {
        if k.starts_with("operators.operatorframework.io.") && !b.annotations.contains_key(k) {
            ctx.error("dockerfile-labels", file, Some(&format!("LABEL {k}")), format!("LABEL {k}={v} is not in metadata/annotations.yaml; OLM reads the annotations, so the image and the directory would disagree"));
        }
    }
    let Some(text) = &b.dockerfile else { return };
    let joined = text.replace("\\\n", " ");
    for line in joined.lines() {
        let line = line.trim();
        let Some(rest) = line
            .strip_prefix("COPY ")
            .or_else(|| line.strip_prefix("copy "))
        else {
            continue;
        };
        let args: Vec<&str> = rest
            .split_whitespace()
            .filter(|a| !a.starts_with("--"))
            .collect();
        let Some((_, sources)) = args.split_last() else {
            continue;
        };
        for src in sources {
            let s = src.trim_end_matches('/').trim_start_matches("./");
            let exists = s == "."
                || b.manifest_files
                    .keys()
                    .any(|f| f == s || f.starts_with(&format!("{s}/")))
                || b.annotations_file
                    .as_deref()
                    .is_some_and(|f| f == s || f.starts_with(&format!("{s}/")))
                || b.other_files
                    .iter()
                    .any(|f| f == s || f.starts_with(&format!("{s}/")));
            if !exists {
                let f = ctx.warning(
                    "dockerfile-copy",
                    file,
                    Some(&format!("COPY {src}")),
                    format!("COPY source {src:?} does not exist relative to the bundle directory"),
                );
                hint(
                    f,
                    "build the bundle image with the bundle directory as context, or fix the path",
                );
            }
        }
    }
}

fn manifests(ctx: &mut Ctx) {
    let b = ctx.bundle;
    let min_kube = ctx
        .csv
        .and_then(|m| str_at(&m.object, "/spec/minKubeVersion"))
        .and_then(parse_tolerant);
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut csvs = Vec::new();
    for m in &b.manifests {
        let file = Some(m.file.as_str());
        let (api, kind, name) = (m.api_version(), m.kind(), m.name());
        if !m.object.is_object() {
            ctx.error(
                "manifest-metadata",
                file,
                None,
                "not a Kubernetes object (expected a mapping)",
            );
            continue;
        }
        if api.is_empty() {
            ctx.error(
                "manifest-metadata",
                file,
                Some("apiVersion"),
                "apiVersion is required",
            );
        }
        if kind.is_empty() {
            ctx.error("manifest-metadata", file, Some("kind"), "kind is required");
            continue;
        }
        if kind == kinds::CSV {
            csvs.push(m.file.clone());
        }
        if !kinds::is_supported(kind) {
            let f = ctx.error(
                "manifest-kind",
                file,
                Some("kind"),
                format!("{kind} is not supported type for registryV1 bundle"),
            );
            hint(
                f,
                format!(
                    "OLM installs only {} from a bundle; move {kind} objects into the operator's own reconciliation or drop them",
                    kinds::supported_list()
                ),
            );
        }
        if name.is_empty() {
            ctx.error(
                "manifest-metadata",
                file,
                Some("metadata.name"),
                "metadata.name is required",
            );
        } else {
            let problem = match kind {
                // RBAC names are path segments and may contain ':' (e.g. system:...).
                "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => {
                    (name.contains('/') || name.contains('%') || name == "." || name == "..")
                        .then(|| "may not contain '/' or '%'".to_string())
                }
                "Service" => service_name_problem(name),
                _ => dns1123_subdomain_problem(name),
            };
            if let Some(p) = problem {
                ctx.error(
                    "manifest-metadata",
                    file,
                    Some("metadata.name"),
                    format!("{name:?} is not a valid {kind} name: {p}"),
                );
            }
            let key = (kind.to_string(), name.to_string());
            if let Some(first) = seen.get(&key) {
                ctx.error("manifest-metadata", file, Some("metadata.name"), format!("{kind} {name} is also defined in {first}; OLM would install only one of them"));
            } else {
                seen.insert(key, m.file.clone());
            }
        }
        if kinds::is_namespaced(kind) == Some(true)
            && kind != kinds::CSV
            && str_at(&m.object, "/metadata/namespace").is_some_and(|n| !n.is_empty())
        {
            let f = ctx.warning(
                "manifest-namespace",
                file,
                Some("metadata.namespace"),
                format!("{kind} {name} sets a namespace; OLM installs bundle objects into the operator's namespace and ignores it"),
            );
            hint(
                f,
                "remove metadata.namespace (bundle-tool generate bundle does)",
            );
        }
        if let Some((_, _, removed)) = REMOVED_APIS
            .iter()
            .find(|(a, k, _)| *a == api && (k.is_empty() || *k == kind))
        {
            let removed_v = semver::Version::parse(removed).ok();
            let msg =
                format!("{kind} {name} uses {api}, which Kubernetes {removed} no longer serves");
            let is_error = match (&min_kube, &removed_v) {
                (Some(min), Some(r)) => min >= r,
                _ => false,
            };
            let f = if is_error {
                ctx.error(
                    "deprecated-api",
                    file,
                    Some("apiVersion"),
                    format!("{msg}, and spec.minKubeVersion says the bundle targets it"),
                )
            } else {
                ctx.warning(
                    "deprecated-api",
                    file,
                    Some("apiVersion"),
                    format!("{msg}; the bundle cannot install there"),
                )
            };
            hint(f, "migrate the object to a current API version");
        }
    }
    match csvs.len() {
        0 => {
            let f = ctx.error(
                "csv-missing",
                Some("manifests/"),
                None,
                "the bundle has no ClusterServiceVersion",
            );
            hint(
                f,
                "a registry+v1 bundle needs exactly one CSV; generate it with `bundle-tool generate bundle`",
            );
        }
        1 => {}
        _ => {
            ctx.error(
                "csv-missing",
                Some("manifests/"),
                None,
                format!(
                    "the bundle has {} ClusterServiceVersions ({}); OLM expects exactly one",
                    csvs.len(),
                    csvs.join(", ")
                ),
            );
        }
    }
}

fn service_name_problem(name: &str) -> Option<String> {
    // Service names are DNS-1035 labels: they must start with a letter.
    if let Some(p) = crate::naming::dns1123_label_problem(name) {
        return Some(p);
    }
    (!name.starts_with(|c: char| c.is_ascii_lowercase()))
        .then(|| "must start with a lower case letter (DNS-1035 label)".to_string())
}

fn sizes(ctx: &mut Ctx) {
    let b = ctx.bundle;
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    let mut total = 0usize;
    for (file, bytes) in &b.manifest_files {
        total += bytes.len();
        let _ = enc.write_all(bytes);
        if bytes.len() > MAX_MANIFEST_BYTES {
            let f = ctx.error(
                "manifest-size",
                Some(file),
                None,
                format!("{file} is {} bytes, more than the {} bytes a single object can safely have in Kubernetes and in OLM's bundle ConfigMap", bytes.len(), MAX_MANIFEST_BYTES),
            );
            hint(
                f,
                "shrink it (for CRDs: drop descriptions with controller-gen crd:maxDescLen=0)",
            );
        }
    }
    let compressed = enc.finish().map(|v| v.len() as u64).unwrap_or(total as u64);
    let limit = MAX_BUNDLE_COMPRESSED;
    if compressed > limit {
        ctx.error(
            "bundle-size",
            Some("manifests/"),
            None,
            format!("the manifests compress to {compressed} bytes, over the {limit} bytes OLM can unpack"),
        );
    } else if compressed * 100 > limit * 85 {
        ctx.warning(
            "bundle-size",
            Some("manifests/"),
            None,
            format!("the manifests compress to {compressed} bytes, close to the {limit}-byte limit OLM can unpack"),
        );
    }
}

/// Runs the format checks.
pub(crate) fn check(ctx: &mut Ctx) {
    annotations(ctx);
    dockerfile(ctx);
    manifests(ctx);
    sizes(ctx);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerant_versions() {
        assert_eq!(
            parse_tolerant("1.25").unwrap(),
            semver::Version::new(1, 25, 0)
        );
        assert_eq!(
            parse_tolerant("v1.8.0").unwrap(),
            semver::Version::new(1, 8, 0)
        );
        assert_eq!(
            parse_tolerant("1.19.0").unwrap(),
            semver::Version::new(1, 19, 0)
        );
        assert!(parse_tolerant("1.x").is_none());
        assert!(parse_tolerant("").is_none());
    }
}
