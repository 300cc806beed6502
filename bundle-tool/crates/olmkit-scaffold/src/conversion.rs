//! The conversion code of a kind with several versions: `Spoke` implementations between each
//! version and the hub (its storage version), field by field for the fields both have, the rest
//! kept in annotations with `olmkit_runtime::conversion::preserved`, plus property tests of both
//! round trips.
//!
//! The fields come from the version files themselves (parsed with syn): a field is shared when
//! both versions have it with the same name and type, and the type names nothing defined in the
//! version's own module (`v1::Size` and `v1alpha1::Size` are different types even when they
//! read the same; those are kept instead, as JSON).
//!
//! Keys: on an object of spoke `S`, `conversion.<group>/<S>` holds the hub fields `S` cannot
//! express; on a hub object, `conversion.<group>/<S>-only` holds the fields only `S` has. One
//! key per spoke and direction, so conversions chained through an older hub never read each
//! other's data.

use std::collections::BTreeSet;

use quote::ToTokens;

use crate::ScaffoldError;

/// A field of a spec or status struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The Rust name.
    pub name: String,
    /// The type, as written (`Option<String>`).
    pub ty: String,
    /// The type as the kind's other modules name it: the version module's own items and the
    /// names it imports are written out in full (`v1::Size`, `k8s_openapi::...::Condition`).
    pub qualified: String,
    /// Whether the type names something defined in the version's module.
    pub local: bool,
}

/// The fields of one version's `<Kind>Spec` and `<Kind>Status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionFields {
    /// Spec fields.
    pub spec: Vec<Field>,
    /// Status fields (none when the version has no status).
    pub status: Option<Vec<Field>>,
}

fn type_idents(ty: &syn::Type, out: &mut BTreeSet<String>) {
    for token in ty.to_token_stream() {
        collect_idents(token, out);
    }
}

fn collect_idents(token: proc_macro2::TokenTree, out: &mut BTreeSet<String>) {
    match token {
        proc_macro2::TokenTree::Ident(i) => {
            out.insert(i.to_string());
        }
        proc_macro2::TokenTree::Group(g) => {
            for t in g.stream() {
                collect_idents(t, out);
            }
        }
        _ => {}
    }
}

/// Token text as people write it: `Option < Vec < String > >` → `Option<Vec<String>>`.
fn pretty(tokens: &str) -> String {
    let mut s = tokens.to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
    ] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s
}

/// The names a `use` item brings into scope, with their full paths (`self::` becomes the
/// version module; globs are skipped).
fn use_paths(tree: &syn::UseTree, prefix: &str, module: &str, out: &mut Vec<(String, String)>) {
    let join = |segment: &str| -> String {
        let segment = if prefix.is_empty() && segment == "self" {
            module.to_string()
        } else {
            segment.to_string()
        };
        if prefix.is_empty() {
            segment
        } else {
            format!("{prefix}::{segment}")
        }
    };
    match tree {
        syn::UseTree::Path(p) => use_paths(&p.tree, &join(&p.ident.to_string()), module, out),
        syn::UseTree::Name(n) if n.ident == "self" => {
            if let Some(last) = prefix.rsplit("::").next() {
                out.push((last.to_string(), prefix.to_string()));
            }
        }
        syn::UseTree::Name(n) => out.push((n.ident.to_string(), join(&n.ident.to_string()))),
        syn::UseTree::Rename(r) => out.push((r.rename.to_string(), join(&r.ident.to_string()))),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, module, out);
            }
        }
        syn::UseTree::Glob(_) => {}
    }
}

/// Rewrites the identifiers of `ty` found in `names` to their full paths.
fn qualify_idents(ty: &str, names: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let mut after_path = false;
    let flush = |word: &mut String, out: &mut String, after_path: bool| {
        if word.is_empty() {
            return;
        }
        match names.iter().find(|(n, _)| n == word) {
            Some((_, full)) if !after_path => out.push_str(full),
            _ => out.push_str(word),
        }
        word.clear();
    };
    let chars: Vec<char> = ty.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_alphanumeric() || *c == '_' {
            if word.is_empty() {
                // An identifier right after `::` is a path segment, not a name to resolve.
                after_path = i >= 2 && chars[i - 1] == ':' && chars[i - 2] == ':';
            }
            word.push(*c);
        } else {
            flush(&mut word, &mut out, after_path);
            out.push(*c);
        }
    }
    flush(&mut word, &mut out, after_path);
    out
}

