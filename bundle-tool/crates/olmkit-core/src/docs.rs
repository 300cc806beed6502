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

/// Something a parse accepted only by being as lenient as Go's YAML decoder (which
/// `operator-sdk`, `opm` and the API server's clients use): the input is not strictly valid
/// YAML, and a stricter tool may refuse it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseWarning {
    /// File name, `<stdin>`, or another label of the input.
    pub source_name: String,
    /// 1-based line the strict parser stopped at, when it said.
    pub line: Option<u64>,
    /// What was accepted and how.
    pub message: String,
}

impl std::fmt::Display for ParseWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.source_name, self.message),
            None => write!(f, "{}: {}", self.source_name, self.message),
        }
    }
}

type WarningSink = Box<dyn Fn(&ParseWarning) + Send + Sync>;

static WARNING_SINK: std::sync::OnceLock<WarningSink> = std::sync::OnceLock::new();
static WARNED: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Reports a warning about input that no caller hands on (a duplicate key in a catalog read
/// by `render`, a hard link read on request): once per process and text, through the sink set
/// with [`set_warning_sink`], else as `warning: <file>:<line>: <message>` on stderr. Readers
/// whose caller reports warnings itself (a validator turning them into findings) return them
/// instead ([`parse_documents_lenient`]).
pub fn warn(w: &ParseWarning) {
    let fresh = WARNED
        .lock()
        .map(|mut seen| seen.insert(w.to_string()))
        .unwrap_or(true);
    if !fresh {
        return;
    }
    match WARNING_SINK.get() {
        Some(sink) => sink(w),
        None => eprintln!("warning: {w}"),
    }
}

/// Sends [`warn`]'s warnings to `sink` instead of stderr; only the first call takes effect
/// (false after that).
pub fn set_warning_sink(sink: impl Fn(&ParseWarning) + Send + Sync + 'static) -> bool {
    WARNING_SINK.set(Box::new(sink)).is_ok()
}

/// Parses a stream of documents: JSON values back to back (as `opm render` writes) or
/// `---`-separated YAML. Empty and null documents are skipped. Accepts what Go's YAML decoder
/// accepts (see [`parse_documents_lenient`]), and reports each leniency with [`warn`]; use
/// [`parse_documents_lenient`] to get them instead.
pub fn parse_documents(source_name: &str, bytes: &[u8]) -> Result<Vec<Value>, ParseDocumentError> {
    let (docs, warnings) = parse_documents_lenient(source_name, bytes)?;
    warnings.iter().for_each(warn);
    Ok(docs)
}

/// Like [`parse_documents`], and also returns a [`ParseWarning`] for each leniency the input
/// needed. Go's decoder (`sigs.k8s.io/yaml` over go-yaml), which every upstream OLM tool uses,
/// accepts two things YAML 1.2 and serde-saphyr's default mode refuse, and real bundles contain
/// both:
/// - duplicate mapping keys: the last value wins, as in Go;
/// - continuation lines of a multi-line quoted scalar indented no deeper than its key (old
///   controller-gen output): those lines are re-indented before a second parse. Leading
///   whitespace of a quoted scalar's continuation line is folded away, so the value is the one
///   Go decodes.
///
/// Each is tried only after the strict parse failed with that specific error.
pub fn parse_documents_lenient(
    source_name: &str,
    bytes: &[u8],
) -> Result<(Vec<Value>, Vec<ParseWarning>), ParseDocumentError> {
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
            let docs = out.into_iter().filter(|v| !v.is_null()).collect();
            return Ok((docs, Vec::new()));
        }
    }
    parse_yaml_lenient(source_name, text)
}

/// Why a strict YAML parse failed, when it is a leniency Go's decoder has.
enum Relaxable {
    DuplicateKey(Option<u64>, String),
    QuotedIndent(Option<u64>),
}

type Attempt = Result<Vec<Value>, (ParseDocumentError, Option<Relaxable>)>;

/// serde-saphyr's default budget caps a whole stream at 1,024 documents, 250,000 nodes and
/// 64 MiB of scalar text: a catalog written by `render -o yaml` breaches it at about 60 MB,
/// which `opm` and the catalog server read. The counters that grow with honest input (documents,
/// nodes, events, scalar bytes) are allowed to grow with the input's size instead, so memory
/// stays linear in it; the limits that stop bombs (aliases, anchors, depth, the input size
/// itself) are kept.
fn stream_budget(len: usize) -> serde_saphyr::Budget {
    let mut b = serde_saphyr::Budget::default();
    b.max_reader_input_bytes = Some(MAX_DOCUMENT_BYTES);
    b.max_documents = b.max_documents.max(len / 4);
    b.max_nodes = b.max_nodes.max(len);
    b.max_events = b.max_events.max(len.saturating_mul(2));
    b.max_total_scalar_bytes = b.max_total_scalar_bytes.max(len);
    b
}

