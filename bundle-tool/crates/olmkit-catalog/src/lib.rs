//! File-Based Catalogs: model, loader, writer, opm-compatible validation, templates, upgrade
//! graphs and explain.
//!
//! The concerns are kept apart:
//! - [`declcfg`]: the FBC blob types, the opm-compatible directory loader and writer (no
//!   judgement); [`property`]: typed views of well-known properties.
//! - [`model`]: the catalog as packages, channels (with their resolved upgrade graphs) and
//!   bundles, converted from the blobs like opm's `ConvertToModel` (problems are recorded, not
//!   fatal); [`validate`]: every rule `opm validate` enforces, as findings over the model (a
//!   `RULES` table, one file per area, no I/O); skipRanges are [`olmkit_core::version_range`].
//! - [`render`]: registry+v1 bundle directory to `olm.bundle` (opm's rules in [`render_opm`],
//!   with Go's unstable sort in [`gosort`]); [`template`]: basic and semver catalog templates.
//! - [`declcfg::opm`]: what `opm render` does to a catalog between reading and printing it.
//! - [`graph`]: per-channel upgrade graphs; [`graph_draw`]: text, Mermaid, DOT, SVG;
//!   [`explain`]: OLM v0/v1 upgrade replay and channel-switch gaps.
//! - [`change`]: a release's or a promotion's changes as data, and the graph edit applying
//!   them (olmkit-release plans them); [`catalog_dir`]: our `catalog/<package>/` files, atomic
//!   updates and the re-render check.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod catalog_dir;
pub mod change;
pub mod declcfg;
pub mod explain;
pub mod gosort;
pub mod graph;
pub mod graph_draw;
pub mod init;
pub mod model;
pub mod olmv1;
pub mod property;
pub mod render;
pub mod render_opm;
pub mod template;
pub mod validate;
