//! Rendering a registry+v1 bundle directory the way `opm render` v1.73 does.
//!
//! Mirrors operator-registry's `registry.ObjectsAndPropertiesFromBundle` and
//! `alpha/action/render.go` `bundleToDeclcfg`/`getRelatedImages`, as pinned by the
//! `bundle-render/*` goldens:
//! - reading ([`load_bundle_dir_opm`]): only the first document of each manifest file; the
//!   dependencies of the first `metadata/` file (sorted by name) that decodes and has a
//!   non-empty `dependencies:` list (`dependencies.yaml`, `dependency.yaml`, even
//!   `properties.yaml`); a metadata file that does not decode is ignored, as opm ignores it;
//! - properties: `metadata/properties.yaml` and the CSV's `olm.properties` annotation;
//!   `olm.package` (from `properties.yaml` or annotations + CSV version); provided GVKs (every
//!   CRD version, owned APIServices) and required GVKs (dependencies' `olm.gvk`, required CRDs
//!   and APIServices) as sets, so a GVK required twice appears once; dependencies'
//!   `olm.package` as `olm.package.required`; one `olm.bundle.object` per manifest (or one
//!   `olm.csv.metadata`); all sorted by (type, value bytes), then objects moved last;
//! - `relatedImages`: the CSV's, the bundle image (name "", left out when there is none, as
//!   without `--image-ref-template`) and the operator containers' images not listed yet;
//!   sorted by image with Go's `sort.Slice`.