fn parse_yaml_once(source_name: &str, text: &str, last_key_wins: bool) -> Attempt {
    let parsed = std::panic::catch_unwind(|| {
        let mut options = serde_saphyr::Options::default();
        options.budget = Some(stream_budget(text.len()));
        if last_key_wins {
            options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
        }
        serde_saphyr::from_multiple_with_options::<Value>(text, options)
    })
    .map_err(|_| {
        (
            ParseDocumentError::new(source_name, "the YAML parser failed on this input"),
            None,
        )
    })?;
    match parsed {
        Ok(docs) => Ok(docs.into_iter().filter(|v| !v.is_null()).collect()),
        Err(e) => {
            let line = e.location().map(|l| l.line());
            // Matched on the message: the error may come wrapped (with a source snippet).
            let message = e.to_string();
            let relax = if let Some(rest) = message.split("duplicate mapping key: ").nth(1) {
                let key = rest.split([',', '\n']).next().unwrap_or("").to_string();
                Some(Relaxable::DuplicateKey(line, key))
            } else if message.contains("invalid indentation in multiline quoted scalar") {
                Some(Relaxable::QuotedIndent(line))
            } else {
                None
            };
            Err((
                ParseDocumentError::new(source_name, format!("invalid YAML: {e}")),
                relax,
            ))
        }
    }
}

