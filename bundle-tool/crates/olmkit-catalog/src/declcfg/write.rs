//! Writing blobs the way `opm render` does.
//!
//! opm groups a catalog by package (packages sorted by name): the `olm.package` blob, its
//! channels sorted by name, its bundles sorted by name, its other blobs stably sorted by schema,
//! its `olm.deprecations`; blobs of no package come last. JSON is indented with 4 spaces
//! without HTML escaping. YAML is what opm's JSON-to-YAML conversion gives: every key sorted,
//! one `---` before each document. JSON lines (compact, keys sorted) is catalogd's form.

use super::{Blob, DeclarativeConfig};
use crate::property::Property;
use olmkit_core::docs::RenderDocumentError;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;

/// Output format of a rendered catalog.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteFormat {
    /// opm's JSON: one 4-space-indented object per blob.
    #[default]
    Json,
    /// opm's YAML (go-yaml v2's emitter, see [`olmkit_core::goyaml`]): `---` then the blob.
    Yaml,
    /// bundle-tool's own catalog YAML (the style `catalog/` has always been written in, kept
    /// so that releases do not rewrite existing files): `---` then the blob with sorted keys.
    CatalogYaml,
    /// One compact JSON object per line, keys sorted (catalogd's `all.json`).
    JsonLines,
}

impl WriteFormat {
    /// File extension (without the dot) opm uses for this format.
    pub fn extension(self) -> &'static str {
        match self {
            WriteFormat::Json | WriteFormat::JsonLines => "json",
            WriteFormat::Yaml | WriteFormat::CatalogYaml => "yaml",
        }
    }
}

/// Orders blobs like opm's writer. The result borrows from `cfg`.
pub fn ordered_blobs(cfg: &DeclarativeConfig) -> Vec<BlobRef<'_>> {
    #[derive(Default)]
    struct Group<'a> {
        packages: Vec<BlobRef<'a>>,
        channels: Vec<BlobRef<'a>>,
        bundles: Vec<BlobRef<'a>>,
        others: Vec<BlobRef<'a>>,
        deprecations: Vec<BlobRef<'a>>,
    }
    let mut groups: BTreeMap<&str, Group<'_>> = BTreeMap::new();
    for p in &cfg.packages {
        groups
            .entry(p.name.as_str())
            .or_default()
            .packages
            .push(BlobRef::Package(p));
    }
    for c in &cfg.channels {
        groups
            .entry(c.package.as_str())
            .or_default()
            .channels
            .push(BlobRef::Channel(c));
    }
    for b in &cfg.bundles {
        groups
            .entry(b.package.as_str())
            .or_default()
            .bundles
            .push(BlobRef::Bundle(b));
    }
    for o in &cfg.others {
        groups
            .entry(o.package.as_str())
            .or_default()
            .others
            .push(BlobRef::Other(o));
    }
    for d in &cfg.deprecations {
        groups
            .entry(d.package.as_str())
            .or_default()
            .deprecations
            .push(BlobRef::Deprecation(d));
    }
    let mut out = Vec::with_capacity(cfg.len());
    let mut unowned = Vec::new();
    for (name, mut g) in groups {
        if name.is_empty() {
            // opm drops package-less olm.package/channel/bundle blobs here and writes only the
            // package-less "others" at the very end.
            unowned = g.others;
            continue;
        }
        g.channels.sort_by(|a, b| a.name().cmp(b.name()));
        g.bundles.sort_by(|a, b| a.name().cmp(b.name()));
        g.others.sort_by(|a, b| a.schema().cmp(b.schema()));
        out.extend(g.packages);
        out.extend(g.channels);
        out.extend(g.bundles);
        out.extend(g.others);
        out.extend(g.deprecations);
    }
    out.extend(unowned);
    out
}

