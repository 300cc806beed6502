//! registry+v1 bundles: model, loading, generation and validation.
//!
//! A bundle is a directory with `manifests/` (a ClusterServiceVersion, CRDs and other objects),
//! `metadata/annotations.yaml` and usually a `bundle.Dockerfile`. This crate keeps the concerns
//! apart: [`model`] is the in-memory form, [`load`] reads it from disk without judging it.

pub mod load;
pub mod model;

pub use load::{LoadBundleError, load_bundle_dir};
pub use model::{Bundle, Manifest};