fn parse_yaml_lenient(
    source_name: &str,
    text: &str,
) -> Result<(Vec<Value>, Vec<ParseWarning>), ParseDocumentError> {
    let mut warnings = Vec::new();
    let mut last_key_wins = false;
    let mut reindented: Option<String> = None;
    // At most one relaxation of each kind, so at most three attempts.
    loop {
        let current = reindented.as_deref().unwrap_or(text);
        match parse_yaml_once(source_name, current, last_key_wins) {
            Ok(docs) => return Ok((docs, warnings)),
            Err((_, Some(Relaxable::DuplicateKey(line, key)))) if !last_key_wins => {
                last_key_wins = true;
                warnings.push(ParseWarning {
                    source_name: source_name.to_string(),
                    line,
                    message: format!(
                        "duplicate mapping key {key:?}: YAML forbids it; the last value is used, as Go's decoder (operator-sdk, opm, kubectl) does"
                    ),
                });
            }
            Err((_, Some(Relaxable::QuotedIndent(line)))) if reindented.is_none() => {
                reindented = Some(reindent_quoted_continuations(text));
                warnings.push(ParseWarning {
                    source_name: source_name.to_string(),
                    line,
                    message: "a continuation line of a multi-line quoted scalar is not indented deeper than its key (old controller-gen output): YAML forbids it; read as Go's decoder reads it".to_string(),
                });
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// An unclosed quoted scalar: its quote character and the column of its key.
struct OpenQuote {
    quote: char,
    key_column: usize,
}

/// Scans `s` (the text after an opening quote, or a continuation line) for the closing quote;
/// true when the scalar closes in `s`.
fn closes_quote(s: &str, quote: char) -> bool {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        // `\x` escapes in double quotes and `''` in single quotes do not close the scalar.
        let escaped = (quote == '"' && c == '\\')
            || (quote == '\'' && c == '\'' && chars.peek() == Some(&'\''));
        if escaped {
            chars.next();
        } else if c == quote {
            return true;
        }
    }
    false
}

/// The quoted scalar a line opens and leaves unclosed (`key: 'text...` or `- key: "text...`).
fn opens_quote(line: &str) -> Option<OpenQuote> {
    let body = line.trim_start();
    let mut key_column = line.len() - body.len();
    let mut rest = body;
    while let Some(r) = rest.strip_prefix("- ") {
        let trimmed = r.trim_start();
        key_column += rest.len() - trimmed.len();
        rest = trimmed;
    }
    if rest.starts_with('#') {
        return None;
    }
    let colon = rest.find(": ")?;
    let value = rest[colon + 1..].trim_start();
    let quote = value.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    (!closes_quote(&value[1..], quote)).then_some(OpenQuote { quote, key_column })
}

/// Indents every continuation line of a multi-line quoted scalar two columns deeper than its
/// key when it is not deeper already. Used only after the strict parse failed on exactly that.
fn reindent_quoted_continuations(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1024);
    let mut open: Option<OpenQuote> = None;
    for line in text.split_inclusive('\n') {
        match &open {
            None => {
                open = opens_quote(line);
                out.push_str(line);
            }
            Some(q) => {
                let body = line.trim_start_matches([' ', '\t']);
                let indent = line.len() - body.len();
                if indent <= q.key_column && !body.trim().is_empty() {
                    out.push_str(&" ".repeat(q.key_column + 2));
                    out.push_str(body);
                } else {
                    out.push_str(line);
                }
                if closes_quote(body, q.quote) {
                    open = None;
                }
            }
        }
    }
    out
}

/// Parses exactly one document (leniencies reported with [`warn`], as [`parse_documents`]).
pub fn parse_document(source_name: &str, bytes: &[u8]) -> Result<Value, ParseDocumentError> {
    let (doc, warnings) = parse_document_lenient(source_name, bytes)?;
    warnings.iter().for_each(warn);
    Ok(doc)
}

/// Like [`parse_document`], and also returns what had to be read leniently
/// ([`parse_documents_lenient`]).
pub fn parse_document_lenient(
    source_name: &str,
    bytes: &[u8],
) -> Result<(Value, Vec<ParseWarning>), ParseDocumentError> {
    let (mut docs, warnings) = parse_documents_lenient(source_name, bytes)?;
    match docs.len() {
        1 => Ok((docs.remove(0), warnings)),
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
    fn long_yaml_streams_are_not_capped() {
        // 5,000 documents and 70 MiB of scalar text: beyond serde-saphyr's default budget
        // (1,024 documents, 64 MiB), well within what `render -o yaml` writes for a catalog.
        let many: String = (0..5000).map(|i| format!("---\nname: b{i}\n")).collect();
        assert_eq!(
            parse_documents("c.yaml", many.as_bytes()).unwrap().len(),
            5000
        );
        let blob = "x".repeat(1 << 20);
        let big: String = (0..70)
            .map(|i| format!("---\nn: {i}\ndata: {blob}\n"))
            .collect();
        assert_eq!(parse_documents("c.yaml", big.as_bytes()).unwrap().len(), 70);
    }

    #[test]
    fn alias_bombs_are_still_refused() {
        let mut y = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let prev = (b'a' + i - 1) as char;
            let cur = (b'a' + i) as char;
            y.push_str(&format!("{cur}: &{cur} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        assert!(parse_documents("bomb.yaml", y.as_bytes()).is_err());
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

    #[test]
    fn duplicate_keys_last_wins_with_a_warning() {
        let (docs, warnings) =
            parse_documents_lenient("sa.yaml", b"kind: A\nmetadata:\n  name: x\nkind: B\n")
                .unwrap();
        assert_eq!(docs[0]["kind"], "B");
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].line, Some(4));
        assert!(
            warnings[0]
                .to_string()
                .starts_with("sa.yaml:4: duplicate mapping key \"kind\"")
        );
        // The plain API is lenient too, and strict input gives no warning.
        assert_eq!(
            parse_documents("sa.yaml", b"a: 1\na: 2\n").unwrap()[0]["a"],
            2
        );
        assert!(
            parse_documents_lenient("ok.yaml", b"a: 1\n")
                .unwrap()
                .1
                .is_empty()
        );
    }

    #[test]
    fn quoted_continuations_at_the_key_indent_read_as_go_does() {
        let text = "spec:\n  d: 'Specifies if the root\n  should be read-only. It''s\n  10.9.'\n  t: boolean\n  e: \"a\n  b\"\n";
        let (docs, warnings) = parse_documents_lenient("crd.yaml", text.as_bytes()).unwrap();
        assert_eq!(
            docs[0]["spec"]["d"],
            "Specifies if the root should be read-only. It's 10.9."
        );
        assert_eq!(docs[0]["spec"]["e"], "a b");
        assert_eq!(docs[0]["spec"]["t"], "boolean");
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].message.contains("quoted scalar"),
            "{:?}",
            warnings
        );
        // A genuinely broken file still fails, naming the source.
        let e = parse_documents_lenient("bad.yaml", b"a: 'open\nb: [\n").unwrap_err();
        assert!(e.to_string().starts_with("bad.yaml: "));
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