/// Reads the spec and status fields of `kind` from the version file of module `module`.
pub fn parse_version(
    file: &str,
    text: &str,
    kind: &str,
    module: &str,
) -> Result<VersionFields, ScaffoldError> {
    let parsed = syn::parse_file(text).map_err(|e| ScaffoldError::Parse {
        file: file.to_string(),
        message: format!("not valid Rust: {e}"),
    })?;
    let local: BTreeSet<String> = parsed
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Struct(s) => Some(s.ident.to_string()),
            syn::Item::Enum(e) => Some(e.ident.to_string()),
            syn::Item::Type(t) => Some(t.ident.to_string()),
            _ => None,
        })
        .collect();
    let mut names: Vec<(String, String)> = local
        .iter()
        .map(|n| (n.clone(), format!("{module}::{n}")))
        .collect();
    for item in &parsed.items {
        if let syn::Item::Use(u) = item {
            let mut found = Vec::new();
            use_paths(&u.tree, "", module, &mut found);
            for (name, path) in found {
                let path = if let Some(rest) = path.strip_prefix("super::") {
                    format!("super::{rest}")
                } else {
                    path
                };
                names.push((name, path));
            }
        }
    }
    let fields_of = |name: &str| -> Result<Option<Vec<Field>>, ScaffoldError> {
        let Some(item) = parsed.items.iter().find_map(|item| match item {
            syn::Item::Struct(s) if s.ident == name => Some(s),
            _ => None,
        }) else {
            return Ok(None);
        };
        let syn::Fields::Named(named) = &item.fields else {
            return Err(ScaffoldError::Parse {
                file: file.to_string(),
                message: format!("{name} is not a struct with named fields"),
            });
        };
        Ok(Some(
            named
                .named
                .iter()
                .map(|f| {
                    let mut idents = BTreeSet::new();
                    type_idents(&f.ty, &mut idents);
                    let ty = pretty(&f.ty.to_token_stream().to_string());
                    Field {
                        name: f
                            .ident
                            .as_ref()
                            .map(ToString::to_string)
                            .unwrap_or_default(),
                        qualified: qualify_idents(&ty, &names),
                        ty,
                        local: idents.iter().any(|i| local.contains(i)),
                    }
                })
                .collect(),
        ))
    };
    let spec = fields_of(&format!("{kind}Spec"))?.ok_or_else(|| ScaffoldError::Parse {
        file: file.to_string(),
        message: format!("no struct {kind}Spec: create api generates the conversion from it"),
    })?;
    let status = fields_of(&format!("{kind}Status"))?;
    Ok(VersionFields { spec, status })
}

/// The `shortname = "..."` values of the `#[kube(...)]` attribute of a version file (a new
/// version must repeat them: the versions of a CRD share its names).
pub fn short_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("shortname = \"") {
        rest = &rest[i + "shortname = \"".len()..];
        if let Some(end) = rest.find('"') {
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

fn shared(a: &Field, b: &Field) -> bool {
    a.name == b.name && a.qualified == b.qualified && !a.local && !b.local
}

/// The fields of `from` that `to` cannot take (by name and type).
fn only_in<'a>(from: &'a [Field], to: &[Field]) -> Vec<&'a Field> {
    from.iter()
        .filter(|f| !to.iter().any(|t| shared(f, t)))
        .collect()
}

/// A payload field's name: `spec_size`, `status_nodes`.
fn kept_name(part: &str, f: &Field) -> String {
    format!("{part}_{}", f.name.trim_start_matches("r#"))
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

/// What a generated conversion needs to know about the kind.
pub struct Kind<'a> {
    /// `Whalesay`.
    pub kind: &'a str,
    /// `demo.example.com`.
    pub group: &'a str,
}

