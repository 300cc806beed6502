//! Typed views of the well-known FBC properties (`olm.package`, `olm.gvk`, ...).
//!
//! Properties stay `{type, value}` JSON in the blobs (unknown types pass through untouched);
//! this module names the types and parses or builds the values the tool works with.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

/// A property of a package, channel or bundle: `{type, value}` with a free-form value.
#[derive(Clone, Debug, Deserialize)]
pub struct Property {
    /// Property type, e.g. `olm.package` or `olm.gvk`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// The value, kept as JSON (its key order is preserved).
    #[serde(default)]
    pub value: Value,
    /// The value is written with `<`, `>` and `&` as `\u003c`, `\u003e`, `\u0026` in its
    /// strings. opm copies a bundle's `metadata/properties.yaml` values as the raw JSON that
    /// Go's YAML-to-JSON step produced (`json.Marshal`, HTML-safe), and its writer keeps those
    /// escapes (it only adds none of its own). Only the JSON writer looks at this; it is not
    /// part of the value (equality ignores it).
    #[serde(skip)]
    pub html_escaped: bool,
}

impl PartialEq for Property {
    fn eq(&self, other: &Self) -> bool {
        self.type_ == other.type_ && self.value == other.value
    }
}

impl Property {
    /// A property from a type and any serialisable value.
    pub fn new(type_: impl Into<String>, value: Value) -> Self {
        Self {
            type_: type_.into(),
            value,
            html_escaped: false,
        }
    }
}

/// A property value does not have the shape its type calls for.
#[derive(Debug, Error)]
#[error("parse property {type_:?}: {source}")]
pub struct ParsePropertyError {
    /// The property type (`olm.package`...).
    pub type_: String,
    /// What serde said.
    pub source: serde_json::Error,
}

/// `olm.package`: the bundle's package name and version.
pub const PACKAGE: &str = "olm.package";
/// `olm.gvk`: an API the bundle provides.
pub const GVK: &str = "olm.gvk";
/// `olm.package.required`: a package (version range) the bundle needs.
pub const PACKAGE_REQUIRED: &str = "olm.package.required";
/// `olm.gvk.required`: an API the bundle needs.
pub const GVK_REQUIRED: &str = "olm.gvk.required";
/// `olm.bundle.object`: a manifest of the bundle, base64 (`data`) or a file (`ref`).
pub const BUNDLE_OBJECT: &str = "olm.bundle.object";
/// `olm.csv.metadata`: the CSV's display metadata, a compact stand-in for the CSV object.
pub const CSV_METADATA: &str = "olm.csv.metadata";
/// `olm.deprecated` (legacy per-bundle deprecation marker).
pub const DEPRECATED: &str = "olm.deprecated";
/// `olm.constraint`: a generic dependency constraint.
pub const CONSTRAINT: &str = "olm.constraint";

/// Value of `olm.package`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageValue {
    /// Package name.
    pub package_name: String,
    /// Semver version of the bundle.
    pub version: String,
}

/// Value of `olm.gvk` and `olm.gvk.required`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GvkValue {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Version.
    pub version: String,
}

/// Value of `olm.package.required`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageRequiredValue {
    /// Package name.
    pub package_name: String,
    /// Semver range.
    pub version_range: String,
}

impl Property {
    /// `olm.package` with a name and version.
    pub fn package(name: &str, version: &str) -> Self {
        Property::new(
            PACKAGE,
            serde_json::json!({"packageName": name, "version": version}),
        )
    }
    /// `olm.gvk`.
    pub fn gvk(group: &str, kind: &str, version: &str) -> Self {
        Property::new(
            GVK,
            serde_json::json!({"group": group, "kind": kind, "version": version}),
        )
    }
    /// `olm.bundle.object` with inline base64 data.
    pub fn bundle_object(base64: String) -> Self {
        Property::new(BUNDLE_OBJECT, serde_json::json!({ "data": base64 }))
    }
    /// Parses the value as `T`, or explains why it cannot.
    pub fn parse<T: for<'de> Deserialize<'de>>(&self) -> Result<T, ParsePropertyError> {
        T::deserialize(&self.value).map_err(|source| ParsePropertyError {
            type_: self.type_.clone(),
            source,
        })
    }
}

