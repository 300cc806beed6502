//! Cutting an FBC file into its documents while remembering where each one starts.
//!
//! The server keeps only metadata in memory and re-reads a bundle's bytes when a client asks
//! for its CSV or manifests, so it needs the byte span of every blob. Parsers do not report
//! document offsets, so this module finds the boundaries itself, streaming the file so that a
//! multi-gigabyte `catalog.json` never sits in memory whole:
//! - JSON streams (what `opm render` writes) are split by matching braces, strings and escapes
//!   being honoured, so the split is exact for any valid JSON;
//! - YAML streams are split at `---`/`...` marker lines, which the YAML spec forbids inside
//!   any scalar at column 0.
//!
//! The pieces are then parsed by the catalog crate's own parser; if a piece does not parse the
//! caller falls back to loading the whole file the ordinary way, so an unusual file costs
//! memory, never correctness.
//!
//! No document (and no YAML line) may grow past [`olmkit_core::confine::CATALOG_DOCUMENT`]: a
//! file of zeros or one endless value is refused with a read error naming the limit once that
//! much has been read, instead of growing a buffer until an allocation fails and aborts the
//! process.

use std::io::{self, BufRead, Read};

/// How a file is encoded, decided like the FBC loader does: JSON when the first non-blank
/// character is `{` or `[`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Concatenated JSON values.
    Json,
    /// A `---`-separated YAML stream.
    Yaml,
}

/// Decides the format from the first bytes of a file (a UTF-8 BOM is ignored).
pub fn sniff(prefix: &[u8]) -> Format {
    let text = prefix.strip_prefix(b"\xef\xbb\xbf").unwrap_or(prefix);
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | Some(b'[') => Format::Json,
        _ => Format::Yaml,
    }
}

/// One document's bytes and where they start in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawDoc {
    /// Byte offset of the first byte.
    pub offset: u64,
    /// 1-based line of the first byte (what a parser of the document alone calls line 1), so
    /// that a warning about the document can name the line of the file.
    pub line: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Why a file could not be split.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// Reading failed.
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
    /// A JSON stream holds something other than objects (an array, a scalar, garbage).
    #[error("byte {offset}: expected a JSON object")]
    NotAnObject {
        /// Where.
        offset: u64,
    },
    /// The file ends inside a JSON value.
    #[error("unexpected end of file inside a JSON value that starts at byte {offset}")]
    Unterminated {
        /// Where the value starts.
        offset: u64,
    },
}

/// Iterator over the documents of one file.
pub struct Splitter<R> {
    reader: R,
    format: Format,
    pos: u64,
    /// 1-based line of the byte at `pos`.
    line: u64,
    at_start: bool,
    done: bool,
    /// YAML: a marker line (offset, line number, bytes) read while finishing the previous
    /// document.
    pending_line: Option<(u64, u64, Vec<u8>)>,
    /// Largest document (and YAML line) accepted, in bytes.
    limit: u64,
}

/// The error of a document that grows past the limit: a read error (the caller reports it
/// naming the file), not a reason to load the file whole.
fn too_large(offset: u64, limit: u64) -> SplitError {
    let what = olmkit_core::confine::CATALOG_DOCUMENT.what;
    SplitError::Io(io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!(
            "the document at byte {offset} has more than the {limit} bytes {what} may have: refusing to read it"
        ),
    ))
}

impl<R: BufRead> Splitter<R> {
    /// Splits `reader`, which holds a file in `format`; documents are bounded by
    /// [`olmkit_core::confine::CATALOG_DOCUMENT`].
    pub fn new(reader: R, format: Format) -> Self {
        Self {
            reader,
            format,
            pos: 0,
            line: 1,
            at_start: true,
            done: false,
            pending_line: None,
            limit: olmkit_core::confine::CATALOG_DOCUMENT.bytes,
        }
    }

    /// The same splitter with another bound on a document's size.
    pub fn with_limit(mut self, limit: u64) -> Self {
        self.limit = limit;
        self
    }

