//! Reading File-Based Catalog blobs from files and directories, the way `opm` does.
//!
//! A catalog directory is walked recursively in lexical order; every regular file (or symlink
//! to one) that no `.indexignore` excludes is parsed as a stream of YAML or JSON documents, and
//! each document becomes one [`Blob`]. Like opm, the file extension does not matter: a stray
//! `README.md` in a catalog breaks `opm serve` too, so it is reported here rather than hidden.
//! `.indexignore` files use gitignore syntax and apply to their own directory and below.
//!
//! The loader only parses: a catalog with broken graphs loads fine and the validator says what
//! is wrong. It fails on unreadable files, text that is neither YAML nor JSON, documents that
//! are not objects, blobs without a `schema`, and known blobs whose fields have the wrong JSON
//! types, always naming the file (and the document index inside it).
//!
//! Every file is opened through [`olmkit_core::confine::InputRoot`] (relative to the catalog
//! directory, no link out of it, a regular file with one link) and read from that descriptor.
//! A YAML file is parsed whole, so it may have at most [`CATALOG_YAML_FILE`] (checked from the
//! descriptor before reading); a JSON stream larger than that is read one document at a time,
//! each at most [`CATALOG_DOCUMENT`], so a multi-gigabyte `render -o json` file loads in the
//! memory of its largest blob. Duplicate YAML keys and the other leniencies of Go's decoder
//! are reported with [`olmkit_core::docs::warn`] (or kept in [`Origins::warnings`] for a
//! validator, [`LoadOptions::keep_warnings`]).

use super::{Blob, Bundle, DeclarativeConfig, Meta};
use olmkit_core::confine::{
    CATALOG_DOCUMENT, CATALOG_YAML_FILE, InputFile, InputRoot, ReadConfinedError,
};
use olmkit_core::docs::{ParseWarning, parse_documents_lenient, warn};
use rayon::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Name of the ignore files honoured while walking a catalog.
pub const INDEX_IGNORE: &str = ".indexignore";

/// A catalog could not be loaded.
#[derive(Debug, Error)]
pub enum LoadCatalogError {
    /// The root does not exist or is not a directory.
    #[error("{0}: not a catalog directory (no such directory)")]
    NotADirectory(PathBuf),
    /// Walking the directory failed (permissions, a bad `.indexignore`...).
    #[error("cannot walk {path}: {message}")]
    Walk {
        /// Where.
        path: PathBuf,
        /// What the walker said.
        message: String,
    },
    /// A symbolic link in the catalog leads outside it (or nowhere).
    #[error(transparent)]
    Escape(#[from] olmkit_core::confine::ConfineError),
    /// A file may not be read: not a regular file (a FIFO), hard-linked, or too large.
    #[error(transparent)]
    Input(ReadConfinedError),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not a YAML or JSON document stream.
    #[error(transparent)]
    Parse(#[from] olmkit_core::docs::ParseDocumentError),
    /// A document could not be turned into a blob.
    #[error("{file}: document {index}: {message}")]
    Blob {
        /// The file, relative to the catalog root when loading a directory.
        file: String,
        /// Index of the document in the file (0-based).
        index: usize,
        /// What is wrong, in opm's words where opm has some (`parse bundle: ...`).
        message: String,
    },
}

impl From<ReadConfinedError> for LoadCatalogError {
    fn from(e: ReadConfinedError) -> Self {
        match e {
            ReadConfinedError::Confine(c) => LoadCatalogError::Escape(c),
            other => LoadCatalogError::Input(other),
        }
    }
}

/// A parsed document could not be turned into a blob. The texts follow opm's where opm has
/// some; [`LoadCatalogError::Blob`] carries them as its message.
#[derive(Debug, Error)]
pub enum ParseBlobError {
    /// The document is not an object.
    #[error("expected a blob (a JSON/YAML object), found {0}")]
    NotAnObject(&'static str),
    /// Top-level keys that differ only by case (opm matches them case-insensitively).
    #[error("{}", .0.join(", "))]
    DuplicateKeys(Vec<String>),
    /// A meta key (`schema`, `package`, `name`) holds something other than a string.
    #[error("expected value for key {key:?} to be a string, got {found}")]
    NotAString {
        /// The key as spelled in the document.
        key: String,
        /// What the value is (`a number`...).
        found: &'static str,
    },
    /// The object has no `schema`.
    #[error("object '{0}' is missing root schema field")]
    MissingSchema(String),
    /// A blob of a known schema has fields of the wrong JSON types.
    #[error("parse {what}: {source}")]
    Typed {
        /// The blob kind (`package`, `bundle`...).
        what: &'static str,
        /// What serde said.
        source: serde_json::Error,
    },
}

/// Options of the loaders.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Keep `olm.bundle.object` properties (base64 manifests, often most of a catalog's bytes).
    /// Validation and graph work do not need them; dropping them keeps memory proportional to
    /// the graph instead of to the catalog size. Dropped objects are counted in
    /// [`Bundle::omitted_objects`].
    pub keep_bundle_objects: bool,
    /// Leave what had to be read leniently (duplicate YAML keys...) in [`Origins::warnings`]
    /// for the caller to report, instead of reporting it with [`olmkit_core::docs::warn`]
    /// (for a validator that turns it into findings).
    pub keep_warnings: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            keep_bundle_objects: true,
            keep_warnings: false,
        }
    }
}

impl LoadOptions {
    /// Options that drop `olm.bundle.object` payloads (for validation, graphs, explain).
    pub fn graph_only() -> Self {
        Self {
            keep_bundle_objects: false,
            keep_warnings: false,
        }
    }
}

/// One blob and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct BlobAt {
    /// File, relative to the catalog root (or the name given to [`load_bytes`]).
    pub file: String,
    /// Index of the document in the file.
    pub index: usize,
    /// The blob.
    pub blob: Blob,
}