/// A payload struct: the fields kept for the other side.
fn payload(name: &str, doc: &str, fields: &[(&str, &Field)]) -> String {
    let mut out = format!(
        "/// {doc}\n#[derive(Serialize, Deserialize, Default)]\n#[serde(rename_all = \"camelCase\", deny_unknown_fields)]\nstruct {name} {{\n"
    );
    for (part, f) in fields {
        out.push_str(&format!(
            "    #[serde(default, skip_serializing_if = \"Option::is_none\")]\n    {}: Option<{}>,\n",
            kept_name(part, f),
            f.qualified
        ));
    }
    out.push_str("    #[serde(default, skip_serializing_if = \"Option::is_none\")]\n    annotation: Option<String>,\n}\n\n");
    let empty = if fields.is_empty() {
        "true".to_string()
    } else {
        fields
            .iter()
            .map(|(part, f)| format!("self.{}.is_none()", kept_name(part, f)))
            .collect::<Vec<_>>()
            .join(" && ")
    };
    let empty = if empty.len() > 60 {
        let parts: Vec<String> = fields
            .iter()
            .map(|(part, f)| format!("self.{}.is_none()", kept_name(part, f)))
            .collect();
        parts.join("\n            && ")
    } else {
        empty
    };
    out.push_str(&format!(
        "impl Kept for {name} {{\n    fn is_empty(&self) -> bool {{\n        {empty}\n    }}\n    fn hub_annotation(&mut self) -> &mut Option<String> {{\n        &mut self.annotation\n    }}\n}}\n\n"
    ));
    out
}

/// The struct literal of one part (spec or status) of `to`, from `source` (an expression of the
/// `from` struct) and `kept` (the payload).
fn literal(
    indent: &str,
    ty: &str,
    part: &str,
    to: &[Field],
    from: &[Field],
    source: &str,
    kept: &str,
) -> String {
    let mut out = format!("{ty} {{\n");
    for f in to {
        let value = if from.iter().any(|g| shared(f, g)) {
            format!("{source}.{}", f.name)
        } else {
            format!("{kept}.{}.unwrap_or_default()", kept_name(part, f))
        };
        out.push_str(&format!("{indent}    {}: {value},\n", f.name));
    }
    out.push_str(&format!("{indent}}}"));
    out
}

/// The payload field assignments: `spec_x: unless_default(&source.x)` for each field.
fn fill(indent: &str, part: &str, fields: &[&Field], source: &str) -> String {
    fields
        .iter()
        .map(|f| {
            format!(
                "{indent}{}: unless_default(&{source}.{}),\n",
                kept_name(part, f),
                f.name
            )
        })
        .collect()
}

/// How a hub and a spoke differ: the fields each cannot express of the other.
struct Sides<'a> {
    hub_status: &'a [Field],
    spoke_status: &'a [Field],
    /// Both versions have a status, so it converts field by field.
    status_has_parts: bool,
    hub_only_spec: Vec<&'a Field>,
    hub_only_status: Vec<&'a Field>,
    spoke_only_spec: Vec<&'a Field>,
    spoke_only_status: Vec<&'a Field>,
}

impl<'a> Sides<'a> {
    fn of(hub: &'a VersionFields, spoke: &'a VersionFields) -> Self {
        let hub_status = hub.status.as_deref().unwrap_or_default();
        let spoke_status = spoke.status.as_deref().unwrap_or_default();
        Self {
            hub_status,
            spoke_status,
            status_has_parts: hub.status.is_some() && spoke.status.is_some(),
            hub_only_spec: only_in(&hub.spec, &spoke.spec),
            hub_only_status: only_in(hub_status, spoke_status),
            spoke_only_spec: only_in(&spoke.spec, &hub.spec),
            spoke_only_status: only_in(spoke_status, hub_status),
        }
    }

    /// The payload kept on a spoke object: the hub's fields the spoke cannot express.
    fn down_fields(&self) -> Vec<(&'static str, &'a Field)> {
        parts(&self.hub_only_spec, &self.hub_only_status)
    }

    /// The payload kept on a hub object: the fields only the spoke has.
    fn up_fields(&self) -> Vec<(&'static str, &'a Field)> {
        parts(&self.spoke_only_spec, &self.spoke_only_status)
    }
}

/// Spec and status fields, each with the part it belongs to.
fn parts<'a>(spec: &[&'a Field], status: &[&'a Field]) -> Vec<(&'static str, &'a Field)> {
    spec.iter()
        .map(|f| ("spec", *f))
        .chain(status.iter().map(|f| ("status", *f)))
        .collect()
}

