//! A bundle's heavy data — its CSV and manifests — read from the FBC files on demand.
//!
//! The index keeps only where a bundle's blob lives (file, offset, length, checksum). When a
//! client asks for a bundle, its bytes are read back, checked against the checksum, parsed
//! with the catalog crate's parser and turned into the `csvJson` and `object` fields exactly
//! as operator-registry fills them:
//! - every `olm.bundle.object` property becomes one object: its `data` (base64) or the file
//!   its `ref` points at, passed through `yaml.ToJSON` — JSON is kept byte for byte, YAML is
//!   converted with sorted keys (`alpha/declcfg/load.go`, `readBundleObjects`);
//! - `csvJson` is the first object whose `kind` is `ClusterServiceVersion` (`extractCSV`);
//! - without such an object, an `olm.csv.metadata` property yields a synthetic CSV, which is
//!   then also the only object if there are none (`pkg/api/model_to_api.go`).
//!
//! Files are opened through the catalog's root ([`InputRoot`]) as when the index was built:
//! a file replaced since by a link out of the catalog, a FIFO or a hard link is refused, not
//! read, and a span is checked against the size of the opened file (and its limit) before any
//! memory is reserved for it.

use crate::gojson::{self, CsvSource};
use crate::index_pb::{Package, SourceFile, Span};
use base64::Engine;
use olmkit_catalog::declcfg::{Blob, LoadOptions, load::blob_from_value};
use olmkit_catalog::property;
use olmkit_core::confine::{
    CATALOG_DOCUMENT, CATALOG_YAML_FILE, InputRoot, MANIFEST_FILE, ReadConfinedError,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// The bytes of an `olm.bundle.object` could not be read. The texts follow opm's
/// (`alpha/declcfg/load.go`), which findings and served errors quote.
#[derive(Debug, Error)]
pub enum ReadBundleObjectError {
    /// Both `data` and `ref` are set.
    #[error("fields 'ref' and 'data' are mutually exclusive")]
    DataAndRef,
    /// `data` is not standard base64.
    #[error("illegal base64 data: {0}")]
    Base64(#[source] base64::DecodeError),
    /// `ref` is an absolute path.
    #[error("reference must be a relative path")]
    AbsoluteRef,
    /// `ref` climbs out of the catalog root.
    #[error("open {0}: invalid argument (outside the catalog)")]
    OutsideCatalog(String),
    /// The referenced file could not be read.
    #[error("open {}: {source}", path.display())]
    Open {
        /// The file, relative to the catalog root.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The referenced file may not be read: a link out of the catalog, not a regular file,
    /// hard-linked, or over [`MANIFEST_FILE`].
    #[error(transparent)]
    Refused(ReadConfinedError),
}

/// An object's bytes could not be converted to JSON like `yaml.ToJSON` does.
#[derive(Debug, Error)]
pub enum ObjectToJsonError {
    /// JSON-looking bytes that are not UTF-8.
    #[error("object is not UTF-8 text")]
    NotUtf8,
    /// Neither JSON nor YAML. The text is the parser's message alone (no file name), as the
    /// callers already say which file and object.
    #[error("{}", .0.message)]
    Parse(olmkit_core::docs::ParseDocumentError),
}

/// A bundle's payload could not be read.
#[derive(Debug, Error)]
pub enum ReadPayloadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file may not be read (a link out of the catalog, not a regular file, hard-linked),
    /// or the span is larger than a document may be.
    #[error(transparent)]
    Refused(ReadConfinedError),
    /// The bytes are not what the index recorded: the catalog changed after it was indexed.
    #[error(
        "{file}: the bytes at offset {offset} no longer match the catalog index (the catalog changed after it was indexed; rebuild the index or restart the server)"
    )]
    Stale {
        /// File, relative to the catalog root.
        file: String,
        /// Offset of the blob.
        offset: u64,
    },
    /// The blob does not parse or is not what was expected.
    #[error("{file}: document {document}: {message}")]
    Blob {
        /// File, relative to the catalog root.
        file: String,
        /// Document index in the file.
        document: u32,
        /// What went wrong.
        message: String,
    },
}

