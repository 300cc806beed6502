//! File-Based Catalogs: model, loader, writer, opm-compatible validation, templates, upgrade
//! graphs and explain.
//!
//! [`declcfg`] is the on-disk blob format (load and write, no judgement); [`property`] gives
//! typed views of well-known properties.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod declcfg;
pub mod explain;
pub mod graph;
pub mod graph_render;
pub mod layout;
pub mod property;
pub mod release;
pub mod render;
pub mod template;
pub mod validate;
pub mod version_range;
