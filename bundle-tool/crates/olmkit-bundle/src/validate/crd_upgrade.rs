//! OLM v1's CRD upgrade safety check, mirrored rule by rule.
//!
//! operator-controller refuses to upgrade a ClusterExtension whose new bundle changes a CRD of
//! the cluster unsafely: the preflight `rukpak/preflights/crdupgradesafety` (`NewPreflight`,
//! `runPreflight`) runs `sigs.k8s.io/crdify`'s runner with `defaultConfig()` over the CRD on
//! the cluster and the new one, and every failure is an error. Its validations:
//!
//! - CRD-wide ([`CRD_RULES`]): `NoScopeChange`, `NoStoredVersionRemoved`,
//!   `NoExistingFieldRemoved` (crdify `scope`, `storedVersionRemoval`,
//!   `existingFieldRemoval`);
//! - per field of every version the two CRDs share ([`PROPERTY_RULES`], the `ChangeValidator`
//!   validations, crdify's `same` version validator): `Description` (allowed), `Enum` (values
//!   removed, or an enum where there was none; added values allowed: `additionPolicy:
//!   Allow`), `Required` (new required fields), `Maximum`/`MaxItems`/`MaxLength`/
//!   `MaxProperties` (added or decreased), `Minimum`/`MinItems`/`MinLength`/`MinProperties`
//!   (added or increased), `Default` (added, removed or changed), `Type` (changed), crdify's
//!   `pattern`, `nullable` and `oneOf` (added, removed or changed), and `unhandled`: any other
//!   change of a field (a format, `x-kubernetes-*`, `anyOf`, ...) is refused as well
//!   (fail-closed, `UnhandledEnforcement: Error`);
//! - between the served versions of the new CRD (`ServedVersionValidator`, crdify's `served`
//!   validator): the same per-field rules from each older served version to each newer one, in
//!   Kubernetes version order, minus what the previous CRD already had; skipped when the new
//!   CRD converts with a webhook (`Conversion: ConversionPolicyIgnore`).
//!
//! A field is compared as Go decodes it into `JSONSchemaProps` (crdify compares with
//! `equality.Semantic.DeepEqual`): unknown keys dropped, `null` and the zero value of a
//! non-pointer field (`""`, `false`, `[]`, `{}`) the same as absent, numbers by value. The
//! previous bundle stands in for the cluster: the versions it stored are its storage version
//! and its `status.storedVersions`.

use super::crd::defaulted_scope;
use crate::json::arr_at;
use olmkit_core::csv::str_at;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// One version of a CRD, as OLM v1 reads it (apiextensions/v1; a v1beta1 CRD's top-level
/// `spec.validation` and `spec.version` converted as the API server converts them).
pub(crate) struct CrdVersion<'a> {
    pub name: &'a str,
    pub served: bool,
    pub schema: Option<&'a Value>,
}

/// What the upgrade rules read of a CRD.
pub(crate) struct CrdView<'a> {
    pub scope: &'a str,
    pub versions: Vec<CrdVersion<'a>>,
    /// The versions objects may be stored in (storage version and `status.storedVersions`).
    pub stored: BTreeSet<&'a str>,
    /// `spec.conversion.strategy: Webhook`.
    pub webhook: bool,
}

impl<'a> CrdView<'a> {
    pub fn new(crd: &'a Value) -> Self {
        let top_schema = crd.pointer("/spec/validation/openAPIV3Schema");
        let mut versions: Vec<CrdVersion<'a>> = arr_at(crd, "/spec/versions")
            .iter()
            .map(|v| CrdVersion {
                name: str_at(v, "/name").unwrap_or(""),
                served: v.get("served") == Some(&Value::Bool(true)),
                schema: v.pointer("/schema/openAPIV3Schema").or(top_schema),
            })
            .collect();
        let mut stored: BTreeSet<&str> = arr_at(crd, "/spec/versions")
            .iter()
            .filter(|v| v.get("storage") == Some(&Value::Bool(true)))
            .filter_map(|v| str_at(v, "/name"))
            .collect();
        if versions.is_empty()
            && let Some(v) = str_at(crd, "/spec/version").filter(|v| !v.is_empty())
        {
            versions.push(CrdVersion {
                name: v,
                served: true,
                schema: top_schema,
            });
            stored.insert(v);
        }
        stored.extend(
            arr_at(crd, "/status/storedVersions")
                .iter()
                .filter_map(Value::as_str),
        );
        CrdView {
            scope: defaulted_scope(crd),
            versions,
            stored,
            webhook: str_at(crd, "/spec/conversion/strategy") == Some("Webhook"),
        }
    }