/// `csvJson` and `object` of a bundle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Payload {
    /// The CSV as JSON ("" when the bundle has none).
    pub csv_json: String,
    /// All objects as JSON.
    pub objects: Vec<String>,
}

/// Where to read blobs from.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// Catalog root directory.
    pub root: &'a Path,
    /// The index's file table.
    pub files: &'a [SourceFile],
}

fn file_of<'a>(src: &Source<'a>, span: &Span) -> Result<&'a SourceFile, ReadPayloadError> {
    src.files
        .get(span.file as usize)
        .ok_or_else(|| ReadPayloadError::Blob {
            file: format!("file #{}", span.file),
            document: span.document,
            message: "the index points at a file it does not list".into(),
        })
}

fn refused(e: ReadConfinedError) -> ReadPayloadError {
    match e {
        ReadConfinedError::Io { path, source } => ReadPayloadError::Io { path, source },
        other => ReadPayloadError::Refused(other),
    }
}

/// The catalog's root, opened.
fn open_root(src: &Source<'_>) -> Result<InputRoot, ReadPayloadError> {
    InputRoot::new(src.root).map_err(|e| refused(e.into()))
}

/// Reads a span's bytes and checks them against the recorded checksum.
pub fn read_span(src: &Source<'_>, span: &Span) -> Result<Vec<u8>, ReadPayloadError> {
    read_span_in(&open_root(src)?, src, span)
}

fn read_span_in(
    root: &InputRoot,
    src: &Source<'_>,
    span: &Span,
) -> Result<Vec<u8>, ReadPayloadError> {
    let file = file_of(src, span)?;
    let path = src.root.join(&file.path);
    let stale = || ReadPayloadError::Stale {
        file: file.path.clone(),
        offset: span.offset,
    };
    let opened = root.open(&path).map_err(refused)?;
    // A blob is one document, or (loaded whole) one YAML file: never more than their limits,
    // whatever an index file says.
    let limit = if span.whole_file {
        CATALOG_YAML_FILE
    } else {
        CATALOG_DOCUMENT
    };
    if span.length > limit.bytes {
        return Err(ReadPayloadError::Refused(ReadConfinedError::TooLarge {
            path,
            size: span.length,
            limit,
        }));
    }
    if span
        .offset
        .checked_add(span.length)
        .is_none_or(|end| end > opened.len())
    {
        return Err(stale());
    }
    let len = usize::try_from(span.length).map_err(|_| stale())?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|_| {
        ReadPayloadError::Refused(ReadConfinedError::OutOfMemory {
            path: path.clone(),
            size: span.length,
        })
    })?;
    buf.resize(len, 0);
    opened
        .file()
        .read_exact_at(&mut buf, span.offset)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                stale()
            } else {
                ReadPayloadError::Io {
                    path: path.clone(),
                    source: e,
                }
            }
        })?;
    if !span.sha256.is_empty() && Sha256::digest(&buf).as_slice() != span.sha256.as_slice() {
        return Err(stale());
    }
    Ok(buf)
}

/// Reads and parses the blob at `span` (objects kept).
pub fn read_blob(src: &Source<'_>, span: &Span) -> Result<Blob, ReadPayloadError> {
    read_blob_in(&open_root(src)?, src, span)
}

fn read_blob_in(root: &InputRoot, src: &Source<'_>, span: &Span) -> Result<Blob, ReadPayloadError> {
    let file = file_of(src, span)?;
    let bytes = read_span_in(root, src, span)?;
    let err = |message: String| ReadPayloadError::Blob {
        file: file.path.clone(),
        document: span.document,
        message,
    };
    let mut docs =
        olmkit_core::docs::parse_documents(&file.path, &bytes).map_err(|e| err(e.message))?;
    let pick = if span.whole_file {
        span.document as usize
    } else {
        0
    };
    if pick >= docs.len() || (!span.whole_file && docs.len() != 1) {
        return Err(err(
            "the document recorded in the catalog index is gone".into()
        ));
    }
    let doc = docs.swap_remove(pick);
    blob_from_value(doc, file.yaml, &LoadOptions::default()).map_err(|e| err(e.to_string()))
}