    /// How many bytes of the file have been consumed (all of it once the iterator has ended).
    pub fn position(&self) -> u64 {
        self.pos
    }

    fn next_json(&mut self) -> Result<Option<RawDoc>, SplitError> {
        // Skip blanks (and a BOM at the very start) up to the next value.
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Ok(None);
            }
            let mut skip = 0;
            if self.at_start {
                self.at_start = false;
                if buf.starts_with(b"\xef\xbb\xbf") {
                    skip = 3;
                }
            }
            while skip < buf.len() && buf[skip].is_ascii_whitespace() {
                skip += 1;
            }
            let found = skip < buf.len();
            let first = buf.get(skip).copied();
            self.line += newlines(&buf[..skip]);
            self.reader.consume(skip);
            self.pos += skip as u64;
            if found {
                if first != Some(b'{') {
                    return Err(SplitError::NotAnObject { offset: self.pos });
                }
                break;
            }
        }
        let (offset, line) = (self.pos, self.line);
        let mut bytes = Vec::new();
        let mut depth = 0usize;
        let mut in_str = false;
        let mut escaped = false;
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Err(SplitError::Unterminated { offset });
            }
            let mut i = 0;
            let mut complete = false;
            // Line feeds only occur between tokens (a JSON string holds none), so they are
            // counted where the bytes are stepped through anyway.
            let mut lines = 0u64;
            while i < buf.len() {
                if in_str {
                    if escaped {
                        escaped = false;
                        i += 1;
                        continue;
                    }
                    // Long strings (base64 manifests) dominate catalogs: jump to the next
                    // quote or backslash instead of stepping byte by byte through the state machine.
                    match buf[i..].iter().position(|&b| b == b'"' || b == b'\\') {
                        None => i = buf.len(),
                        Some(p) => {
                            i += p;
                            if buf[i] == b'\\' {
                                escaped = true;
                            } else {
                                in_str = false;
                            }
                            i += 1;
                        }
                    }
                    continue;
                }
                match buf[i] {
                    b'"' => in_str = true,
                    b'\n' => lines += 1,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            i += 1;
                            complete = true;
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            if (bytes.len() + i) as u64 > self.limit {
                return Err(too_large(offset, self.limit));
            }
            bytes.extend_from_slice(&buf[..i]);
            self.line += lines;
            self.reader.consume(i);
            self.pos += i as u64;
            if complete {
                return Ok(Some(RawDoc {
                    offset,
                    line,
                    bytes,
                }));
            }
        }
    }

    /// The next line: its offset, its 1-based number and its bytes.
    fn read_line(&mut self) -> Result<Option<(u64, u64, Vec<u8>)>, SplitError> {
        if let Some(line) = self.pending_line.take() {
            return Ok(Some(line));
        }
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(self.limit.saturating_add(1))
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(None);
        }
        if n as u64 > self.limit {
            return Err(too_large(self.pos, self.limit));
        }
        let (at, number) = (self.pos, self.line);
        self.pos += n as u64;
        self.line += 1;
        Ok(Some((at, number, line)))
    }

    fn next_yaml(&mut self) -> Result<Option<RawDoc>, SplitError> {
        let mut doc: Option<RawDoc> = None;
        while let Some((at, number, line)) = self.read_line()? {
            if is_marker(&line, b"---") {
                if let Some(d) = doc.take() {
                    // The marker starts the next document.
                    self.pending_line = Some((at, number, line));
                    return Ok(Some(d));
                }
                doc = Some(RawDoc {
                    offset: at,
                    line: number,
                    bytes: line,
                });
                continue;
            }
            let d = doc.get_or_insert_with(|| RawDoc {
                offset: at,
                line: number,
                bytes: Vec::new(),
            });
            if (d.bytes.len() + line.len()) as u64 > self.limit {
                return Err(too_large(d.offset, self.limit));
            }
            d.bytes.extend_from_slice(&line);
            if is_marker(&line, b"...") {
                return Ok(doc);
            }
        }
        Ok(doc)
    }
}