/// A borrowed blob of any schema.
#[derive(Clone, Copy, Debug)]
pub enum BlobRef<'a> {
    /// `olm.package`.
    Package(&'a super::Package),
    /// `olm.channel`.
    Channel(&'a super::Channel),
    /// `olm.bundle`.
    Bundle(&'a super::Bundle),
    /// `olm.deprecations`.
    Deprecation(&'a super::Deprecation),
    /// Anything else.
    Other(&'a super::Meta),
}

impl BlobRef<'_> {
    fn name(&self) -> &str {
        match self {
            BlobRef::Package(p) => &p.name,
            BlobRef::Channel(c) => &c.name,
            BlobRef::Bundle(b) => &b.name,
            BlobRef::Deprecation(_) => "",
            BlobRef::Other(m) => &m.name,
        }
    }
    fn schema(&self) -> &str {
        match self {
            BlobRef::Package(_) => super::SCHEMA_PACKAGE,
            BlobRef::Channel(_) => super::SCHEMA_CHANNEL,
            BlobRef::Bundle(_) => super::SCHEMA_BUNDLE,
            BlobRef::Deprecation(_) => super::SCHEMA_DEPRECATIONS,
            BlobRef::Other(m) => &m.schema,
        }
    }
}

impl Serialize for BlobRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            BlobRef::Package(b) => b.serialize(s),
            BlobRef::Channel(b) => b.serialize(s),
            BlobRef::Bundle(b) => b.serialize(s),
            BlobRef::Deprecation(b) => b.serialize(s),
            BlobRef::Other(b) => b.serialize(s),
        }
    }
}

thread_local! {
    /// Set while a value marked [`Property::html_escaped`] is being serialised.
    static ESCAPE_HTML: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A property as opm writes it: `{type, value}`, its value HTML-escaped when it was read
/// that way ([`Property::html_escaped`]).
impl Serialize for Property {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Property", 2)?;
        st.serialize_field("type", &self.type_)?;
        if self.html_escaped {
            st.serialize_field("value", &HtmlEscaped(&self.value))?;
        } else {
            st.serialize_field("value", &self.value)?;
        }
        st.end()
    }
}

/// A property value whose strings the JSON writer HTML-escapes (see
/// [`Property::html_escaped`]). Serialisers other than ours see the plain value.
pub(crate) struct HtmlEscaped<'a>(pub(crate) &'a Value);

impl Serialize for HtmlEscaped<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// Resets the flag however serialisation ends.
        struct Reset(bool);
        impl Drop for Reset {
            fn drop(&mut self) {
                ESCAPE_HTML.with(|f| f.set(self.0));
            }
        }
        let _reset = Reset(ESCAPE_HTML.with(|f| f.replace(true)));
        self.0.serialize(s)
    }
}

/// Go's encoder escapes U+2028 and U+2029 even with HTML escaping off; so do we, to stay
/// byte-compatible with opm. Inside an [`HtmlEscaped`] value it also escapes `<`, `>`, `&`.
struct GoFormatter<F> {
    inner: F,
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for GoFormatter<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let html = ESCAPE_HTML.with(std::cell::Cell::get);
        olmkit_core::gojson::write_string_fragment(writer, fragment, html)
    }
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> std::io::Result<()> {
        // Go's encoding/json float64 form (numbers in property values are float64 in opm).
        w.write_all(olmkit_core::goyaml::go_json_float(value).as_bytes())
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.inner.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.inner.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_object_value(w)
    }
}

