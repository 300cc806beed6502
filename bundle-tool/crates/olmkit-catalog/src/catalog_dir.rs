//! Our on-disk catalog: `catalog/<package>/catalog.yaml` (or `.json`), one file per package,
//! each written exactly as `opm render` groups and orders it (what opm's `WriteFS` produces).
//!
//! Updates are planned on a catalog loaded without bundle objects, then applied to the full
//! blobs of only the files that hold the package, and staged in an `olmkit_core::fsio`
//! [`Changeset`] so that the whole update lands or nothing does. [`verify`] re-renders the
//! catalog's `olm.bundle` blobs from bundle directories and reports every difference: the
//! catalog must be reproducible from `bundle/` plus the channel membership it records.

use crate::change::{Change, apply};
use crate::declcfg::load::{Origins, load_dir_with_files, load_file_in};
use crate::declcfg::write::write_config;
use crate::declcfg::{Blob, DeclarativeConfig, LoadCatalogError, LoadOptions, WriteFormat};
use olmkit_core::docs::RenderDocumentError;
use olmkit_core::fsio::{Changeset, WriteOutputError};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The catalog could not be updated; nothing was written.
#[derive(Debug, Error)]
pub enum WriteCatalogError {
    /// Reading the current catalog failed.
    #[error(transparent)]
    Load(#[from] LoadCatalogError),
    /// Rendering failed.
    #[error(transparent)]
    Render(#[from] RenderDocumentError),
    /// Writing failed (the previous contents are kept).
    #[error(transparent)]
    Write(#[from] WriteOutputError),
}

/// A catalog directory as loaded for planning.
#[derive(Clone, Debug, Default)]
pub struct CatalogDir {
    /// The directory.
    pub dir: PathBuf,
    /// Blobs, without `olm.bundle.object` payloads.
    pub config: DeclarativeConfig,
    /// Source file of every blob.
    pub origins: Origins,
}

impl CatalogDir {
    /// Loads a catalog directory for planning; a missing directory is an empty catalog (the
    /// first release creates it).
    pub fn open(dir: &Path) -> Result<Self, LoadCatalogError> {
        if !dir.exists() {
            return Ok(Self {
                dir: dir.to_path_buf(),
                ..Default::default()
            });
        }
        let (config, origins) = load_dir_with_files(dir, &LoadOptions::graph_only())?;
        Ok(Self {
            dir: dir.to_path_buf(),
            config,
            origins,
        })
    }

    /// Files holding any blob of `package`, sorted.
    pub fn files_of(&self, package: &str) -> BTreeSet<String> {
        let c = &self.config;
        let o = &self.origins;
        let mut files = BTreeSet::new();
        let mut add = |list: &[String], i: usize| {
            if let Some(f) = list.get(i) {
                files.insert(f.clone());
            }
        };
        for (i, p) in c.packages.iter().enumerate() {
            if p.name == package {
                add(&o.packages, i);
            }
        }
        for (i, x) in c.channels.iter().enumerate() {
            if x.package == package {
                add(&o.channels, i);
            }
        }
        for (i, x) in c.bundles.iter().enumerate() {
            if x.package == package {
                add(&o.bundles, i);
            }
        }
        for (i, x) in c.deprecations.iter().enumerate() {
            if x.package == package {
                add(&o.deprecations, i);
            }
        }
        for (i, x) in c.others.iter().enumerate() {
            if x.package == package {
                add(&o.others, i);
            }
        }
        files
    }

    /// The format already used for `package` (by its file's extension), else YAML.
    pub fn format_of(&self, package: &str) -> WriteFormat {
        match self.files_of(package).iter().next() {
            Some(f) if f.ends_with(".json") => WriteFormat::Json,
            _ => WriteFormat::CatalogYaml,
        }
    }
}

/// Path of a package's file relative to the catalog root.
pub fn package_file(package: &str, format: WriteFormat) -> PathBuf {
    PathBuf::from(package).join(format!("catalog.{}", format.extension()))
}

fn render(cfg: &DeclarativeConfig, format: WriteFormat) -> Result<Vec<u8>, RenderDocumentError> {
    let mut buf = Vec::new();
    write_config(&mut buf, cfg, format)?;
    Ok(buf)
}

/// Stages the update of one package in `cs`. `prefix` is the catalog directory relative to
/// the changeset root (empty when the changeset is rooted at the catalog). The package's blobs
/// are read in full from their files, changed, and written to `<package>/catalog.<ext>`;
/// other packages' blobs sharing those files are written back unchanged.
pub fn stage_package_update(
    cs: &mut Changeset,
    prefix: &Path,
    catalog: &CatalogDir,
    package: &str,
    changes: &[Change],
    format: WriteFormat,
) -> Result<(), WriteCatalogError> {
    let mut mine = DeclarativeConfig::default();
    let mut rewrites: BTreeMap<String, DeclarativeConfig> = BTreeMap::new();
    let files = catalog.files_of(package);
    // The package's files, read confined to the catalog (which exists when it has any).
    let root = match files.is_empty() {
        true => None,
        false => Some(
            olmkit_core::confine::InputRoot::new(&catalog.dir).map_err(LoadCatalogError::from)?,
        ),
    };
    for file in files {
        let Some(root) = &root else { break };
        let blobs = load_file_in(
            root,
            &catalog.dir.join(&file),
            &file,
            &LoadOptions::default(),
        )?;
        let others = rewrites.entry(file.clone()).or_default();
        for at in blobs {
            let owner = match &at.blob {
                Blob::Package(p) => p.name.as_str(),
                other => other.package(),
            };
            if owner == package {
                mine.push(at.blob);
            } else {
                others.push(at.blob);
            }
        }
    }
    apply(&mut mine, changes);
    let target = package_file(package, format);
    for (file, others) in &rewrites {
        let rel = prefix.join(file);
        if others.is_empty() {
            cs.remove(&rel)?;
        } else {
            let keep = if file.ends_with(".json") {
                WriteFormat::Json
            } else {
                WriteFormat::CatalogYaml
            };
            cs.put_file(&rel, &render(others, keep)?)?;
        }
    }
    cs.put_file(prefix.join(&target), &render(&mine, format)?)?;
    Ok(())
}

/// Applies `changes` to `package` in the catalog directory, all or nothing.
pub fn write_package_update(
    catalog: &CatalogDir,
    package: &str,
    changes: &[Change],
    format: WriteFormat,
) -> Result<(), WriteCatalogError> {
    let mut cs = Changeset::new(&catalog.dir)?;
    stage_package_update(&mut cs, Path::new(""), catalog, package, changes, format)?;
    cs.commit()?;
    Ok(())
}

/// Result of [`verify`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Bundle directories whose CSV is not in the catalog.
    pub not_in_catalog: Vec<String>,
    /// Catalog bundles of the verified packages with no bundle directory.
    pub no_bundle_dir: Vec<String>,
    /// Bundles whose blob differs from a fresh render: (bundle, unified diff).
    pub differs: Vec<(String, String)>,
}

impl VerifyReport {
    /// True when the catalog matches the bundle directories.
    pub fn is_clean(&self) -> bool {
        self.not_in_catalog.is_empty() && self.no_bundle_dir.is_empty() && self.differs.is_empty()
    }
    /// Human-readable report.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for b in &self.not_in_catalog {
            out.push_str(&format!(
                "bundle {b}: has a bundle directory but is not in the catalog\n"
            ));
        }
        for b in &self.no_bundle_dir {
            out.push_str(&format!(
                "bundle {b}: in the catalog but no bundle directory renders it\n"
            ));
        }
        for (b, diff) in &self.differs {
            out.push_str(&format!(
                "bundle {b}: catalog blob differs from its bundle directory (- catalog, + re-rendered):\n{diff}"
            ));
        }
        if self.is_clean() {
            out.push_str("catalog matches the bundle directories\n");
        }
        out
    }
}

