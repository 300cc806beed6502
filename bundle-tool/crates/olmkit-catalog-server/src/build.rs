//! Turning a catalog directory into a [`CatalogIndex`]: everything the server answers from
//! memory, plus the byte span of each blob so payloads can be read lazily.
//!
//! Files are walked like `opm serve` walks them (the catalog crate's walker, `.indexignore`
//! honoured), cut into documents by [`crate::split`] and parsed by the catalog crate's parser,
//! a few files at a time, so memory holds one document per worker plus the graph — never the
//! catalog. `olm.bundle.object` payloads are decoded once to prove they load (opm refuses to
//! serve a catalog whose objects do not decode) and dropped.
//!
//! Whether the catalog can be served is decided by the same rules as `opm validate`
//! ([`olmkit_catalog::validate`]), which is what opm's cache build enforces through
//! `declcfg.ConvertToModel`, plus the checks opm makes while converting bundles for the API
//! (`pkg/api/model_to_api.go`: at most one `olm.csv.metadata`, and one that decodes). Every
//! problem is reported, not only the first.

use crate::gojson;
use crate::index_pb::{
    self, CatalogIndex, Channel, CustomBlob, Entry, Gvk, Package, SourceFile, Span, TypedValue,
};
use crate::payload;
use crate::split::{self, Format, Splitter};
use olmkit_catalog::declcfg::{
    Blob, Bundle, DeclarativeConfig, LoadCatalogError, LoadOptions, SCHEMA_BUNDLE, SCHEMA_CHANNEL,
    SCHEMA_PACKAGE, catalog_files,
    load::{Origins, load_bytes},
};
use olmkit_catalog::property;
use olmkit_catalog::validate::{channel_heads, object_path, rules, validate};
use olmkit_core::findings::{Finding, Report};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
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

fn scan_file(
    root: &Path,
    path: &Path,
    opts: &BuildOptions,
) -> Result<ScannedFile, LoadCatalogError> {
    let rel = rel_name(root, path);
    let read_err = |source| LoadCatalogError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let size = file.metadata().map_err(read_err)?.len();
    let mut reader = BufReader::with_capacity(1 << 18, file);
    let format = split::sniff(reader.fill_buf().map_err(read_err)?);
    let yaml = format == Format::Yaml;
    let mut out = ScannedFile {
        rel,
        size,
        yaml,
        blobs: Vec::new(),
        findings: Vec::new(),
    };
    match scan_split(root, reader, format, opts, &mut out)? {
        Ok(()) => Ok(out),
        Err(NeedsWholeFile) => {
            // The piece-wise parse disagreed with the file; load it the ordinary way so the
            // result (or the error) is exactly what every other command sees.
            out.blobs.clear();
            out.findings.clear();
            let bytes = std::fs::read(path).map_err(read_err)?;
            let sha = digest(opts.checksums, &bytes);
            let blobs = load_bytes(&out.rel, &bytes, &LoadOptions::default())?;
            drop(bytes);
            for at in blobs {
                let span = Span {
                    file: 0,
                    offset: 0,
                    length: size,
                    sha256: sha.clone(),
                    document: u32::try_from(at.index).unwrap_or(u32::MAX),
                    whole_file: true,
                };
                push_blob(root, &mut out, at.index, at.blob, span);
            }
            Ok(out)
        }
    }
}

