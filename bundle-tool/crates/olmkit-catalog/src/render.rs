//! Rendering a registry+v1 bundle directory into an `olm.bundle` blob.
//!
//! `opm render` v1.73 of a bundle directory is [`crate::render_opm::render_bundle`]; this module
//! holds what both renderings share.
//! [`render_bundle_release`] is bundle-tool's own catalog style, the one `catalog/` of a release
//! is written in, after opm's `ObjectsAndPropertiesFromBundle` as bundle-tool first read it:
//! `olm.package` (from the annotations' package and the CSV version, unless
//! `metadata/properties.yaml` gives one), one `olm.gvk` per version of every CRD shipped and per
//! owned APIService, `olm.gvk.required` per required CRD or APIService,
//! `olm.package.required`/`olm.gvk.required`/`olm.constraint` from
//! `metadata/dependencies.yaml`, the other `properties.yaml` entries, all sorted by type and
//! value; then either `olm.csv.metadata` or one `olm.bundle.object` per manifest.
//! `relatedImages` are the CSV's, then the bundle image, then the operator containers' images
//! not listed yet. A bundle directory has no image reference, so the caller gives one (usually
//! through [`ImageRefTemplate`]).

use crate::declcfg::{Bundle, RelatedImage, SCHEMA_BUNDLE};
use crate::property;
use crate::property::Property;
use base64::Engine;
use olmkit_bundle::Bundle as BundleDir;
use olmkit_core::csv::{ApiServiceDescription, CrdDescription, Csv, str_at};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use thiserror::Error;

/// A bundle directory could not be rendered.
#[derive(Debug, Error)]
pub enum RenderBundleError {
    /// The bundle has no ClusterServiceVersion.
    #[error("{0}: bundle has no ClusterServiceVersion in manifests/")]
    NoCsv(String),
    /// A required field is missing.
    #[error("{dir}: {file}: {field} is missing or empty")]
    Missing {
        /// Bundle directory.
        dir: String,
        /// File concerned.
        file: String,
        /// Field path.
        field: String,
    },
    /// A CRD or CSV field has the wrong shape.
    #[error("{dir}: {file}: {message}")]
    Invalid {
        /// Bundle directory.
        dir: String,
        /// File concerned.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The image reference template is unusable.
    #[error("invalid image reference template {template:?}: {message}")]
    Template {
        /// The template.
        template: String,
        /// What is wrong.
        message: String,
    },
}

/// How to render bundle directories.
#[derive(Clone, Debug, Default)]
pub struct RenderOptions {
    /// Embed every manifest as `olm.bundle.object` (opm's default) instead of one
    /// `olm.csv.metadata` (opm's `--migrate-level bundle-object-to-csv-metadata`).
    pub bundle_objects: bool,
}

impl RenderOptions {
    /// What `opm render` does by default: every manifest as `olm.bundle.object`.
    pub fn opm() -> Self {
        Self {
            bundle_objects: true,
        }
    }
}

/// A bundle image reference pattern with `{package}`, `{name}` (the CSV name) and `{version}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRefTemplate(String);

impl ImageRefTemplate {
    /// Parses a template; it must contain `{version}` or `{name}` so that every bundle gets
    /// its own image.
    pub fn parse(template: &str) -> Result<Self, RenderBundleError> {
        // opm's `--alpha-image-ref-template` is a Go template over the same three fields.
        let converted = template
            .replace("{{.Package}}", "{package}")
            .replace("{{.Name}}", "{name}")
            .replace("{{.Version}}", "{version}");
        let template = converted.as_str();
        let err = |message: &str| RenderBundleError::Template {
            template: template.to_string(),
            message: message.to_string(),
        };
        if !template.contains("{version}") && !template.contains("{name}") {
            return Err(err(
                "it must contain {version} or {name}, or every bundle would get the same image",
            ));
        }
        let probe = template
            .replace("{package}", "p")
            .replace("{name}", "p.v1.0.0")
            .replace("{version}", "1.0.0");
        if probe.contains('{') || probe.contains('}') {
            return Err(err(
                "unknown placeholder (known: {package}, {name}, {version})",
            ));
        }
        if let Some(e) = crate::validate::image_pullspec_error(&probe) {
            return Err(err(&format!(
                "it does not give a valid image reference: {e}"
            )));
        }
        Ok(Self(template.to_string()))
    }
    /// The image of one bundle.
    pub fn expand(&self, package: &str, name: &str, version: &str) -> String {
        self.0
            .replace("{package}", package)
            .replace("{name}", name)
            .replace("{version}", version)
    }
}

fn sort_props(props: &mut [Property]) {
    props.sort_by(|a, b| {
        a.type_
            .cmp(&b.type_)
            .then_with(|| a.value.to_string().cmp(&b.value.to_string()))
    });
}

/// The `olm.csv.metadata` value of a CSV object.
pub fn csv_metadata(csv: &Value) -> Value {
    let mut m = Map::new();
    let csv = Csv::new(csv);
    let spec = |field: &str| csv.spec_field(field);
    let non_empty = |v: &Value| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    };
    if let Some(a) = csv.metadata_field("annotations").filter(|v| non_empty(v)) {
        m.insert(
            "annotations".into(),
            olmkit_core::gojson::sorted_keys(a.clone()),
        );
    }
    // Go marshals these two structs even when empty.
    m.insert(
        "apiServiceDefinitions".into(),
        spec("apiservicedefinitions")
            .cloned()
            .filter(|v| v.is_object())
            .unwrap_or_else(|| json!({})),
    );
    m.insert(
        "crdDescriptions".into(),
        spec("customresourcedefinitions")
            .cloned()
            .filter(|v| v.is_object())
            .unwrap_or_else(|| json!({})),
    );
    for (out, field) in [
        ("description", "description"),
        ("displayName", "displayName"),
        ("installModes", "installModes"),
        ("keywords", "keywords"),
    ] {
        if let Some(v) = spec(field).filter(|v| non_empty(v)) {
            m.insert(out.into(), v.clone());
        }
    }
    if let Some(l) = csv.metadata_field("labels").filter(|v| non_empty(v)) {
        m.insert("labels".into(), olmkit_core::gojson::sorted_keys(l.clone()));
    }
    for (out, field) in [
        ("links", "links"),
        ("maintainers", "maintainers"),
        ("maturity", "maturity"),
        ("minKubeVersion", "minKubeVersion"),
        ("nativeAPIs", "nativeAPIs"),
    ] {
        if let Some(v) = spec(field).filter(|v| non_empty(v)) {
            m.insert(out.into(), v.clone());
        }
    }
    m.insert(
        "provider".into(),
        spec("provider")
            .cloned()
            .filter(|v| v.is_object())
            .unwrap_or_else(|| json!({})),
    );
    Value::Object(m)
}