use crate::declcfg::{Bundle, RelatedImage, SCHEMA_BUNDLE};
use crate::property;
use crate::property::Property;
use crate::render::{
    Gvk, RenderBundleError, RenderOptions, api_service_gvk, csv_metadata, csv_related_images,
    required_crd_gvk,
};
use base64::Engine;
use olmkit_bundle::Bundle as BundleDir;
use olmkit_core::confine::MANIFEST_FILE;
use olmkit_core::csv::{Csv, str_at};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A bundle directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadOpmBundleError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The manifests or annotations do not load.
    #[error(transparent)]
    Bundle(#[from] olmkit_bundle::LoadBundleError),
    /// A symbolic link leads out of the bundle directory (it would be embedded in the catalog).
    #[error(transparent)]
    Escape(#[from] olmkit_core::confine::ConfineError),
    /// A file may not be read: not a regular file (a FIFO), hard-linked, or too large.
    #[error(transparent)]
    Input(olmkit_core::confine::ReadConfinedError),
}

impl From<olmkit_core::confine::ReadConfinedError> for LoadOpmBundleError {
    fn from(e: olmkit_core::confine::ReadConfinedError) -> Self {
        match e {
            olmkit_core::confine::ReadConfinedError::Confine(c) => LoadOpmBundleError::Escape(c),
            other => LoadOpmBundleError::Input(other),
        }
    }
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<std::fs::DirEntry>, LoadOpmBundleError> {
    let err = |source| LoadOpmBundleError::Read {
        path: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir)
        .map_err(err)?
        .collect::<Result<_, _>>()
        .map_err(err)?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    Ok(entries)
}

/// Loads a bundle directory with opm's leniencies (see the module docs). The returned
/// model's `dependencies` is the metadata document opm takes its dependencies from.
/// Nothing is read from outside `dir`: every file goes through
/// [`olmkit_core::confine::InputRoot`] (opened relative to the bundle directory, a regular file
/// with one link, within [`MANIFEST_FILE`], read from that descriptor), so a symlink that
/// leads out of it (to `/etc/passwd`, to a registry credential file), a hard link, a FIFO or a
/// huge file is an error naming it, not content for `olm.bundle.object`. Duplicate keys and
/// the other leniencies are reported with [`olmkit_core::docs::warn`].
pub fn load_bundle_dir_opm(dir: &Path) -> Result<BundleDir, LoadOpmBundleError> {
    let root = olmkit_core::confine::InputRoot::new(dir)?;
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    // The regular files directly in `sub` (opm reads no sub-folders), read through the root;
    // what is neither a file nor a directory is refused by the opener, naming it.
    let read_files = |sub: &str| -> Result<Vec<(String, Vec<u8>)>, LoadOpmBundleError> {
        let mut out = Vec::new();
        if !dir.join(sub).is_dir() {
            return Ok(out);
        }
        for e in read_dir_sorted(&dir.join(sub))? {
            let p = e.path();
            let kind = match e.file_type() {
                Ok(t) if t.is_symlink() => root.inspect(&p)?.file_type(),
                Ok(t) => t,
                Err(source) => {
                    return Err(LoadOpmBundleError::Read {
                        path: p.display().to_string(),
                        source,
                    });
                }
            };
            if kind.is_dir() {
                continue;
            }
            let name = format!("{sub}/{}", e.file_name().to_string_lossy());
            out.push((name, root.read(&p, MANIFEST_FILE)?));
        }
        Ok(out)
    };
    files.extend(read_files("manifests")?);
    let metadata = read_files("metadata")?;
    for (name, bytes) in &metadata {
        if name == "metadata/annotations.yaml" || name == "metadata/annotations.yml" {
            files.insert(name.clone(), bytes.clone());
        }
    }
    let mut bundle = olmkit_bundle::load::bundle_from_files(dir, &files)?;
    olmkit_bundle::load::warn_load_warnings(&bundle);
    // opm decodes only the first object of each manifest file.
    bundle.manifests.retain(|m| m.doc_index == 0);
    // A metadata file that does not decode is ignored, as opm ignores it; one that decodes
    // leniently is reported, named under the bundle directory like the manifests.
    let parsed = |name: &str, bytes: &[u8]| {
        let (doc, warnings) = olmkit_core::docs::parse_document_lenient(name, bytes).ok()?;
        for w in warnings {
            olmkit_core::docs::warn(&olmkit_core::docs::ParseWarning {
                source_name: dir.join(&w.source_name).display().to_string(),
                ..w
            });
        }
        Some(doc)
    };
    bundle.properties = metadata
        .iter()
        .find(|(n, _)| n == "metadata/properties.yaml")
        .and_then(|(n, b)| parsed(n, b));
    bundle.dependencies = metadata
        .iter()
        .filter(|(n, _)| !n.ends_with("/annotations.yaml"))
        .filter_map(|(n, b)| parsed(n, b))
        .find(|doc| {
            doc.get("dependencies")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
        });
    Ok(bundle)
}

fn gvk_of(v: &Value) -> Gvk {
    let g = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    (g("group"), g("kind"), g("version"))
}

/// Provided GVKs: every version of every CRD, and owned APIServices.
fn provided_gvks(dir: &BundleDir, csv: Csv<'_>) -> BTreeSet<Gvk> {
    let mut provided = BTreeSet::new();
    for crd in dir.crds() {
        let group = str_at(&crd.object, "/spec/group").unwrap_or("").to_string();
        let kind = str_at(&crd.object, "/spec/names/kind")
            .unwrap_or("")
            .to_string();
        for vn in crate::render::crd_version_names(&crd.object) {
            provided.insert((group.clone(), kind.clone(), vn.to_string()));
        }
    }
    provided.extend(csv.owned_api_services().map(|a| api_service_gvk(&a)));
    provided
}

/// Required GVKs of the CSV (`RequiredAPIs`): required CRDs (group from `plural.group`) and
/// required APIServices.
fn required_gvks(
    csv: Csv<'_>,
    dir_name: &str,
    csv_file: &str,
    required: &mut BTreeSet<Gvk>,
) -> Result<(), RenderBundleError> {
    for a in csv.required_crds() {
        required.insert(required_crd_gvk(&a, dir_name, csv_file)?);
    }
    required.extend(csv.required_api_services().map(|a| api_service_gvk(&a)));
    Ok(())
}

/// Properties from `properties.yaml` and the CSV's `olm.properties` annotation, split into the
/// `olm.package` one (if any), provided GVKs and the others.
fn declared_properties(
    dir: &BundleDir,
    csv: Csv<'_>,
    dir_name: &str,
    csv_file: &str,
    provided: &mut BTreeSet<Gvk>,
) -> Result<(Option<Property>, Vec<Property>), RenderBundleError> {
    let mut list: Vec<(String, Value)> = Vec::new();
    if let Some(p) = &dir.properties {
        for item in p
            .get("properties")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            list.push(("metadata/properties.yaml".into(), item.clone()));
        }
    }
    if let Some(text) = csv.annotation("olm.properties") {
        let items: Vec<Value> =
            serde_json::from_str(text).map_err(|e| RenderBundleError::Invalid {
                dir: dir_name.to_string(),
                file: csv_file.to_string(),
                message: format!("metadata.annotations.\"olm.properties\": {e}"),
            })?;
        list.extend(items.into_iter().map(|v| (csv_file.to_string(), v)));
    }
    let mut package = None;
    let mut other = Vec::new();
    for (file, item) in list {
        // opm keeps these values as the HTML-safe JSON its YAML decoder made of them.
        let from_yaml = file == "metadata/properties.yaml";
        let mut prop: Property =
            serde_json::from_value(item).map_err(|e| RenderBundleError::Invalid {
                dir: dir_name.to_string(),
                file,
                message: format!("properties: {e}"),
            })?;
        prop.html_escaped = from_yaml;
        match prop.type_.as_str() {
            property::GVK => {
                provided.insert(gvk_of(&prop.value));
            }
            property::PACKAGE => {
                let s = |k: &str| prop.value.get(k).and_then(Value::as_str).unwrap_or("");
                package = Some(Property::package(s("packageName"), s("version")));
            }
            _ => other.push(prop),
        }
    }
    Ok((package, other))
}

/// Dependencies: `olm.gvk` into the required set, `olm.package` as `olm.package.required`;
/// other types are not turned into properties by opm.
fn dependency_properties(dir: &BundleDir, required: &mut BTreeSet<Gvk>) -> Vec<Property> {
    let mut out = Vec::new();
    for item in dir
        .dependencies
        .as_ref()
        .and_then(|d| d.get("dependencies"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let v = item.get("value").cloned().unwrap_or(Value::Null);
        match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "olm.gvk" => {
                required.insert(gvk_of(&v));
            }
            "olm.package" => {
                let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
                out.push(Property::new(
                    property::PACKAGE_REQUIRED,
                    json!({"packageName": s("packageName"), "versionRange": s("version")}),
                ));
            }
            _ => {}
        }
    }
    out
}

/// operator-registry `alpha/action/render.go` `getRelatedImages`: the CSV's, then the bundle
/// image unless it is empty (`b.BundleImage != ""`: a bundle directory rendered without
/// `--alpha-image-ref-template` has none) or listed, then the operator images not listed yet.
/// As upstream, the bundle image is not added to the set of images seen, so an operator
/// container running the bundle image itself is listed a second time.
fn related_images(csv: Csv<'_>, image: &str) -> Vec<RelatedImage> {
    let mut related = csv_related_images(csv);
    let mut seen: BTreeSet<String> = related.iter().map(|r| r.image.clone()).collect();
    if !image.is_empty() && !seen.contains(image) {
        related.push(RelatedImage {
            name: String::new(),
            image: image.to_string(),
        });
    }
    // `GetOperatorImages`: only the deployments of the `deployment` install strategy.
    let deployment_strategy = csv.install_strategy() == Some("deployment");
    let operator_images: BTreeSet<String> = csv
        .deployments()
        .filter(|_| deployment_strategy)
        .flat_map(|d| d.spec().pod_spec().all_containers())
        .map(|c| c.image().unwrap_or("").to_string())
        .collect();
    for img in operator_images {
        if seen.insert(img.clone()) {
            related.push(RelatedImage {
                name: String::new(),
                image: img,
            });
        }
    }
    related
}

/// [`crate::render::RenderStyle::Opm`]: see the module docs.
pub fn render_bundle(
    dir: &BundleDir,
    image: &str,
    opts: &RenderOptions,
) -> Result<Bundle, RenderBundleError> {
    let crate::render::BundleHead {
        dir_name,
        csv_m,
        csv,
        name,
        package,
    } = crate::render::bundle_head(dir)?;
    let version = csv.version().unwrap_or("");

    let mut provided = provided_gvks(dir, csv);
    let (package_prop, other) =
        declared_properties(dir, csv, &dir_name, &csv_m.file, &mut provided)?;
    let mut required = BTreeSet::new();
    let mut props = dependency_properties(dir, &mut required);
    required_gvks(csv, &dir_name, &csv_m.file, &mut required)?;
    props.push(package_prop.unwrap_or_else(|| Property::package(package, version)));
    for (g, k, v) in &provided {
        props.push(Property::gvk(g, k, v));
    }
    for (g, k, v) in &required {
        props.push(Property::new(
            property::GVK_REQUIRED,
            json!({"group": g, "kind": k, "version": v}),
        ));
    }
    props.extend(other);
    if opts.bundle_objects {
        for m in &dir.manifests {
            let data = base64::engine::general_purpose::STANDARD
                .encode(olmkit_core::gojson::marshal(&m.object));
            props.push(Property::bundle_object(data));
        }
    }
    // Values compared as Go's compact JSON of the (sorted) value.
    for p in &mut props {
        crate::declcfg::opm::normalize_value(&mut p.value);
    }
    if !opts.bundle_objects {
        // A typed struct in opm: its field order, not sorted (added after normalising).
        props.push(Property::new(
            property::CSV_METADATA,
            csv_metadata_go(csv.raw()),
        ));
    }
    let mut keyed: Vec<(String, Property)> = props
        .into_iter()
        .map(|p| (olmkit_core::gojson::marshal(&p.value), p))
        .collect();
    crate::gosort::sort_slice(&mut keyed, |a, b| {
        if a.1.type_ != b.1.type_ {
            a.1.type_ < b.1.type_
        } else {
            a.0 < b.0
        }
    });
    let mut properties: Vec<Property> = keyed.into_iter().map(|(_, p)| p).collect();
    crate::declcfg::opm::move_objects_last(&mut properties);
    let mut related_images = related_images(csv, image);
    crate::gosort::sort_slice(&mut related_images, |x, y| x.image < y.image);
    Ok(Bundle {
        schema: SCHEMA_BUNDLE.into(),
        name: name.to_string(),
        package: package.to_string(),
        image: image.to_string(),
        properties,
        related_images,
        omitted_objects: 0,
    })
}

/// How one field of a Go struct is encoded by `encoding/json`.
#[derive(Clone, Copy)]
enum Shape {
    /// A string (zero value "").
    Str,
    /// A boolean (zero value false).
    Bool,
    /// An integer (zero value 0).
    Int,
    /// `[]string`.
    Strings,
    /// `json.RawMessage` or a map: kept, keys sorted.
    Raw,
    /// A nested struct.
    Struct(&'static [Field]),
    /// A slice of structs.
    List(&'static [Field]),
}

/// A Go struct field: JSON name, `omitempty`, shape.
type Field = (&'static str, bool, Shape);

const RESOURCE: &[Field] = &[
    ("name", false, Shape::Str),
    ("kind", false, Shape::Str),
    ("version", false, Shape::Str),
];
const DESCRIPTOR: &[Field] = &[
    ("path", false, Shape::Str),
    ("displayName", true, Shape::Str),
    ("description", true, Shape::Str),
    ("x-descriptors", true, Shape::Strings),
    ("value", true, Shape::Raw),
];
const CRD_DESCRIPTION: &[Field] = &[
    ("name", false, Shape::Str),
    ("version", false, Shape::Str),
    ("kind", false, Shape::Str),
    ("displayName", true, Shape::Str),
    ("description", true, Shape::Str),
    ("resources", true, Shape::List(RESOURCE)),
    ("statusDescriptors", true, Shape::List(DESCRIPTOR)),
    ("specDescriptors", true, Shape::List(DESCRIPTOR)),
    ("actionDescriptors", true, Shape::List(DESCRIPTOR)),
];
const API_SERVICE_DESCRIPTION: &[Field] = &[
    ("name", false, Shape::Str),
    ("group", false, Shape::Str),
    ("version", false, Shape::Str),
    ("kind", false, Shape::Str),
    ("deploymentName", true, Shape::Str),
    ("containerPort", true, Shape::Int),
    ("displayName", true, Shape::Str),
    ("description", true, Shape::Str),
    ("resources", true, Shape::List(RESOURCE)),
    ("statusDescriptors", true, Shape::List(DESCRIPTOR)),
    ("specDescriptors", true, Shape::List(DESCRIPTOR)),
    ("actionDescriptors", true, Shape::List(DESCRIPTOR)),
];
const CRDS: &[Field] = &[
    ("owned", true, Shape::List(CRD_DESCRIPTION)),
    ("required", true, Shape::List(CRD_DESCRIPTION)),
];
const API_SERVICES: &[Field] = &[
    ("owned", true, Shape::List(API_SERVICE_DESCRIPTION)),
    ("required", true, Shape::List(API_SERVICE_DESCRIPTION)),
];
const APP_LINK: &[Field] = &[("name", true, Shape::Str), ("url", true, Shape::Str)];
const MAINTAINER: &[Field] = &[("name", true, Shape::Str), ("email", true, Shape::Str)];
const INSTALL_MODE: &[Field] = &[
    ("type", false, Shape::Str),
    ("supported", false, Shape::Bool),
];
const GVK: &[Field] = &[
    ("group", false, Shape::Str),
    ("version", false, Shape::Str),
    ("kind", false, Shape::Str),
];
/// operator-registry's `property.CSVMetadata`.
const CSV_METADATA_FIELDS: &[Field] = &[
    ("annotations", true, Shape::Raw),
    ("apiServiceDefinitions", false, Shape::Struct(API_SERVICES)),
    ("crdDescriptions", false, Shape::Struct(CRDS)),
    ("description", true, Shape::Str),
    ("displayName", true, Shape::Str),
    ("installModes", true, Shape::List(INSTALL_MODE)),
    ("keywords", true, Shape::Strings),
    ("labels", true, Shape::Raw),
    ("links", true, Shape::List(APP_LINK)),
    ("maintainers", true, Shape::List(MAINTAINER)),
    ("maturity", true, Shape::Str),
    ("minKubeVersion", true, Shape::Str),
    ("nativeAPIs", true, Shape::List(GVK)),
    ("provider", false, Shape::Struct(APP_LINK)),
];

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Re-encodes `v` as Go's `encoding/json` encodes the struct `fields` decoded from it: fields
/// in declaration order, unknown fields dropped, zero values of `omitempty` fields left out.
fn go_struct(v: &Value, fields: &[Field]) -> Value {
    let mut out = serde_json::Map::new();
    for &(name, omitempty, shape) in fields {
        let field = v.get(name).unwrap_or(&Value::Null);
        let encoded = match shape {
            Shape::Str => Value::String(field.as_str().unwrap_or("").to_string()),
            Shape::Bool => Value::Bool(field.as_bool().unwrap_or(false)),
            Shape::Int => field.as_i64().map_or(json!(0), |i| json!(i)),
            Shape::Strings | Shape::Raw => olmkit_core::gojson::sorted_keys(field.clone()),
            Shape::Struct(inner) => go_struct(field, inner),
            Shape::List(inner) => Value::Array(
                field
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|item| go_struct(item, inner))
                    .collect(),
            ),
        };
        let absent =
            matches!(shape, Shape::Strings | Shape::Raw | Shape::List(_)) && field.is_null();
        if (omitempty && is_zero(&encoded)) || (absent && !omitempty) && field.is_null() {
            if !omitempty {
                // A nil slice or map without omitempty is `null` in Go.
                out.insert(name.to_string(), Value::Null);
            }
            continue;
        }
        out.insert(name.to_string(), encoded);
    }
    Value::Object(out)
}

/// The `olm.csv.metadata` value opm builds from a CSV (`property.MustBuildCSVMetadata`): the
/// typed struct, so nested fields come in Go's declaration order.
pub fn csv_metadata_go(csv: &Value) -> Value {
    go_struct(&csv_metadata(csv), CSV_METADATA_FIELDS)
}