fn scan_split(
    root: &Path,
    reader: BufReader<std::fs::File>,
    format: Format,
    opts: &BuildOptions,
    out: &mut ScannedFile,
) -> Result<Result<(), NeedsWholeFile>, LoadCatalogError> {
    let mut index = 0usize;
    for raw in Splitter::new(reader, format) {
        let raw = match raw {
            Ok(raw) => raw,
            Err(split::SplitError::Io(source)) => {
                return Err(LoadCatalogError::Read {
                    path: root.join(&out.rel),
                    source,
                });
            }
            Err(_) => return Ok(Err(NeedsWholeFile)),
        };
        // JSON goes through the catalog loader's fast path, which checks bundle-object data
        // in place and drops it without copying (most of a big catalog's bytes); YAML keeps
        // the objects so that `push_blob` can check them.
        // The fast path also drops `ref` objects unchecked; the few documents that mention a
        // `"ref"` key keep their objects so the referenced files are checked too.
        let load_opts = match format {
            Format::Json if memchr::memmem::find(&raw.bytes, b"\"ref\"").is_none() => {
                LoadOptions::graph_only()
            }
            _ => LoadOptions::default(),
        };
        let mut blobs = match load_bytes(&out.rel, &raw.bytes, &load_opts) {
            Ok(b) => b,
            Err(LoadCatalogError::Blob { message, .. }) => {
                return Err(LoadCatalogError::Blob {
                    file: out.rel.clone(),
                    index,
                    message,
                });
            }
            // Parse errors are reported from the whole file, with the loader's positions.
            Err(_) => return Ok(Err(NeedsWholeFile)),
        };
        let blob = match blobs.len() {
            0 => continue,
            1 => blobs.swap_remove(0).blob,
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
        push_blob(root, out, index, blob, span);
        index += 1;
    }
    Ok(Ok(()))
}

/// Checks a bundle's payload properties the way opm's loader and API conversion do, then drops
/// the `olm.bundle.object` payloads (they are read again from disk when asked for).
fn push_blob(root: &Path, out: &mut ScannedFile, index: usize, blob: Blob, span: Span) {
    let blob = match blob {
        Blob::Bundle(mut b) => {
            let path = object_path(&b.package, None, Some(&b.name));
            let mut metas = 0usize;
            for (i, p) in b.properties.iter().enumerate() {
                if p.type_ == property::BUNDLE_OBJECT {
                    // Either step's text goes into the finding as is.
                    let checked: Result<_, Box<dyn std::error::Error>> =
                        payload::object_bytes(&p.value, root, &out.rel)
                            .map_err(Into::into)
                            .and_then(|bytes| Ok(payload::object_to_json(bytes, &out.rel)?));
                    if let Err(e) = checked {
                        out.findings.push(
                            Finding::error(
                                rules::BUNDLE_PROPERTIES,
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
                    let r = scan_file(root, path, opts);
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

    let mut report = validate(&cfg, Some(&origins));
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
    let index = assemble(cfg, source_files, bundle_spans, other_spans);
    Ok(BuiltIndex { index, report })
}

#[derive(Default)]
struct Deprecations {
    package: Option<String>,
    channels: HashMap<String, String>,
    bundles: HashMap<String, String>,
}

fn deprecation(message: Option<&String>) -> Option<index_pb::Deprecation> {
    message.map(|m| index_pb::Deprecation { message: m.clone() })
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

fn index_bundle(
    b: Bundle,
    span: Span,
    deprecations: &HashMap<String, Deprecations>,
) -> index_pb::Bundle {
    let mut out = index_pb::Bundle {
        deprecation: deprecation(
            deprecations
                .get(&b.package)
                .and_then(|d| d.bundles.get(&b.name)),
        ),
        objects: u32::try_from(b.omitted_objects).unwrap_or(u32::MAX),
        span: Some(span),
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
    out.name = b.name;
    out.package = b.package;
    out.image = b.image;
    out
}

fn assemble(
    cfg: DeclarativeConfig,
    files: Vec<SourceFile>,
    bundle_spans: Vec<Span>,
    other_spans: Vec<Span>,
) -> CatalogIndex {
    let mut deps: HashMap<String, Deprecations> = HashMap::new();
    for d in &cfg.deprecations {
        let slot = deps.entry(d.package.clone()).or_default();
        for e in &d.entries {
            match e.reference.schema.as_str() {
                SCHEMA_PACKAGE => slot.package = Some(e.message.clone()),
                SCHEMA_CHANNEL => {
                    slot.channels
                        .insert(e.reference.name.clone(), e.message.clone());
                }
                SCHEMA_BUNDLE => {
                    slot.bundles
                        .insert(e.reference.name.clone(), e.message.clone());
                }
                _ => {}
            }
        }
    }

    let mut channels_of: BTreeMap<String, Vec<Channel>> = BTreeMap::new();
    for c in &cfg.channels {
        let head = channel_heads(c)
            .first()
            .map(|h| (*h).to_string())
            .unwrap_or_default();
        channels_of
            .entry(c.package.clone())
            .or_default()
            .push(Channel {
                name: c.name.clone(),
                head,
                deprecation: deprecation(
                    deps.get(&c.package).and_then(|d| d.channels.get(&c.name)),
                ),
                entries: c
                    .entries
                    .iter()
                    .map(|e| Entry {
                        name: e.name.clone(),
                        replaces: e.replaces.clone(),
                        skips: e.skips.clone(),
                        skip_range: e.skip_range.clone(),
                    })
                    .collect(),
            });
    }

    let mut packages: Vec<Package> = cfg
        .packages
        .into_iter()
        .map(|p| {
            let mut channels = channels_of.remove(&p.name).unwrap_or_default();
            channels.sort_by(|a, b| a.name.cmp(&b.name));
            let (has_icon, icon_base64, icon_media_type) = match p.icon {
                Some(i) => (true, i.base64data, i.mediatype),
                None => (false, String::new(), String::new()),
            };
            Package {
                deprecation: deprecation(deps.get(&p.name).and_then(|d| d.package.as_ref())),
                name: p.name,
                default_channel: p.default_channel,
                description: p.description,
                icon_base64,
                icon_media_type,
                has_icon,
                channels,
            }
        })
        .collect();
    packages.sort_by(|a, b| a.name.cmp(&b.name));

    let mut bundles: Vec<index_pb::Bundle> = cfg
        .bundles
        .into_iter()
        .zip(bundle_spans)
        .map(|(b, span)| index_bundle(b, span, &deps))
        .collect();
    bundles.sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));

    let others = cfg
        .others
        .into_iter()
        .zip(other_spans)
        .map(|(m, span)| CustomBlob {
            schema: m.schema,
            package: m.package,
            name: m.name,
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