/// Resolves an `olm.bundle.object` `ref` like Go's `fs.FS`: relative to the directory of the
/// file holding the blob, and never outside the catalog root.
fn resolve_ref(blob_file: &str, reference: &str) -> Result<PathBuf, ReadBundleObjectError> {
    if Path::new(reference).is_absolute() {
        return Err(ReadBundleObjectError::AbsoluteRef);
    }
    let dir = Path::new(blob_file).parent().unwrap_or(Path::new(""));
    let joined = dir.join(reference);
    let mut out: Vec<&std::ffi::OsStr> = Vec::new();
    for c in joined.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if out.pop().is_none() {
                    return Err(ReadBundleObjectError::OutsideCatalog(reference.to_string()));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ReadBundleObjectError::AbsoluteRef);
            }
        }
    }
    Ok(out.iter().collect())
}

/// Go's `base64.StdEncoding` (padding required, non-zero trailing bits tolerated), which
/// `encoding/json` uses for `[]byte` fields.
const GO_STD_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// The raw bytes of one `olm.bundle.object` property value. A `ref` is read through the
/// catalog's `root` (see [`InputRoot`]), at most [`MANIFEST_FILE`].
pub fn object_bytes(
    value: &Value,
    root: &InputRoot,
    blob_file: &str,
) -> Result<Vec<u8>, ReadBundleObjectError> {
    let data = value
        .get("data")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let reference = value
        .get("ref")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    match (data, reference) {
        (Some(_), Some(_)) => Err(ReadBundleObjectError::DataAndRef),
        (Some(data), None) => {
            // Go's base64 decoder skips line breaks inside the data.
            let cleaned: std::borrow::Cow<'_, str> = if data.contains(['\r', '\n']) {
                data.replace(['\r', '\n'], "").into()
            } else {
                data.into()
            };
            GO_STD_BASE64
                .decode(cleaned.as_bytes())
                .map_err(ReadBundleObjectError::Base64)
        }
        (None, Some(reference)) => {
            let rel = resolve_ref(blob_file, reference)?;
            root.open(&root.path().join(&rel))
                .and_then(|f| f.read_to_end(MANIFEST_FILE))
                .map_err(|e| match e {
                    ReadConfinedError::Io { source, .. } => {
                        ReadBundleObjectError::Open { path: rel, source }
                    }
                    other => ReadBundleObjectError::Refused(other),
                })
        }
        (None, None) => Ok(Vec::new()),
    }
}

/// `k8s.io/apimachinery/pkg/util/yaml.ToJSON`: JSON (first non-blank byte `{`) is returned as
/// is, anything else is parsed as YAML and re-encoded with sorted keys.
pub fn object_to_json(bytes: Vec<u8>, what: &str) -> Result<String, ObjectToJsonError> {
    let json_prefix = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    if json_prefix {
        return String::from_utf8(bytes).map_err(|_| ObjectToJsonError::NotUtf8);
    }
    let docs =
        olmkit_core::docs::parse_documents(what, &bytes).map_err(ObjectToJsonError::Parse)?;
    Ok(match docs.into_iter().next() {
        Some(v) => olmkit_core::gojson::marshal(&v),
        None => "null".into(),
    })
}

/// The `kind` of a JSON object, if it parses.
fn kind_of(object: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: Option<Value>,
    }
    let k: Kind = serde_json::from_str(object).ok()?;
    k.kind.and_then(|v| v.as_str().map(String::from))
}