    fn version(&self, name: &str) -> Option<&CrdVersion<'a>> {
        self.versions.iter().find(|v| v.name == name)
    }
}

/// A refusal: where (a version, or a pair of served versions), the field (crdify's location,
/// `^` being the object root), the upstream validation and what changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Refusal {
    pub version: String,
    pub field: String,
    pub validation: &'static str,
    pub detail: String,
}

impl Refusal {
    /// OLM v1's wording: `<version>: <field>: <validation>: <detail>`.
    pub fn message(&self) -> String {
        let mut parts: Vec<&str> = Vec::new();
        if !self.version.is_empty() {
            parts.push(&self.version);
        }
        if !self.field.is_empty() {
            parts.push(&self.field);
        }
        parts.push(self.validation);
        format!("{}: {}", parts.join(": "), self.detail)
    }
}

type CrdRule = fn(&CrdView<'_>, &CrdView<'_>) -> Vec<Refusal>;

/// The CRD-wide validations, each with the operator-controller `crdupgradesafety` validation
/// it mirrors and crdify's name for it.
pub(crate) const CRD_RULES: &[(&str, CrdRule)] = &[
    ("NoScopeChange", no_scope_change),
    ("NoStoredVersionRemoved", no_stored_version_removed),
    ("NoExistingFieldRemoved", no_existing_field_removed),
];

/// crdupgradesafety `NoScopeChange` (crdify `scope.Compare`): the scope never changes.
fn no_scope_change(old: &CrdView<'_>, new: &CrdView<'_>) -> Vec<Refusal> {
    if old.scope == new.scope {
        return Vec::new();
    }
    vec![Refusal {
        version: String::new(),
        field: String::new(),
        validation: "scope",
        detail: format!("scope changed : {:?} -> {:?}", old.scope, new.scope),
    }]
}

/// crdupgradesafety `NoStoredVersionRemoved` (crdify `storedVersionRemoval.Compare`): every
/// version objects may be stored in is still a version of the CRD.
fn no_stored_version_removed(old: &CrdView<'_>, new: &CrdView<'_>) -> Vec<Refusal> {
    let removed: Vec<&str> = old
        .stored
        .iter()
        .copied()
        .filter(|s| new.version(s).is_none())
        .collect();
    if removed.is_empty() {
        return Vec::new();
    }
    vec![Refusal {
        version: String::new(),
        field: String::new(),
        validation: "storedVersionRemoval",
        detail: format!("stored versions removed : [{}]", removed.join(" ")),
    }]
}

/// crdupgradesafety `NoExistingFieldRemoved` (crdify `existingFieldRemoval.Compare`, over
/// `SchemaHas` locations): in every version of the new CRD that the old one has, every field
/// of the old schema is still there.
fn no_existing_field_removed(old: &CrdView<'_>, new: &CrdView<'_>) -> Vec<Refusal> {
    let mut out = Vec::new();
    for nv in &new.versions {
        let Some(ov) = old.version(nv.name) else {
            continue;
        };
        let old_fields = flatten(ov.schema);
        let new_fields = flatten(nv.schema);
        for f in old_fields.keys().filter(|f| !new_fields.contains_key(*f)) {
            out.push(Refusal {
                version: nv.name.to_string(),
                field: f.clone(),
                validation: "existingFieldRemoval",
                detail: format!("removed field : {}.{f}", nv.name),
            });
        }
    }
    out
}