/// Container images of the CSV's install deployments (init containers included), sorted.
fn operator_images(csv: Csv<'_>) -> BTreeSet<String> {
    csv.deployments()
        .flat_map(|d| d.spec().pod_spec().all_containers())
        .filter_map(|c| c.image())
        .filter(|img| !img.is_empty())
        .map(str::to_string)
        .collect()
}

/// What every rendering of a bundle directory starts from, each missing piece named with its
/// file and field: the CSV (and the manifest holding it), its name, the package.
pub(crate) struct BundleHead<'a> {
    /// The bundle directory, for messages.
    pub dir_name: String,
    /// The manifest holding the CSV.
    pub csv_m: &'a olmkit_bundle::model::Manifest,
    /// The CSV.
    pub csv: Csv<'a>,
    /// `metadata.name` of the CSV.
    pub name: &'a str,
    /// The package, from the annotations.
    pub package: &'a str,
}

/// The version names a CRD provides: every `spec.versions[].name`, and the legacy
/// `spec.version` of old v1beta1 CRDs (each an `olm.gvk` of the bundle, in both renderers).
pub(crate) fn crd_version_names(crd: &Value) -> impl Iterator<Item = &str> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .chain(str_at(crd, "/spec/version").filter(|s| !s.is_empty()))
}

/// A required field is missing from a file of the bundle `dir_name`.
pub(crate) fn missing_field(dir_name: &str, file: &str, field: &str) -> RenderBundleError {
    RenderBundleError::Missing {
        dir: dir_name.to_string(),
        file: file.to_string(),
        field: field.to_string(),
    }
}

/// The [`BundleHead`] of `dir`, or the first missing piece.
pub(crate) fn bundle_head(dir: &BundleDir) -> Result<BundleHead<'_>, RenderBundleError> {
    let dir_name = dir.root.display().to_string();
    let csv_m = dir
        .csv()
        .ok_or_else(|| RenderBundleError::NoCsv(dir_name.clone()))?;
    let csv = csv_m.csv_view();
    let name = csv
        .name()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| missing_field(&dir_name, &csv_m.file, "metadata.name"))?;
    let package = dir.package().filter(|s| !s.is_empty()).ok_or_else(|| {
        missing_field(
            &dir_name,
            dir.annotations_file
                .as_deref()
                .unwrap_or("metadata/annotations.yaml"),
            "annotations.\"operators.operatorframework.io.bundle.package.v1\"",
        )
    })?;
    Ok(BundleHead {
        dir_name,
        csv_m,
        csv,
        name,
        package,
    })
}

