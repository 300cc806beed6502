//! Turning a catalog directory into a [`CatalogIndex`]: everything the server answers from
//! memory, plus the byte span of each blob so payloads can be read lazily.
//!
//! Files are walked like `opm serve` walks them (the catalog crate's walker, `.indexignore`
//! honoured), cut into documents by [`crate::split`] and parsed by the catalog crate's parser,
//! a few files at a time, so memory holds one document per worker plus the graph — never the
//! catalog. `olm.bundle.object` payloads are decoded once to prove they load (opm refuses to
//! serve a catalog whose objects do not decode) and dropped.
//!
//! Every file (and every file an object's `ref` names) is opened once through the catalog's
//! root ([`olmkit_core::confine::InputRoot`]), checked on that descriptor and read from it,
//! exactly as the catalog crate's loader reads it: a link out of the catalog (listed, or
//! swapped in after the listing), a FIFO, a file with several hard links or a YAML file over
//! [`CATALOG_YAML_FILE`] is refused with the words `catalog validate` uses, before anything is
//! read, and a YAML file is never read beyond that limit even if it grows meanwhile.
//!
//! Whether the catalog can be served is decided by the same rules as `opm validate`
//! ([`olmkit_catalog::validate`]), which is what opm's cache build enforces through
//! `declcfg.ConvertToModel`, plus the checks opm makes while converting bundles for the API
//! (`pkg/api/model_to_api.go`: at most one `olm.csv.metadata`, and one that decodes). Every
//! problem is reported, not only the first. The index is then read off the same catalog model
//! ([`olmkit_catalog::model`]) the validator judged: packages, channels with their heads,
//! bundles and deprecations as opm's model holds them.

use crate::gojson;
use crate::index_pb::{
    self, CatalogIndex, Channel, CustomBlob, Entry, Gvk, Package, SourceFile, Span, TypedValue,
};
use crate::payload;
use crate::split::{self, Format, Splitter};
use olmkit_catalog::declcfg::{
    self, Blob, Bundle, DeclarativeConfig, LoadCatalogError, LoadOptions, SCHEMA_BUNDLE,
    SCHEMA_CHANNEL, SCHEMA_PACKAGE, catalog_files,
    load::{Origins, blob_from_value, load_bytes, load_file_in},
};
use olmkit_catalog::model::{self, Model};
use olmkit_catalog::property;
use olmkit_catalog::validate::{object_path, rules, validate_model};
use olmkit_core::confine::{CATALOG_YAML_FILE, InputFile, InputRoot, ReadConfinedError};
use olmkit_core::docs::{parse_documents_lenient, warn};
use olmkit_core::findings::{Finding, Report};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use thiserror::Error;

/// Version of the index format written by this build.
pub const INDEX_FORMAT: u32 = 1;

/// Rule id of findings about `olm.csv.metadata` properties the API conversion refuses.
pub const RULE_CSV_METADATA: &str = "csv-metadata";

/// A catalog could not be turned into an index.
#[derive(Debug, Error)]
pub enum BuildIndexError {
    /// Reading or parsing the files failed.
    #[error(transparent)]
    Load(#[from] LoadCatalogError),
    /// The catalog loads but breaks rules that stop opm from serving it.
    #[error("{root}: the catalog cannot be served: {summary}")]
    Invalid {
        /// Catalog root.
        root: PathBuf,
        /// The first error and how many there are.
        summary: String,
        /// Every finding.
        report: Report,
    },
}

/// Options of [`build_index`].
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Files parsed in parallel (0: one per CPU).
    pub threads: usize,
    /// Record a SHA-256 of every blob, so that a server reading an index file notices a
    /// catalog that changed after indexing. Not needed when the index is built at startup.
    pub checksums: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            threads: 0,
            checksums: true,
        }
    }
}

/// An index and the warnings found while building it.
#[derive(Debug)]
pub struct BuiltIndex {
    /// The index.
    pub index: CatalogIndex,
    /// Warnings (the build fails on errors).
    pub report: Report,
}

struct ScannedBlob {
    blob: Blob,
    span: Span,
}

struct ScannedFile {
    rel: String,
    size: u64,
    yaml: bool,
    blobs: Vec<ScannedBlob>,
    findings: Vec<Finding>,
}

fn rel_name(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

fn digest(checksums: bool, bytes: &[u8]) -> Vec<u8> {
    if checksums {
        Sha256::digest(bytes).to_vec()
    } else {
        Vec::new()
    }
}

/// Why a file must be loaded whole instead of split.
struct NeedsWholeFile;

/// Whether an opened file starts like a JSON stream, by the catalog loader's rule (its first
/// 64 KiB, read at its start without moving its position).
fn starts_like_json(file: &InputFile) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut prefix = vec![0u8; 64 << 10];
    let n = file.file().read_at(&mut prefix, 0)?;
    Ok(split::sniff(&prefix[..n]) == Format::Json)
}

