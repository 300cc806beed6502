//! JSON written the way Go's `encoding/json` writes it, for the strings opm puts on the wire.
//!
//! Clients compare and store what the registry sends (OLM copies `csvJson` into the cluster), so
//! where opm re-encodes JSON we re-encode it the same way:
//! - Go's escaping and map key order are `olmkit_core::gojson`'s (`compact`, `marshal`);
//! - [`synthetic_csv`]: the ClusterServiceVersion opm builds from an `olm.csv.metadata`
//!   property (operator-registry `pkg/api/model_to_api.go`, `csvMetadataToCsv`), which goes
//!   through Go structs: struct field order, `omitempty` rules, unknown fields dropped and keys
//!   matched case-insensitively on the way in.

use serde_json::{Map, Value};
use thiserror::Error;

/// An `olm.csv.metadata` value does not decode into operator-registry's Go type; the text is
/// `encoding/json`'s, with the JSON path of the offending value.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{path}: cannot unmarshal {found} into a Go value of type {want}")]
pub struct DecodeCsvMetadataError {
    /// Where the value is (`olm.csv.metadata.installModes[0].supported`).
    pub path: String,
    /// The JSON type found (`string`...).
    pub found: &'static str,
    /// The Go type expected (`bool`...).
    pub want: &'static str,
}

use olmkit_core::gojson::compact;

// --- typed re-encoding -------------------------------------------------------------------------