fn rel_name(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Lists the files of a catalog directory that opm would load: recursively, in lexical order,
/// skipping `.indexignore` files and everything they exclude. Like opm (`fs.WalkDir`), linked
/// directories are not descended and linked files are read; unlike opm, a link that leads
/// outside the catalog is an error naming it (its target would end up in the catalog served or
/// rendered: a credential file, `/etc/passwd`), and so is a file that is not a regular file
/// (a FIFO would block opm forever), one with several hard links (see
/// [`olmkit_core::confine::HardLinks`]) and a file over [`CATALOG_YAML_FILE`] that is not a
/// JSON stream: each is opened through the root and checked on its descriptor here, before
/// any reader (this crate's or the catalog server's) reads it.
pub fn catalog_files(root: &Path) -> Result<Vec<PathBuf>, LoadCatalogError> {
    if !root.is_dir() {
        return Err(LoadCatalogError::NotADirectory(root.to_path_buf()));
    }
    let confine = InputRoot::new(root)?;
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .parents(false)
        .add_custom_ignore_filename(INDEX_IGNORE)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let mut out = Vec::new();
    for entry in walker {
        let entry = entry.map_err(|e| LoadCatalogError::Walk {
            path: root.to_path_buf(),
            message: e.to_string(),
        })?;
        if entry.depth() == 0 {
            continue;
        }
        let Some(ft) = entry.file_type() else {
            continue;
        };
        if entry.file_name() == INDEX_IGNORE {
            continue;
        }
        if ft.is_dir() || (ft.is_symlink() && confine.inspect(entry.path())?.is_dir()) {
            continue;
        }
        let file = confine.open(entry.path())?;
        if file.len() > CATALOG_YAML_FILE.bytes && !json_stream(&file)? {
            file.check_size(CATALOG_YAML_FILE)?;
        }
        out.push(entry.into_path());
    }
    Ok(out)
}

/// Whether an opened file starts like a JSON stream (read at its start without moving its
/// position).
fn json_stream(file: &InputFile) -> Result<bool, ReadConfinedError> {
    use std::os::unix::fs::FileExt;
    let mut prefix = vec![0u8; 64 << 10];
    let n = file
        .file()
        .read_at(&mut prefix, 0)
        .map_err(|source| ReadConfinedError::Io {
            path: file.path().to_path_buf(),
            source,
        })?;
    Ok(looks_like_json(&prefix[..n]))
}

/// Parses one file's bytes into blobs. `name` is used in errors and in [`BlobAt::file`].
/// Leniencies (duplicate YAML keys...) are reported with [`olmkit_core::docs::warn`].
pub fn load_bytes(
    name: &str,
    bytes: &[u8],
    opts: &LoadOptions,
) -> Result<Vec<BlobAt>, LoadCatalogError> {
    let (blobs, warnings) = load_bytes_warned(name, bytes, opts)?;
    warnings.iter().for_each(warn);
    Ok(blobs)
}

/// Parsed blobs, and what had to be read leniently.
type Loaded = (Vec<BlobAt>, Vec<ParseWarning>);

/// [`load_bytes`], returning the warnings.
fn load_bytes_warned(
    name: &str,
    bytes: &[u8],
    opts: &LoadOptions,
) -> Result<Loaded, LoadCatalogError> {
    match load_utf8_bytes(name, bytes, opts) {
        // Go's decoders replace each invalid UTF-8 byte with U+FFFD instead of failing. Checked
        // only after a failure, so that valid files (all of a big catalog) are not scanned twice.
        Err(_) if std::str::from_utf8(bytes).is_err() => {
            load_utf8_bytes(name, replace_invalid_utf8(bytes).as_bytes(), opts)
        }
        other => other,
    }
}

fn load_utf8_bytes(
    name: &str,
    bytes: &[u8],
    opts: &LoadOptions,
) -> Result<Loaded, LoadCatalogError> {
    let from_yaml = !looks_like_json(bytes);
    if !from_yaml && let Some(blobs) = fast_json::load(name, bytes, opts)? {
        return Ok((blobs, Vec::new()));
    }
    let (docs, warnings) = parse_documents_lenient(name, bytes)?;
    if docs.is_empty() && from_yaml && !bytes.is_empty() {
        // opm's YAML decoder reads a whitespace- or comment-only file as one empty object.
        return Err(LoadCatalogError::Blob {
            file: name.to_string(),
            index: 0,
            message: ParseBlobError::MissingSchema(String::new()).to_string(),
        });
    }
    let mut out = Vec::with_capacity(docs.len());
    for (index, doc) in docs.into_iter().enumerate() {
        let blob = blob_from_value(doc, from_yaml, opts).map_err(|e| LoadCatalogError::Blob {
            file: name.to_string(),
            index,
            message: e.to_string(),
        })?;
        out.push(BlobAt {
            file: name.to_string(),
            index,
            blob,
        });
    }
    Ok((out, warnings))
}

/// Reads and parses one file a user named directly (`render FILE`): symlinks followed, as
/// named, and the descriptor checked ([`olmkit_core::confine::open_named`]); `name` is used in
/// errors. Files found under a catalog directory are read with [`load_file_in`].
pub fn load_file(
    path: &Path,
    name: &str,
    opts: &LoadOptions,
) -> Result<Vec<BlobAt>, LoadCatalogError> {
    let (blobs, warnings) = read_file(olmkit_core::confine::open_named(path)?, name, opts)?;
    warnings.iter().for_each(warn);
    Ok(blobs)
}

/// Reads and parses the file `path` of the catalog directory `root`, confined to it (see the
/// module docs); `name` is used in errors.
pub fn load_file_in(
    root: &InputRoot,
    path: &Path,
    name: &str,
    opts: &LoadOptions,
) -> Result<Vec<BlobAt>, LoadCatalogError> {
    let (blobs, warnings) = read_file(root.open(path)?, name, opts)?;
    warnings.iter().for_each(warn);
    Ok(blobs)
}

/// Parses an opened file: whole when it is at most [`CATALOG_YAML_FILE`], else (only a JSON
/// stream may be larger) one document at a time.
fn read_file(file: InputFile, name: &str, opts: &LoadOptions) -> Result<Loaded, LoadCatalogError> {
    if file.len() > CATALOG_YAML_FILE.bytes {
        if !json_stream(&file)? {
            file.check_size(CATALOG_YAML_FILE)?;
        }
        return Ok((
            json_docs::load(&file, name, opts, CATALOG_DOCUMENT)?,
            Vec::new(),
        ));
    }
    let bytes = file.read_to_end(CATALOG_YAML_FILE)?;
    load_bytes_warned(name, &bytes, opts)
}

/// Walks a catalog directory and calls `f` for every blob, file by file in lexical order.
/// Only one file's blobs are in memory at a time. The first error (of the loader or of `f`)
/// stops the walk.
pub fn walk_dir<E: From<LoadCatalogError>>(
    root: &Path,
    opts: &LoadOptions,
    mut f: impl FnMut(BlobAt) -> Result<(), E>,
) -> Result<(), E> {
    let confine = InputRoot::new(root).map_err(LoadCatalogError::from)?;
    for path in catalog_files(root)? {
        let name = rel_name(root, &path);
        for blob in load_file_in(&confine, &path, &name, opts)? {
            f(blob)?;
        }
    }
    Ok(())
}

/// Loads a whole catalog directory, parsing files in parallel. Blobs keep the file order of
/// the walk, so the result is the same on every run.
pub fn load_dir(root: &Path, opts: &LoadOptions) -> Result<DeclarativeConfig, LoadCatalogError> {
    Ok(load_dir_with_files(root, opts)?.0)
}

/// Like [`load_dir`], and also returns, for every blob pushed, the file it came from (packages,
/// channels, bundles, deprecations, others: each list in the order of the config's lists).
pub fn load_dir_with_files(
    root: &Path,
    opts: &LoadOptions,
) -> Result<(DeclarativeConfig, Origins), LoadCatalogError> {
    let files = catalog_files(root)?;
    let confine = InputRoot::new(root)?;
    let parsed: Vec<Result<Loaded, LoadCatalogError>> = files
        .par_iter()
        .map(|path| read_file(confine.open(path)?, &rel_name(root, path), opts))
        .collect();
    let mut cfg = DeclarativeConfig::default();
    let mut origins = Origins::default();
    for file in parsed {
        let (blobs, warnings) = file?;
        if !opts.keep_warnings {
            warnings.iter().for_each(warn);
        }
        origins.warnings.extend(warnings);
        for at in blobs {
            let list = match &at.blob {
                Blob::Package(_) => &mut origins.packages,
                Blob::Channel(_) => &mut origins.channels,
                Blob::Bundle(_) => &mut origins.bundles,
                Blob::Deprecation(_) => &mut origins.deprecations,
                Blob::Other(_) => &mut origins.others,
            };
            list.push(at.file);
            cfg.push(at.blob);
        }
    }
    Ok((cfg, origins))
}

/// The source file of every blob of a [`DeclarativeConfig`], list by list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origins {
    /// Files of `packages[i]`.
    pub packages: Vec<String>,
    /// Files of `channels[i]`.
    pub channels: Vec<String>,
    /// Files of `bundles[i]`.
    pub bundles: Vec<String>,
    /// Files of `deprecations[i]`.
    pub deprecations: Vec<String>,
    /// Files of `others[i]`.
    pub others: Vec<String>,
    /// What had to be read leniently, as Go's decoder reads it (duplicate keys...), each
    /// naming its file and line.
    pub warnings: Vec<ParseWarning>,
}