/// Re-renders the `olm.bundle` blobs of the catalog from `bundle_dirs` (each with the image the
/// catalog records for it, and with `olm.bundle.object`s when the catalog blob has them) and
/// compares. Packages without any bundle directory are not checked.
pub fn verify(
    catalog_dir: &Path,
    bundle_dirs: &[olmkit_bundle::Bundle],
) -> Result<VerifyReport, VerifyCatalogError> {
    let (cfg, _) = load_dir_with_files(catalog_dir, &LoadOptions::default())?;
    let mut report = VerifyReport::default();
    let mut packages = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for dir in bundle_dirs {
        let Some(name) = dir.csv_name() else {
            return Err(VerifyCatalogError::Render(
                crate::render::RenderBundleError::NoCsv(dir.root.display().to_string()),
            ));
        };
        if let Some(p) = dir.package() {
            packages.insert(p.to_string());
        }
        let Some(existing) = cfg
            .bundles
            .iter()
            .find(|b| b.name == name && Some(b.package.as_str()) == dir.package())
        else {
            report.not_in_catalog.push(name.to_string());
            continue;
        };
        seen.insert(existing.name.clone());
        let objects = existing
            .properties
            .iter()
            .any(|p| p.type_ == crate::property::BUNDLE_OBJECT);
        // Our catalog is written in bundle-tool's release style; catalogs from `catalog
        // from-bundles` (and opm) in opm's: either matches.
        let opts = crate::render::RenderOptions {
            bundle_objects: objects,
        };
        let fresh = crate::render::render_bundle_release(dir, &existing.image, &opts)?;
        let matches_opm = || -> Result<bool, VerifyCatalogError> {
            let mut opm = crate::render_opm::render_bundle(dir, &existing.image, &opts)?;
            let mut mine = existing.clone();
            crate::declcfg::opm::normalize_bundle(&mut mine);
            crate::declcfg::opm::normalize_bundle(&mut opm);
            Ok(opm == mine)
        };
        if &fresh != existing && !matches_opm()? {
            let a = crate::declcfg::render_blobs(
                &[Blob::Bundle(existing.clone())],
                WriteFormat::CatalogYaml,
            )?;
            let b = crate::declcfg::render_blobs(&[Blob::Bundle(fresh)], WriteFormat::CatalogYaml)?;
            let diff = similar::TextDiff::from_lines(&a, &b)
                .unified_diff()
                .context_radius(2)
                .header("catalog", "bundle directory")
                .to_string();
            report.differs.push((existing.name.clone(), diff));
        }
    }
    for b in cfg.bundles.iter().filter(|b| packages.contains(&b.package)) {
        if !seen.contains(&b.name) {
            report.no_bundle_dir.push(b.name.clone());
        }
    }
    report.not_in_catalog.sort();
    report.no_bundle_dir.sort();
    Ok(report)
}