fn render_err(what: &str, e: impl std::fmt::Display) -> RenderDocumentError {
    RenderDocumentError {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// Writes one blob in `format` to `w`.
pub fn write_blob<T: Serialize, W: Write>(
    w: &mut W,
    blob: &T,
    format: WriteFormat,
) -> Result<(), RenderDocumentError> {
    match format {
        WriteFormat::Json => {
            let fmt = GoFormatter {
                inner: serde_json::ser::PrettyFormatter::with_indent(b"    "),
            };
            let mut ser = serde_json::Serializer::with_formatter(&mut *w, fmt);
            blob.serialize(&mut ser)
                .map_err(|e| render_err("catalog blob", e))?;
            w.write_all(b"\n")
                .map_err(|e| render_err("catalog blob", e))
        }
        WriteFormat::JsonLines => {
            let v = serde_json::to_value(blob).map_err(|e| render_err("catalog blob", e))?;
            let fmt = GoFormatter {
                inner: serde_json::ser::CompactFormatter,
            };
            let mut ser = serde_json::Serializer::with_formatter(&mut *w, fmt);
            olmkit_core::gojson::sorted_keys(v)
                .serialize(&mut ser)
                .map_err(|e| render_err("catalog blob", e))?;
            w.write_all(b"\n")
                .map_err(|e| render_err("catalog blob", e))
        }
        WriteFormat::CatalogYaml => {
            let v = serde_json::to_value(blob).map_err(|e| render_err("catalog blob", e))?;
            let text =
                olmkit_core::docs::to_yaml("catalog blob", &olmkit_core::gojson::sorted_keys(v))?;
            w.write_all(b"---\n")
                .and_then(|()| w.write_all(text.as_bytes()))
                .map_err(|e| render_err("catalog blob", e))
        }
        WriteFormat::Yaml => {
            let v = serde_json::to_value(blob).map_err(|e| render_err("catalog blob", e))?;
            let text =
                olmkit_core::goyaml::to_yaml(&v).map_err(|e| render_err("catalog blob", e))?;
            w.write_all(b"---\n")
                .and_then(|()| w.write_all(text.as_bytes()))
                .map_err(|e| render_err("catalog blob", e))
        }
    }
}

/// Writes a whole config, ordered like opm, to `w`.
pub fn write_config<W: Write>(
    w: &mut W,
    cfg: &DeclarativeConfig,
    format: WriteFormat,
) -> Result<(), RenderDocumentError> {
    for b in ordered_blobs(cfg) {
        write_blob(w, &b, format)?;
    }
    Ok(())
}

/// Splits a config into one config per package (sorted by name; blobs of no package last, in
/// a config named "").
pub fn split_by_package(cfg: DeclarativeConfig) -> Vec<(String, DeclarativeConfig)> {
    let mut groups: BTreeMap<String, DeclarativeConfig> = BTreeMap::new();
    for p in cfg.packages {
        groups.entry(p.name.clone()).or_default().packages.push(p);
    }
    for c in cfg.channels {
        groups
            .entry(c.package.clone())
            .or_default()
            .channels
            .push(c);
    }
    for b in cfg.bundles {
        groups.entry(b.package.clone()).or_default().bundles.push(b);
    }
    for d in cfg.deprecations {
        groups
            .entry(d.package.clone())
            .or_default()
            .deprecations
            .push(d);
    }
    for o in cfg.others {
        groups.entry(o.package.clone()).or_default().others.push(o);
    }
    let unowned = groups.remove("");
    let mut out: Vec<(String, DeclarativeConfig)> = groups.into_iter().collect();
    if let Some(u) = unowned {
        out.push((String::new(), u));
    }
    out
}

/// The bytes written before a blob failed, and why it failed.
type Partial = (Vec<u8>, RenderDocumentError);

/// Writes a config in opm's order, rendering packages in parallel (a few at a time, so that
/// memory stays bounded) and handing the bytes to `sink` in order. Consumes the config so
/// that each package is freed as soon as it is written.
pub fn write_config_parallel<E: From<RenderDocumentError>>(
    cfg: DeclarativeConfig,
    format: WriteFormat,
    mut sink: impl FnMut(Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    use rayon::prelude::*;
    let groups = split_by_package(cfg);
    let batch = rayon::current_num_threads().max(1) * 2;
    let mut iter = groups.into_iter().peekable();
    while iter.peek().is_some() {
        let chunk: Vec<(String, DeclarativeConfig)> = iter.by_ref().take(batch).collect();
        let rendered: Vec<Result<Vec<u8>, Partial>> = chunk
            .into_par_iter()
            .map(|(_, c)| {
                let mut buf = Vec::new();
                match write_config(&mut buf, &c, format) {
                    Ok(()) => Ok(buf),
                    Err(e) => Err((buf, e)),
                }
            })
            .collect();
        for r in rendered {
            match r {
                Ok(bytes) => sink(bytes)?,
                // opm prints the blobs before the one it cannot write.
                Err((partial, e)) => {
                    sink(partial)?;
                    return Err(e.into());
                }
            }
        }
    }
    Ok(())
}

/// Renders a whole config, ordered like opm, to a string.
pub fn render_config(
    cfg: &DeclarativeConfig,
    format: WriteFormat,
) -> Result<String, RenderDocumentError> {
    let mut buf = Vec::new();
    write_config(&mut buf, cfg, format)?;
    String::from_utf8(buf).map_err(|e| render_err("catalog", e))
}

/// Renders blobs in the given order (no regrouping).
pub fn render_blobs(blobs: &[Blob], format: WriteFormat) -> Result<String, RenderDocumentError> {
    let mut buf = Vec::new();
    for b in blobs {
        write_blob(&mut buf, b, format)?;
    }
    String::from_utf8(buf).map_err(|e| render_err("catalog", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declcfg::{LoadOptions, load_dir};
    use std::path::Path;

    fn fixtures() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/fbc-examples")
    }

    #[test]
    fn catalogd_json_lines_golden() {
        let dir = fixtures().join("valid/catalogd-test-catalog");
        let cfg = load_dir(&dir, &LoadOptions::default()).unwrap();
        let got = render_config(&cfg, WriteFormat::JsonLines).unwrap();
        let want = std::fs::read_to_string(dir.join("expected_all.json")).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn parallel_writer_gives_the_same_bytes() {
        for dir in [
            "valid/opm-list-index",
            "valid/opm-index-declcfgs-latest",
            "valid/opm-fbc-dir-webhook-operator",
        ] {
            let cfg = load_dir(&fixtures().join(dir), &LoadOptions::default()).unwrap();
            for format in [WriteFormat::Json, WriteFormat::Yaml, WriteFormat::JsonLines] {
                let want = render_config(&cfg, format).unwrap().into_bytes();
                let mut got = Vec::new();
                write_config_parallel::<RenderDocumentError>(cfg.clone(), format, |b| {
                    got.extend(b);
                    Ok(())
                })
                .unwrap();
                assert_eq!(got, want, "{dir} {format:?}");
            }
        }
    }

    #[test]
    fn json_is_opm_ordered_and_escapes_like_go() {
        let cfg = load_dir(
            &fixtures().join("valid/opm-list-index"),
            &LoadOptions::default(),
        )
        .unwrap();
        let out = render_config(&cfg, WriteFormat::Json).unwrap();
        let first = out.find("\"schema\": \"olm.package\"").unwrap();
        let bar = out.find("\"name\": \"bar\"").unwrap();
        let foo = out.find("\"name\": \"foo\"").unwrap();
        assert!(first < bar && bar < foo);
        let mut buf = Vec::new();
        write_blob(
            &mut buf,
            &serde_json::json!({"a": "x\u{2028}<y>"}),
            WriteFormat::Json,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "{\n    \"a\": \"x\\u2028<y>\"\n}\n"
        );
    }

    #[test]
    fn html_escaped_property_values_only_in_json() {
        let mut p = crate::property::Property::new(
            "olm.constraint",
            serde_json::json!({"range": ">=1.0.0 <2 & x"}),
        );
        p.html_escaped = true;
        let plain = crate::property::Property::new("t", serde_json::json!("<a>"));
        let mut buf = Vec::new();
        write_blob(&mut buf, &vec![p.clone(), plain], WriteFormat::Json).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.contains(r#""range": "\u003e=1.0.0 \u003c2 \u0026 x""#),
            "{text}"
        );
        assert!(
            text.contains(r#""value": "<a>""#),
            "escaping must not leak: {text}"
        );
        // YAML and equality see the plain value.
        let mut y = Vec::new();
        write_blob(&mut y, &p, WriteFormat::Yaml).unwrap();
        assert!(String::from_utf8(y).unwrap().contains(">=1.0.0 <2 & x"));
        assert_eq!(
            p,
            crate::property::Property::new("olm.constraint", p.value.clone())
        );
    }
}
