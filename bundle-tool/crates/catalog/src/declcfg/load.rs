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

use super::{Blob, Bundle, DeclarativeConfig, Meta};
use olmkit_core::docs::parse_documents;
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

/// Options of the loaders.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Keep `olm.bundle.object` properties (base64 manifests, often most of a catalog's bytes).
    /// Validation and graph work do not need them; dropping them keeps memory proportional to
    /// the graph instead of to the catalog size. Dropped objects are counted in
    /// [`Bundle::omitted_objects`].
    pub keep_bundle_objects: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            keep_bundle_objects: true,
        }
    }
}

impl LoadOptions {
    /// Options that drop `olm.bundle.object` payloads (for validation, graphs, explain).
    pub fn graph_only() -> Self {
        Self {
            keep_bundle_objects: false,
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
/// skipping `.indexignore` files and everything they exclude.
pub fn catalog_files(root: &Path) -> Result<Vec<PathBuf>, LoadCatalogError> {
    if !root.is_dir() {
        return Err(LoadCatalogError::NotADirectory(root.to_path_buf()));
    }
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
        let is_file = if ft.is_symlink() {
            std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file())
        } else {
            ft.is_file()
        };
        if is_file {
            out.push(entry.into_path());
        }
    }
    Ok(out)
}

/// Parses one file's bytes into blobs. `name` is used in errors and in [`BlobAt::file`].
pub fn load_bytes(
    name: &str,
    bytes: &[u8],
    opts: &LoadOptions,
) -> Result<Vec<BlobAt>, LoadCatalogError> {
    let from_yaml = !looks_like_json(bytes);
    let docs = parse_documents(name, bytes)?;
    let mut out = Vec::with_capacity(docs.len());
    for (index, doc) in docs.into_iter().enumerate() {
        let blob =
            blob_from_value(doc, from_yaml, opts).map_err(|message| LoadCatalogError::Blob {
                file: name.to_string(),
                index,
                message,
            })?;
        out.push(BlobAt {
            file: name.to_string(),
            index,
            blob,
        });
    }
    Ok(out)
}

/// Reads and parses one file; `name` is used in errors.
pub fn load_file(
    path: &Path,
    name: &str,
    opts: &LoadOptions,
) -> Result<Vec<BlobAt>, LoadCatalogError> {
    let bytes = std::fs::read(path).map_err(|source| LoadCatalogError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    load_bytes(name, &bytes, opts)
}

/// Walks a catalog directory and calls `f` for every blob, file by file in lexical order.
/// Only one file's blobs are in memory at a time. The first error (of the loader or of `f`)
/// stops the walk.
pub fn walk_dir<E: From<LoadCatalogError>>(
    root: &Path,
    opts: &LoadOptions,
    mut f: impl FnMut(BlobAt) -> Result<(), E>,
) -> Result<(), E> {
    for path in catalog_files(root)? {
        let name = rel_name(root, &path);
        for blob in load_file(&path, &name, opts)? {
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
    let parsed: Vec<Result<Vec<BlobAt>, LoadCatalogError>> = files
        .par_iter()
        .map(|path| load_file(path, &rel_name(root, path), opts))
        .collect();
    let mut cfg = DeclarativeConfig::default();
    let mut origins = Origins::default();
    for file_blobs in parsed {
        for at in file_blobs? {
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
fn canonical_meta_keys(obj: &mut Map<String, Value>) -> Result<(), String> {
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
        return Err(dups.join(", "));
    }
    // `package` and `name` of known schemas are checked by their typed parse, which reports
    // them as `parse <schema>: ...` like opm's addMeta does.
    for canonical in ["schema"] {
        if let Some(key) = seen.get(canonical).and_then(|keys| keys.first())
            && let Some(v) = obj.get(key)
            && !v.is_string()
        {
            return Err(format!(
                "expected value for key {key:?} to be a string, got {}",
                json_type(v)
            ));
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

fn typed<T: DeserializeOwned>(what: &str, v: Value) -> Result<T, String> {
    serde_json::from_value(v).map_err(|e| format!("parse {what}: {e}"))
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
pub fn blob_from_value(doc: Value, from_yaml: bool, opts: &LoadOptions) -> Result<Blob, String> {
    let Value::Object(mut obj) = doc else {
        return Err(format!(
            "expected a blob (a JSON/YAML object), found {}",
            json_type(&doc)
        ));
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
        "" => Err(format!(
            "object '{}' is missing root schema field",
            short_json(&Value::Object(obj))
        )),
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
            b.omitted_objects = omitted;
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
                    return Err(format!(
                        "expected value for key {k:?} to be a string, got {}",
                        json_type(v)
                    ));
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
    props.retain(|p| p.get("type").and_then(Value::as_str) != Some(crate::property::BUNDLE_OBJECT));
    before - props.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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