/// Renders a bundle directory in bundle-tool's own catalog style, the one `catalog/` of a
/// release has always been written in (kept so that releases do not rewrite existing
/// entries): properties sorted by type and value, `relatedImages` in CSV order then the bundle
/// and operator images, no `olm.properties` annotation, dependencies only from
/// `metadata/dependencies.yaml`.
pub fn render_bundle_release(
    dir: &BundleDir,
    image: &str,
    opts: &RenderOptions,
) -> Result<Bundle, RenderBundleError> {
    let BundleHead {
        dir_name,
        csv_m,
        csv,
        name,
        package,
    } = bundle_head(dir)?;
    let version = csv
        .version()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| missing_field(&dir_name, &csv_m.file, "spec.version"))?;

    let (package_prop, other) = metadata_properties(dir, &dir_name)?;
    let mut props = dependency_properties(dir, &dir_name)?;
    props.push(package_prop.unwrap_or_else(|| Property::package(package, version)));
    for (g, k, v) in &provided_apis(dir, csv, &dir_name)? {
        props.push(Property::gvk(g, k, v));
    }
    for (g, k, v) in &required_apis(csv, &dir_name, &csv_m.file)? {
        props.push(Property::new(
            property::GVK_REQUIRED,
            json!({"group": g, "kind": k, "version": v}),
        ));
    }
    props.extend(other);
    sort_props(&mut props);
    if opts.bundle_objects {
        for m in &dir.manifests {
            let data = base64::engine::general_purpose::STANDARD
                .encode(olmkit_core::gojson::marshal(&m.object));
            props.push(Property::bundle_object(data));
        }
    } else {
        props.push(Property::new(
            property::CSV_METADATA,
            csv_metadata(csv.raw()),
        ));
    }

    Ok(Bundle {
        schema: SCHEMA_BUNDLE.into(),
        name: name.to_string(),
        package: package.to_string(),
        image: image.to_string(),
        properties: props,
        related_images: release_related_images(csv, image),
        omitted_objects: 0,
    })
}

/// The properties of `metadata/properties.yaml`: its `olm.package` (if any) and the others.
fn metadata_properties(
    dir: &BundleDir,
    dir_name: &str,
) -> Result<(Option<Property>, Vec<Property>), RenderBundleError> {
    let mut package_prop = None;
    let mut other = Vec::new();
    let Some(p) = &dir.properties else {
        return Ok((package_prop, other));
    };
    let list = p
        .get("properties")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for item in list {
        let prop: Property =
            serde_json::from_value(item).map_err(|e| RenderBundleError::Invalid {
                dir: dir_name.to_string(),
                file: "metadata/properties.yaml".into(),
                message: format!("properties: {e}"),
            })?;
        if prop.type_ == property::PACKAGE {
            package_prop = Some(prop);
        } else {
            other.push(prop);
        }
    }
    Ok((package_prop, other))
}

/// The `*.required` properties of `metadata/dependencies.yaml`, in its order.
fn dependency_properties(
    dir: &BundleDir,
    dir_name: &str,
) -> Result<Vec<Property>, RenderBundleError> {
    let mut props = Vec::new();
    let Some(d) = &dir.dependencies else {
        return Ok(props);
    };
    let list = d
        .get("dependencies")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, item) in list.into_iter().enumerate() {
        let t = item.get("type").and_then(Value::as_str).unwrap_or("");
        let v = item.get("value").cloned().unwrap_or(Value::Null);
        let invalid = |message: String| RenderBundleError::Invalid {
            dir: dir_name.to_string(),
            file: "metadata/dependencies.yaml".into(),
            message: format!("dependencies[{i}]: {message}"),
        };
        match t {
            "olm.package" => {
                let pn = v.get("packageName").and_then(Value::as_str).unwrap_or("");
                let vr = v.get("version").and_then(Value::as_str).unwrap_or("");
                if pn.is_empty() || vr.is_empty() {
                    return Err(invalid(
                        "olm.package dependencies need packageName and version".into(),
                    ));
                }
                props.push(Property::new(
                    property::PACKAGE_REQUIRED,
                    json!({"packageName": pn, "versionRange": vr}),
                ));
            }
            "olm.gvk" => {
                let g = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                props.push(Property::new(
                    property::GVK_REQUIRED,
                    json!({"group": g("group"), "kind": g("kind"), "version": g("version")}),
                ));
            }
            "olm.constraint" => props.push(Property::new(property::CONSTRAINT, v)),
            "olm.label" => props.push(Property::new("olm.label.required", v)),
            other => return Err(invalid(format!("unknown dependency type {other:?}"))),
        }
    }
    Ok(props)
}