/// `impl Spoke<hub::Kind> for spoke::Kind`, its payloads and its round-trip tests.
pub fn spoke_impl(
    k: &Kind<'_>,
    hub: &str,
    hub_fields: &VersionFields,
    spoke: &str,
    spoke_fields: &VersionFields,
) -> (String, String) {
    let sides = Sides::of(hub_fields, spoke_fields);
    let mut out = payload_decls(k, hub, spoke, &sides);
    let bodies = Bodies::of(k.kind, hub, hub_fields, spoke, spoke_fields, &sides);
    let payloads = PayloadCode::of(spoke, &sides);
    out.push_str(&impl_block(k.kind, hub, spoke, &bodies, &payloads));
    let tests = round_trip_tests(k.kind, hub, hub_fields, spoke, spoke_fields);
    (out, tests)
}

/// The annotation names and the two payload structs of a spoke's conversion.
fn payload_decls(k: &Kind<'_>, hub: &str, spoke: &str, sides: &Sides<'_>) -> String {
    let kind = k.kind;
    let group = k.group;
    let s_up = upper_first(spoke);
    let mut out = String::new();
    out.push_str(&format!(
        "// {spoke} <-> {hub}\n\n/// On a `{spoke}` object: the `{hub}` fields `{spoke}` cannot express.\npub const {}_KEPT: &str = \"conversion.{group}/{spoke}\";\n/// On a `{hub}` object: the fields only `{spoke}` has.\npub const {}_ONLY: &str = \"conversion.{group}/{spoke}-only\";\n\n",
        spoke.to_ascii_uppercase(),
        spoke.to_ascii_uppercase()
    ));
    out.push_str(&payload(
        &format!("{s_up}Kept"),
        &format!("What `{spoke}` cannot express of a `{hub}` {kind}."),
        &sides.down_fields(),
    ));
    out.push_str(&payload(
        &format!("{s_up}Only"),
        &format!("What only `{spoke}` has of a {kind}, kept on the `{hub}` object."),
        &sides.up_fields(),
    ));
    out
}

/// The spec and status expressions of the converted objects, both ways.
struct Bodies {
    hub_spec: String,
    spoke_spec: String,
    hub_status: String,
    spoke_status: String,
}

impl Bodies {
    fn of(
        kind: &str,
        hub: &str,
        hub_fields: &VersionFields,
        spoke: &str,
        spoke_fields: &VersionFields,
        sides: &Sides<'_>,
    ) -> Self {
        let indent = "            ";
        let hub_spec = literal(
            indent,
            &format!("{hub}::{kind}Spec"),
            "spec",
            &hub_fields.spec,
            &spoke_fields.spec,
            "self.spec",
            "kept",
        );
        let spoke_spec = literal(
            indent,
            &format!("{spoke}::{kind}Spec"),
            "spec",
            &spoke_fields.spec,
            &hub_fields.spec,
            "hub.spec",
            "only",
        );
        let (hub_status, spoke_status) = if sides.status_has_parts {
            (
                format!(
                    "self.status.map(|status| {})",
                    literal(
                        indent,
                        &format!("{hub}::{kind}Status"),
                        "status",
                        sides.hub_status,
                        sides.spoke_status,
                        "status",
                        "kept",
                    )
                ),
                format!(
                    "hub.status.map(|status| {})",
                    literal(
                        indent,
                        &format!("{spoke}::{kind}Status"),
                        "status",
                        sides.spoke_status,
                        sides.hub_status,
                        "status",
                        "only",
                    )
                ),
            )
        } else {
            ("None".into(), "None".into())
        };
        Self {
            hub_spec,
            spoke_spec,
            hub_status,
            spoke_status,
        }
    }
}

/// The statements that fill the payloads and read them back.
struct PayloadCode {
    down_name: String,
    /// `let only` / `let mut only` (mutable when the status adds to it).
    only_decl: &'static str,
    only_init: String,
    up_status_fill: String,
    kept_decl: &'static str,
    kept_init: String,
    down_status_fill: String,
    /// The binding of the restored `Kept` payload (`_` when there is nothing to restore).
    kept_in: &'static str,
    only_restore: String,
}