/// The Go type of a field, as far as JSON encoding cares.
enum Ty {
    Str,
    Bool,
    Int,
    /// `json.RawMessage`: any JSON, re-emitted compact.
    Raw,
    /// `map[string]string`: sorted keys.
    StrMap,
    List(&'static Ty),
    Struct(&'static [Field]),
}

struct Field {
    name: &'static str,
    ty: &'static Ty,
    omitempty: bool,
}

const fn f(name: &'static str, ty: &'static Ty) -> Field {
    Field {
        name,
        ty,
        omitempty: false,
    }
}

const fn o(name: &'static str, ty: &'static Ty) -> Field {
    Field {
        name,
        ty,
        omitempty: true,
    }
}

static STR: Ty = Ty::Str;
static BOOL: Ty = Ty::Bool;
static INT: Ty = Ty::Int;
static RAW: Ty = Ty::Raw;
static STR_MAP: Ty = Ty::StrMap;
static STR_LIST: Ty = Ty::List(&STR);

// operator-framework/api pkg/operators/v1alpha1 (clusterserviceversion_types.go).
static RESOURCE_REF: Ty = Ty::Struct(&[f("name", &STR), f("kind", &STR), f("version", &STR)]);
static DESCRIPTOR: Ty = Ty::Struct(&[
    f("path", &STR),
    o("displayName", &STR),
    o("description", &STR),
    o("x-descriptors", &STR_LIST),
    o("value", &RAW),
]);
static DESCRIPTORS: Ty = Ty::List(&DESCRIPTOR);
static RESOURCE_REFS: Ty = Ty::List(&RESOURCE_REF);
static CRD_DESCRIPTION: Ty = Ty::Struct(&[
    f("name", &STR),
    f("version", &STR),
    f("kind", &STR),
    o("displayName", &STR),
    o("description", &STR),
    o("resources", &RESOURCE_REFS),
    o("statusDescriptors", &DESCRIPTORS),
    o("specDescriptors", &DESCRIPTORS),
    o("actionDescriptors", &DESCRIPTORS),
]);
static CRD_DESCRIPTIONS: Ty = Ty::List(&CRD_DESCRIPTION);
static CRD_DEFINITIONS: Ty = Ty::Struct(&[
    o("owned", &CRD_DESCRIPTIONS),
    o("required", &CRD_DESCRIPTIONS),
]);
static APISERVICE_DESCRIPTION: Ty = Ty::Struct(&[
    f("name", &STR),
    f("group", &STR),
    f("version", &STR),
    f("kind", &STR),
    o("deploymentName", &STR),
    o("containerPort", &INT),
    o("displayName", &STR),
    o("description", &STR),
    o("resources", &RESOURCE_REFS),
    o("statusDescriptors", &DESCRIPTORS),
    o("specDescriptors", &DESCRIPTORS),
    o("actionDescriptors", &DESCRIPTORS),
]);
static APISERVICE_DESCRIPTIONS: Ty = Ty::List(&APISERVICE_DESCRIPTION);
static APISERVICE_DEFINITIONS: Ty = Ty::Struct(&[
    o("owned", &APISERVICE_DESCRIPTIONS),
    o("required", &APISERVICE_DESCRIPTIONS),
]);
static INSTALL_MODE: Ty = Ty::Struct(&[f("type", &STR), f("supported", &BOOL)]);
static INSTALL_MODES: Ty = Ty::List(&INSTALL_MODE);
static APP_LINK: Ty = Ty::Struct(&[o("name", &STR), o("url", &STR)]);
static APP_LINKS: Ty = Ty::List(&APP_LINK);
static MAINTAINER: Ty = Ty::Struct(&[o("name", &STR), o("email", &STR)]);
static MAINTAINERS: Ty = Ty::List(&MAINTAINER);
// k8s.io/apimachinery metav1.GroupVersionKind.
static GVK: Ty = Ty::Struct(&[f("group", &STR), f("version", &STR), f("kind", &STR)]);
static GVKS: Ty = Ty::List(&GVK);

// operator-registry alpha/property CSVMetadata: the shape of an `olm.csv.metadata` value.
static CSV_METADATA: Ty = Ty::Struct(&[
    o("annotations", &STR_MAP),
    o("apiServiceDefinitions", &APISERVICE_DEFINITIONS),
    o("crdDescriptions", &CRD_DEFINITIONS),
    o("description", &STR),
    o("displayName", &STR),
    o("installModes", &INSTALL_MODES),
    o("keywords", &STR_LIST),
    o("labels", &STR_MAP),
    o("links", &APP_LINKS),
    o("maintainers", &MAINTAINERS),
    o("maturity", &STR),
    o("minKubeVersion", &STR),
    o("nativeAPIs", &GVKS),
    o("provider", &APP_LINK),
]);

/// A value decoded into a Go type: `None` is Go's zero value (absent or `null`).
#[derive(Clone, Debug, PartialEq)]
enum Typed {
    Str(String),
    Bool(bool),
    Int(i64),
    Raw(Value),
    StrMap(Vec<(String, String)>),
    List(Vec<Typed>),
    Struct(Vec<Option<Typed>>),
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `json.Unmarshal` into a typed value: unknown keys are ignored, keys match
/// case-insensitively when there is no exact match, `null` leaves the zero value.
fn decode(ty: &Ty, v: &Value, path: &str) -> Result<Option<Typed>, DecodeCsvMetadataError> {
    if v.is_null() && !matches!(ty, Ty::Raw) {
        return Ok(None);
    }
    let mismatch = |want: &'static str| {
        Err(DecodeCsvMetadataError {
            path: path.to_string(),
            found: type_name(v),
            want,
        })
    };
    Ok(Some(match ty {
        Ty::Str => match v {
            Value::String(s) => Typed::Str(s.clone()),
            _ => return mismatch("string"),
        },
        Ty::Bool => match v {
            Value::Bool(b) => Typed::Bool(*b),
            _ => return mismatch("bool"),
        },
        Ty::Int => match v.as_i64() {
            Some(n) if i32::try_from(n).is_ok() => Typed::Int(n),
            _ => return mismatch("int32"),
        },
        Ty::Raw => Typed::Raw(v.clone()),
        Ty::StrMap => match v {
            Value::Object(m) => {
                let mut out = Vec::with_capacity(m.len());
                for (k, val) in m {
                    match val {
                        Value::String(s) => out.push((k.clone(), s.clone())),
                        // A null map value decodes to "" in Go.
                        Value::Null => out.push((k.clone(), String::new())),
                        _ => {
                            return Err(DecodeCsvMetadataError {
                                path: format!("{path}.{k}"),
                                found: type_name(val),
                                want: "string",
                            });
                        }
                    }
                }
                out.sort_by(|a, b| a.0.cmp(&b.0));
                Typed::StrMap(out)
            }
            _ => return mismatch("map[string]string"),
        },
        Ty::List(item) => match v {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, it) in items.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    out.push(decode(item, it, &p)?.unwrap_or_else(|| zero(item)));
                }
                Typed::List(out)
            }
            _ => return mismatch("array"),
        },
        Ty::Struct(fields) => match v {
            Value::Object(m) => {
                let mut out = Vec::with_capacity(fields.len());
                for fd in fields.iter() {
                    let val = m.get(fd.name).or_else(|| {
                        m.iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(fd.name))
                            .map(|(_, v)| v)
                    });
                    let p = format!("{path}.{}", fd.name);
                    out.push(match val {
                        Some(val) => decode(fd.ty, val, &p)?,
                        None => None,
                    });
                }
                Typed::Struct(out)
            }
            _ => return mismatch("object"),
        },
    }))
}

