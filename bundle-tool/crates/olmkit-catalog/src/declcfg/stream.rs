//! Package-at-a-time rendering of a catalog directory, so that rendering a 1.6 GB catalog
//! holds one batch of packages in memory instead of the whole catalog.
//!
//! A first pass loads the directory's graph only (bundle objects skipped: cheap) to learn which
//! files hold which package. When every file belongs to one package — the usual layout, one
//! directory per package — packages are then loaded in full and written one small batch at a
//! time, in the order [`super::write::write_config_parallel`] writes a whole config, so the
//! bytes are the same. Any other layout (files mixing packages, blobs of no package) falls
//! back to loading everything.

use super::DeclarativeConfig;
use super::load::{
    LoadCatalogError, LoadOptions, catalog_files, load_dir_with_files, load_file_in,
};
use super::write::{WriteFormat, split_by_package, write_config};
use olmkit_core::docs::RenderDocumentError;
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Rendering a catalog directory failed.
#[derive(Debug, Error)]
pub enum RenderCatalogDirError {
    /// The directory does not load.
    #[error(transparent)]
    Load(#[from] LoadCatalogError),
    /// Output could not be produced.
    #[error(transparent)]
    Render(#[from] RenderDocumentError),
    /// A blob could not be written after the blobs before it were (opm prints those, then
    /// fails: `-o yaml` on characters go-yaml refuses).
    #[error("{source}")]
    Incomplete {
        /// The bytes of the blobs written before the failure.
        partial: Vec<u8>,
        /// Why the next blob could not be written.
        source: RenderDocumentError,
    },
}

/// How [`render_dir_streaming`] went about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenderMode {
    /// Package by package.
    PerPackage,
    /// The whole catalog at once (its files mix packages).
    Whole,
}

/// Files of each package (sorted by package name), or `None` when some file holds blobs of
/// several packages or of none.
fn files_by_package(
    root: &Path,
) -> Result<Option<BTreeMap<String, BTreeSet<String>>>, LoadCatalogError> {
    let (cfg, origins) = load_dir_with_files(root, &LoadOptions::graph_only())?;
    let mut by_package: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    let pairs = cfg
        .packages
        .iter()
        .map(|p| p.name.as_str())
        .zip(&origins.packages)
        .chain(
            cfg.channels
                .iter()
                .map(|c| c.package.as_str())
                .zip(&origins.channels),
        )
        .chain(
            cfg.bundles
                .iter()
                .map(|b| b.package.as_str())
                .zip(&origins.bundles),
        )
        .chain(
            cfg.deprecations
                .iter()
                .map(|d| d.package.as_str())
                .zip(&origins.deprecations),
        )
        .chain(
            cfg.others
                .iter()
                .map(|o| o.package.as_str())
                .zip(&origins.others),
        );
    for (package, file) in pairs {
        if package.is_empty() {
            return Ok(None);
        }
        match owner.insert(file.as_str(), package) {
            Some(other) if other != package => return Ok(None),
            _ => {}
        }
        by_package
            .entry(package.to_string())
            .or_default()
            .insert(file.clone());
    }
    Ok(Some(by_package))
}

/// Renders the catalog directory `root` to `sink` as `opm render` prints it (order, and the
/// re-encoding of [`super::opm::normalize`]), package by package when its layout allows (see
/// the module docs). Returns how it was done.
pub fn render_dir_streaming<E: From<RenderCatalogDirError>>(
    root: &Path,
    opts: &LoadOptions,
    format: WriteFormat,
    mut sink: impl FnMut(Vec<u8>) -> Result<(), E>,
) -> Result<RenderMode, E> {
    let load_err = |e: LoadCatalogError| E::from(RenderCatalogDirError::Load(e));
    let batch = rayon::current_num_threads().max(1) * 2;
    let Some(by_package) = files_by_package(root).map_err(load_err)? else {
        let mut cfg = super::load::load_dir(root, opts).map_err(load_err)?;
        // opm prints what it decoded and re-encoded.
        super::opm::normalize(&mut cfg);
        let groups: Vec<DeclarativeConfig> =
            split_by_package(cfg).into_iter().map(|(_, c)| c).collect();
        in_batches(&groups, batch, |c| render(c, format), &mut sink)?;
        return Ok(RenderMode::Whole);
    };
    // Paths as the loader names and orders them.
    let all: Vec<PathBuf> = catalog_files(root).map_err(load_err)?;
    let confine = olmkit_core::confine::InputRoot::new(root)
        .map_err(|e| load_err(LoadCatalogError::from(e)))?;
    let index: BTreeMap<String, usize> = all
        .iter()
        .enumerate()
        .map(|(i, p)| (rel(root, p), i))
        .collect();
    let packages: Vec<Vec<usize>> = by_package
        .into_values()
        .map(|files| {
            let mut idx: Vec<usize> = files.iter().filter_map(|f| index.get(f).copied()).collect();
            idx.sort_unstable();
            idx
        })
        .collect();
    let load_and_render = |files: &Vec<usize>| {
        let mut cfg = DeclarativeConfig::default();
        for &i in files {
            let path = &all[i];
            for at in load_file_in(&confine, path, &rel(root, path), opts)? {
                cfg.push(at.blob);
            }
        }
        super::opm::normalize(&mut cfg);
        render(&cfg, format)
    };
    in_batches(&packages, batch, load_and_render, &mut sink)?;
    Ok(RenderMode::PerPackage)
}

/// Renders `items` a batch at a time in parallel and hands the bytes to `sink` in order, so
/// that at most one batch is in memory.
fn in_batches<T: Sync, E: From<RenderCatalogDirError>>(
    items: &[T],
    batch: usize,
    render_one: impl Fn(&T) -> Result<Vec<u8>, RenderCatalogDirError> + Sync,
    sink: &mut impl FnMut(Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    for chunk in items.chunks(batch) {
        let rendered: Vec<Result<Vec<u8>, RenderCatalogDirError>> =
            chunk.par_iter().map(&render_one).collect();
        for r in rendered {
            match r {
                Ok(bytes) => sink(bytes)?,
                Err(RenderCatalogDirError::Incomplete { partial, source }) => {
                    sink(partial)?;
                    return Err(E::from(RenderCatalogDirError::Render(source)));
                }
                Err(e) => return Err(E::from(e)),
            }
        }
    }
    Ok(())
}

/// Writes one group of blobs (already normalised, see [`super::opm`]).
fn render(cfg: &DeclarativeConfig, format: WriteFormat) -> Result<Vec<u8>, RenderCatalogDirError> {
    let mut buf = Vec::new();
    match write_config(&mut buf, cfg, format) {
        Ok(()) => Ok(buf),
        Err(source) => Err(RenderCatalogDirError::Incomplete {
            partial: buf,
            source,
        }),
    }
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declcfg::render_config;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures")
    }

    fn streamed(dir: &Path, format: WriteFormat) -> (String, RenderMode) {
        let mut out = Vec::new();
        let mode = render_dir_streaming::<RenderCatalogDirError>(
            dir,
            &LoadOptions::default(),
            format,
            |chunk| {
                out.extend(chunk);
                Ok(())
            },
        )
        .unwrap();
        (String::from_utf8(out).unwrap(), mode)
    }

    /// Byte-identical to rendering the whole catalog at once, for every valid example catalog,
    /// this repository's catalog, and each output format.
    #[test]
    fn same_bytes_as_the_whole_catalog() {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures().join("fbc-examples/valid"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.push(fixtures().join("registry/edge-catalog"));
        dirs.push(fixtures().join("catalog/graph-demo"));
        dirs.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../catalog"));
        dirs.sort();
        let mut per_package = 0;
        for dir in &dirs {
            let mut whole = crate::declcfg::load_dir(dir, &LoadOptions::default()).unwrap();
            crate::declcfg::opm::normalize(&mut whole);
            for format in [WriteFormat::Json, WriteFormat::Yaml, WriteFormat::JsonLines] {
                let want = render_config(&whole, format).unwrap();
                let (got, mode) = streamed(dir, format);
                assert_eq!(got, want, "{} {format:?} ({mode:?})", dir.display());
                if mode == RenderMode::PerPackage && format == WriteFormat::Json {
                    per_package += 1;
                }
            }
        }
        assert!(
            per_package >= 3,
            "most example catalogs stream: {per_package}"
        );
    }

    #[test]
    fn files_mixing_packages_fall_back_to_the_whole_catalog() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("all.yaml"),
            "schema: olm.package\nname: a\n---\nschema: olm.package\nname: b\n",
        )
        .unwrap();
        let (text, mode) = streamed(d.path(), WriteFormat::Yaml);
        assert_eq!(mode, RenderMode::Whole);
        assert!(text.contains("name: a") && text.contains("name: b"));
    }
}