impl PayloadCode {
    fn of(spoke: &str, sides: &Sides<'_>) -> Self {
        let s_up = upper_first(spoke);
        let down_name = format!("{s_up}Kept");
        let up_name = format!("{s_up}Only");
        let sk = spoke.to_ascii_uppercase();
        let up_fill_spec = fill("            ", "spec", &sides.spoke_only_spec, "self.spec");
        let down_fill_spec = fill("            ", "spec", &sides.hub_only_spec, "hub.spec");
        let up_status_fill = status_fill(&sides.spoke_only_status, "self", "only");
        let down_status_fill = status_fill(&sides.hub_only_status, "hub", "kept");
        // The payloads read back: unused when there is nothing to restore.
        let only_restore = if sides.up_fields().is_empty() {
            format!("let _ = preserved::restore::<{up_name}>(&mut metadata, {sk}_ONLY);")
        } else {
            format!("let (only, _) = preserved::restore::<{up_name}>(&mut metadata, {sk}_ONLY);")
        };
        Self {
            only_decl: if up_status_fill.is_empty() {
                "let only"
            } else {
                "let mut only"
            },
            kept_decl: if down_status_fill.is_empty() {
                "let kept"
            } else {
                "let mut kept"
            },
            only_init: payload_init(&up_name, &up_fill_spec),
            kept_init: payload_init(&down_name, &down_fill_spec),
            kept_in: if sides.down_fields().is_empty() {
                "_"
            } else {
                "kept"
            },
            only_restore,
            up_status_fill,
            down_status_fill,
            down_name,
        }
    }
}

/// The statements copying status fields into a payload (none when there are none to copy).
fn status_fill(fields: &[&Field], source: &str, payload: &str) -> String {
    if fields.is_empty() {
        return String::new();
    }
    let mut s = format!("        if let Some(status) = &{source}.status {{\n");
    for f in fields {
        s.push_str(&format!(
            "            {payload}.{} = unless_default(&status.{});\n",
            kept_name("status", f),
            f.name
        ));
    }
    s.push_str("        }\n");
    s
}

/// A payload's initial value: its spec fields, or `Default` when it has none.
fn payload_init(name: &str, fill: &str) -> String {
    if fill.is_empty() {
        format!("{name}::default()")
    } else {
        format!("{name} {{\n{fill}            ..Default::default()\n        }}")
    }
}

/// The `impl Spoke` block itself.
fn impl_block(kind: &str, hub: &str, spoke: &str, b: &Bodies, p: &PayloadCode) -> String {
    let sk = spoke.to_ascii_uppercase();
    let Bodies {
        hub_spec,
        spoke_spec,
        hub_status: hub_status_expr,
        spoke_status: spoke_status_expr,
    } = b;
    let PayloadCode {
        down_name,
        only_decl,
        only_init,
        up_status_fill,
        kept_decl,
        kept_init,
        down_status_fill,
        kept_in,
        only_restore,
    } = p;
    format!(
        "impl Spoke<{hub}::{kind}> for {spoke}::{kind} {{
    fn into_hub(self) -> Converted<{hub}::{kind}> {{
        let mut metadata = self.metadata;
        let ({kept_in}, error) = preserved::restore::<{down_name}>(&mut metadata, {sk}_KEPT);
        let warnings = error
            .map(|e| format!(\"annotation {{{sk}_KEPT}}: {{e}}\"))
            .into_iter()
            .collect();
        {only_decl} = {only_init};
{up_status_fill}        keep(&mut metadata, {sk}_ONLY, only);
        let object = {hub}::{kind} {{
            metadata,
            spec: {hub_spec},
            status: {hub_status_expr},
        }};
        Converted {{ object, warnings }}
    }}

    fn from_hub(hub: {hub}::{kind}) -> Self {{
        let mut metadata = hub.metadata;
        {only_restore}
        {kept_decl} = {kept_init};
{down_status_fill}        keep(&mut metadata, {sk}_KEPT, kept);
        {spoke}::{kind} {{
            metadata,
            spec: {spoke_spec},
            status: {spoke_status_expr},
        }}
    }}
}}

"
    )
}