/// crdify `same` validator (crdupgradesafety `ChangeValidator`): each field of each version
/// the two CRDs share, through [`PROPERTY_RULES`]. A field the new version lacks is
/// [`no_existing_field_removed`]'s to report.
pub(crate) fn same_version_changes(old: &CrdView<'_>, new: &CrdView<'_>) -> Vec<Refusal> {
    let mut out = Vec::new();
    for ov in &old.versions {
        let Some(nv) = new.version(ov.name) else {
            continue;
        };
        out.extend(compare_versions(ov.schema, nv.schema, ov.name, false));
    }
    out
}

/// crdify `served` validator (crdupgradesafety `ServedVersionValidator`): from each served
/// version of the new CRD to each newer one, what the old CRD's served versions did not
/// already do; nothing when the new CRD converts with a webhook.
pub(crate) fn served_version_changes(old: &CrdView<'_>, new: &CrdView<'_>) -> Vec<Refusal> {
    if new.webhook {
        return Vec::new();
    }
    let known: BTreeSet<Refusal> = served_pairs(old).into_iter().collect();
    served_pairs(new)
        .into_iter()
        .filter(|r| !known.contains(r))
        .collect()
}

fn served_pairs(crd: &CrdView<'_>) -> Vec<Refusal> {
    let mut served: Vec<&CrdVersion<'_>> = crd.versions.iter().filter(|v| v.served).collect();
    served.sort_by(|a, b| compare_kube_aware_versions(a.name, b.name));
    let mut out = Vec::new();
    for (i, a) in served.iter().enumerate() {
        for b in &served[i + 1..] {
            let pair = format!("{} -> {}", a.name, b.name);
            out.extend(compare_versions(a.schema, b.schema, &pair, true));
        }
    }
    out
}

