//! Reading a registry+v1 bundle directory into a [`Bundle`], and manifest streams into
//! [`Manifest`]s.
//!
//! The loaders only parse: a bundle with wrong content still loads, and the validators report
//! what is wrong with it. They fail only when they cannot read or parse a file, naming that file
//! (and for streams the document number), so every later error can point at its source.
//! YAML is read as leniently as Go's decoder reads it (operator-framework/api `loadBundle`
//! decodes with `sigs.k8s.io/yaml`): duplicate keys and under-indented quoted scalars load,
//! and are kept in [`Bundle::load_warnings`]; a `metadata/` file other than the annotations
//! that does not parse is skipped with a warning, as operator-registry skips it.
//!
//! Every file is read through [`olmkit_core::confine`]'s opener: opened relative to the bundle
//! directory without a link leading out of it, a regular file with one link, within
//! [`MANIFEST_FILE`], read from that descriptor. Files the bundle model does not use
//! (`tests/scorecard/`, stray files) are checked the same way but not read.

use crate::model::{Bundle, Manifest};
use olmkit_core::confine::{InputRoot, MANIFEST_FILE, ReadConfinedError};
use olmkit_core::docs::{ParseWarning, parse_document_lenient, parse_documents_lenient, warn};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A bundle directory could not be read.
#[derive(Debug, Error)]
pub enum LoadBundleError {
    /// The path does not exist or is not a directory.
    #[error("{0}: not a bundle directory (no such directory)")]
    NotADirectory(PathBuf),
    /// The directory has no `manifests/` folder.
    #[error("{0}: not a bundle directory (no manifests/ folder)")]
    NoManifests(PathBuf),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be parsed.
    #[error(transparent)]
    Parse(#[from] olmkit_core::docs::ParseDocumentError),
    /// A symbolic link leads out of the bundle directory.
    #[error(transparent)]
    Escape(#[from] olmkit_core::confine::ConfineError),
    /// A file of the bundle is not one it may read: not a regular file, hard-linked, too
    /// large.
    #[error(transparent)]
    Input(ReadConfinedError),
    /// `annotations.yaml` is not of the form `annotations: {key: string}`.
    #[error("{path}: field annotations: {message}")]
    Annotations {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl From<ReadConfinedError> for LoadBundleError {
    fn from(e: ReadConfinedError) -> Self {
        match e {
            ReadConfinedError::Confine(c) => LoadBundleError::Escape(c),
            other => LoadBundleError::Input(other),
        }
    }
}

/// Every file under `dir`, sorted. Symbolic links are followed only when they stay inside `dir`
/// (a bundle is untrusted input: a link to `/etc/passwd` or a registry credential file must not
/// end up in a catalog or an image); one that leads out is an error naming it, and so is
/// anything that is neither a directory nor a regular file (a FIFO, a socket, a device). This
/// only lists: files are opened later, through `root`, which checks them again.
fn sorted_files(root: &InputRoot, dir: &Path) -> Result<Vec<PathBuf>, LoadBundleError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    // Linked directories are read after the whole real tree, and only when their real location
    // was not read yet: a link back up the tree adds nothing and cannot loop.
    let mut linked = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while let Some(d) = stack.pop().or_else(|| linked.pop()) {
        if !seen.insert(d.canonicalize().unwrap_or_else(|_| d.clone())) {
            continue;
        }
        let rd = fs::read_dir(&d).map_err(|source| LoadBundleError::Read {
            path: d.clone(),
            source,
        })?;
        for e in rd {
            let e = e.map_err(|source| LoadBundleError::Read {
                path: d.clone(),
                source,
            })?;
            let p = e.path();
            let ft = e.file_type().map_err(|source| LoadBundleError::Read {
                path: p.clone(),
                source,
            })?;
            let resolved = if ft.is_symlink() {
                root.inspect(&p)?.file_type()
            } else {
                ft
            };
            if resolved.is_dir() {
                if ft.is_symlink() {
                    linked.push(p);
                } else {
                    stack.push(p);
                }
            } else if resolved.is_file() {
                out.push(p);
            } else {
                // Refused by the opener, saying what it is.
                root.open(&p)?;
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Whether the bundle model reads `rel` (see [`bundle_from_files`]); other files are only
/// listed.
fn used_by_the_model(rel: &str) -> bool {
    rel.starts_with("manifests/")
        || matches!(
            rel,
            "metadata/annotations.yaml"
                | "metadata/annotations.yml"
                | "metadata/dependencies.yaml"
                | "metadata/properties.yaml"
                | "bundle.Dockerfile"
        )
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Parses the `LABEL` instructions of a Dockerfile (the grammar's home is olmkit-core).
use olmkit_core::dockerfile::parse_labels as parse_dockerfile_labels;

/// Loads the bundle in `dir`. What had to be read leniently (duplicate keys...) is kept in
/// [`Bundle::load_warnings`] and also reported with [`olmkit_core::docs::warn`], so that every
/// command that reads a bundle says so; a validator that reports them as findings loads with
/// [`load_bundle_dir_quiet`].
pub fn load_bundle_dir(dir: &Path) -> Result<Bundle, LoadBundleError> {
    let bundle = load_bundle_dir_quiet(dir)?;
    warn_load_warnings(&bundle);
    Ok(bundle)
}

/// Reports a bundle's [`Bundle::load_warnings`] with [`olmkit_core::docs::warn`], each file
/// named under the bundle's directory (`bundle/manifests/x.yaml:12: ...`).
pub fn warn_load_warnings(bundle: &Bundle) {
    for w in &bundle.load_warnings {
        warn(&ParseWarning {
            source_name: bundle.root.join(&w.source_name).display().to_string(),
            ..w.clone()
        });
    }
}

/// Like [`load_bundle_dir`], leaving the warnings to the caller ([`Bundle::load_warnings`]).
pub fn load_bundle_dir_quiet(dir: &Path) -> Result<Bundle, LoadBundleError> {
    if !dir.is_dir() {
        return Err(LoadBundleError::NotADirectory(dir.to_path_buf()));
    }
    if !dir.join("manifests").is_dir() {
        return Err(LoadBundleError::NoManifests(dir.to_path_buf()));
    }
    let root = InputRoot::new(dir)?;
    let mut files = BTreeMap::new();
    let mut unread = Vec::new();
    for path in sorted_files(&root, dir)? {
        // Each file is opened once, through the root, and checked on its descriptor; only
        // what the model uses is read.
        let file = root.open(&path)?;
        let name = rel(dir, &path);
        if used_by_the_model(&name) {
            files.insert(name, file.read_to_end(MANIFEST_FILE)?);
        } else if !name.starts_with("metadata/") {
            unread.push(name);
        }
    }
    let mut bundle = bundle_from_files(dir, &files)?;
    bundle.other_files.extend(unread);
    bundle.other_files.sort();
    Ok(bundle)
}

/// Builds a [`Bundle`] from an in-memory tree: `files` maps paths relative to the bundle root
/// (`manifests/x.yaml`, `metadata/annotations.yaml`, ...) to contents. This is what
/// [`load_bundle_dir`] does after reading the directory, and what validates a generated bundle
/// before anything is written.
pub fn bundle_from_files(
    root: &Path,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<Bundle, LoadBundleError> {
    if !files.keys().any(|k| k.starts_with("manifests/")) {
        return Err(LoadBundleError::NoManifests(root.to_path_buf()));
    }
    let mut bundle = Bundle {
        root: root.to_path_buf(),
        ..Default::default()
    };
    for (name, bytes) in files.range("manifests/".to_string()..) {
        if !name.starts_with("manifests/") {
            break;
        }
        let (objects, warnings) = parse_documents_lenient(name, bytes)?;
        bundle.load_warnings.extend(warnings);
        for (i, object) in objects.into_iter().enumerate() {
            bundle
                .manifests
                .push(Manifest::new(name.clone(), i, object));
        }
        bundle.manifest_files.insert(name.clone(), bytes.clone());
    }
    for name in ["metadata/annotations.yaml", "metadata/annotations.yml"] {
        let Some(bytes) = files.get(name) else {
            continue;
        };
        let (doc, warnings) = parse_document_lenient(name, bytes)?;
        bundle.load_warnings.extend(warnings);
        let annotations_error = |message: String| LoadBundleError::Annotations {
            path: name.to_string(),
            message,
        };
        let map = doc
            .get("annotations")
            .ok_or_else(|| annotations_error("missing top-level `annotations:` map".into()))?;
        let obj = map
            .as_object()
            .ok_or_else(|| annotations_error("must be a map of strings".into()))?;
        for (k, v) in obj {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(_) | Value::Bool(_) => v.to_string(),
                _ => return Err(annotations_error(format!("value of {k} must be a string"))),
            };
            bundle.annotations.insert(k.clone(), s);
        }
        bundle.annotations_file = Some(name.to_string());
        break;
    }
    // operator-registry's `ValidateBundleFormat` skips a metadata file it cannot decode (it
    // then simply has no dependencies); keep loading and say so.
    bundle.dependencies = optional_metadata(files, "metadata/dependencies.yaml", &mut bundle);
    bundle.properties = optional_metadata(files, "metadata/properties.yaml", &mut bundle);
    if let Some(bytes) = files.get("bundle.Dockerfile") {
        let text = String::from_utf8_lossy(bytes).into_owned();
        bundle.dockerfile_labels = Some(parse_dockerfile_labels(&text));
        bundle.dockerfile = Some(text);
    }
    for r in files.keys() {
        if !r.starts_with("manifests/") && !r.starts_with("metadata/") && r != "bundle.Dockerfile" {
            bundle.other_files.push(r.clone());
        }
    }
    Ok(bundle)
}

/// Parses an optional metadata file; one that does not parse becomes a load warning.
fn optional_metadata(
    files: &BTreeMap<String, Vec<u8>>,
    name: &str,
    bundle: &mut Bundle,
) -> Option<Value> {
    let bytes = files.get(name)?;
    match parse_document_lenient(name, bytes) {
        Ok((doc, warnings)) => {
            bundle.load_warnings.extend(warnings);
            Some(doc)
        }
        Err(e) => {
            bundle.load_warnings.push(ParseWarning {
                source_name: name.to_string(),
                line: None,
                message: format!("ignored, as operator-sdk and opm ignore it: {}", e.message),
            });
            None
        }
    }
}

/// A manifest stream (stdin, a file or a directory of YAML) could not be read.
#[derive(Debug, Error)]
pub enum LoadManifestsError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be parsed.
    #[error(transparent)]
    Parse(#[from] olmkit_core::docs::ParseDocumentError),
    /// A document is not a Kubernetes object (a mapping).
    #[error(
        "{document}: not a Kubernetes object (expected a mapping with apiVersion and kind, found {found})"
    )]
    NotAnObject {
        /// `<source> document <n>`.
        document: String,
        /// What was found instead.
        found: &'static str,
    },
    /// A directory holds no YAML or JSON file.
    #[error("{0}: no .yaml, .yml or .json files found")]
    Empty(PathBuf),
    /// A symbolic link leads out of the directory given.
    #[error(transparent)]
    Escape(#[from] olmkit_core::confine::ConfineError),
    /// A file is not one that may be read: not a regular file (a FIFO), hard-linked, or too
    /// large.
    #[error(transparent)]
    Input(ReadConfinedError),
}

impl From<ReadConfinedError> for LoadManifestsError {
    fn from(e: ReadConfinedError) -> Self {
        match e {
            ReadConfinedError::Confine(c) => LoadManifestsError::Escape(c),
            other => LoadManifestsError::Input(other),
        }
    }
}

fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// Parses a stream of YAML or JSON documents (as `kubectl kustomize` prints) into objects.
/// Empty documents are skipped; a `kind: List` document is flattened into its items.
pub fn load_manifest_stream(
    source: &str,
    bytes: &[u8],
) -> Result<Vec<Manifest>, LoadManifestsError> {
    // Number documents as they appear, counting empty ones too, so "document 7" is the
    // seventh `---` section a user sees in the file.
    let text_docs = parse_documents_numbered(source, bytes)?;
    let mut out = Vec::new();
    for (index, object) in text_docs {
        let document = format!("{source} document {}", index + 1);
        if !object.is_object() {
            return Err(LoadManifestsError::NotAnObject {
                document,
                found: value_kind(&object),
            });
        }
        let is_list = object.get("kind").and_then(Value::as_str) == Some("List")
            && object.get("items").is_some_and(Value::is_array);
        if is_list {
            let items = object
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (i, item) in items.into_iter().enumerate() {
                if !item.is_object() {
                    return Err(LoadManifestsError::NotAnObject {
                        document: format!("{document} item {i}"),
                        found: value_kind(&item),
                    });
                }
                out.push(Manifest {
                    item: Some(i),
                    ..Manifest::new(source, index, item)
                });
            }
        } else {
            out.push(Manifest::new(source, index, object));
        }
    }
    Ok(out)
}

/// Splits YAML text on document markers and parses each part on its own so documents keep
/// their (0-based) position even when some are empty. JSON streams are numbered in order.
fn parse_documents_numbered(
    source: &str,
    bytes: &[u8],
) -> Result<Vec<(usize, Value)>, LoadManifestsError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        olmkit_core::docs::ParseDocumentError::new(source, format!("not UTF-8 text: {e}"))
    })?;
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    // Warnings come from the parse of the whole text (lines of the file), once.
    let parse_quiet =
        |name: &str, bytes: &[u8]| parse_documents_lenient(name, bytes).map(|(d, _)| d);
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let (docs, warnings) = parse_documents_lenient(source, bytes)?;
        warnings.iter().for_each(warn);
        return Ok(docs.into_iter().enumerate().collect());
    }
    // Document boundaries: a line that is exactly `---` (or `--- ` followed by content).
    let mut parts: Vec<String> = vec![String::new()];
    for line in text.split_inclusive('\n') {
        let l = line.trim_end();
        if l == "---" || l.starts_with("--- ") || l.starts_with("---\t") {
            parts.push(String::new());
        } else if let Some(last) = parts.last_mut() {
            last.push_str(line);
        }
    }
    // A leading `---` makes the first part empty; it is not a document of its own.
    if text.trim_start().starts_with("---") && parts.first().is_some_and(|p| p.trim().is_empty()) {
        parts.remove(0);
    }
    let whole = parse_documents_lenient(source, bytes).map(|(docs, warnings)| {
        warnings.iter().for_each(warn);
        docs
    });
    let mut numbered = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        match parse_quiet(&format!("{source} document {}", i + 1), part.as_bytes()) {
            Ok(docs) => numbered.extend(docs.into_iter().map(|d| (i, d))),
            // A syntax error: name the document it is in, unless the whole text parses (then
            // the split cut through a block scalar and the parser's numbering is the truth).
            Err(e) if whole.is_err() => return Err(e.into()),
            Err(_) => break,
        }
    }
    let all = whole?;
    // The split is a fast path; if it disagrees with the real parser (a `---` inside a block
    // scalar), trust the parser and number documents in order.
    if numbered.len() != all.len() || numbered.iter().zip(&all).any(|((_, a), b)| a != b) {
        return Ok(all.into_iter().enumerate().collect());
    }
    Ok(numbered)
}

/// Reads every `.yaml`, `.yml` and `.json` file under `dir` (recursively, sorted by path) as a
/// manifest stream, or `dir` itself when it is a file. Sources are named by their path as
/// given (`config/samples/x.yaml`). Files are read through [`olmkit_core::confine`]: under a
/// directory, confined to it; a file named directly, as named; either way a regular file (a
/// FIFO is refused, naming it, without blocking) within [`MANIFEST_FILE`].
pub fn load_manifest_dir(dir: &Path) -> Result<Vec<Manifest>, LoadManifestsError> {
    let meta = fs::metadata(dir).map_err(|source| LoadManifestsError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        // The descriptor decides: a regular file is read, anything else refused, naming it.
        let bytes = olmkit_core::confine::read_named(dir, MANIFEST_FILE)?;
        return load_manifest_stream(&dir.display().to_string(), &bytes);
    }
    let root = InputRoot::new(dir)?;
    let files = sorted_files(&root, dir).map_err(|e| match e {
        LoadBundleError::Read { path, source } => LoadManifestsError::Read { path, source },
        LoadBundleError::Escape(e) => LoadManifestsError::Escape(e),
        LoadBundleError::Input(e) => LoadManifestsError::Input(e),
        other => LoadManifestsError::Read {
            path: dir.to_path_buf(),
            source: std::io::Error::other(other.to_string()),
        },
    })?;
    let mut out = Vec::new();
    let mut seen_any = false;
    for path in files {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "yaml" | "yml" | "json") {
            continue;
        }
        seen_any = true;
        let bytes = root.read(&path, MANIFEST_FILE)?;
        out.extend(load_manifest_stream(&path.display().to_string(), &bytes)?);
    }
    if !seen_any {
        return Err(LoadManifestsError::Empty(dir.to_path_buf()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_numbers_documents_as_written() {
        let docs = load_manifest_stream(
            "<stdin>",
            b"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n",
        )
        .unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].label(), "<stdin> document 1 (ConfigMap a)");
        assert_eq!(docs[1].label(), "<stdin> document 3 item 0 (Secret s)");
        let e = load_manifest_stream("<stdin>", b"a: 1\n---\n- 1\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "<stdin> document 2: not a Kubernetes object (expected a mapping with apiVersion and kind, found a sequence)"
        );
    }

    #[test]
    fn block_scalars_with_dashes_keep_order() {
        let docs = load_manifest_stream("f", b"kind: A\ndata: |\n  x\n  ---\n  y\n---\nkind: B\n")
            .unwrap();
        assert_eq!(
            docs.iter().map(|d| d.kind()).collect::<Vec<_>>(),
            ["A", "B"]
        );
    }

    #[test]
    fn loads_a_real_bundle() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../tests/fixtures/real-bundles/authorino-operator/0.13.0");
        let b = load_bundle_dir(&dir).unwrap();
        assert_eq!(b.package(), Some("authorino-operator"));
        assert_eq!(b.csv_name(), Some("authorino-operator.v0.13.0"));
        assert_eq!(b.channels(), vec!["stable"]);
        assert_eq!(b.crds().count(), 2);
        assert!(
            b.other_files
                .iter()
                .any(|f| f.starts_with("tests/scorecard"))
        );
    }

    #[test]
    fn symlinks_out_of_the_bundle_are_refused_inside_ones_are_read() {
        use std::os::unix::fs::symlink;
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("config.json"), "{\"auths\": {}}").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let b = tmp.path().join("b");
        std::fs::create_dir_all(b.join("manifests")).unwrap();
        std::fs::create_dir_all(b.join("metadata")).unwrap();
        std::fs::write(
            b.join("manifests/a.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        )
        .unwrap();
        // Inside the bundle, and a loop back to its root: fine, read once.
        symlink("../manifests", b.join("metadata/loop")).unwrap();
        let files = sorted_files(&InputRoot::new(&b).unwrap(), &b).unwrap();
        assert!(files.iter().any(|p| p.ends_with("manifests/a.yaml")));
        symlink(
            outside.path().join("config.json"),
            b.join("manifests/creds.yaml"),
        )
        .unwrap();
        let e = load_bundle_dir(&b).unwrap_err().to_string();
        assert!(
            e.contains("manifests/creds.yaml") && e.contains("outside"),
            "{e}"
        );
        let e = load_manifest_dir(&b.join("manifests"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("creds.yaml") && e.contains("outside"), "{e}");
    }

    #[test]
    fn missing_dir_is_an_error() {
        assert!(matches!(
            load_bundle_dir(Path::new("/nonexistent")),
            Err(LoadBundleError::NotADirectory(_))
        ));
    }
}