/// A proptest strategy for a field type; `Default` for types it does not know.
fn strategy(f: &Field) -> String {
    let ty = f.ty.as_str();
    match ty {
        "i32" | "i64" | "u32" | "u64" | "u16" | "i16" | "u8" | "i8" | "bool" | "f64" => {
            format!("any::<{ty}>()")
        }
        "String" => "\"[a-z0-9]{0,8}\"".into(),
        "Option<String>" => "proptest::option::of(\"[a-z0-9]{0,8}\")".into(),
        "Vec<String>" => "proptest::collection::vec(\"[a-z0-9]{0,8}\", 0..3)".into(),
        t if t.starts_with("Option<")
            && matches!(
                &t[7..t.len() - 1],
                "i32" | "i64" | "u32" | "u64" | "u16" | "bool"
            ) =>
        {
            format!("proptest::option::of(any::<{}>())", &t[7..t.len() - 1])
        }
        "BTreeMap<String, String>" | "std::collections::BTreeMap<String, String>" => {
            "proptest::collection::btree_map(\"[a-z]{1,4}\", \"[a-z0-9]{0,4}\", 0..3)".into()
        }
        _ => "LazyJust::new(Default::default)".into(),
    }
}

/// `(a, b, ...)` nested so that no tuple has more than 10 elements (proptest's strategies
/// are tuples of at most 12), laid out one element per line when long.
fn tuple(indent: &str, items: &[String]) -> String {
    let parts: Vec<String> = if items.len() <= 10 {
        items.to_vec()
    } else {
        let (a, b) = items.split_at(10);
        vec![
            tuple(&format!("{indent}    "), a),
            tuple(&format!("{indent}    "), b),
        ]
    };
    if parts.len() == 1 {
        return parts[0].clone();
    }
    let one = format!("({})", parts.join(", "));
    if one.len() <= 60 && !one.contains('\n') {
        return one;
    }
    let mut out = String::from("(\n");
    for p in &parts {
        out.push_str(&format!("{indent}    {p},\n"));
    }
    out.push_str(&format!("{indent})"));
    out
}

/// A strategy producing objects of `module::Kind` with random spec and status fields.
pub fn object_strategy(kind: &str, module: &str, fields: &VersionFields) -> String {
    let status = fields.status.clone().unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    let mut strategies: Vec<String> = Vec::new();
    for f in &fields.spec {
        names.push(format!("spec_{}", f.name.trim_start_matches("r#")));
        strategies.push(strategy(f));
    }
    for f in &status {
        names.push(format!("status_{}", f.name.trim_start_matches("r#")));
        strategies.push(strategy(f));
    }
    names.push("has_status".into());
    strategies.push("any::<bool>()".into());
    let spec_fields: String = fields
        .spec
        .iter()
        .map(|f| {
            format!(
                "                {}: spec_{},\n",
                f.name,
                f.name.trim_start_matches("r#")
            )
        })
        .collect();
    let status_expr = if fields.status.is_some() {
        let status_fields: String = status
            .iter()
            .map(|f| {
                format!(
                    "            {}: status_{},\n",
                    f.name,
                    f.name.trim_start_matches("r#")
                )
            })
            .collect();
        format!("has_status.then_some({module}::{kind}Status {{\n{status_fields}        }})")
    } else {
        "None".into()
    };
    let unused_status = if fields.status.is_none() {
        "        let _ = has_status;\n"
    } else {
        ""
    };
    format!(
        "fn {module}_object() -> impl Strategy<Value = {module}::{kind}> {{
    let fields = {};
    fields.prop_map(|fields| {{
        let {} = fields;
{unused_status}        let mut object = {module}::{kind}::new(
            \"sample\",
            {module}::{kind}Spec {{
{spec_fields}            }},
        );
        object.status = {status_expr};
        object
    }})
}}
",
        tuple("    ", &strategies),
        tuple("        ", &names),
    )
}

