//! Bundle format: annotations, Dockerfile, kinds, object metadata, sizes, removed APIs.
//!
//! Follows operator-registry's `ValidateBundleFormat` (required annotations;
//! `pkg/lib/bundle/validate.go` `validateAnnotations`), operator-sdk's `ValidateBundleContent`
//! (only supported kinds, object metadata) and operator-framework/api's `validateBundleSize`
//! (`pkg/validation/internal/bundle.go`: each manifest gzip-compressed and base64-encoded, the
//! sum at most 1 MiB, a warning above 85%). Dockerfile labels, names, per-object sizes and
//! removed APIs are bundle-tool's own checks: warnings, errors only with `suite=strict`.

use super::rules::{
    BUNDLE_ANNOTATIONS, BUNDLE_DEFAULT_CHANNEL, BUNDLE_SIZE, CSV_MISSING, DEPRECATED_API,
    DOCKERFILE_COPY, DOCKERFILE_LABELS, MANIFEST_KIND, MANIFEST_METADATA, MANIFEST_NAMESPACE,
    MANIFEST_SIZE, YAML_SYNTAX,
};
use super::{Ctx, name_problem};
use crate::kinds;
use crate::model::{Manifest, keys};
use flate2::Compression;
use flate2::write::GzEncoder;
use olmkit_core::csv::str_at;
use olmkit_core::k8s_name;
use std::collections::BTreeMap;
use std::io::Write;

/// Largest bundle OLM can stage in one ConfigMap, measured as the sum of each manifest file
/// gzip-compressed then base64-encoded (operator-framework/api `max_bundle_size`, 1 MiB).
pub const MAX_BUNDLE_COMPRESSED: u64 = 1 << 20;
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

/// operator-registry `validateAnnotations`: metadata/annotations.yaml exists with every key, the
/// registry+v1 media type and channels (errors); other values and blank entries (stricter).
fn annotations(ctx: &mut Ctx) {
    let b = ctx.bundle;
    let Some(file) = b.annotations_file.clone() else {
        ctx.at(Some("metadata/annotations.yaml"), None).error(&BUNDLE_ANNOTATIONS, "could not find the annotations file metadata/annotations.yaml").hint("`bundle-tool generate bundle` writes it; OLM and opm read the package and channels from it");
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
            // operator-registry `validateAnnotations`: every key must be present, the media
            // type must be registry+v1 and the channels non-empty; it never compares the
            // manifests/metadata values (a no-op in upstream), so a mismatch there is ours.
            (None, _) => {
                ctx.at(file, Some(&path))
                    .error(&BUNDLE_ANNOTATIONS, format!("missing annotation {key:?}"));
            }
            (Some(v), Some(want)) if v != want => {
                let msg =
                    format!("expecting annotation {key:?} to have value {want:?} instead of {v:?}");
                if key == keys::MEDIATYPE {
                    ctx.at(file, Some(&path)).error(&BUNDLE_ANNOTATIONS, msg);
                } else {
                    ctx.at(file, Some(&path)).stricter(&BUNDLE_ANNOTATIONS, msg);
                }
            }
            (Some(v), _) if v.trim().is_empty() => {
                let msg = format!("expecting annotation {key:?} to have non-empty value");
                if key == keys::CHANNELS && v.is_empty() {
                    ctx.at(file, Some(&path)).error(&BUNDLE_ANNOTATIONS, msg);
                } else {
                    ctx.at(file, Some(&path)).stricter(&BUNDLE_ANNOTATIONS, msg);
                }
            }
            _ => {}
        }
    }
    package_and_channels(ctx, file);
    default_channel(ctx, file);
}