/// Decodes UTF-8 like Go's `utf8.DecodeRune` loop: every byte that does not start a valid
/// sequence becomes one U+FFFD.
fn replace_invalid_utf8(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 16);
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push('\u{FFFD}');
                rest = &bad[1..];
            }
        }
    }
    out
}

fn looks_like_json(bytes: &[u8]) -> bool {
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    matches!(
        text.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{') | Some(b'[')
    )
}

fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        let mut end = 200;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    } else {
        s
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Makes the top-level keys `schema`, `package` and `name` canonical: opm (Go's encoding/json)
/// matches them case-insensitively, so `Schema:` works there and must work here. Two keys that
/// differ only by case are an error, as in opm.
fn canonical_meta_keys(obj: &mut Map<String, Value>) -> Result<(), ParseBlobError> {
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for k in obj.keys() {
        seen.entry(k.to_lowercase()).or_default().push(k.clone());
    }
    let dups: Vec<String> = seen
        .iter()
        .filter(|(_, keys)| keys.len() > 1)
        .map(|(folded, keys)| {
            let mut keys = keys.clone();
            keys.sort();
            format!("duplicate keys for key {folded:?}: [{}]", keys.join(" "))
        })
        .collect();
    if !dups.is_empty() {
        return Err(ParseBlobError::DuplicateKeys(dups));
    }
    // `package` and `name` of known schemas are checked by their typed parse, which reports
    // them as `parse <schema>: ...` like opm's addMeta does.
    for canonical in ["schema"] {
        if let Some(key) = seen.get(canonical).and_then(|keys| keys.first())
            && let Some(v) = obj.get(key)
            && !v.is_string()
        {
            return Err(ParseBlobError::NotAString {
                key: key.clone(),
                found: json_type(v),
            });
        }
    }
    Ok(())
}

/// Renames top-level keys that match a known field case-insensitively to the field's spelling.
fn canonicalize_fields(obj: &mut Map<String, Value>, fields: &[&str]) {
    let renames: Vec<(String, &str)> = obj
        .keys()
        .filter_map(|k| {
            fields
                .iter()
                .find(|f| f.eq_ignore_ascii_case(k) && **f != k)
                .map(|f| (k.clone(), *f))
        })
        .collect();
    for (from, to) in renames {
        if let Some(v) = obj.remove(&from) {
            obj.insert(to.to_string(), v);
        }
    }
}

/// Recursively sorts the keys of every object: opm converts YAML to JSON through Go maps, so
/// values read from YAML come out with sorted keys.
fn sort_value_keys(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (k, mut val) in entries {
                sort_value_keys(&mut val);
                map.insert(k, val);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(sort_value_keys),
        _ => {}
    }
}

fn typed<T: DeserializeOwned>(what: &'static str, v: Value) -> Result<T, ParseBlobError> {
    serde_json::from_value(v).map_err(|source| ParseBlobError::Typed { what, source })
}

const PACKAGE_FIELDS: &[&str] = &[
    "schema",
    "name",
    "defaultChannel",
    "icon",
    "description",
    "properties",
];
const CHANNEL_FIELDS: &[&str] = &["schema", "name", "package", "entries", "properties"];
const BUNDLE_FIELDS: &[&str] = &[
    "schema",
    "name",
    "package",
    "image",
    "properties",
    "relatedImages",
];
const DEPRECATION_FIELDS: &[&str] = &["schema", "package", "entries"];

/// Turns one parsed document into a blob.
pub fn blob_from_value(
    doc: Value,
    from_yaml: bool,
    opts: &LoadOptions,
) -> Result<Blob, ParseBlobError> {
    blob_from_value_counted(doc, from_yaml, opts, 0)
}

fn blob_from_value_counted(
    doc: Value,
    from_yaml: bool,
    opts: &LoadOptions,
    already_omitted: usize,
) -> Result<Blob, ParseBlobError> {
    let Value::Object(mut obj) = doc else {
        return Err(ParseBlobError::NotAnObject(json_type(&doc)));
    };
    canonical_meta_keys(&mut obj)?;
    let get = |obj: &Map<String, Value>, key: &str| -> String {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let schema = get(&obj, "schema");
    match schema.as_str() {
        "" => Err(ParseBlobError::MissingSchema(short_json(&Value::Object(
            obj,
        )))),
        super::SCHEMA_PACKAGE => {
            canonicalize_fields(&mut obj, PACKAGE_FIELDS);
            if from_yaml {
                sort_property_values(&mut obj);
            }
            typed("package", Value::Object(obj)).map(Blob::Package)
        }
        super::SCHEMA_CHANNEL => {
            canonicalize_fields(&mut obj, CHANNEL_FIELDS);
            if from_yaml {
                sort_property_values(&mut obj);
            }
            typed("channel", Value::Object(obj)).map(Blob::Channel)
        }
        super::SCHEMA_BUNDLE => {
            canonicalize_fields(&mut obj, BUNDLE_FIELDS);
            let omitted = if opts.keep_bundle_objects {
                0
            } else {
                drop_bundle_objects(&mut obj)
            };
            if from_yaml {
                sort_property_values(&mut obj);
            }
            let mut b: Bundle = typed("bundle", Value::Object(obj))?;
            b.omitted_objects = omitted + already_omitted;
            Ok(Blob::Bundle(b))
        }
        super::SCHEMA_DEPRECATIONS => {
            canonicalize_fields(&mut obj, DEPRECATION_FIELDS);
            typed("deprecations", Value::Object(obj)).map(Blob::Deprecation)
        }
        _ => {
            for key in ["package", "name"] {
                if let Some((k, v)) = obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(key))
                    && !v.is_string()
                {
                    return Err(ParseBlobError::NotAString {
                        key: k.clone(),
                        found: json_type(v),
                    });
                }
            }
            let package = get(&obj, "package");
            let name = get(&obj, "name");
            // opm keeps unknown blobs as re-encoded Go maps: same content, keys sorted.
            let mut blob = Value::Object(obj);
            sort_value_keys(&mut blob);
            Ok(Blob::Other(Meta {
                schema,
                package,
                name,
                blob,
            }))
        }
    }
}

/// The JSON fast path: documents are read straight from the bytes with a visitor that, when
/// objects are not kept, checks `olm.bundle.object` data in place (borrowed, never copied) and
/// drops it; only the small rest of each blob becomes a `Value`. Opm-rendered catalogs are
/// almost all such payloads, so this is what makes a 1.6 GB catalog cheap to validate.
mod fast_json {
    use super::{
        BlobAt, LoadCatalogError, LoadOptions, ParseBlobError, blob_from_value_counted,
        looks_like_base64,
    };
    use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Value};
    use std::borrow::Cow;
    use std::fmt;

    /// A parsed document: an object (with objects already dropped) or the kind of non-object.
    pub(super) enum Doc {
        Object(Map<String, Value>, usize),
        NotObject(&'static str),
    }

    struct DocSeed {
        drop_objects: bool,
    }

    impl<'de> DeserializeSeed<'de> for DocSeed {
        type Value = Doc;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Doc, D::Error> {
            d.deserialize_any(DocVisitor {
                drop_objects: self.drop_objects,
            })
        }
    }

    struct DocVisitor {
        drop_objects: bool,
    }

    /// One document for `StreamDeserializer` (which takes types, not seeds); `DROP` says
    /// whether valid `olm.bundle.object` data is dropped while reading.
    struct DocOf<const DROP: bool>(Doc);

    impl<'de, const DROP: bool> de::Deserialize<'de> for DocOf<DROP> {
        fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            DocSeed { drop_objects: DROP }.deserialize(d).map(DocOf)
        }
    }

    impl<'de> Visitor<'de> for DocVisitor {
        type Value = Doc;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a blob")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc, A::Error> {
            let mut obj = Map::new();
            let mut omitted = 0;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if self.drop_objects && key == "properties" {
                    let (v, n) = map.next_value_seed(PropsSeed)?;
                    omitted += n;
                    obj.insert(key.into_owned(), v);
                } else {
                    let v: Value = map.next_value()?;
                    obj.insert(key.into_owned(), v);
                }
            }
            Ok(Doc::Object(obj, omitted))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Doc::NotObject("an array"))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Doc, E> {
            Ok(Doc::NotObject("a string"))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Doc, E> {
            Ok(Doc::NotObject("a boolean"))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Doc, E> {
            Ok(Doc::NotObject("a number"))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Doc, E> {
            Ok(Doc::NotObject("a number"))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Doc, E> {
            Ok(Doc::NotObject("a number"))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Doc, E> {
            Ok(Doc::NotObject("null"))
        }
    }

    /// `properties`: an array whose `olm.bundle.object` entries with valid data are dropped
    /// (counted); anything else is kept as JSON for the typed parse to judge.
    struct PropsSeed;

    impl<'de> DeserializeSeed<'de> for PropsSeed {
        type Value = (Value, usize);
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(Value, usize), D::Error> {
            d.deserialize_any(PropsVisitor)
        }
    }

    struct PropsVisitor;

    macro_rules! passthrough {
        ($($name:ident: $t:ty),*) => {
            $(fn $name<E: de::Error>(self, v: $t) -> Result<(Value, usize), E> {
                Ok((Value::from(v), 0))
            })*
        };
    }

    impl<'de> Visitor<'de> for PropsVisitor {
        type Value = (Value, usize);
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of properties")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(Value, usize), A::Error> {
            let mut out = Vec::new();
            let mut omitted = 0;
            while let Some(p) = seq.next_element_seed(PropSeed)? {
                match p {
                    Some(v) => out.push(v),
                    None => omitted += 1,
                }
            }
            Ok((Value::Array(out), omitted))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(Value, usize), A::Error> {
            let v = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
            Ok((v, 0))
        }
        passthrough!(visit_str: &str, visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64);
        fn visit_unit<E: de::Error>(self) -> Result<(Value, usize), E> {
            Ok((Value::Null, 0))
        }
    }

    use serde::Deserialize;

    /// One property: `None` when it was a droppable bundle object.
    struct PropSeed;

    impl<'de> DeserializeSeed<'de> for PropSeed {
        type Value = Option<Value>;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
            d.deserialize_any(PropVisitor)
        }
    }

    struct PropVisitor;

    /// A JSON value whose strings stay borrowed from the input when they have no escapes.
    enum Field<'de> {
        Str(Cow<'de, str>),
        Other(Value),
    }

    impl Field<'_> {
        fn into_value(self) -> Value {
            match self {
                Field::Str(s) => Value::String(s.into_owned()),
                Field::Other(v) => v,
            }
        }
    }

    struct FieldVisitor;

    impl<'de> Visitor<'de> for FieldVisitor {
        type Value = Field<'de>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Field<'de>, E> {
            Ok(Field::Str(Cow::Borrowed(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Field<'de>, E> {
            Ok(Field::Str(Cow::Owned(v.to_string())))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Field<'de>, E> {
            Ok(Field::Str(Cow::Owned(v)))
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Field<'de>, E> {
            Ok(Field::Other(Value::from(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Field<'de>, E> {
            Ok(Field::Other(Value::from(v)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Field<'de>, E> {
            Ok(Field::Other(Value::from(v)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Field<'de>, E> {
            Ok(Field::Other(Value::from(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Field<'de>, E> {
            Ok(Field::Other(Value::Null))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field<'de>, A::Error> {
            Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Field::Other)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field<'de>, A::Error> {
            Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(Field::Other)
        }
    }

    impl<'de> Deserialize<'de> for Field<'de> {
        fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(FieldVisitor)
        }
    }

    /// The value of an `olm.bundle.object`: droppable when it is `{data: <base64>}` or
    /// `{ref: <string>}`; anything else is rebuilt as JSON for the validator.
    struct ObjectValueVisitor;

    impl<'de> Visitor<'de> for ObjectValueVisitor {
        /// `None` = droppable.
        type Value = Option<Value>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a bundle object value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
            let mut rest = Map::new();
            let mut data: Option<Field<'de>> = None;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if key == "data" {
                    data = Some(map.next_value()?);
                } else {
                    rest.insert(key.into_owned(), map.next_value()?);
                }
            }
            let droppable = match (&data, rest.get("ref")) {
                (Some(Field::Str(d)), None) => rest.is_empty() && looks_like_base64(d),
                (None, Some(Value::String(_))) => rest.len() == 1,
                _ => false,
            };
            if droppable {
                return Ok(None);
            }
            if let Some(d) = data {
                rest.insert("data".into(), d.into_value());
            }
            Ok(Some(Value::Object(rest)))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<Value>, A::Error> {
            Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Some)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<Value>, E> {
            Ok(Some(Value::Null))
        }
    }

    struct ObjectValueSeed;

    impl<'de> DeserializeSeed<'de> for ObjectValueSeed {
        type Value = Option<Value>;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
            d.deserialize_any(ObjectValueVisitor)
        }
    }

    impl<'de> Visitor<'de> for PropVisitor {
        type Value = Option<Value>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a property")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
            let mut obj = Map::new();
            let mut is_object = false;
            let mut dropped = false;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if key == "value" && is_object && !obj.contains_key("value") {
                    // type came first: look at the data in place.
                    match map.next_value_seed(ObjectValueSeed)? {
                        None => dropped = true,
                        Some(v) => {
                            obj.insert("value".into(), v);
                        }
                    }
                } else {
                    let v: Value = map.next_value()?;
                    if key == "type" && v.as_str() == Some(crate::property::BUNDLE_OBJECT) {
                        is_object = true;
                    }
                    obj.insert(key.into_owned(), v);
                }
            }
            if dropped {
                return Ok(None);
            }
            Ok(Some(Value::Object(obj)))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<Value>, A::Error> {
            Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Some)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<Value>, E> {
            Ok(Some(Value::from(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<Value>, E> {
            Ok(Some(Value::Null))
        }
    }

    /// Parses a JSON document stream; `Ok(None)` when the first document is not valid JSON
    /// (the caller then tries YAML, whose flow style looks like JSON).
    pub(super) fn load(
        name: &str,
        bytes: &[u8],
        opts: &LoadOptions,
    ) -> Result<Option<Vec<BlobAt>>, LoadCatalogError> {
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        // No size cap here (the generic parser has one, 512 MiB, because it builds a value
        // per document and keeps them all): this path keeps one document's small remainder
        // at a time, so a single-file `render -o json` of a community-sized catalog (1.7 GB)
        // loads in memory about its own size.
        // A stream deserializer finds the end of input by peeking. Asking `Deserializer::end`
        // instead builds an error at every document boundary, and serde_json locates an
        // error by scanning from the start of the slice: quadratic in the file size.
        let docs: Box<dyn Iterator<Item = serde_json::Result<Doc>>> = if opts.keep_bundle_objects {
            Box::new(
                serde_json::Deserializer::from_slice(bytes)
                    .into_iter::<DocOf<false>>()
                    .map(|d| d.map(|d| d.0)),
            )
        } else {
            Box::new(
                serde_json::Deserializer::from_slice(bytes)
                    .into_iter::<DocOf<true>>()
                    .map(|d| d.map(|d| d.0)),
            )
        };
        let mut out = Vec::new();
        for (index, doc) in docs.enumerate() {
            let doc = match doc {
                Ok(d) => d,
                Err(_) if index == 0 => return Ok(None),
                Err(e) => {
                    return Err(LoadCatalogError::Parse(
                        olmkit_core::docs::ParseDocumentError::new(
                            name,
                            format!(
                                "invalid JSON at line {} column {}: {e}",
                                e.line(),
                                e.column()
                            ),
                        ),
                    ));
                }
            };
            let blob = match doc {
                Doc::Object(obj, omitted) => {
                    blob_from_value_counted(Value::Object(obj), false, opts, omitted)
                }
                Doc::NotObject(kind) => Err(ParseBlobError::NotAnObject(kind)),
            }
            .map_err(|e| LoadCatalogError::Blob {
                file: name.to_string(),
                index,
                message: e.to_string(),
            })?;
            out.push(BlobAt {
                file: name.to_string(),
                index,
                blob,
            });
        }
        Ok(Some(out))
    }
}

/// JSON streams too large to hold whole: read from the descriptor in chunks and cut into
/// documents by matching braces (strings and escapes honoured, so the cut is exact for valid
/// JSON), each parsed by the fast path on its own, so memory holds one document (at most
/// [`CATALOG_DOCUMENT`]) and one chunk. The blobs are those of [`load_bytes`] on the whole
/// file; errors name the document's byte offset instead of a line.
mod json_docs {
    use super::{BlobAt, InputFile, LoadCatalogError, LoadOptions};
    use olmkit_core::confine::{ReadConfinedError, SizeLimit};
    use olmkit_core::docs::ParseDocumentError;
    use std::io::Read;

    const CHUNK: usize = 8 << 20;

    /// Where the scan is: inside a document from `start` (depth, string state) or between.
    #[derive(Default)]
    struct Scan {
        pos: usize,
        start: Option<usize>,
        depth: usize,
        in_str: bool,
        escaped: bool,
    }

    enum Step {
        /// A whole document: `buf[start..end]`.
        Doc(usize, usize),
        /// Read more.
        More,
        /// Something other than an object or array starts at this index.
        NotADocument(usize),
    }

    impl Scan {
        fn step(&mut self, buf: &[u8]) -> Step {
            let mut i = self.pos;
            if self.start.is_none() {
                while i < buf.len() && buf[i].is_ascii_whitespace() {
                    i += 1;
                }
                self.pos = i;
                match buf.get(i) {
                    None => return Step::More,
                    Some(b'{') | Some(b'[') => {
                        self.start = Some(i);
                        self.depth = 0;
                    }
                    Some(_) => return Step::NotADocument(i),
                }
            }
            while i < buf.len() {
                if self.in_str {
                    if self.escaped {
                        self.escaped = false;
                        i += 1;
                        continue;
                    }
                    // Base64 payloads are most of a catalog: jump to the next quote or escape.
                    match memchr::memchr2(b'"', b'\\', &buf[i..]) {
                        None => i = buf.len(),
                        Some(p) => {
                            i += p;
                            if buf[i] == b'\\' {
                                self.escaped = true;
                            } else {
                                self.in_str = false;
                            }
                            i += 1;
                        }
                    }
                    continue;
                }
                match buf[i] {
                    b'"' => self.in_str = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth = self.depth.saturating_sub(1);
                        if self.depth == 0
                            && let Some(start) = self.start.take()
                        {
                            self.pos = i + 1;
                            return Step::Doc(start, i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            self.pos = i;
            Step::More
        }

        /// The buffer lost its first `by` bytes.
        fn shift(&mut self, by: usize) {
            self.pos -= by;
            if let Some(s) = &mut self.start {
                *s -= by;
            }
        }
    }

    fn parse_err(name: &str, message: String) -> LoadCatalogError {
        LoadCatalogError::Parse(ParseDocumentError::new(name, message))
    }

    /// Parses one document of the stream (document `index`, at byte `offset` of the file).
    fn document(
        name: &str,
        opts: &LoadOptions,
        doc: &[u8],
        index: usize,
        offset: u64,
    ) -> Result<Vec<BlobAt>, LoadCatalogError> {
        // The JSON fast path alone: a later document of a stream never falls back to
        // YAML (nor does it in the whole-file parse); invalid UTF-8 is replaced as Go
        // replaces it.
        let parse = |bytes: &[u8]| super::fast_json::load(name, bytes, opts);
        let parsed = match parse(doc) {
            Ok(None) | Err(_) if std::str::from_utf8(doc).is_err() => {
                parse(super::replace_invalid_utf8(doc).as_bytes())
            }
            other => other,
        };
        match parsed {
            Ok(Some(blobs)) => Ok(blobs),
            Ok(None) => {
                let why = serde_json::from_slice::<serde::de::IgnoredAny>(doc)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                Err(parse_err(
                    name,
                    format!("document {index} at byte {offset}: invalid JSON: {why}"),
                ))
            }
            Err(LoadCatalogError::Blob { message, .. }) => Err(LoadCatalogError::Blob {
                file: name.to_string(),
                index,
                message,
            }),
            Err(LoadCatalogError::Parse(p)) => Err(parse_err(
                name,
                format!("document {index} at byte {offset}: {}", p.message),
            )),
            Err(other) => Err(other),
        }
    }

    /// Loads the JSON stream of `file` document by document, each at most `limit`.
    pub(super) fn load(
        file: &InputFile,
        name: &str,
        opts: &LoadOptions,
        limit: SizeLimit,
    ) -> Result<Vec<BlobAt>, LoadCatalogError> {
        let max = usize::try_from(limit.bytes).unwrap_or(usize::MAX);
        let io = |source: std::io::Error| {
            LoadCatalogError::from(ReadConfinedError::Io {
                path: file.path().to_path_buf(),
                source,
            })
        };
        let too_large = |size: usize| {
            LoadCatalogError::from(ReadConfinedError::TooLarge {
                path: file.path().to_path_buf(),
                size: size as u64,
                limit,
            })
        };
        let mut reader = file.file();
        let mut buf: Vec<u8> = Vec::new();
        // The file offset of buf[0].
        let mut base = 0u64;
        let mut scan = Scan::default();
        let mut at_start = true;
        let mut eof = false;
        let mut out = Vec::new();
        loop {
            match scan.step(&buf) {
                Step::Doc(start, end) => {
                    let index = out.len();
                    let offset = base + start as u64;
                    if end - start > max {
                        return Err(too_large(end - start));
                    }
                    let blobs = document(name, opts, &buf[start..end], index, offset)?;
                    out.extend(blobs.into_iter().map(|mut at| {
                        at.index = index;
                        at
                    }));
                }
                Step::NotADocument(i) => {
                    return Err(LoadCatalogError::Blob {
                        file: name.to_string(),
                        index: out.len(),
                        message: format!(
                            "expected a blob (a JSON object) at byte {}",
                            base + i as u64
                        ),
                    });
                }
                Step::More if eof => {
                    return match scan.start {
                        None => Ok(out),
                        Some(start) => Err(parse_err(
                            name,
                            format!(
                                "invalid JSON: the file ends inside the document that starts at byte {}",
                                base + start as u64
                            ),
                        )),
                    };
                }
                Step::More => {
                    // Keep only the document being read (or nothing), then read on.
                    let keep = scan.start.unwrap_or(scan.pos);
                    buf.drain(..keep);
                    base += keep as u64;
                    scan.shift(keep);
                    if buf.len() > max {
                        return Err(too_large(buf.len()));
                    }
                    buf.try_reserve(CHUNK).map_err(|_| {
                        LoadCatalogError::from(ReadConfinedError::OutOfMemory {
                            path: file.path().to_path_buf(),
                            size: (buf.len() + CHUNK) as u64,
                        })
                    })?;
                    let n = (&mut reader)
                        .take(CHUNK as u64)
                        .read_to_end(&mut buf)
                        .map_err(io)?;
                    eof = n == 0;
                    if at_start {
                        at_start = false;
                        if buf.starts_with(b"\xef\xbb\xbf") {
                            scan.pos = 3;
                        }
                    }
                }
            }
        }
    }
}

fn sort_property_values(obj: &mut Map<String, Value>) {
    if let Some(Value::Array(props)) = obj.get_mut("properties") {
        for p in props {
            if let Some(v) = p.get_mut("value") {
                sort_value_keys(v);
            }
        }
    }
}

fn drop_bundle_objects(obj: &mut Map<String, Value>) -> usize {
    let Some(Value::Array(props)) = obj.get_mut("properties") else {
        return 0;
    };
    let before = props.len();
    // Objects whose data is not even base64 are kept, so that the validator reports them
    // (opm fails to load those); the check is a single vectorisable pass over the bytes.
    props.retain(|p| {
        p.get("type").and_then(Value::as_str) != Some(crate::property::BUNDLE_OBJECT)
            || !p
                .pointer("/value/data")
                .and_then(Value::as_str)
                .is_none_or(looks_like_base64)
    });
    before - props.len()
}

fn looks_like_base64(s: &str) -> bool {
    let b = s.as_bytes();
    b.len().is_multiple_of(4)
        && b.iter().fold(true, |ok, &c| {
            ok & (c.is_ascii_alphanumeric() | (c == b'+') | (c == b'/') | (c == b'='))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use olmkit_core::confine::SizeLimit;
    use olmkit_core::docs::parse_documents;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/fbc-examples")
    }

    #[test]
    fn honours_indexignore() {
        let files = catalog_files(&fixtures().join("valid/catalogd-test-catalog")).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["catalog.yaml"]);
    }

    #[test]
    fn loads_nested_dirs_in_order() {
        let cfg = load_dir(
            &fixtures().join("valid/opm-list-index"),
            &LoadOptions::default(),
        )
        .unwrap();
        assert_eq!(cfg.package_names(), vec!["bar", "foo"]);
        assert!(!cfg.bundles.is_empty());
    }

    #[test]
    fn graph_only_drops_objects() {
        let dir = fixtures().join("valid/opm-index-declcfgs-latest");
        let full = load_dir(&dir, &LoadOptions::default()).unwrap();
        let slim = load_dir(&dir, &LoadOptions::graph_only()).unwrap();
        let count = |c: &DeclarativeConfig| {
            c.bundles
                .iter()
                .flat_map(|b| &b.properties)
                .filter(|p| p.type_ == crate::property::BUNDLE_OBJECT)
                .count()
        };
        assert!(count(&full) > 0);
        assert_eq!(count(&slim), 0);
        assert_eq!(
            slim.bundles
                .iter()
                .map(|b| b.omitted_objects)
                .sum::<usize>(),
            count(&full)
        );
    }

    #[test]
    fn parse_errors_name_the_file() {
        for (dir, want) in [
            ("parse-invalid-bundle-json", "parse bundle"),
            ("parse-invalid-package-json", "parse package"),
            ("parse-no-schema", "is missing root schema field"),
            ("parse-not-yaml-or-json", "not-yaml-or-json.txt"),
            (
                "parse-not-yaml-or-json-object",
                "not-yaml-or-json-object.json",
            ),
        ] {
            let e = load_dir(
                &fixtures().join("invalid").join(dir),
                &LoadOptions::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(want), "{dir}: {e}");
        }
    }

    #[test]
    fn json_stream_edges() {
        // objects back to back, trailing whitespace, and an error in a later document that
        // names its own line (found without rescanning the file per document)
        let pkg = |n: &str| format!(r#"{{"schema":"olm.package","name":"{n}"}}"#);
        let text = format!("{}{}\n\n  \n", pkg("a"), pkg("b"));
        let blobs = load_bytes("c.json", text.as_bytes(), &LoadOptions::graph_only()).unwrap();
        assert_eq!(blobs.len(), 2);
        let bad = format!("{}\n{}\n{{\"schema\": }}\n", pkg("a"), pkg("b"));
        let err = load_bytes("c.json", bad.as_bytes(), &LoadOptions::graph_only())
            .unwrap_err()
            .to_string();
        assert!(err.contains("c.json") && err.contains("line 3"), "{err}");
    }

    #[test]
    fn json_fast_path_matches_the_value_path() {
        let dir = fixtures().join("valid/opm-index-declcfgs-latest");
        let full = load_dir(&dir, &LoadOptions::default()).unwrap();
        let json = crate::declcfg::render_config(&full, crate::declcfg::WriteFormat::Json).unwrap();
        let a = load_bytes("c.json", json.as_bytes(), &LoadOptions::default()).unwrap();
        let b = load_bytes("c.json", json.as_bytes(), &LoadOptions::graph_only()).unwrap();
        assert_eq!(a.len(), b.len());
        let objects = |v: &[BlobAt]| -> (usize, usize) {
            v.iter()
                .filter_map(|x| match &x.blob {
                    Blob::Bundle(b) => Some((
                        b.properties
                            .iter()
                            .filter(|p| p.type_ == crate::property::BUNDLE_OBJECT)
                            .count(),
                        b.omitted_objects,
                    )),
                    _ => None,
                })
                .fold((0, 0), |acc, x| (acc.0 + x.0, acc.1 + x.1))
        };
        let (kept, _) = objects(&a);
        assert!(kept > 0);
        assert_eq!(objects(&b), (0, kept));
        // the full fast path equals the generic path on the same JSON
        let mut via_value = Vec::new();
        for (i, doc) in parse_documents("c.json", json.as_bytes())
            .unwrap()
            .into_iter()
            .enumerate()
        {
            via_value.push(BlobAt {
                file: "c.json".into(),
                index: i,
                blob: blob_from_value(doc, false, &LoadOptions::default()).unwrap(),
            });
        }
        assert_eq!(a, via_value);
    }

    #[test]
    fn json_fast_path_keeps_what_the_validator_must_see() {
        let text = br#"{"schema":"olm.bundle","name":"a.v1.0.0","package":"a","image":"q.io/a:v1","properties":[
            {"type":"olm.bundle.object","value":{"data":"not base64!"}},
            {"value":{"data":"eyJ9"},"type":"olm.bundle.object"},
            {"type":"olm.bundle.object","value":{"data":"eyJ9"}},
            {"type":"olm.package","value":{"packageName":"a","version":"1.0.0"}}]}
            [1]"#;
        let e = load_bytes("x.json", text, &LoadOptions::graph_only()).unwrap_err();
        assert!(
            e.to_string()
                .contains("x.json: document 1: expected a blob"),
            "{e}"
        );
        let ok = load_bytes(
            "x.json",
            &text[..text.len() - 4],
            &LoadOptions::graph_only(),
        )
        .unwrap();
        let Blob::Bundle(b) = &ok[0].blob else {
            panic!()
        };
        // invalid data kept; the valid ones dropped, whatever their key order
        assert_eq!(b.properties.len(), 2);
        assert_eq!(b.omitted_objects, 2);
        let bad = load_bytes(
            "y.json",
            b"{\"schema\": \"olm.bundle\"} {\"schema\": ",
            &LoadOptions::default(),
        )
        .unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("y.json: invalid JSON at line 1"),
            "{bad}"
        );
    }

    /// A JSON stream read document by document (as files over [`CATALOG_YAML_FILE`] are)
    /// gives the blobs of the whole-file parse; a document over the limit, a scalar between
    /// documents and a truncated end are errors naming the file and the byte.
    #[test]
    fn big_json_streams_load_document_by_document() {
        let dir = fixtures().join("valid/opm-index-declcfgs-latest");
        let full = load_dir(&dir, &LoadOptions::default()).unwrap();
        let json = crate::declcfg::render_config(&full, crate::declcfg::WriteFormat::Json).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("catalog.json");
        let unlimited = SizeLimit {
            bytes: u64::MAX,
            what: "x",
        };
        let stream = |text: &[u8], opts: &LoadOptions, limit: SizeLimit| {
            std::fs::write(&path, text).unwrap();
            let file = olmkit_core::confine::open_named(&path).unwrap();
            json_docs::load(&file, "catalog.json", opts, limit)
        };
        for opts in [LoadOptions::default(), LoadOptions::graph_only()] {
            let whole = load_bytes("catalog.json", json.as_bytes(), &opts).unwrap();
            assert!(whole.len() > 3);
            assert_eq!(stream(json.as_bytes(), &opts, unlimited).unwrap(), whole);
            let bom = [b"\xef\xbb\xbf".as_slice(), json.as_bytes()].concat();
            assert_eq!(stream(&bom, &opts, unlimited).unwrap(), whole);
        }
        let opts = LoadOptions::default();
        let biggest = json.split("\n}\n").map(str::len).max().unwrap() as u64;
        let e = stream(
            json.as_bytes(),
            &opts,
            SizeLimit {
                bytes: biggest / 2,
                what: "one catalog document",
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("catalog.json") && e.contains("one catalog document"),
            "{e}"
        );
        let pkg = r#"{"schema":"olm.package","name":"a"}"#;
        let e = stream(format!("{pkg}\n42\n").as_bytes(), &opts, unlimited)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("catalog.json: document 1: expected a blob") && e.contains("byte 36"),
            "{e}"
        );
        let e = stream(
            format!("{pkg}\n{{\"schema\": \"x").as_bytes(),
            &opts,
            unlimited,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("ends inside the document that starts at byte 36"),
            "{e}"
        );
        let e = stream(
            format!("{pkg}\n{{\"schema\": x}}").as_bytes(),
            &opts,
            unlimited,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("document 1 at byte 36"), "{e}");
    }

    #[test]
    fn catalog_files_refuse_what_may_not_be_read() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("c");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.yaml"), "schema: olm.package\nname: a\n").unwrap();
        // Too large for a YAML file: refused from its size, nothing read.
        std::fs::File::create(root.join("big.yaml"))
            .unwrap()
            .set_len(CATALOG_YAML_FILE.bytes + 1)
            .unwrap();
        let e = catalog_files(&root).unwrap_err().to_string();
        assert!(e.contains("big.yaml") && e.contains("more than the"), "{e}");
        std::fs::remove_file(root.join("big.yaml")).unwrap();
        // Another name of a file outside.
        std::fs::write(tmp.path().join("outside"), "schema: x\n").unwrap();
        std::fs::hard_link(tmp.path().join("outside"), root.join("b.yaml")).unwrap();
        let e = catalog_files(&root).unwrap_err().to_string();
        assert!(e.contains("b.yaml") && e.contains("hard links"), "{e}");
    }

    #[test]
    fn duplicate_keys_are_kept_for_a_validator_and_named_with_their_line() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("c.yaml"),
            "schema: olm.package\nname: a\ndefaultChannel: stable\ndefaultChannel: alpha\n",
        )
        .unwrap();
        let opts = LoadOptions {
            keep_warnings: true,
            ..LoadOptions::graph_only()
        };
        let (cfg, origins) = load_dir_with_files(tmp.path(), &opts).unwrap();
        assert_eq!(cfg.packages[0].default_channel, "alpha");
        assert_eq!(origins.warnings.len(), 1);
        assert_eq!(origins.warnings[0].line, Some(4));
        assert!(
            origins.warnings[0]
                .to_string()
                .starts_with("c.yaml:4: duplicate mapping key \"defaultChannel\""),
            "{:?}",
            origins.warnings
        );
    }

    #[test]
    fn case_insensitive_meta_keys() {
        let b = load_bytes(
            "t.yaml",
            b"Schema: olm.semver\nGenerateMajorChannels: true\n",
            &LoadOptions::default(),
        )
        .unwrap();
        assert_eq!(b[0].blob.schema(), "olm.semver");
        let e = load_bytes(
            "t.yaml",
            b"schema: olm.package\nSchema: olm.package\n",
            &LoadOptions::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("duplicate keys"), "{e}");
    }
}