/// [`verify`] could not run.
#[derive(Debug, Error)]
pub enum VerifyCatalogError {
    /// The catalog does not load.
    #[error(transparent)]
    Load(#[from] LoadCatalogError),
    /// A bundle directory does not render.
    #[error(transparent)]
    Render(#[from] crate::render::RenderBundleError),
    /// Output rendering failed.
    #[error(transparent)]
    Output(#[from] RenderDocumentError),
}

/// Builds a catalog from bundle directories: one `olm.bundle` per directory, channels from each
/// bundle's annotations with the CSV's `replaces`, `skips` and `olm.skipRange` as entries, and the
/// default channel from the annotations of the newest bundle that sets one. This is how the
/// registry+v1 ("replaces mode") catalogs of community operators are formed.
pub fn catalog_from_bundles(
    bundles: &[(olmkit_bundle::Bundle, String)],
    opts: &crate::render::RenderOptions,
    mode: UpdateGraph,
) -> Result<DeclarativeConfig, crate::render::RenderBundleError> {
    let (cfg, mut failed) = catalog_from_bundles_lenient(bundles, opts, mode);
    match failed.is_empty() {
        true => Ok(cfg),
        false => Err(failed.remove(0).1),
    }
}

/// Like [`catalog_from_bundles`], but a bundle that does not render is left out and returned
/// with its directory instead of failing the whole catalog: one bad bundle must not hide the
/// others (opm renders bundles one by one).
pub fn catalog_from_bundles_lenient(
    bundles: &[(olmkit_bundle::Bundle, String)],
    opts: &crate::render::RenderOptions,
    mode: UpdateGraph,
) -> (
    DeclarativeConfig,
    Vec<(PathBuf, crate::render::RenderBundleError)>,
) {
    let mut cfg = DeclarativeConfig::default();
    let mut failed = Vec::new();
    let mut channels: BTreeMap<(String, String), Vec<crate::declcfg::ChannelEntry>> =
        BTreeMap::new();
    let mut defaults: BTreeMap<String, (Option<semver::Version>, String)> = BTreeMap::new();
    for (dir, image) in bundles {
        let blob = match crate::render_opm::render_bundle(dir, image, opts) {
            Ok(b) => b,
            Err(e) => {
                failed.push((dir.root.clone(), e));
                continue;
            }
        };
        let edges = crate::render::declared_edges(dir);
        let version = crate::model::bundle_version(&blob);
        for ch in dir.channels() {
            channels
                .entry((blob.package.clone(), ch))
                .or_default()
                .push(crate::declcfg::ChannelEntry {
                    name: blob.name.clone(),
                    replaces: edges.replaces.clone(),
                    skips: edges.skips.clone(),
                    skip_range: edges.skip_range.clone(),
                });
        }
        if let Some(d) = dir.default_channel().filter(|d| !d.is_empty()) {
            let slot = defaults
                .entry(blob.package.clone())
                .or_insert((None, String::new()));
            let newer = match (&slot.0, &version) {
                (None, _) => true,
                (Some(a), Some(b)) => b.cmp_precedence(a).is_gt(),
                (Some(_), None) => false,
            };
            if newer {
                *slot = (version.clone(), d.to_string());
            }
        }
        cfg.bundles.push(blob);
    }
    let packages: BTreeSet<String> = cfg.bundles.iter().map(|b| b.package.clone()).collect();
    for p in packages {
        let default = defaults.get(&p).map(|d| d.1.clone()).unwrap_or_else(|| {
            channels
                .keys()
                .find(|(pk, _)| pk == &p)
                .map(|(_, c)| c.clone())
                .unwrap_or_default()
        });
        cfg.packages.push(crate::declcfg::Package {
            schema: crate::declcfg::SCHEMA_PACKAGE.into(),
            name: p,
            default_channel: default,
            icon: None,
            description: String::new(),
            properties: Vec::new(),
        });
    }
    let versions: BTreeMap<String, semver::Version> = cfg
        .bundles
        .iter()
        .filter_map(|b| crate::model::bundle_version(b).map(|v| (b.name.clone(), v)))
        .collect();
    for ((package, name), mut entries) in channels {
        if mode == UpdateGraph::SemverMode {
            // community-operators' semver-mode: order by version and chain each bundle to the
            // next lower one, whatever the CSVs say about replaces.
            entries.sort_by(
                |a, b| match (versions.get(&a.name), versions.get(&b.name)) {
                    (Some(x), Some(y)) => x.cmp_precedence(y),
                    _ => a.name.cmp(&b.name),
                },
            );
            let mut prev = String::new();
            for e in &mut entries {
                e.replaces = std::mem::replace(&mut prev, e.name.clone());
            }
        }
        cfg.channels.push(crate::declcfg::Channel {
            schema: crate::declcfg::SCHEMA_CHANNEL.into(),
            name,
            package,
            entries,
            properties: Vec::new(),
        });
    }
    (cfg, failed)
}

/// How channel edges are formed from bundle directories (community-operators' `updateGraph`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpdateGraph {
    /// Edges are the CSVs' replaces, skips and olm.skipRange.
    #[default]
    ReplacesMode,
    /// Each bundle replaces the next lower version of its channel; skips and skipRange kept.
    SemverMode,
}

impl UpdateGraph {
    /// Reads `updateGraph` from a community-operators `ci.yaml` next to the bundle folders
    /// (through [`olmkit_core::confine::InputRoot`]: a ci.yaml that may not be read, a FIFO or a
    /// link out of `dir`, is left out with a warning naming it).
    pub fn from_ci_yaml(dir: &Path) -> Option<Self> {
        use olmkit_core::confine::{InputRoot, MANIFEST_FILE, ReadConfinedError};
        let path = dir.join("ci.yaml");
        let read = InputRoot::new(dir)
            .map_err(ReadConfinedError::from)
            .and_then(|root| root.read(&path, MANIFEST_FILE));
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(ReadConfinedError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return None;
            }
            Err(ReadConfinedError::Confine(olmkit_core::confine::ConfineError::Resolve {
                ..
            })) => return None,
            Err(e) => {
                olmkit_core::docs::warn(&olmkit_core::docs::ParseWarning {
                    source_name: path.display().to_string(),
                    line: None,
                    message: format!("ignored: {e}"),
                });
                return None;
            }
        };
        let doc = olmkit_core::docs::parse_document("ci.yaml", &bytes).ok()?;
        match doc.get("updateGraph")?.as_str()? {
            "semver-mode" => Some(Self::SemverMode),
            "replaces-mode" => Some(Self::ReplacesMode),
            _ => None,
        }
    }
}

/// Bundle directories under `dir`: `dir` itself when it has `manifests/` and `metadata/` (what
/// opm takes as a bundle), else every directory below it that has them, down to two levels
/// (`bundle/<version>/` or `bundle/<package>/<version>/`), skipping hidden directories and the
/// `bundle/`/`certification/` copies some repositories keep inside a version folder; sorted by
/// path.
pub fn find_bundle_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    fn walk(dir: &Path, depth: u8, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        // Copies of a bundle kept below a version folder for other pipelines
        // (`<package>/<version>/bundle/`, `.../certification/`) are not more bundles.
        if depth == 0
            && dir
                .file_name()
                .is_some_and(|n| n == "bundle" || n == "certification")
        {
            return Ok(());
        }
        if dir.join("manifests").is_dir() && dir.join("metadata").is_dir() {
            out.push(dir.to_path_buf());
            return Ok(());
        }
        if depth == 0 {
            return Ok(());
        }
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            let hidden = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if p.is_dir() && !hidden {
                walk(&p, depth - 1, out)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, 2, &mut out)?;
    out.sort();
    Ok(out)
}