/// All `olm.package` values of a property list (parse failures are returned as errors).
pub fn packages(props: &[Property]) -> Vec<Result<PackageValue, ParsePropertyError>> {
    props
        .iter()
        .filter(|p| p.type_ == PACKAGE)
        .map(Property::parse)
        .collect()
}

/// All `olm.gvk` values that parse.
pub fn gvks(props: &[Property]) -> Vec<GvkValue> {
    props
        .iter()
        .filter(|p| p.type_ == GVK)
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Base64 `data` of an `olm.bundle.object` value, if inline.
pub fn bundle_object_data(value: &Value) -> Option<&str> {
    value.get("data").and_then(Value::as_str)
}

/// A well-known property whose value opm cannot parse, in opm's words.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct PropertyShapeError(pub String);

/// A field check: name, predicate, what the value must be.
type FieldCheck<'a> = (&'a str, fn(&Value) -> bool, &'a str);

/// Checks that a property of a known type has the shape opm parses it into (operator-registry
/// `property.Parse`); unknown types always pass. `index` is the property's position in the
/// bundle's list, which opm's `ParseError` names.
pub fn check_shape(p: &Property, index: usize) -> Result<(), PropertyShapeError> {
    let expect_obj = |fields: &[FieldCheck<'_>]| -> Result<(), PropertyShapeError> {
        let Some(obj) = p.value.as_object() else {
            return Err(PropertyShapeError(format!(
                "parse property[{index}] of type {:?}: json: cannot unmarshal {} into Go value",
                p.type_,
                json_kind(&p.value)
            )));
        };
        for (name, check, want) in fields {
            if let Some(v) = obj.get(*name)
                && !check(v)
            {
                return Err(PropertyShapeError(format!(
                    "parse property[{index}] of type {:?}: field {name:?} must be {want}, found {}",
                    p.type_,
                    json_kind(v)
                )));
            }
        }
        Ok(())
    };
    let is_str: fn(&Value) -> bool = |v| v.is_string();
    match p.type_.as_str() {
        PACKAGE => expect_obj(&[
            ("packageName", is_str, "a string"),
            ("version", is_str, "a string"),
        ]),
        PACKAGE_REQUIRED => expect_obj(&[
            ("packageName", is_str, "a string"),
            ("versionRange", is_str, "a string"),
        ]),
        GVK | GVK_REQUIRED => expect_obj(&[
            ("group", is_str, "a string"),
            ("kind", is_str, "a string"),
            ("version", is_str, "a string"),
        ]),
        BUNDLE_OBJECT => {
            expect_obj(&[("ref", is_str, "a string"), ("data", is_str, "a string")])?;
            check_bundle_object(p, index)
        }
        CSV_METADATA => expect_obj(&[]),
        _ => Ok(()),
    }
}

/// An `olm.bundle.object` needs inline base64 `data` that decodes, or a `ref`.
fn check_bundle_object(p: &Property, index: usize) -> Result<(), PropertyShapeError> {
    if let Some(data) = bundle_object_data(&p.value) {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map(|_| ())
            .map_err(|e| {
                PropertyShapeError(format!(
                    "parse property[{index}] of type {:?}: illegal base64 data: {e}",
                    p.type_
                ))
            })
    } else if p.value.get("ref").is_none() {
        Err(PropertyShapeError(format!(
            "parse property[{index}] of type {:?}: one of \"data\" or \"ref\" must be set",
            p.type_
        )))
    } else {
        Ok(())
    }
}

/// The JSON kind of a value, as Go's decoder names it in its errors.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
