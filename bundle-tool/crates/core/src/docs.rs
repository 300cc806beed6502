//! YAML and JSON documents, with the input named in every error.
//!
//! Loaders across bundle-tool read Kubernetes-style documents from files, directories and stdin.
//! This module turns bytes into `serde_json::Value`s (one per document, empty documents skipped)
//! and back into text in the two canonical forms bundle-tool writes: block YAML and
//! `opm`-style JSON (4-space indent). It never panics on input: every failure is a
//! [`ParseDocumentError`] naming the source.

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

/// Input could not be parsed.
#[derive(Debug, Error)]
#[error("{source_name}: {message}")]
pub struct ParseDocumentError {
    /// File name, `<stdin>`, or another label of the input.
    pub source_name: String,
    /// What the parser said, including a line/column when it gave one.
    pub message: String,
}

impl ParseDocumentError {
    /// An error about `source_name`.
    pub fn new(source_name: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            source_name: source_name.into(),
            message: message.into(),
        }
    }
}

/// Output could not be rendered (a value that YAML/JSON cannot represent).
#[derive(Debug, Error)]
#[error("cannot render {what}: {message}")]
pub struct RenderDocumentError {
    /// What was being rendered.
    pub what: String,
    /// Why not.
    pub message: String,
}

/// Largest input accepted by the document parsers (YAML bombs and runaway files are refused).
pub const MAX_DOCUMENT_BYTES: usize = 512 * 1024 * 1024;

fn looks_like_json(text: &str) -> bool {
    matches!(
        text.trim_start().as_bytes().first(),
        Some(b'{') | Some(b'[')
    )
}

/// Parses a stream of documents: JSON values back to back (as `opm render` writes) or
/// `---`-separated YAML. Empty and null documents are skipped.
pub fn parse_documents(source_name: &str, bytes: &[u8]) -> Result<Vec<Value>, ParseDocumentError> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(ParseDocumentError::new(
            source_name,
            format!("input is larger than {MAX_DOCUMENT_BYTES} bytes"),
        ));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ParseDocumentError::new(source_name, format!("not UTF-8 text: {e}")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if looks_like_json(text) {
        let mut out = Vec::new();
        let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        let mut ok = true;
        for v in stream {
            match v {
                Ok(v) => out.push(v),
                Err(e) => {
                    // JSON that is not a JSON stream may still be YAML (flow style); fall through.
                    ok = false;
                    if out.is_empty() {
                        break;
                    }
                    return Err(ParseDocumentError::new(
                        source_name,
                        format!(
                            "invalid JSON at line {} column {}: {e}",
                            e.line(),
                            e.column()
                        ),
                    ));
                }
            }
        }
        if ok {
            return Ok(out.into_iter().filter(|v| !v.is_null()).collect());
        }
    }
    parse_yaml(source_name, text)
}

fn parse_yaml(source_name: &str, text: &str) -> Result<Vec<Value>, ParseDocumentError> {
    let docs: Vec<Value> = std::panic::catch_unwind(|| serde_saphyr::from_multiple::<Value>(text))
        .map_err(|_| ParseDocumentError::new(source_name, "the YAML parser failed on this input"))?
        .map_err(|e| ParseDocumentError::new(source_name, format!("invalid YAML: {e}")))?;
    Ok(docs.into_iter().filter(|v| !v.is_null()).collect())
}

/// Parses exactly one document.
pub fn parse_document(source_name: &str, bytes: &[u8]) -> Result<Value, ParseDocumentError> {
    let mut docs = parse_documents(source_name, bytes)?;
    match docs.len() {
        1 => Ok(docs.remove(0)),
        0 => Err(ParseDocumentError::new(source_name, "no document found")),
        n => Err(ParseDocumentError::new(
            source_name,
            format!("expected one document, found {n}"),
        )),
    }
}

/// Renders a value as block YAML, ending with a newline.
pub fn to_yaml<T: Serialize>(what: &str, value: &T) -> Result<String, RenderDocumentError> {
    let mut s = serde_saphyr::to_string(value).map_err(|e| RenderDocumentError {
        what: what.into(),
        message: e.to_string(),
    })?;
    if !s.ends_with('\n') {
        s.push('\n');
    }
    Ok(s)
}

/// Renders values as a `---`-separated YAML stream (each document starts with `---`).
pub fn to_yaml_stream<T: Serialize>(
    what: &str,
    values: &[T],
) -> Result<String, RenderDocumentError> {
    let mut out = String::new();
    for v in values {
        out.push_str("---\n");
        out.push_str(&to_yaml(what, v)?);
    }
    Ok(out)
}

/// Renders a value as JSON with a 4-space indent and a trailing newline, as `opm` writes FBC.
/// HTML characters are not escaped (opm turns that off too).
pub fn to_json_4<T: Serialize + ?Sized>(
    what: &str,
    value: &T,
) -> Result<String, RenderDocumentError> {
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    value.serialize(&mut ser).map_err(|e| RenderDocumentError {
        what: what.into(),
        message: e.to_string(),
    })?;
    buf.push(b'\n');
    String::from_utf8(buf).map_err(|e| RenderDocumentError {
        what: what.into(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn yaml_stream_and_json_stream() {
        let y = parse_documents("a.yaml", b"---\na: 1\n---\n---\nb: [x, 'on']\n").unwrap();
        assert_eq!(y.len(), 2);
        assert_eq!(y[1]["b"][1], "on");
        let j = parse_documents("a.json", b"{\"a\":1}\n{\"b\":2}").unwrap();
        assert_eq!(j.len(), 2);
    }

    #[test]
    fn errors_name_the_source() {
        let e = parse_documents("bad.yaml", b"a: [1,\n").unwrap_err();
        assert!(e.to_string().starts_with("bad.yaml: "), "{e}");
        let e = parse_documents("bin", &[0xff, 0xfe]).unwrap_err();
        assert!(e.to_string().contains("UTF-8"));
    }

    #[test]
    fn json_4_indent() {
        let s = to_json_4("x", &serde_json::json!({"a": [1], "b": "<&>"})).unwrap();
        assert_eq!(
            s,
            "{\n    \"a\": [\n        1\n    ],\n    \"b\": \"<&>\"\n}\n"
        );
    }

    #[test]
    fn yaml_roundtrip_quotes_booleans_like_strings() {
        let v = serde_json::json!({"on": "yes", "n": "0123", "t": true});
        let y = to_yaml("x", &v).unwrap();
        assert_eq!(parse_document("y", y.as_bytes()).unwrap(), v);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_documents("fuzz", &bytes);
        }

        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,256}") {
            if let Err(e) = parse_documents("fuzz", s.as_bytes()) {
                prop_assert!(e.to_string().starts_with("fuzz: "));
            }
        }
    }
}