/// The package name is a DNS-1123 subdomain and the channel list has no empty entry
/// (operator-registry does not look: stricter).
fn package_and_channels(ctx: &mut Ctx, file: Option<&str>) {
    let b = ctx.bundle;
    if let Some(p) = b.package()
        && let Some(problem) = name_problem(k8s_name::dns1123_subdomain_errors(p))
    {
        ctx.at(file, Some(&format!("annotations.{}", keys::PACKAGE)))
            .stricter(
                &BUNDLE_ANNOTATIONS,
                format!("package name {p:?} is invalid: {problem}"),
            );
    }
    if let Some(raw) = b.annotations.get(keys::CHANNELS)
        && raw.split(',').any(|c| c.trim().is_empty())
        && !raw.trim().is_empty()
    {
        ctx.at(file, Some(&format!("annotations.{}", keys::CHANNELS)))
            .stricter(
                &BUNDLE_ANNOTATIONS,
                format!("channel list {raw:?} has an empty entry"),
            );
    }
}

/// operator-registry `validateAnnotations`: a default channel annotation is not empty (an
/// error); one that is not among the bundle's channels is accepted upstream (the catalog
/// decides the package's default channel: stricter).
fn default_channel(ctx: &mut Ctx, file: Option<&str>) {
    let b = ctx.bundle;
    let channels = b.channels();
    if let Some(d) = b.annotations.get(keys::DEFAULT_CHANNEL) {
        let path = format!("annotations.{}", keys::DEFAULT_CHANNEL);
        if d.is_empty() {
            ctx.at(file, Some(&path)).error(
                &BUNDLE_ANNOTATIONS,
                format!(
                    "expecting annotation {:?} to have non-empty value",
                    keys::DEFAULT_CHANNEL
                ),
            );
        } else if !channels.is_empty() && !channels.iter().any(|c| c == d) {
            // operator-sdk accepts it (the catalog decides the package's default channel).
            ctx.at(file, Some(&path)).stricter(&BUNDLE_DEFAULT_CHANNEL, format!(
                    "default channel {d:?} is not one of the bundle's channels ({})",
                    channels.join(",")
                )).hint("add it to operators.operatorframework.io.bundle.channels.v1 or pick one of the listed channels");
        }
    }
}

/// bundle.Dockerfile LABELs equal the annotations and its COPY sources exist (bundle-tool's
/// own: warnings).
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
                ctx.at(file, Some(&format!("LABEL {k}"))).stricter(
                    &DOCKERFILE_LABELS,
                    format!("missing LABEL {k}={v} (annotations.yaml has it)"),
                );
            }
            Some(l) if l != v => {
                ctx.at(file, Some(&format!("LABEL {k}"))).stricter(
                    &DOCKERFILE_LABELS,
                    format!("LABEL {k}={l:?} differs from annotations.yaml ({v:?})"),
                );
            }
            _ => {}
        }
    }
    for (k, v) in labels {
        if k.starts_with("operators.operatorframework.io.") && !b.annotations.contains_key(k) {
            ctx.at(file, Some(&format!("LABEL {k}"))).stricter(&DOCKERFILE_LABELS, format!("LABEL {k}={v} is not in metadata/annotations.yaml; OLM reads the annotations, so the image and the directory would disagree"));
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
            if !copy_source_resolves(b, src) {
                ctx.at(file, Some(&format!("COPY {src}"))).warning(&DOCKERFILE_COPY, format!("COPY source {src:?} is not in the bundle directory, whatever the build context")).hint("fix the path: it should name manifests/, metadata/ or another file of the bundle");
            }
        }
    }
}

/// True when `path` (relative to the bundle root) is a file or folder of the bundle.
fn in_bundle(b: &crate::model::Bundle, path: &str) -> bool {
    let under = |f: &str| f == path || f.starts_with(&format!("{path}/"));
    path == "."
        || path.is_empty()
        || b.manifest_files.keys().any(|f| under(f))
        || b.annotations_file.as_deref().is_some_and(under)
        || b.other_files.iter().any(|f| under(f))
        || ["manifests", "metadata"].contains(&path)
}

