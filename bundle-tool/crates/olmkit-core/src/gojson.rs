//! JSON as Go's `encoding/json` writes it: the one home of the details that make our output
//! byte-identical to operator-sdk's, opm's and operator-registry's where they marshal JSON.
//!
//! - String escaping (`encodeState.string` in encoding/json): U+2028 and U+2029 are always
//!   written as `\u2028`/`\u2029`; with HTML escaping on, which `json.Marshal` and
//!   `json.NewEncoder` default to, `<`, `>` and `&` become `\u003c`, `\u003e`, `\u0026`.
//! - Key order: Go marshals a `map[string]interface{}` with its keys sorted by bytes
//!   (`mapEncoder.encode`), which is what every YAML-to-JSON conversion upstream
//!   (`sigs.k8s.io/yaml`) produces.
//!
//! Numbers: `compact` and `marshal` keep serde_json's number text (integers as written, floats
//! shortest round-trip), as the callers that mirror Go here only see integers; writers that
//! emit Go `float64`s use [`crate::goyaml::go_json_float`] in their own formatter.

use std::io::{self, Write};

use serde_json::Value;

/// Writes a string fragment (the text between escapes serde_json already applied) with Go's
/// additional escapes: U+2028 and U+2029 always, `<`, `>` and `&` when `html`.
///
/// # Errors
/// When `writer` fails.
pub fn write_string_fragment<W: ?Sized + Write>(
    writer: &mut W,
    fragment: &str,
    html: bool,
) -> io::Result<()> {
    let special =
        |c: char| matches!(c, '\u{2028}' | '\u{2029}') || html && matches!(c, '<' | '>' | '&');
    if !fragment.contains(special) {
        return writer.write_all(fragment.as_bytes());
    }
    let mut start = 0;
    for (i, c) in fragment.char_indices() {
        let esc = match c {
            '\u{2028}' => "\\u2028",
            '\u{2029}' => "\\u2029",
            '<' if html => "\\u003c",
            '>' if html => "\\u003e",
            '&' if html => "\\u0026",
            _ => continue,
        };
        writer.write_all(&fragment.as_bytes()[start..i])?;
        writer.write_all(esc.as_bytes())?;
        start = i + c.len_utf8();
    }
    writer.write_all(&fragment.as_bytes()[start..])
}

/// A compact serde_json formatter that escapes strings like Go's encoder with HTML escaping on
/// (`json.Marshal`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GoCompact;

impl serde_json::ser::Formatter for GoCompact {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        write_string_fragment(writer, fragment, true)
    }
}

/// Compact JSON with Go's HTML-safe escaping, keys in the order of the value.
pub fn compact(value: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoCompact);
    // Serialising a `Value` into memory cannot fail, and the output is UTF-8.
    let _ = serde::Serialize::serialize(value, &mut ser);
    String::from_utf8(out).unwrap_or_default()
}

/// `json.Marshal` of a value decoded into Go maps: keys sorted, compact, HTML-safe escaping.
pub fn marshal(value: &Value) -> String {
    compact(&sorted_keys(value.clone()))
}

/// Encoded JSON `text` with the escapes Go's encoder adds (`json.HTMLEscape` plus U+2028 and
/// U+2029): for text serde_json wrote, where `<`, `>` and `&` can only be inside strings.
pub fn html_escape(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    // Writing into memory cannot fail.
    let _ = write_string_fragment(&mut out, text, true);
    String::from_utf8(out).unwrap_or_default()
}

/// Sorts the keys of every object in `value`, recursively, in Go's map order (by bytes).
pub fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// `value` with the keys of every object sorted (see [`sort_keys`]).
pub fn sorted_keys(mut value: Value) -> Value {
    sort_keys(&mut value);
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Go 1.22: `json.Marshal(map[string]any{"b": "<a>&\u2028", "a": []any{map[string]any{"z": 1, "y": 2}}})`.
    #[test]
    fn marshal_like_go() {
        let v = json!({"b": "<a>&\u{2028}\u{2029}", "a": [{"z": 1, "y": 2}]});
        assert_eq!(
            marshal(&v),
            r#"{"a":[{"y":2,"z":1}],"b":"\u003ca\u003e\u0026\u2028\u2029"}"#
        );
    }

    #[test]
    fn compact_keeps_key_order() {
        let v = json!({"b": 1, "a": ">"});
        assert_eq!(compact(&v), r#"{"b":1,"a":"\u003e"}"#);
    }

    #[test]
    fn html_escape_of_encoded_text() {
        assert_eq!(html_escape("a<b>&c"), "a\\u003cb\\u003e\\u0026c");
        assert_eq!(html_escape("plain"), "plain");
    }

    #[test]
    fn fragments_without_html_escape_only_line_separators() {
        let mut out = Vec::new();
        write_string_fragment(&mut out, "<\u{2028}>", false).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "<\\u2028>");
    }

    #[test]
    fn sort_keys_by_bytes_recursively() {
        let v = sorted_keys(json!({"b": {"Z": 1, "a": 2}, "A": [{"y": 1, "x": 2}]}));
        assert_eq!(v.to_string(), r#"{"A":[{"x":2,"y":1}],"b":{"Z":1,"a":2}}"#);
    }
}