/// Computes `csvJson` and `object` for a bundle blob.
pub fn bundle_payload(
    src: &Source<'_>,
    span: &Span,
    package: &Package,
    version: &str,
) -> Result<Payload, ReadPayloadError> {
    let file = file_of(src, span)?;
    let root = open_root(src)?;
    let Blob::Bundle(bundle) = read_blob_in(&root, src, span)? else {
        return Err(ReadPayloadError::Blob {
            file: file.path.clone(),
            document: span.document,
            message: "the catalog index points at a blob that is not an olm.bundle".into(),
        });
    };
    let err = |message: String| ReadPayloadError::Blob {
        file: file.path.clone(),
        document: span.document,
        message: format!(
            "package {:?}, bundle {:?}: {message}",
            bundle.package, bundle.name
        ),
    };
    let mut objects = Vec::new();
    for (i, p) in bundle.properties.iter().enumerate() {
        if p.type_ != property::BUNDLE_OBJECT {
            continue;
        }
        let bytes = object_bytes(&p.value, &root, &file.path)
            .map_err(|e| err(format!("get data for bundle object at index {i}: {e}")))?;
        objects.push(
            object_to_json(bytes, &file.path)
                .map_err(|e| err(format!("convert bundle object at index {i} to JSON: {e}")))?,
        );
    }
    let mut csv_json = objects
        .iter()
        .find(|o| kind_of(o).as_deref() == Some("ClusterServiceVersion"))
        .cloned()
        .unwrap_or_default();
    if csv_json.is_empty() {
        let metas: Vec<&Value> = bundle
            .properties
            .iter()
            .filter(|p| p.type_ == property::CSV_METADATA)
            .map(|p| &p.value)
            .collect();
        if let [meta] = metas.as_slice() {
            csv_json = gojson::synthetic_csv(&CsvSource {
                name: &bundle.name,
                version,
                metadata: Some(meta),
                related_images: bundle
                    .related_images
                    .iter()
                    .map(|r| (r.name.as_str(), r.image.as_str()))
                    .collect(),
                package_description: &package.description,
                package_icon: package.has_icon.then_some((
                    package.icon_base64.as_str(),
                    package.icon_media_type.as_str(),
                )),
            })
            .map_err(|e| err(e.to_string()))?;
            if objects.is_empty() {
                objects.push(csv_json.clone());
            }
        }
    }
    Ok(Payload { csv_json, objects })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn refs_stay_inside_the_catalog() {
        assert_eq!(
            resolve_ref("a/b.json", "c.yaml").unwrap(),
            PathBuf::from("a/c.yaml")
        );
        assert_eq!(
            resolve_ref("a/b.json", "../c.yaml").unwrap(),
            PathBuf::from("c.yaml")
        );
        assert!(resolve_ref("a/b.json", "../../c.yaml").is_err());
        assert!(resolve_ref("a/b.json", "/etc/passwd").is_err());
    }

    #[test]
    fn objects_decode_like_opm() {
        let root = InputRoot::new(Path::new("/")).unwrap();
        let v =
            json!({"data": base64::engine::general_purpose::STANDARD.encode(b"{\"kind\": \"X\"}")});
        assert_eq!(object_bytes(&v, &root, "f").unwrap(), b"{\"kind\": \"X\"}");
        assert!(object_bytes(&json!({"data": "!!"}), &root, "f").is_err());
        assert!(object_bytes(&json!({"data": "e30=", "ref": "x"}), &root, "f").is_err());
        // JSON is kept as is, YAML is converted with sorted keys and Go escaping.
        assert_eq!(
            object_to_json(b" {\"b\": 1, \"a\": 2}".to_vec(), "t").unwrap(),
            " {\"b\": 1, \"a\": 2}"
        );
        assert_eq!(
            object_to_json(b"kind: X\napiVersion: v1\nx: <y>\n".to_vec(), "t").unwrap(),
            r#"{"apiVersion":"v1","kind":"X","x":"\u003cy\u003e"}"#
        );
        assert_eq!(
            kind_of(r#"{"kind":"ClusterServiceVersion"}"#).as_deref(),
            Some("ClusterServiceVersion")
        );
        assert_eq!(kind_of("not json"), None);
    }
}
