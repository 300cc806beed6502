//! registry+v1 bundles: model, loading, generation and validation.
//!
//! A bundle is a directory with `manifests/` (a ClusterServiceVersion, CRDs and other objects),
//! `metadata/annotations.yaml` and usually a `bundle.Dockerfile`. This crate keeps the concerns
//! apart: [`model`] is the in-memory form, [`load`] reads bundles and manifest streams without
//! judging them, [`generate`] turns an operator's manifests into bundle files (pure, no I/O),
//! [`write`](mod@write) puts those files on disk all-or-nothing, and [`validate`] checks a loaded bundle
//! (pure, every problem reported).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod generate;
pub mod godecode;
pub(crate) mod json;
pub mod kinds;
pub mod load;
pub mod model;
pub mod naming;
pub mod schemas;
pub mod validate;
pub mod write;

pub use generate::{GenerateBundleError, GenerateOptions, GeneratedBundle, generate_bundle};
pub use load::{LoadBundleError, load_bundle_dir, load_bundle_dir_quiet};
pub use model::{Bundle, Manifest};
pub use validate::{Suite, ValidateOptions, validate_bundle};