fn round_trip_tests(
    kind: &str,
    hub: &str,
    hub_fields: &VersionFields,
    spoke: &str,
    spoke_fields: &VersionFields,
) -> String {
    let _ = kind;
    let hub_strategy = object_strategy(kind, hub, hub_fields);
    let spoke_strategy = object_strategy(kind, spoke, spoke_fields);
    format!(
        "{hub_strategy}
{spoke_strategy}
proptest! {{
    /// `{hub}` → `{spoke}` → `{hub}` gives the object back.
    #[test]
    fn {hub}_through_{spoke}_round_trips(object in {hub}_object()) {{
        let down = <{spoke}::{kind} as Spoke<{hub}::{kind}>>::from_hub(object.clone());
        let up = Spoke::<{hub}::{kind}>::into_hub(down);
        prop_assert!(up.warnings.is_empty(), \"{{:?}}\", up.warnings);
        prop_assert_eq!(json(&up.object), json(&object));
    }}

    /// `{spoke}` → `{hub}` → `{spoke}` gives the object back.
    #[test]
    fn {spoke}_through_{hub}_round_trips(object in {spoke}_object()) {{
        let up = Spoke::<{hub}::{kind}>::into_hub(object.clone());
        prop_assert!(up.warnings.is_empty(), \"{{:?}}\", up.warnings);
        let down = <{spoke}::{kind} as Spoke<{hub}::{kind}>>::from_hub(up.object);
        prop_assert_eq!(json(&down), json(&object));
    }}
}}
"
    )
}

/// `impl Spoke<new hub> for spoke` through the previous hub (when `--storage` moves the hub).
pub fn chained_impl(kind: &str, new_hub: &str, old_hub: &str, spoke: &str) -> String {
    format!(
        "// {spoke} <-> {new_hub}, through {old_hub} (the hub before {new_hub})

impl Spoke<{new_hub}::{kind}> for {spoke}::{kind} {{
    fn into_hub(self) -> Converted<{new_hub}::{kind}> {{
        let mid = Spoke::<{old_hub}::{kind}>::into_hub(self);
        let up = Spoke::<{new_hub}::{kind}>::into_hub(mid.object);
        let warnings = [mid.warnings, up.warnings].concat();
        Converted {{
            object: up.object,
            warnings,
        }}
    }}

    fn from_hub(hub: {new_hub}::{kind}) -> Self {{
        let mid = <{old_hub}::{kind} as Spoke<{new_hub}::{kind}>>::from_hub(hub);
        <Self as Spoke<{old_hub}::{kind}>>::from_hub(mid)
    }}
}}

"
    )
}

/// Round-trip tests of a chained spoke.
pub fn chained_tests(kind: &str, new_hub: &str, spoke: &str) -> String {
    format!(
        "proptest! {{
    /// `{spoke}` → `{new_hub}` → `{spoke}` gives the object back.
    #[test]
    fn {spoke}_through_{new_hub}_round_trips(object in {spoke}_object()) {{
        let up = Spoke::<{new_hub}::{kind}>::into_hub(object.clone());
        prop_assert!(up.warnings.is_empty(), \"{{:?}}\", up.warnings);
        let down = <{spoke}::{kind} as Spoke<{new_hub}::{kind}>>::from_hub(up.object);
        prop_assert_eq!(json(&down), json(&object));
    }}
}}
"
    )
}

/// The whole `conversion.rs` of a kind's first conversion.
pub fn file(kind: &str, hub: &str, modules: &[String], body: &str, tests: &str) -> String {
    let modules = format!("{{{}}}", modules.join(", "));
    format!(
        "//! Conversion between the versions of {kind}, through the hub `{hub}` (the storage version).
//!
//! Scaffolded by `bundle-tool create api --version`; yours to edit. The API server converts
//! every {kind} it reads or writes in another version through these `Spoke` implementations
//! (the manager's conversion webhook), so a round trip must lose nothing: fields both versions
//! have are copied, and what one version cannot express is kept in an annotation
//! (`olmkit_runtime::conversion::preserved`). When you change a version's fields, the compiler
//! points here; the property tests at the end check both round trips of every spoke.
//! `bundle-tool create api` adds new versions at the `+olmkit:scaffold` markers: keep them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use olmkit_runtime::conversion::preserved::{{self, Kept}};
use olmkit_runtime::conversion::{{Converted, Spoke}};
use serde::{{Deserialize, Serialize}};

use super::{modules};

/// `Some(value)` unless it is the default, which the way back restores anyway (so an object
/// that loses nothing carries no annotation).
#[allow(dead_code)]
fn unless_default<T: Clone + Default + PartialEq>(value: &T) -> Option<T> {{
    (*value != T::default()).then(|| value.clone())
}}

/// Stores `kept` under `key`, wrapping the value the object already had there (the other side
/// puts it back); with nothing to keep, that value stays as it is.
fn keep<T: Kept>(metadata: &mut ObjectMeta, key: &str, kept: T) {{
    let existing = preserved::take_annotation(metadata, key);
    if kept.is_empty() {{
        if let Some(value) = existing {{
            metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(key.to_string(), value);
        }}
    }} else {{
        preserved::store(metadata, key, kept, existing);
    }}
}}

{body}// +olmkit:scaffold:conversions

#[cfg(test)]
mod tests {{
    use super::*;
    use proptest::prelude::*;
    #[allow(unused_imports)]
    use proptest::strategy::LazyJust;

    fn json<T: Serialize>(value: &T) -> serde_json::Value {{
        serde_json::to_value(value).unwrap()
    }}

{tests}    // +olmkit:scaffold:conversion-tests
}}
",
        tests = indent(tests, "    "),
    )
}

/// Indents every non-empty line.
pub fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("{by}{l}\n")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = r#"
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
#[derive(CustomResource)]
#[kube(group = "demo.example.com", version = "v1", kind = "Whalesay", shortname = "ws", shortname = "whale")]
pub struct WhalesaySpec {
    pub size: i32,
    pub message: Option<String>,
    pub sizes: Vec<Size>,
}
pub struct Size { pub n: i32 }
pub struct WhalesayStatus {
    pub conditions: Vec<Condition>,
}
"#;

    #[test]
    fn reads_fields_and_knows_local_types() {
        let v = parse_version("v1.rs", V1, "Whalesay", "v1").unwrap();
        assert_eq!(v.spec.len(), 3);
        assert_eq!(v.spec[1].ty, "Option<String>");
        assert!(!v.spec[0].local);
        assert!(v.spec[2].local, "Size is the module's own type");
        assert_eq!(v.spec[2].qualified, "Vec<v1::Size>");
        let status = v.status.unwrap();
        assert_eq!(status[0].ty, "Vec<Condition>");
        assert_eq!(
            status[0].qualified,
            "Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>"
        );
        assert_eq!(short_names(V1), ["ws", "whale"]);
    }

    #[test]
    fn errors_name_the_file() {
        let e = parse_version("src/whalesay/v1.rs", "fn (", "Whalesay", "v1").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("src/whalesay/v1.rs: not valid Rust"),
            "{e}"
        );
        let e = parse_version("v1.rs", "pub struct X;", "Whalesay", "v1").unwrap_err();
        assert!(e.to_string().contains("no struct WhalesaySpec"), "{e}");
    }

    #[test]
    fn shared_fields_are_copied_and_the_rest_kept() {
        let hub = parse_version("v1.rs", V1, "Whalesay", "v1").unwrap();
        let field = |name: &str, ty: &str| Field {
            name: name.into(),
            ty: ty.into(),
            qualified: ty.into(),
            local: false,
        };
        let spoke = VersionFields {
            spec: vec![field("size", "i32"), field("colour", "String")],
            status: hub.status.clone(),
        };
        let (code, tests) = spoke_impl(
            &Kind {
                kind: "Whalesay",
                group: "demo.example.com",
            },
            "v1",
            &hub,
            "v1alpha1",
            &spoke,
        );
        assert!(code.contains("size: self.spec.size,"), "{code}");
        assert!(
            code.contains("message: kept.spec_message.unwrap_or_default(),"),
            "{code}"
        );
        assert!(
            code.contains("sizes: kept.spec_sizes.unwrap_or_default(),"),
            "{code}"
        );
        assert!(
            code.contains("spec_sizes: Option<Vec<v1::Size>>,"),
            "{code}"
        );
        assert!(
            code.contains("colour: only.spec_colour.unwrap_or_default(),"),
            "{code}"
        );
        assert!(
            code.contains("conversion.demo.example.com/v1alpha1-only"),
            "{code}"
        );
        assert!(
            tests.contains("fn v1_through_v1alpha1_round_trips"),
            "{tests}"
        );
    }
}