/// How many line feeds `bytes` holds.
fn newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

/// A document marker line: the marker at column 0 followed by a blank or the end of the line.
fn is_marker(line: &[u8], marker: &[u8]) -> bool {
    line.starts_with(marker)
        && matches!(
            line.get(marker.len()),
            None | Some(b' ') | Some(b'\t') | Some(b'\r') | Some(b'\n')
        )
}

impl<R: BufRead> Iterator for Splitter<R> {
    type Item = Result<RawDoc, SplitError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = match self.format {
            Format::Json => self.next_json(),
            Format::Yaml => self.next_yaml(),
        };
        match next {
            Ok(Some(doc)) => Some(Ok(doc)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn split(text: &str) -> Vec<(u64, String)> {
        let format = sniff(text.as_bytes());
        Splitter::new(io::BufReader::with_capacity(7, text.as_bytes()), format)
            .map(|d| {
                let d = d.unwrap();
                // The line is the file's line of the document's first byte.
                let before = &text.as_bytes()[..d.offset as usize];
                assert_eq!(d.line, 1 + newlines(before), "{d:?}");
                (d.offset, String::from_utf8(d.bytes).unwrap())
            })
            .collect()
    }

    #[test]
    fn json_stream_with_tricky_strings() {
        let text = "\u{feff}  {\"a\":\"}{\\\"\"}\n{\"b\":[{\"c\":\"\\\\\"}]}\n\n";
        let docs = split(text);
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].1, "{\"a\":\"}{\\\"\"}");
        assert_eq!(docs[0].0, 5);
        assert_eq!(docs[1].1, "{\"b\":[{\"c\":\"\\\\\"}]}");
        for (off, d) in &docs {
            let start = *off as usize;
            assert_eq!(&text.as_bytes()[start..start + d.len()], d.as_bytes());
        }
    }

    #[test]
    fn json_array_is_refused() {
        let mut s = Splitter::new(io::BufReader::new(&b" [1]"[..]), Format::Json);
        assert!(matches!(
            s.next(),
            Some(Err(SplitError::NotAnObject { offset: 1 }))
        ));
        assert!(s.next().is_none());
    }

    #[test]
    fn json_unterminated() {
        let mut s = Splitter::new(io::BufReader::new(&b"{\"a\": \"x"[..]), Format::Json);
        assert!(matches!(
            s.next(),
            Some(Err(SplitError::Unterminated { offset: 0 }))
        ));
    }

    #[test]
    fn yaml_markers() {
        let text = "# leading\nschema: a\n---\nschema: b\nx: |\n  ---not a marker\n--- # c\nschema: c\n...\n---\n";
        let docs = split(text);
        let bodies: Vec<&str> = docs.iter().map(|d| d.1.as_str()).collect();
        assert_eq!(
            bodies,
            vec![
                "# leading\nschema: a\n",
                "---\nschema: b\nx: |\n  ---not a marker\n",
                "--- # c\nschema: c\n...\n",
                "---\n"
            ]
        );
        for (off, d) in &docs {
            let start = *off as usize;
            assert_eq!(&text[start..start + d.len()], d.as_str());
        }
    }

    #[test]
    fn documents_and_lines_are_bounded() {
        // One endless JSON value, a line without end, a YAML document of many lines: each is
        // refused as a read error once past the limit, without reading the rest.
        let limit = 64;
        let endless = std::io::repeat(b'x');
        let json = io::BufReader::with_capacity(16, (&b"{\"a\": \""[..]).chain(endless));
        let mut s = Splitter::new(json, Format::Json).with_limit(limit);
        let e = s.next().unwrap().unwrap_err();
        assert!(matches!(&e, SplitError::Io(io) if io.kind() == io::ErrorKind::FileTooLarge));
        assert!(e.to_string().contains("more than the 64 bytes"), "{e}");
        let zeros = io::BufReader::with_capacity(16, std::io::repeat(0));
        let mut s = Splitter::new(zeros, Format::Yaml).with_limit(limit);
        assert!(matches!(s.next(), Some(Err(SplitError::Io(_)))));
        let lines = "a: b\n".repeat(100);
        let mut s =
            Splitter::new(io::BufReader::new(lines.as_bytes()), Format::Yaml).with_limit(limit);
        assert!(matches!(s.next(), Some(Err(SplitError::Io(_)))));
        // Within the limit, nothing changes.
        let ok = "a: b\n---\nc: d\n";
        let mut s =
            Splitter::new(io::BufReader::new(ok.as_bytes()), Format::Yaml).with_limit(limit);
        assert_eq!(s.next().unwrap().unwrap().bytes, b"a: b\n");
    }