fn zero(ty: &Ty) -> Typed {
    match ty {
        Ty::Str => Typed::Str(String::new()),
        Ty::Bool => Typed::Bool(false),
        Ty::Int => Typed::Int(0),
        Ty::Raw => Typed::Raw(Value::Null),
        Ty::StrMap => Typed::StrMap(Vec::new()),
        Ty::List(_) => Typed::List(Vec::new()),
        Ty::Struct(fields) => Typed::Struct(vec![None; fields.len()]),
    }
}

/// Go's "empty value" test for `omitempty`; structs are never empty.
fn is_empty(ty: &Ty, t: &Option<Typed>) -> bool {
    if matches!(ty, Ty::Struct(_)) {
        return false;
    }
    match t {
        None => true,
        Some(Typed::Str(s)) => s.is_empty(),
        Some(Typed::Bool(b)) => !b,
        Some(Typed::Int(n)) => *n == 0,
        Some(Typed::Raw(_)) => false,
        Some(Typed::StrMap(m)) => m.is_empty(),
        Some(Typed::List(l)) => l.is_empty(),
        Some(Typed::Struct(_)) => false,
    }
}

/// Go's `json.Marshal` of a typed value. `None` becomes the zero value's encoding.
fn encode(ty: &Ty, t: &Option<Typed>) -> Value {
    match (ty, t) {
        (Ty::Str, Some(Typed::Str(s))) => Value::String(s.clone()),
        (Ty::Bool, Some(Typed::Bool(b))) => Value::Bool(*b),
        (Ty::Int, Some(Typed::Int(n))) => Value::from(*n),
        (Ty::Raw, Some(Typed::Raw(v))) => v.clone(),
        (Ty::StrMap, Some(Typed::StrMap(m))) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        ),
        (Ty::List(item), Some(Typed::List(items))) => Value::Array(
            items
                .iter()
                .map(|it| encode(item, &Some(it.clone())))
                .collect(),
        ),
        (Ty::Struct(fields), Some(Typed::Struct(vals))) => {
            let mut m = Map::new();
            for (fd, val) in fields.iter().zip(vals) {
                if fd.omitempty && is_empty(fd.ty, val) {
                    continue;
                }
                m.insert(fd.name.to_string(), encode(fd.ty, val));
            }
            Value::Object(m)
        }
        // Zero values: nil maps and slices encode as null, empty structs as {}.
        (Ty::Str, _) => Value::String(String::new()),
        (Ty::Bool, _) => Value::Bool(false),
        (Ty::Int, _) => Value::from(0),
        (Ty::Struct(fields), _) => encode(ty, &Some(Typed::Struct(vec![None; fields.len()]))),
        _ => Value::Null,
    }
}

/// What a synthetic CSV is built from.
#[derive(Clone, Debug, Default)]
pub struct CsvSource<'a> {
    /// Bundle name (becomes `metadata.name`).
    pub name: &'a str,
    /// Bundle version (becomes `spec.version`).
    pub version: &'a str,
    /// The `olm.csv.metadata` property value.
    pub metadata: Option<&'a Value>,
    /// `relatedImages` of the bundle blob, as (name, image).
    pub related_images: Vec<(&'a str, &'a str)>,
    /// The package description, used when the metadata has none.
    pub package_description: &'a str,
    /// The package icon (base64 data, media type), if any.
    pub package_icon: Option<(&'a str, &'a str)>,
}

/// Checks that an `olm.csv.metadata` value decodes into operator-registry's Go type.
pub fn check_csv_metadata(value: &Value) -> Result<(), DecodeCsvMetadataError> {
    decode(&CSV_METADATA, value, "olm.csv.metadata").map(|_| ())
}

fn field(vals: &[Option<Typed>], i: usize) -> &Option<Typed> {
    static NONE: Option<Typed> = None;
    vals.get(i).unwrap_or(&NONE)
}