/// apimachinery `version.CompareKubeAwareVersionStrings` (`^v(\d+)(?:(alpha|beta)(\d+))?$`) as
/// a sort order: names that are not Kubernetes versions first (by reverse name), then alpha,
/// beta, GA, each by major, minor.
fn compare_kube_aware_versions(a: &str, b: &str) -> std::cmp::Ordering {
    fn parse(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (major, rest) = rest.split_at(digits);
        let major: u64 = major.parse().ok()?;
        let (kind, minor) = if rest.is_empty() {
            return Some((2, major, 0));
        } else if let Some(m) = rest.strip_prefix("alpha") {
            (0, m)
        } else if let Some(m) = rest.strip_prefix("beta") {
            (1, m)
        } else {
            return None;
        };
        if minor.is_empty() || !minor.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        Some((kind, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (None, None) => b.cmp(a),
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) => x.cmp(&y),
    }
}

/// crdify `CompareVersions`: flatten both schemas, and run every field of the old one whose
/// node (children dropped) changed through the property rules. With `with_missing`, a field
/// the new schema lacks is compared with an empty schema (as the served validator does).
fn compare_versions(
    old: Option<&Value>,
    new: Option<&Value>,
    version: &str,
    with_missing: bool,
) -> Vec<Refusal> {
    let new_fields = flatten(new);
    let mut out = Vec::new();
    for (field, o) in flatten(old) {
        let n = match new_fields.get(&field) {
            Some(n) => node(n),
            None if with_missing => Map::new(),
            None => continue,
        };
        let o = node(o);
        if o == n {
            continue;
        }
        for (validation, detail) in compare_properties(o, n) {
            out.push(Refusal {
                version: version.to_string(),
                field: field.clone(),
                validation,
                detail,
            });
        }
    }
    out
}

type PropertyRule = fn(&mut Map<String, Value>, &mut Map<String, Value>) -> Option<String>;

/// The per-field validations: (crdupgradesafety `ChangeValidation` / crdify comparator name,
/// function). Each compares its keywords and removes them from both nodes, so that what is
/// left over is an unhandled change.
pub(crate) const PROPERTY_RULES: &[(&str, PropertyRule)] = &[
    ("description", description),
    ("enum", enum_values),
    ("required", required),
    ("maximum", |o, n| max_verification(o, n, "maximum")),
    ("maxItems", |o, n| max_verification(o, n, "maxItems")),
    ("maxLength", |o, n| max_verification(o, n, "maxLength")),
    ("maxProperties", |o, n| {
        max_verification(o, n, "maxProperties")
    }),
    ("minimum", |o, n| min_verification(o, n, "minimum")),
    ("minItems", |o, n| min_verification(o, n, "minItems")),
    ("minLength", |o, n| min_verification(o, n, "minLength")),
    ("minProperties", |o, n| {
        min_verification(o, n, "minProperties")
    }),
    ("default", default_value),
    ("type", type_change),
    ("pattern", pattern),
    ("nullable", nullable),
    ("oneOf", one_of),
];

/// crdify `CompareProperties`: every rule, then `checkUnhandled` on what the rules left.
fn compare_properties(
    mut old: Map<String, Value>,
    mut new: Map<String, Value>,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (name, rule) in PROPERTY_RULES {
        if let Some(detail) = rule(&mut old, &mut new) {
            out.push((*name, detail));
        }
    }
    if let Some(detail) = unhandled(&old, &new) {
        out.push(("unhandled", detail));
    }
    out
}

/// crdupgradesafety `Description` (crdify `description`, enforcement `None` in OLM v1's
/// config): description changes are safe.
fn description(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Option<String> {
    old.remove("description");
    new.remove("description");
    None
}

/// crdupgradesafety `Enum` (crdify `enum` with `additionPolicy: Allow`): no value may be
/// removed, and no enum added where there was none.
fn enum_values(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Option<String> {
    let set = |m: &mut Map<String, Value>| -> BTreeSet<String> {
        match m.remove("enum") {
            Some(Value::Array(a)) => a.iter().map(Value::to_string).collect(),
            _ => BTreeSet::new(),
        }
    };
    let (o, n) = (set(old), set(new));
    let list = |s: &BTreeSet<&String>| {
        format!(
            "[{}]",
            s.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(" ")
        )
    };
    if o.is_empty() && !n.is_empty() {
        return Some(format!(
            "enum constraint added when there was none previously : {}",
            list(&n.iter().collect())
        ));
    }
    let removed: BTreeSet<&String> = o.difference(&n).collect();
    (!removed.is_empty()).then(|| format!("allowed enum values removed : {}", list(&removed)))
}

/// crdupgradesafety `Required` (crdify `required`): no field becomes required.
fn required(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Option<String> {
    let set = |m: &mut Map<String, Value>| -> BTreeSet<String> {
        match m.remove("required") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => BTreeSet::new(),
        }
    };
    let (o, n) = (set(old), set(new));
    let added: Vec<&str> = n.difference(&o).map(String::as_str).collect();
    (!added.is_empty()).then(|| format!("new required fields: [{}]", added.join(" ")))
}

fn take_num(m: &mut Map<String, Value>, key: &str) -> Option<f64> {
    m.remove(key).as_ref().and_then(Value::as_f64)
}

fn show(n: f64) -> String {
    // Go's `%v` of a float64 or int64 bound.
    format!("{n}")
}

/// crdupgradesafety `Maximum`/`MaxItems`/`MaxLength`/`MaxProperties` (crdify
/// `MaxVerification`): no upper bound added, none lowered.
fn max_verification(
    old: &mut Map<String, Value>,
    new: &mut Map<String, Value>,
    key: &str,
) -> Option<String> {
    match (take_num(old, key), take_num(new, key)) {
        (None, Some(n)) => Some(format!(
            "{key} constraint added when there was none previously : {}",
            show(n)
        )),
        (Some(o), Some(n)) if n < o => {
            Some(format!("{key} decreased : {} -> {}", show(o), show(n)))
        }
        _ => None,
    }
}

/// crdupgradesafety `Minimum`/`MinItems`/`MinLength`/`MinProperties` (crdify
/// `MinVerification`): no lower bound added, none raised.
fn min_verification(
    old: &mut Map<String, Value>,
    new: &mut Map<String, Value>,
    key: &str,
) -> Option<String> {
    match (take_num(old, key), take_num(new, key)) {
        (None, Some(n)) => Some(format!(
            "{key} constraint added when there was none previously : {}",
            show(n)
        )),
        (Some(o), Some(n)) if n > o => {
            Some(format!("{key} increased : {} -> {}", show(o), show(n)))
        }
        _ => None,
    }
}

/// crdupgradesafety `Default` (crdify `default`): a default is never added, removed or
/// changed.
fn default_value(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Option<String> {
    match (old.remove("default"), new.remove("default")) {
        (None, Some(n)) => Some(format!(
            "default added when there was none previously : {:?}",
            n.to_string()
        )),
        (Some(o), None) => Some(format!("default value removed : {:?}", o.to_string())),
        (Some(o), Some(n)) if o != n => Some(format!(
            "default value changed : {:?} -> {:?}",
            o.to_string(),
            n.to_string()
        )),
        _ => None,
    }
}

fn take_str(m: &mut Map<String, Value>, key: &str) -> String {
    match m.remove(key) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    }
}

/// crdupgradesafety `Type` (crdify `type`): the type never changes.
fn type_change(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Option<String> {
    let (o, n) = (take_str(old, "type"), take_str(new, "type"));
    (o != n).then(|| format!("type changed : {o:?} -> {n:?}"))
}

/// crdify `pattern` (`removalPolicy: Disallow`, its default): no pattern added, removed or
/// changed.
fn pattern(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Option<String> {
    let (o, n) = (take_str(old, "pattern"), take_str(new, "pattern"));
    let what = match (o.is_empty(), n.is_empty()) {
        _ if o == n => return None,
        (true, false) => "pattern added",
        (false, true) => "pattern removed",
        _ => "pattern changed",
    };
    Some(format!("{what} : {o:?} -> {n:?}"))
}

/// crdify `nullable` (addition and removal policies `Disallow`, the defaults): `nullable`
/// never changes.
fn nullable(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Option<String> {
    let take = |m: &mut Map<String, Value>| m.remove("nullable") == Some(Value::Bool(true));
    let (o, n) = (take(old), take(new));
    match (o, n) {
        (false, true) => Some("nullable added : false -> true".into()),
        (true, false) => Some("nullable removed : true -> false".into()),
        _ => None,
    }
}

/// crdify `oneOf` (as operator-controller pins it since "resolve crdUpgradeSafety reporting
/// OneOf changes as unhandled"; addition and removal policies `Disallow`, the defaults): no
/// `oneOf` where there was none, no subschema removed or added, subschemas compared without
/// description, title, example and externalDocs.
fn one_of(old: &mut Map<String, Value>, new: &mut Map<String, Value>) -> Option<String> {
    let set = |m: &mut Map<String, Value>| -> BTreeSet<String> {
        match m.remove("oneOf") {
            Some(Value::Array(a)) => a
                .into_iter()
                .map(|mut x| {
                    if let Some(o) = x.as_object_mut() {
                        for k in ["description", "title", "example", "externalDocs"] {
                            o.remove(k);
                        }
                    }
                    x.to_string()
                })
                .collect(),
            _ => BTreeSet::new(),
        }
    };
    let (o, n) = (set(old), set(new));
    let list = |s: Vec<&String>| {
        format!(
            "[{}]",
            s.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(" ")
        )
    };
    let removed: Vec<&String> = o.difference(&n).collect();
    let added: Vec<&String> = n.difference(&o).collect();
    if o.is_empty() && !n.is_empty() {
        Some(format!(
            "oneOf constraint added when there was none previously: {}",
            list(n.iter().collect())
        ))
    } else if !removed.is_empty() {
        Some(format!("allowed oneOf schemas removed: {}", list(removed)))
    } else if !added.is_empty() {
        Some(format!("allowed oneOf schemas added: {}", list(added)))
    } else {
        None
    }
}

/// crdify `checkUnhandled`: whatever else differs is refused, named key by key (as
/// operator-controller's `conciseUnhandledMessage` summarises crdify's diff).
fn unhandled(old: &Map<String, Value>, new: &Map<String, Value>) -> Option<String> {
    if old == new {
        return None;
    }
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    // `normalizeUnhandledValue`: a nested schema is a `<complex value>`.
    let show = |v: Option<&Value>| match v {
        None => "<empty>".to_string(),
        Some(v) if v.to_string().len() > 80 => "<complex value>".to_string(),
        Some(v) => v.to_string(),
    };
    let details: Vec<String> = keys
        .into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| format!("{k} {} -> {}", show(old.get(k)), show(new.get(k))))
        .collect();
    Some(format!("unhandled changes found ({})", details.join("; ")))
}

/// crdify `FlattenCRDVersion` over `SchemaHas`: every schema node of a version by its simple
/// location (`^` the root, `.name` a property, `.items`, `.allOf[0]`, `.additionalProperties`,
/// ...).
fn flatten(schema: Option<&Value>) -> BTreeMap<String, &Value> {
    let mut out = BTreeMap::new();
    if let Some(s) = schema.filter(|s| s.is_object()) {
        walk(s, "^".to_string(), &mut out);
    }
    out
}

fn walk<'a>(s: &'a Value, at: String, out: &mut BTreeMap<String, &'a Value>) {
    let Some(m) = s.as_object() else {
        return;
    };
    // `SchemaHas` visits a node before its children; a later node of the same location (a
    // property named `items`, say) replaces it, as in crdify's map.
    out.insert(at.clone(), s);
    match m.get("items") {
        Some(items @ Value::Object(_)) => walk(items, format!("{at}.items"), out),
        Some(Value::Array(list)) => {
            for (i, x) in list.iter().enumerate() {
                walk(x, format!("{at}.items[{i}]"), out);
            }
        }
        _ => {}
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, x) in m
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            walk(x, format!("{at}.{key}[{i}]"), out);
        }
    }
    if let Some(x) = m.get("not") {
        walk(x, format!("{at}.not"), out);
    }
    for (name, x) in m
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        walk(x, format!("{at}.{name}"), out);
    }
    for key in ["additionalProperties", "additionalItems"] {
        if let Some(x) = m.get(key) {
            walk(x, format!("{at}.{key}"), out);
        }
    }
    for key in ["patternProperties", "definitions", "dependencies"] {
        for (name, x) in m.get(key).and_then(Value::as_object).into_iter().flatten() {
            walk(x, format!("{at}.{key}[{name}]"), out);
        }
    }
}

/// `JSONSchemaProps` fields that are not pointers: their zero value is the same as absent.
const ZERO_IS_ABSENT: &[&str] = &[
    "id",
    "$schema",
    "description",
    "type",
    "format",
    "title",
    "pattern",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "nullable",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "required",
    "enum",
    "allOf",
    "oneOf",
    "anyOf",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
    "properties",
    "patternProperties",
    "dependencies",
    "definitions",
];

/// The other `JSONSchemaProps` fields (pointers and JSON values: present even when zero).
const POINTER_FIELDS: &[&str] = &[
    "$ref",
    "default",
    "example",
    "maximum",
    "minimum",
    "multipleOf",
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "maxProperties",
    "minProperties",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "additionalProperties",
    "additionalItems",
    "not",
    "items",
    "externalDocs",
];

/// Keys whose values are schemas (normalised recursively), or maps/lists of schemas.
const SCHEMA_FIELDS: &[&str] = &["not", "items", "additionalProperties", "additionalItems"];
const SCHEMA_LIST_FIELDS: &[&str] = &["allOf", "oneOf", "anyOf"];
const SCHEMA_MAP_FIELDS: &[&str] = &[
    "properties",
    "patternProperties",
    "definitions",
    "dependencies",
];

/// A flattened field as crdify compares it (`DropChildrenPropertiesFromJSONSchema`: without
/// `properties` and `items`), normalised as Go decodes it.
fn node(s: &Value) -> Map<String, Value> {
    let mut m = normalize_schema(s);
    m.remove("properties");
    m.remove("items");
    m
}

fn normalize_schema(s: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(m) = s.as_object() else {
        return out;
    };
    for (k, v) in m {
        let zero_is_absent = ZERO_IS_ABSENT.contains(&k.as_str());
        if v.is_null() || (!zero_is_absent && !POINTER_FIELDS.contains(&k.as_str())) {
            continue;
        }
        let is_zero = match v {
            Value::String(s) => s.is_empty(),
            Value::Bool(b) => !b,
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        if zero_is_absent && is_zero {
            continue;
        }
        let key = k.as_str();
        let v = if SCHEMA_FIELDS.contains(&key) && v.is_object() {
            Value::Object(normalize_schema(v))
        } else if (key == "items" && v.is_array()) || SCHEMA_LIST_FIELDS.contains(&key) {
            Value::Array(
                v.as_array()
                    .into_iter()
                    .flatten()
                    .map(|x| Value::Object(normalize_schema(x)))
                    .collect(),
            )
        } else if SCHEMA_MAP_FIELDS.contains(&key) {
            Value::Object(
                v.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, x)| {
                        let x = if x.is_object() {
                            Value::Object(normalize_schema(x))
                        } else {
                            normalize_json(x)
                        };
                        (name.clone(), x)
                    })
                    .collect(),
            )
        } else {
            normalize_json(v)
        };
        out.insert(k.clone(), v);
    }
    out
}