/// A COPY source resolves against the image build context, which is usually a parent of the
/// bundle folder (operator-sdk writes `COPY bundle/manifests /manifests/` and builds from the
/// project root): it is fine when some trailing part of it names something in the bundle.
fn copy_source_resolves(b: &crate::model::Bundle, src: &str) -> bool {
    let s = src.trim_end_matches('/').trim_start_matches("./");
    let parts: Vec<&str> = s
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    parts.is_empty() || (0..parts.len()).any(|i| in_bundle(b, &parts[i..].join("/")))
}

/// operator-framework/api `loadBundle` refuses a manifests folder holding a folder or a
/// hidden file ("bundle manifests dir contains directory", "... has hidden file").
fn manifest_folder(ctx: &mut Ctx) {
    let mut subdirs = std::collections::BTreeSet::new();
    for file in ctx.bundle.manifest_files.keys() {
        let rest = file.strip_prefix("manifests/").unwrap_or(file);
        if let Some((dir, _)) = rest.split_once('/') {
            subdirs.insert(format!("manifests/{dir}"));
        } else if rest.starts_with('.') {
            ctx.at(Some(file), None).error(
                &MANIFEST_KIND,
                format!("bundle manifests dir has hidden file: {file}"),
            );
        }
    }
    for dir in subdirs {
        ctx.at(Some(&dir), None)
            .error(
                &MANIFEST_KIND,
                format!("bundle manifests dir contains directory: {dir}"),
            )
            .hint("OLM reads only the files directly in manifests/; move them up or out");
    }
}

/// Every manifest: an object with apiVersion, kind and name, of a kind OLM installs, named
/// validly and once, without a namespace and not on a removed API; then exactly one CSV.
fn manifests(ctx: &mut Ctx) {
    manifest_folder(ctx);
    let b = ctx.bundle;
    let min_kube = ctx
        .csv
        .and_then(|m| m.csv_view().min_kube_version())
        .and_then(parse_tolerant);
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut csvs = Vec::new();
    for m in &b.manifests {
        let file = Some(m.file.as_str());
        let (api, kind) = (m.api_version(), m.kind());
        if !m.object.is_object() {
            ctx.at(file, None).error(
                &MANIFEST_METADATA,
                "not a Kubernetes object (expected a mapping)",
            );
            continue;
        }
        if api.is_empty() {
            // operator-sdk decodes such an object and accepts it; kubectl would not.
            ctx.at(file, Some("apiVersion"))
                .stricter(&MANIFEST_METADATA, "apiVersion is required");
        }
        if kind.is_empty() {
            ctx.at(file, Some("kind"))
                .error(&MANIFEST_METADATA, "kind is required");
            continue;
        }
        if kind == kinds::CSV {
            csvs.push(m.file.clone());
        }
        if !kinds::is_supported(kind) {
            ctx.at(file, Some("kind")).error(&MANIFEST_KIND, format!("{kind} is not supported type for registryV1 bundle")).hint(format!(
                    "OLM installs only {} from a bundle; move {kind} objects into the operator's own reconciliation or drop them",
                    kinds::supported_list()
                ));
        }
        manifest_name(ctx, m, &mut seen);
        manifest_namespace(ctx, m);
        deprecated_api(ctx, m, min_kube.as_ref());
    }
    csv_count(ctx, &csvs);
}