/// Builds the ClusterServiceVersion JSON opm serves for a bundle that has an
/// `olm.csv.metadata` property and no CSV among its objects.
pub fn synthetic_csv(src: &CsvSource<'_>) -> Result<String, DecodeCsvMetadataError> {
    let meta = decoded_metadata(src)?;
    let mut csv = Map::new();
    csv.insert("kind".into(), "ClusterServiceVersion".into());
    csv.insert("apiVersion".into(), "operators.coreos.com/v1alpha1".into());
    csv.insert("metadata".into(), Value::Object(object_meta(src, &meta)));
    csv.insert("spec".into(), Value::Object(csv_spec(src, &meta)));
    csv.insert("status".into(), serde_json::json!({"cleanup": {}}));
    Ok(compact(&Value::Object(csv)))
}

/// The `olm.csv.metadata` value decoded into [`CSV_METADATA`], one value per field in its
/// order (all zero when the bundle has none).
fn decoded_metadata(src: &CsvSource<'_>) -> Result<CsvMetadata, DecodeCsvMetadataError> {
    let decoded = match src.metadata {
        Some(v) => decode(&CSV_METADATA, v, "olm.csv.metadata")?,
        None => None,
    };
    let vals = match decoded {
        Some(Typed::Struct(v)) => v,
        _ => Vec::new(),
    };
    // Indexes into CSV_METADATA's fields.
    let [
        annotations,
        apis,
        crds,
        description,
        display,
        modes,
        keywords,
        labels,
        links,
        maint,
        maturity,
        minkube,
        native,
        provider,
    ] = std::array::from_fn(|i| field(&vals, i).clone());
    Ok(CsvMetadata {
        annotations,
        apis,
        crds,
        description,
        display,
        modes,
        keywords,
        labels,
        links,
        maint,
        maturity,
        minkube,
        native,
        provider,
    })
}

/// operator-registry's `CSVMetadata`, decoded: each field `None` when zero.
struct CsvMetadata {
    annotations: Option<Typed>,
    apis: Option<Typed>,
    crds: Option<Typed>,
    description: Option<Typed>,
    display: Option<Typed>,
    modes: Option<Typed>,
    keywords: Option<Typed>,
    labels: Option<Typed>,
    links: Option<Typed>,
    maint: Option<Typed>,
    maturity: Option<Typed>,
    minkube: Option<Typed>,
    native: Option<Typed>,
    provider: Option<Typed>,
}

/// The CSV's `metadata` (`metav1.ObjectMeta`): name, the zero creation time, labels and
/// annotations.
fn object_meta(src: &CsvSource<'_>, meta: &CsvMetadata) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(src.name.to_string()));
    // metav1.Time's zero value marshals as null and the field has no usable omitempty.
    metadata.insert("creationTimestamp".into(), Value::Null);
    put(&mut metadata, "labels", &STR_MAP, &meta.labels, true);
    put(
        &mut metadata,
        "annotations",
        &STR_MAP,
        &meta.annotations,
        true,
    );
    metadata
}

/// `spec.name = encode(val)`, left out when `omitempty` and Go's empty value.
fn put(spec: &mut Map<String, Value>, name: &str, ty: &Ty, val: &Option<Typed>, omitempty: bool) {
    if !(omitempty && is_empty(ty, val)) {
        spec.insert(name.to_string(), encode(ty, val));
    }
}