fn scan_file(
    root: &Path,
    confine: &InputRoot,
    path: &Path,
    opts: &BuildOptions,
) -> Result<ScannedFile, LoadCatalogError> {
    let rel = rel_name(root, path);
    let read_err = |source| LoadCatalogError::Read {
        path: path.to_path_buf(),
        source,
    };
    // Opened once, through the root, and checked on the descriptor as the catalog loader
    // checks it (with its errors): no link out of the catalog, a regular file (opened without
    // blocking), one link.
    let file = confine.open(path)?;
    let size = file.len();
    // Only a JSON stream may be larger than a YAML catalog file (checked from the descriptor
    // before anything is read); any other file is read no further than that limit.
    let cap = if size > CATALOG_YAML_FILE.bytes {
        if !starts_like_json(&file).map_err(read_err)? {
            file.check_size(CATALOG_YAML_FILE)?;
        }
        None
    } else {
        Some(CATALOG_YAML_FILE.bytes)
    };
    let mut reader = BufReader::with_capacity(
        1 << 18,
        file.file()
            .take(cap.map_or(u64::MAX, |c| c.saturating_add(1))),
    );
    let format = split::sniff(reader.fill_buf().map_err(read_err)?);
    let yaml = format == Format::Yaml;
    let mut out = ScannedFile {
        rel,
        size,
        yaml,
        blobs: Vec::new(),
        findings: Vec::new(),
    };
    match scan_split(path, confine, reader, format, cap, opts, &mut out)? {
        Ok(()) => Ok(out),
        Err(NeedsWholeFile) => {
            // The piece-wise parse disagreed with the file; load it the ordinary way so the
            // result (or the error) is exactly what every other command sees.
            out.blobs.clear();
            out.findings.clear();
            if cap.is_none() {
                // A JSON stream too large to be held whole: the catalog loader reads it one
                // document at a time and says what is wrong with it, in its own words. (It
                // opens the file through the same root, checked the same way.)
                load_file_in(confine, path, &out.rel, &LoadOptions::default())?;
                return Err(read_err(std::io::Error::other(format!(
                    "a JSON stream of more than {} bytes whose documents cannot be cut apart",
                    CATALOG_YAML_FILE.bytes
                ))));
            }
            // Read again from the same descriptor, from its start, within the limit.
            let mut f = file.file();
            f.seek(SeekFrom::Start(0)).map_err(read_err)?;
            let bytes = file.read_to_end(CATALOG_YAML_FILE)?;
            let sha = digest(opts.checksums, &bytes);
            let blobs = load_bytes(&out.rel, &bytes, &LoadOptions::default())?;
            let length = bytes.len() as u64;
            drop(bytes);
            for at in blobs {
                let span = Span {
                    file: 0,
                    offset: 0,
                    length,
                    sha256: sha.clone(),
                    document: u32::try_from(at.index).unwrap_or(u32::MAX),
                    whole_file: true,
                };
                push_blob(confine, &mut out, at.index, at.blob, span);
            }
            Ok(out)
        }
    }
}