/// operator-sdk `ValidateBundleContent` requires `metadata.name` (an error); it validates
/// metadata without a name check (`ValidateObjectMetaAccessor` with a no-op name function), so
/// name syntax per kind and duplicates are bundle-tool's own (stricter).
fn manifest_name(ctx: &mut Ctx, m: &Manifest, seen: &mut BTreeMap<(String, String), String>) {
    let (file, kind, name) = (Some(m.file.as_str()), m.kind(), m.name());
    if name.is_empty() {
        ctx.at(file, Some("metadata.name"))
            .error(&MANIFEST_METADATA, "metadata.name is required");
        return;
    }
    let problem = match kind {
        // RBAC names are path segments and may contain ':' (e.g. system:...).
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => {
            (name.contains('/') || name.contains('%') || name == "." || name == "..")
                .then(|| "may not contain '/' or '%'".to_string())
        }
        "Service" => name_problem(k8s_name::dns1035_label_errors(name)),
        _ => name_problem(k8s_name::dns1123_subdomain_errors(name)),
    };
    if let Some(p) = problem {
        ctx.at(file, Some("metadata.name")).stricter(
            &MANIFEST_METADATA,
            format!("{name:?} is not a valid {kind} name: {p}"),
        );
    }
    let key = (kind.to_string(), name.to_string());
    if let Some(first) = seen.get(&key) {
        ctx.at(file, Some("metadata.name")).stricter(
            &MANIFEST_METADATA,
            format!("{kind} {name} is also defined in {first}; OLM would install only one of them"),
        );
    } else {
        seen.insert(key, m.file.clone());
    }
}

/// Namespaced manifests carry no namespace: OLM installs them into the operator's namespace
/// and ignores it (bundle-tool's own: a warning).
fn manifest_namespace(ctx: &mut Ctx, m: &Manifest) {
    let (kind, name) = (m.kind(), m.name());
    if kinds::is_namespaced(kind) == Some(true)
        && kind != kinds::CSV
        && str_at(&m.object, "/metadata/namespace").is_some_and(|n| !n.is_empty())
    {
        ctx.at(Some(&m.file), Some("metadata.namespace")).warning(&MANIFEST_NAMESPACE, format!("{kind} {name} sets a namespace; OLM installs bundle objects into the operator's namespace and ignores it")).hint("remove metadata.namespace (bundle-tool generate bundle does)");
    }
}

/// No manifest uses an API Kubernetes removed. The default suite of operator-sdk has no
/// removed-API check (the operatorhub suite has upstream's `validateDeprecatedAPIS`, see
/// optional.rs), so this is a warning, stricter when `minKubeVersion` is past the removal.
fn deprecated_api(ctx: &mut Ctx, m: &Manifest, min_kube: Option<&semver::Version>) {
    let (api, kind, name) = (m.api_version(), m.kind(), m.name());
    let Some((_, _, removed)) = REMOVED_APIS
        .iter()
        .find(|(a, k, _)| *a == api && (k.is_empty() || *k == kind))
    else {
        return;
    };
    let removed_v = semver::Version::parse(removed).ok();
    let msg = format!("{kind} {name} uses {api}, which Kubernetes {removed} no longer serves");
    let is_error = match (min_kube, &removed_v) {
        (Some(min), Some(r)) => min >= r,
        _ => false,
    };
    let at = ctx.at(Some(&m.file), Some("apiVersion"));
    let reported = if is_error {
        at.stricter(
            &DEPRECATED_API,
            format!("{msg}, and spec.minKubeVersion says the bundle targets it"),
        )
    } else {
        at.warning(
            &DEPRECATED_API,
            format!("{msg}; the bundle cannot install there"),
        )
    };
    reported.hint("migrate the object to a current API version");
}

/// operator-framework/api `loadBundle`: a bundle has exactly one ClusterServiceVersion.
fn csv_count(ctx: &mut Ctx, csvs: &[String]) {
    match csvs.len() {
        0 => {
            ctx.at(Some("manifests/"), None).error(&CSV_MISSING, "the bundle has no ClusterServiceVersion").hint("a registry+v1 bundle needs exactly one CSV; generate it with `bundle-tool generate bundle`");
        }
        1 => {}
        _ => {
            ctx.at(Some("manifests/"), None).error(
                &CSV_MISSING,
                format!(
                    "the bundle has {} ClusterServiceVersions ({}); OLM expects exactly one",
                    csvs.len(),
                    csvs.join(", ")
                ),
            );
        }
    }
}