    #[test]
    fn sniffing() {
        assert_eq!(sniff(b"\xef\xbb\xbf {"), Format::Json);
        assert_eq!(sniff(b"\n["), Format::Json);
        assert_eq!(sniff(b"schema: x"), Format::Yaml);
        assert_eq!(sniff(b""), Format::Yaml);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use serde_json::Value;

        fn leaf() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                // Quotes, backslashes, braces and brackets inside strings must not fool the
                // splitter.
                "[a-z{}\\[\\]\"\\\\ \n]{0,12}".prop_map(Value::String),
            ]
        }

        fn value() -> impl Strategy<Value = Value> {
            leaf().prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map("[a-z\"{]{1,4}", inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn object() -> impl Strategy<Value = Value> {
            prop::collection::btree_map("[a-z]{1,4}", value(), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        }

        proptest! {
            /// Any stream of JSON objects, compact or pretty, with any blanks between them,
            /// splits into exactly those objects at exactly their offsets.
            #[test]
            fn json_streams_split_exactly(
                docs in prop::collection::vec(object(), 0..6),
                pretty in any::<bool>(),
                gaps in prop::collection::vec("[ \t\n]{0,3}", 6),
                cap in 1usize..64,
            ) {
                let mut text = String::new();
                let mut starts = Vec::new();
                for (i, d) in docs.iter().enumerate() {
                    text.push_str(&gaps[i]);
                    starts.push(text.len() as u64);
                    let s = if pretty { serde_json::to_string_pretty(d) } else { serde_json::to_string(d) };
                    text.push_str(&s.unwrap());
                }
                text.push_str(&gaps[5]);
                let got: Vec<RawDoc> = Splitter::new(io::BufReader::with_capacity(cap, text.as_bytes()), Format::Json)
                    .collect::<Result<_, _>>()
                    .unwrap();
                prop_assert_eq!(got.len(), docs.len());
                for ((raw, want), start) in got.iter().zip(&docs).zip(&starts) {
                    prop_assert_eq!(raw.offset, *start);
                    prop_assert_eq!(raw.line, 1 + newlines(&text.as_bytes()[..*start as usize]));
                    let parsed: Value = serde_json::from_slice(&raw.bytes).unwrap();
                    prop_assert_eq!(&parsed, want);
                }
            }

            /// YAML streams split at markers give the documents the whole-stream parser sees.
            #[test]
            fn yaml_streams_split_like_the_parser(docs in prop::collection::vec(object(), 1..5)) {
                let mut text = String::new();
                for d in &docs {
                    text.push_str("---\n");
                    text.push_str(&olmkit_core::docs::to_yaml("doc", d).unwrap());
                }
                let whole = olmkit_core::docs::parse_documents("t", text.as_bytes()).unwrap();
                let mut pieces = Vec::new();
                for raw in Splitter::new(io::BufReader::new(text.as_bytes()), Format::Yaml) {
                    let raw = raw.unwrap();
                    let start = raw.offset as usize;
                    prop_assert_eq!(&text.as_bytes()[start..start + raw.bytes.len()], &raw.bytes[..]);
                    prop_assert_eq!(raw.line, 1 + newlines(&text.as_bytes()[..start]));
                    pieces.extend(olmkit_core::docs::parse_documents("t", &raw.bytes).unwrap());
                }
                prop_assert_eq!(pieces, whole);
            }
        }
    }
}