/// The CSV's `spec` (`ClusterServiceVersionSpec`, in its field order): an empty deployment
/// install strategy, the version, the metadata's fields, the package icon and description,
/// and the bundle's related images.
fn csv_spec(src: &CsvSource<'_>, meta: &CsvMetadata) -> Map<String, Value> {
    let description = match &meta.description {
        Some(Typed::Str(s)) if !s.is_empty() => s.clone(),
        _ => src.package_description.to_string(),
    };
    let mut spec = Map::new();
    spec.insert(
        "install".into(),
        serde_json::json!({"strategy": "deployment", "spec": {"deployments": null}}),
    );
    spec.insert("version".into(), Value::String(src.version.to_string()));
    put(&mut spec, "maturity", &STR, &meta.maturity, true);
    put(
        &mut spec,
        "customresourcedefinitions",
        &CRD_DEFINITIONS,
        &meta.crds,
        true,
    );
    put(
        &mut spec,
        "apiservicedefinitions",
        &APISERVICE_DEFINITIONS,
        &meta.apis,
        true,
    );
    put(&mut spec, "nativeAPIs", &GVKS, &meta.native, true);
    put(&mut spec, "minKubeVersion", &STR, &meta.minkube, true);
    put(&mut spec, "displayName", &STR, &meta.display, false);
    put(
        &mut spec,
        "description",
        &STR,
        &Some(Typed::Str(description)),
        true,
    );
    put(&mut spec, "keywords", &STR_LIST, &meta.keywords, true);
    put(&mut spec, "maintainers", &MAINTAINERS, &meta.maint, true);
    put(&mut spec, "provider", &APP_LINK, &meta.provider, true);
    put(&mut spec, "links", &APP_LINKS, &meta.links, true);
    if let Some((data, media)) = src.package_icon {
        spec.insert(
            "icon".into(),
            serde_json::json!([{"base64data": data, "mediatype": media}]),
        );
    }
    put(&mut spec, "installModes", &INSTALL_MODES, &meta.modes, true);
    spec.insert("cleanup".into(), serde_json::json!({"enabled": false}));
    if !src.related_images.is_empty() {
        spec.insert(
            "relatedImages".into(),
            Value::Array(
                src.related_images
                    .iter()
                    .map(|(n, i)| serde_json::json!({"name": n, "image": i}))
                    .collect(),
            ),
        );
    }
    spec
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn go_escaping() {
        assert_eq!(
            compact(&json!({"b": "<a&b>\u{2028}\"\n", "a": 1})),
            r#"{"b":"\u003ca\u0026b\u003e\u2028\"\n","a":1}"#
        );
        assert_eq!(
            olmkit_core::gojson::marshal(&json!({"b": {"z": 1, "y": [{"d": 1, "c": 2}]}, "a": 1})),
            r#"{"a":1,"b":{"y":[{"c":2,"d":1}],"z":1}}"#
        );
    }

    #[test]
    fn synthetic_csv_follows_go_struct_order() {
        let meta = json!({
            "displayName": "Foo",
            "annotations": {"z": "1", "a": "2"},
            "crdDescriptions": {"owned": [{"kind": "Foo", "name": "foos.x.io", "version": "v1", "unknown": 1}]},
            "provider": {"name": "Example"},
            "installModes": [{"type": "AllNamespaces", "supported": true}, {"type": "OwnNamespace"}],
            "Keywords": ["k"],
        });
        let csv = synthetic_csv(&CsvSource {
            name: "foo.v1.0.0",
            version: "1.0.0",
            metadata: Some(&meta),
            related_images: vec![("", "quay.io/x/y:1")],
            package_description: "pkg desc",
            package_icon: Some(("aWNvbg==", "image/png")),
        })
        .unwrap();
        assert_eq!(
            csv,
            concat!(
                r#"{"kind":"ClusterServiceVersion","apiVersion":"operators.coreos.com/v1alpha1","#,
                r#""metadata":{"name":"foo.v1.0.0","creationTimestamp":null,"annotations":{"a":"2","z":"1"}},"#,
                r#""spec":{"install":{"strategy":"deployment","spec":{"deployments":null}},"version":"1.0.0","#,
                r#""customresourcedefinitions":{"owned":[{"name":"foos.x.io","version":"v1","kind":"Foo"}]},"#,
                r#""apiservicedefinitions":{},"displayName":"Foo","description":"pkg desc","keywords":["k"],"#,
                r#""provider":{"name":"Example"},"icon":[{"base64data":"aWNvbg==","mediatype":"image/png"}],"#,
                r#""installModes":[{"type":"AllNamespaces","supported":true},{"type":"OwnNamespace","supported":false}],"#,
                r#""cleanup":{"enabled":false},"relatedImages":[{"name":"","image":"quay.io/x/y:1"}]},"#,
                r#""status":{"cleanup":{}}}"#
            )
        );
    }

    #[test]
    fn csv_metadata_type_errors_are_reported() {
        let e = check_csv_metadata(&json!({"installModes": [{"supported": "yes"}]})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "olm.csv.metadata.installModes[0].supported: cannot unmarshal string into a Go value of type bool"
        );
        assert!(check_csv_metadata(&json!({"labels": {"a": null}})).is_ok());
    }

    proptest::proptest! {
        /// Go-escaped output is still JSON for the same value, and never contains the
        /// characters Go escapes.
        #[test]
        fn go_escaping_round_trips(text in "\\PC{0,40}", key in "[<>&a-z\u{2028}]{0,6}") {
            let v = json!({key.clone(): text.clone(), "n": [1, {"x": text}]});
            let out = compact(&v);
            let back: Value = serde_json::from_str(&out).unwrap();
            proptest::prop_assert_eq!(back, v);
            let escaped = ['<', '>', '&', '\u{2028}', '\u{2029}'];
            proptest::prop_assert!(!out.contains(escaped), "unescaped character in {}", out);
        }
    }
}