/// Length of `bytes` gzip-compressed (default level, as Go's `gzip.NewWriter`) and then
/// base64-encoded with padding: operator-framework/api `encoding.GzipBase64Encode`.
fn gzip_base64_len(bytes: &[u8]) -> u64 {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    let gz = enc
        .write_all(bytes)
        .and_then(|_| enc.finish())
        .map(|v| v.len() as u64)
        .unwrap_or(bytes.len() as u64);
    gz.div_ceil(3) * 4
}

/// Sizes as operator-framework/api `formatBytesInUnit` prints them (decimal units).
fn format_bytes(b: u64) -> String {
    if b < 1000 {
        return format!("{b} B");
    }
    let (mut div, mut exp) = (1000u64, 0usize);
    let mut n = b / 1000;
    while n >= 1000 {
        div *= 1000;
        exp += 1;
        n /= 1000;
    }
    let unit = ['k', 'M', 'G', 'T', 'P', 'E'][exp.min(5)];
    format!("{:.1} {unit}B", b as f64 / div as f64)
}

/// The JSON size of every object (what the API server stores), a warning above 1 MiB: an
/// object that large is refused by most clusters (etcd's request limit is 1.5 MiB). Not an
/// operator-sdk check.
fn object_sizes(ctx: &mut Ctx) {
    for m in &ctx.bundle.manifests {
        // Compact JSON is rarely much larger than the YAML it came from: skip small files.
        let file_len = ctx.bundle.manifest_files.get(&m.file).map_or(0, Vec::len);
        if file_len <= MAX_MANIFEST_BYTES / 2 {
            continue;
        }
        let len = serde_json::to_vec(&m.object).map(|v| v.len()).unwrap_or(0);
        if len > MAX_MANIFEST_BYTES {
            ctx.at(Some(&m.file), None).stricter(&MANIFEST_SIZE, format!("{} {} is {len} bytes as JSON, more than the {MAX_MANIFEST_BYTES} bytes a single object can safely have in Kubernetes", m.kind(), m.name())).hint("shrink it (for CRDs: drop descriptions with controller-gen crd:maxDescLen=0)");
        }
    }
}

/// operator-framework/api `validateBundleSize`: the manifests, each gzip-compressed and
/// base64-encoded, must sum to at most 1 MiB; a warning above 85% of it.
fn bundle_size(ctx: &mut Ctx) {
    let b = ctx.bundle;
    let total: u64 = b.manifest_files.values().map(|v| v.len() as u64).sum();
    let compressed: u64 = b.manifest_files.values().map(|v| gzip_base64_len(v)).sum();
    let limit = MAX_BUNDLE_COMPRESSED;
    let sizes = format!(
        "size=~{} , max={}. Bundle uncompressed size is {}",
        format_bytes(compressed),
        format_bytes(limit),
        format_bytes(total)
    );
    if compressed > limit {
        ctx.at(Some("manifests/"), None).error(&BUNDLE_SIZE, format!("maximum bundle compressed size with gzip size exceeded: {sizes}")).hint("OLM stages the bundle in one ConfigMap; shrink the CRDs (controller-gen crd:maxDescLen=0) or split the operator");
    } else if compressed * 100 > limit * 85 {
        ctx.at(Some("manifests/"), None).warning(
            &BUNDLE_SIZE,
            format!("nearing maximum bundle compressed size with gzip: {sizes}"),
        );
    }
}

/// What the loader had to read like Go's YAML decoder (or skipped as upstream does): a
/// warning each, with the file and line, since stricter tools refuse such files.
fn load_warnings(ctx: &mut Ctx) {
    for w in &ctx.bundle.load_warnings {
        let path = w.line.map(|l| format!("line {l}"));
        ctx.at(Some(&w.source_name), path.as_deref())
            .warning(&YAML_SYNTAX, w.message.clone())
            .hint("fix the YAML so that every parser reads it the same way");
    }
}

/// Runs the format checks.
pub(crate) fn check(ctx: &mut Ctx) {
    load_warnings(ctx);
    annotations(ctx);
    dockerfile(ctx);
    manifests(ctx);
    object_sizes(ctx);
    bundle_size(ctx);
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