/// A group/kind/version triple.
pub(crate) type Gvk = (String, String, String);

/// The group, kind and version of an API service description ("" for each missing one).
pub(crate) fn api_service_gvk(a: &ApiServiceDescription<'_>) -> Gvk {
    let s = |v: Option<&str>| v.unwrap_or("").to_string();
    (s(a.group()), s(a.kind()), s(a.version()))
}

/// What the bundle provides: every version of its CRDs and the CSV's owned API services.
fn provided_apis(
    dir: &BundleDir,
    csv: Csv<'_>,
    dir_name: &str,
) -> Result<BTreeSet<Gvk>, RenderBundleError> {
    let mut provided: BTreeSet<Gvk> = BTreeSet::new();
    for crd in dir.crds() {
        let group = str_at(&crd.object, "/spec/group").unwrap_or("").to_string();
        let kind = str_at(&crd.object, "/spec/names/kind")
            .unwrap_or("")
            .to_string();
        if group.is_empty() || kind.is_empty() {
            return Err(RenderBundleError::Invalid {
                dir: dir_name.to_string(),
                file: crd.file.clone(),
                message: "CustomResourceDefinition needs spec.group and spec.names.kind".into(),
            });
        }
        for vn in crate::render::crd_version_names(&crd.object) {
            provided.insert((group.clone(), kind.clone(), vn.to_string()));
        }
    }
    provided.extend(csv.owned_api_services().map(|a| api_service_gvk(&a)));
    Ok(provided)
}

/// What the bundle requires: the CSV's required CRDs (group from `plural.group`) and API
/// services.
fn required_apis(
    csv: Csv<'_>,
    dir_name: &str,
    csv_file: &str,
) -> Result<BTreeSet<Gvk>, RenderBundleError> {
    let mut required: BTreeSet<Gvk> = BTreeSet::new();
    for a in csv.required_crds() {
        required.insert(required_crd_gvk(&a, dir_name, csv_file)?);
    }
    required.extend(csv.required_api_services().map(|a| api_service_gvk(&a)));
    Ok(required)
}

/// The group (from `plural.group`), kind and version of a required CRD (operator-registry
/// `RequiredAPIs`), or the error naming the entry whose name has no group.
pub(crate) fn required_crd_gvk(
    a: &CrdDescription<'_>,
    dir_name: &str,
    csv_file: &str,
) -> Result<Gvk, RenderBundleError> {
    let name = a.name().unwrap_or("");
    let Some((_plural, group)) = name.split_once('.') else {
        return Err(RenderBundleError::Invalid {
            dir: dir_name.to_string(),
            file: csv_file.to_string(),
            message: format!(
                "spec.customresourcedefinitions.required[{}].name: couldn't parse plural.group from crd name: {name}",
                a.index
            ),
        });
    };
    let s = |v: Option<&str>| v.unwrap_or("").to_string();
    Ok((group.to_string(), s(a.kind()), s(a.version())))
}

/// The CSV's `relatedImages`, in its order ("" for a missing name or image).
pub(crate) fn csv_related_images(csv: Csv<'_>) -> Vec<RelatedImage> {
    csv.related_images()
        .map(|r| RelatedImage {
            name: r.name().unwrap_or("").into(),
            image: r.image().unwrap_or("").into(),
        })
        .collect()
}

/// `relatedImages` in CSV order, then the bundle image and the operator images not listed.
fn release_related_images(csv: Csv<'_>, image: &str) -> Vec<RelatedImage> {
    let mut related = csv_related_images(csv);
    let mut seen: BTreeSet<String> = related.iter().map(|r| r.image.clone()).collect();
    if !image.is_empty() && !seen.contains(image) {
        related.push(RelatedImage {
            name: String::new(),
            image: image.to_string(),
        });
        seen.insert(image.to_string());
    }
    for img in operator_images(csv) {
        if seen.insert(img.clone()) {
            related.push(RelatedImage {
                name: String::new(),
                image: img,
            });
        }
    }
    related
}

/// Upgrade edges a bundle declares in its CSV (for building channels from bundles).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeclaredEdges {
    /// `spec.replaces`.
    pub replaces: String,
    /// `spec.skips`.
    pub skips: Vec<String>,
    /// `metadata.annotations["olm.skipRange"]`.
    pub skip_range: String,
}

/// The edges of a bundle directory's CSV.
pub fn declared_edges(dir: &BundleDir) -> DeclaredEdges {
    DeclaredEdges {
        replaces: dir.replaces().unwrap_or("").to_string(),
        skips: dir.skips(),
        skip_range: dir.skip_range().unwrap_or("").to_string(),
    }
}