/// Numbers by value (`1000` and `1000.0` are one number to Go's decoders).
fn normalize_json(v: &Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            Some(f) => Value::from(f),
            None => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(normalize_json).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), normalize_json(x)))
                .collect(),
        ),
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(scope: &str, versions: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "ws.x.io"}, "spec": {"scope": scope, "versions": versions}})
    }

    fn v(name: &str, storage: bool, schema: Value) -> Value {
        json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": schema}})
    }

    fn all(old: &Value, new: &Value) -> Vec<String> {
        let (o, n) = (CrdView::new(old), CrdView::new(new));
        let mut out: Vec<Refusal> = CRD_RULES.iter().flat_map(|(_, r)| r(&o, &n)).collect();
        out.extend(same_version_changes(&o, &n));
        out.extend(served_version_changes(&o, &n));
        out.iter().map(Refusal::message).collect()
    }

    fn spec(props: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}})
    }

    #[test]
    fn each_property_rule_fires_and_a_description_change_does_not() {
        let old = crd(
            "Namespaced",
            json!([v(
                "v1",
                true,
                spec(json!({
                    "a": {"type": "string", "enum": ["x", "y"], "description": "old"},
                    "b": {"type": "integer", "maximum": 10, "minimum": 1, "default": 5},
                    "c": {"type": "string"},
                    "d": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                }))
            )]),
        );
        let new = crd(
            "Namespaced",
            json!([v(
                "v1",
                true,
                spec(json!({
                    "a": {"type": "string", "enum": ["x", "z"], "description": "new"},
                    "b": {"type": "integer", "maximum": 5, "minimum": 2, "default": 6},
                    "c": {"type": "integer", "format": "int32", "pattern": "^[0-9]+$"},
                    "d": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3.0},
                }))
            )]),
        );
        let got = all(&old, &new);
        for want in [
            r#"v1: ^.spec.a: enum: allowed enum values removed : ["y"]"#,
            "v1: ^.spec.b: maximum: maximum decreased : 10 -> 5",
            "v1: ^.spec.b: minimum: minimum increased : 1 -> 2",
            r#"v1: ^.spec.b: default: default value changed : "5" -> "6""#,
            r#"v1: ^.spec.c: type: type changed : "string" -> "integer""#,
            r#"v1: ^.spec.c: pattern: pattern added : "" -> "^[0-9]+$""#,
            r#"v1: ^.spec.c: unhandled: unhandled changes found (format <empty> -> "int32")"#,
            "v1: ^.spec.d.items: maxLength: maxLength constraint added when there was none previously : 8",
        ] {
            assert!(got.iter().any(|g| g == want), "missing {want}\n{got:#?}");
        }
        assert_eq!(got.len(), 8, "{got:#?}");
    }

    #[test]
    fn crd_wide_rules_and_served_versions() {
        let old = crd(
            "Namespaced",
            json!([v(
                "v1alpha1",
                true,
                spec(json!({"a": {"type": "string"}, "b": {"type": "string"}}))
            )]),
        );
        // Scope changes, v1alpha1 (stored) goes, v1 drops b and makes a required.
        let new = crd(
            "Cluster",
            json!([v("v1", true, {
                let mut s = spec(json!({"a": {"type": "string"}}));
                s["properties"]["spec"]["required"] = json!(["a"]);
                s
            })]),
        );
        let got = all(&old, &new);
        assert!(
            got.contains(&r#"scope: scope changed : "Namespaced" -> "Cluster""#.to_string()),
            "{got:#?}"
        );
        assert!(
            got.contains(&"storedVersionRemoval: stored versions removed : [v1alpha1]".to_string()),
            "{got:#?}"
        );
        assert_eq!(got.len(), 2, "{got:#?}");

        // Served versions, without a conversion webhook: v1 drops b, which v1alpha1 has.
        let served_new = crd(
            "Namespaced",
            json!([
                v("v1", false, spec(json!({"a": {"type": "string"}}))),
                v(
                    "v1alpha1",
                    true,
                    spec(json!({"a": {"type": "string"}, "b": {"type": "string"}}))
                ),
            ]),
        );
        let got = all(&old, &served_new);
        assert!(
            got.contains(
                &r#"v1alpha1 -> v1: ^.spec.b: type: type changed : "string" -> """#.to_string()
            ),
            "{got:#?}"
        );
        let mut webhook = served_new.clone();
        webhook["spec"]["conversion"] = json!({"strategy": "Webhook"});
        assert!(all(&old, &webhook).is_empty());
        // A field removed from a shared version.
        let removed = crd(
            "Namespaced",
            json!([v("v1alpha1", true, spec(json!({"a": {"type": "string"}})))]),
        );
        assert_eq!(
            all(&old, &removed),
            ["v1alpha1: ^.spec.b: existingFieldRemoval: removed field : v1alpha1.^.spec.b"]
        );
    }

    #[test]
    fn go_decoding_equivalences_are_no_change() {
        let old = crd(
            "Namespaced",
            json!([v(
                "v1",
                true,
                spec(json!({
                    "a": {"type": "integer", "maximum": 1000, "nullable": false, "required": [], "x-unknown": 1},
                    "b": {"type": "object", "default": {"x": 1, "y": 2}},
                }))
            )]),
        );
        let new = crd(
            "Namespaced",
            json!([v(
                "v1",
                true,
                spec(json!({
                    "a": {"type": "integer", "maximum": 1000.0, "description": ""},
                    "b": {"type": "object", "default": {"y": 2.0, "x": 1}},
                }))
            )]),
        );
        assert!(all(&old, &new).is_empty(), "{:#?}", all(&old, &new));
        // v1beta1: no scope is Namespaced, the top-level schema is every version's.
        let beta = json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
        "spec": {"version": "v1", "validation": {"openAPIV3Schema": spec(json!({
            "a": {"type": "integer", "maximum": 1000},
            "b": {"type": "object", "default": {"x": 1, "y": 2}},
        }))}}});
        assert!(all(&beta, &new).is_empty(), "{:#?}", all(&beta, &new));
    }

    #[test]
    fn kube_aware_version_order() {
        let mut v = vec![
            "v1", "v2beta1", "v1alpha1", "v1beta2", "foo", "v1beta1", "bar", "v10",
        ];
        v.sort_by(|a, b| compare_kube_aware_versions(a, b));
        assert_eq!(
            v,
            [
                "foo", "bar", "v1alpha1", "v1beta1", "v1beta2", "v2beta1", "v1", "v10"
            ]
        );
    }
}