/// Parses one document of a YAML file the way the catalog loader parses a YAML file
/// ([`load_bytes`]: the lenient parser, then [`blob_from_value`]), and reports what had to be
/// read leniently (a duplicate key...) naming the line of the file. `None` when the document
/// does not parse on its own (the caller then loads the whole file, for the loader's error).
fn load_yaml_piece(name: &str, raw: &split::RawDoc) -> Result<Option<Vec<Blob>>, LoadCatalogError> {
    let Ok((docs, warnings)) = parse_documents_lenient(name, &raw.bytes) else {
        return Ok(None);
    };
    for mut w in warnings {
        // The parser counts from the document's first line.
        w.line = w.line.map(|l| l.saturating_add(raw.line.saturating_sub(1)));
        warn(&w);
    }
    docs.into_iter()
        .map(|doc| {
            blob_from_value(doc, true, &LoadOptions::default()).map_err(|e| {
                LoadCatalogError::Blob {
                    file: name.to_string(),
                    index: 0,
                    message: e.to_string(),
                }
            })
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// Splits the file at `path` (read through `reader`) into documents and loads each; `cap`:
/// the most bytes it may have (`None` for a JSON stream over that limit).
fn scan_split<R: BufRead>(
    path: &Path,
    confine: &InputRoot,
    reader: R,
    format: Format,
    cap: Option<u64>,
    opts: &BuildOptions,
    out: &mut ScannedFile,
) -> Result<Result<(), NeedsWholeFile>, LoadCatalogError> {
    let mut index = 0usize;
    let mut splitter = Splitter::new(reader, format);
    for raw in splitter.by_ref() {
        let raw = match raw {
            Ok(raw) => raw,
            Err(split::SplitError::Io(source)) => {
                return Err(LoadCatalogError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
            Err(_) => return Ok(Err(NeedsWholeFile)),
        };
        let loaded = if format == Format::Yaml && split::sniff(&raw.bytes) == Format::Yaml {
            // YAML keeps the objects so that `push_blob` can check them.
            load_yaml_piece(&out.rel, &raw)
        } else {
            // JSON goes through the catalog loader's fast path, which checks bundle-object
            // data in place and drops it without copying (most of a big catalog's bytes).
            // The fast path also drops `ref` objects unchecked; the few documents that
            // mention a `"ref"` key keep their objects so the referenced files are checked
            // too.
            let load_opts = match format {
                Format::Json if memchr::memmem::find(&raw.bytes, b"\"ref\"").is_none() => {
                    LoadOptions::graph_only()
                }
                _ => LoadOptions::default(),
            };
            match load_bytes(&out.rel, &raw.bytes, &load_opts) {
                Ok(b) => Ok(Some(b.into_iter().map(|at| at.blob).collect())),
                Err(e @ LoadCatalogError::Blob { .. }) => Err(e),
                // Parse errors are reported from the whole file, with the loader's positions.
                Err(_) => Ok(None),
            }
        };
        let mut blobs = match loaded {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(Err(NeedsWholeFile)),
            Err(LoadCatalogError::Blob { message, .. }) => {
                return Err(LoadCatalogError::Blob {
                    file: out.rel.clone(),
                    index,
                    message,
                });
            }
            Err(e) => return Err(e),
        };
        let blob = match blobs.len() {
            // A document of comments, or a marker with nothing after it: nothing, as in the
            // whole file (a file of nothing but such documents is left to the loader, below).
            0 => continue,
            1 => blobs.swap_remove(0),
            _ => return Ok(Err(NeedsWholeFile)),
        };
        let span = Span {
            file: 0,
            offset: raw.offset,
            length: raw.bytes.len() as u64,
            sha256: digest(opts.checksums, &raw.bytes),
            document: u32::try_from(index).unwrap_or(u32::MAX),
            whole_file: false,
        };
        drop(raw);
        push_blob(confine, out, index, blob, span);
        index += 1;
    }
    if let Some(limit) = cap
        && splitter.position() > limit
    {
        // It grew past the limit while it was read.
        return Err(ReadConfinedError::TooLarge {
            path: path.to_path_buf(),
            size: splitter.position(),
            limit: CATALOG_YAML_FILE,
        }
        .into());
    }
    if format == Format::Yaml && index == 0 && splitter.position() > 0 {
        // Text without a single document: the loader decides (opm reads it as one empty
        // object, which has no schema).
        return Ok(Err(NeedsWholeFile));
    }
    Ok(Ok(()))
}

/// Checks a bundle's payload properties the way opm's loader and API conversion do, then drops
/// the `olm.bundle.object` payloads (they are read again from disk when asked for).
fn push_blob(confine: &InputRoot, out: &mut ScannedFile, index: usize, blob: Blob, span: Span) {
    let blob = match blob {
        Blob::Bundle(mut b) => {
            let path = object_path(&b.package, None, Some(&b.name));
            let mut metas = 0usize;
            for (i, p) in b.properties.iter().enumerate() {
                if p.type_ == property::BUNDLE_OBJECT {
                    // Either step's text goes into the finding as is.
                    let checked: Result<_, Box<dyn std::error::Error>> =
                        payload::object_bytes(&p.value, confine, &out.rel)
                            .map_err(Into::into)
                            .and_then(|bytes| Ok(payload::object_to_json(bytes, &out.rel)?));
                    if let Err(e) = checked {
                        out.findings.push(
                            Finding::error(
                                rules::BUNDLE_PROPERTIES.id,
                                format!(
                                    "package {:?}, bundle {:?}: bundle object at index {i} (document {index}): {e}",
                                    b.package, b.name
                                ),
                            )
                            .path(path.clone())
                            .file(out.rel.clone()),
                        );
                    }
                } else if p.type_ == property::CSV_METADATA {
                    metas += 1;
                    if let Err(e) = gojson::check_csv_metadata(&p.value) {
                        out.findings.push(
                            Finding::error(RULE_CSV_METADATA, format!("parse properties: {e}"))
                                .path(path.clone())
                                .file(out.rel.clone()),
                        );
                    }
                }
            }
            if metas > 1 {
                out.findings.push(
                    Finding::error(
                        RULE_CSV_METADATA,
                        format!(
                            "expected at most 1 property of type {:?}, found {metas}",
                            property::CSV_METADATA
                        ),
                    )
                    .path(path)
                    .file(out.rel.clone()),
                );
            }
            let before = b.properties.len();
            b.properties.retain(|p| p.type_ != property::BUNDLE_OBJECT);
            b.omitted_objects += before - b.properties.len();
            Blob::Bundle(b)
        }
        other => other,
    };
    out.blobs.push(ScannedBlob { blob, span });
}

fn scan_all(
    root: &Path,
    files: &[PathBuf],
    opts: &BuildOptions,
) -> Result<Vec<ScannedFile>, LoadCatalogError> {
    let confine = InputRoot::new(root)?;
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<ScannedFile, LoadCatalogError>)>> =
        Mutex::new(Vec::with_capacity(files.len()));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = files.get(i) else { break };
                    let r = scan_file(root, &confine, path, opts);
                    let failed = r.is_err();
                    if let Ok(mut v) = results.lock() {
                        v.push((i, r));
                    }
                    if failed {
                        // Later files cannot change the outcome; stop claiming work.
                        next.store(files.len(), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(i, _)| *i);
    // The first error in walk order wins, like a sequential load.
    results.into_iter().map(|(_, r)| r).collect()
}

/// Scans, checks and indexes the catalog at `root`.
pub fn build_index(root: &Path, opts: &BuildOptions) -> Result<BuiltIndex, BuildIndexError> {
    let files = catalog_files(root)?;
    let scanned = scan_all(root, &files, opts)?;

    let mut cfg = DeclarativeConfig::default();
    let mut origins = Origins::default();
    let mut bundle_spans = Vec::new();
    let mut other_spans = Vec::new();
    let mut source_files = Vec::with_capacity(scanned.len());
    let mut findings = Vec::new();
    for (fi, f) in scanned.into_iter().enumerate() {
        let fi = u32::try_from(fi).unwrap_or(u32::MAX);
        source_files.push(SourceFile {
            path: f.rel.clone(),
            size: f.size,
            yaml: f.yaml,
        });
        findings.extend(f.findings);
        for ScannedBlob { blob, mut span } in f.blobs {
            span.file = fi;
            match &blob {
                Blob::Package(_) => origins.packages.push(f.rel.clone()),
                Blob::Channel(_) => origins.channels.push(f.rel.clone()),
                Blob::Bundle(_) => {
                    origins.bundles.push(f.rel.clone());
                    bundle_spans.push(span);
                }
                Blob::Deprecation(_) => origins.deprecations.push(f.rel.clone()),
                Blob::Other(_) => {
                    origins.others.push(f.rel.clone());
                    other_spans.push(span);
                }
            }
            cfg.push(blob);
        }
    }

    // One model serves both the rules opm's cache build enforces and the index.
    let model = Model::new(&cfg, Some(&origins));
    let mut report = validate_model(&model);
    report.extend(findings);
    report.normalize();
    if report.has_errors() {
        let errors: Vec<&Finding> = report
            .findings
            .iter()
            .filter(|f| f.severity == olmkit_core::findings::Severity::Error)
            .collect();
        let first = errors
            .first()
            .map(|f| f.message.clone())
            .unwrap_or_default();
        let summary = match errors.len() {
            1 => first,
            n => format!("{first} (and {} more errors)", n - 1),
        };
        return Err(BuildIndexError::Invalid {
            root: root.to_path_buf(),
            summary,
            report,
        });
    }
    let index = assemble(
        &model,
        &cfg.others,
        source_files,
        &bundle_spans,
        other_spans,
    );
    Ok(BuiltIndex { index, report })
}

/// The deprecation of an object, as the API carries it.
fn deprecation(
    pkg: &model::Package<'_>,
    schema: &str,
    name: &str,
) -> Option<index_pb::Deprecation> {
    let message = pkg.deprecation.as_ref()?.message(schema, name)?;
    Some(index_pb::Deprecation {
        message: message.to_string(),
    })
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn gvk(v: &Value) -> Gvk {
    Gvk {
        group: str_field(v, "group"),
        version: str_field(v, "version"),
        kind: str_field(v, "kind"),
    }
}

/// Property values as opm serves them: re-encoded compact, without HTML escaping
/// (`alpha/property`, `jsonMarshal` after `model.Normalize`).
fn compact_value(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn index_bundle(pkg: &model::Package<'_>, b: &Bundle, span: Span) -> index_pb::Bundle {
    let mut out = index_pb::Bundle {
        deprecation: deprecation(pkg, SCHEMA_BUNDLE, &b.name),
        objects: u32::try_from(b.omitted_objects).unwrap_or(u32::MAX),
        span: Some(span),
        name: b.name.clone(),
        package: b.package.clone(),
        image: b.image.clone(),
        ..Default::default()
    };
    for p in &b.properties {
        match p.type_.as_str() {
            property::PACKAGE if out.version.is_empty() => {
                out.version = str_field(&p.value, "version")
            }
            property::GVK => out.provided.push(gvk(&p.value)),
            property::GVK_REQUIRED => {
                out.required.push(gvk(&p.value));
                out.dependencies.push(TypedValue {
                    r#type: property::GVK.into(),
                    value: compact_value(&p.value),
                });
            }
            property::PACKAGE_REQUIRED => out.dependencies.push(TypedValue {
                r#type: property::PACKAGE.into(),
                value: compact_value(&serde_json::json!({
                    "packageName": str_field(&p.value, "packageName"),
                    "version": str_field(&p.value, "versionRange"),
                })),
            }),
            property::CSV_METADATA => out.csv_metadata = true,
            _ => {}
        }
        if p.type_ != property::BUNDLE_OBJECT && p.type_ != property::CSV_METADATA {
            out.properties.push(TypedValue {
                r#type: p.type_.clone(),
                value: compact_value(&p.value),
            });
        }
    }
    out
}

fn index_channel(pkg: &model::Package<'_>, c: &model::Channel<'_>) -> Channel {
    Channel {
        name: c.name.to_string(),
        // The model's heads are sorted; a servable catalog has exactly one per channel.
        head: c
            .heads
            .first()
            .map(|h| (*h).to_string())
            .unwrap_or_default(),
        deprecation: deprecation(pkg, SCHEMA_CHANNEL, c.name),
        entries: c
            .entries()
            .iter()
            .map(|e| Entry {
                name: e.name.clone(),
                replaces: e.replaces.clone(),
                skips: e.skips.clone(),
                skip_range: e.skip_range.clone(),
            })
            .collect(),
    }
}

fn index_package(pkg: &model::Package<'_>) -> Package {
    let p = pkg.blob;
    let (has_icon, icon_base64, icon_media_type) = match &p.icon {
        Some(i) => (true, i.base64data.clone(), i.mediatype.clone()),
        None => (false, String::new(), String::new()),
    };
    Package {
        deprecation: deprecation(pkg, SCHEMA_PACKAGE, ""),
        name: p.name.clone(),
        default_channel: p.default_channel.clone(),
        description: p.description.clone(),
        icon_base64,
        icon_media_type,
        has_icon,
        // The model keeps channels by name, which is the order the API lists them in.
        channels: pkg
            .channels
            .values()
            .map(|c| index_channel(pkg, c))
            .collect(),
    }
}

/// Builds the index from the model of a catalog that validated (so the model left nothing
/// out). `bundle_spans` and `other_spans` follow the config's bundle and other blobs.
fn assemble(
    model: &Model<'_>,
    others: &[declcfg::Meta],
    files: Vec<SourceFile>,
    bundle_spans: &[Span],
    other_spans: Vec<Span>,
) -> CatalogIndex {
    // Packages and, within each, bundles by name: the order the API lists them in.
    let packages = model.packages.values().map(index_package).collect();
    let mut bundles = Vec::with_capacity(bundle_spans.len());
    for pkg in model.packages.values() {
        let first = bundles.len();
        bundles.extend(pkg.bundles.iter().map(|b| {
            let span = bundle_spans.get(b.index).cloned().unwrap_or_default();
            index_bundle(pkg, b.blob, span)
        }));
        bundles[first..].sort_by(|a: &index_pb::Bundle, b| a.name.cmp(&b.name));
    }
    let others = others
        .iter()
        .zip(other_spans)
        .map(|(m, span)| CustomBlob {
            schema: m.schema.clone(),
            package: m.package.clone(),
            name: m.name.clone(),
            span: Some(span),
        })
        .collect();

    CatalogIndex {
        format: INDEX_FORMAT,
        generator: format!("olmkit-catalog-server {}", env!("CARGO_PKG_VERSION")),
        files,
        packages,
        bundles,
        others,
    }
}
