//! Shared plumbing of bundle-tool's library crates.
//!
//! Owns what every command needs and nobody should write twice: all-or-nothing output
//! ([`fsio`]), findings and their text/JSON reports ([`findings`]), validator rules and the
//! one-line way checks report them ([`rule`]), YAML/JSON documents with the
//! input named in every error ([`docs`]), and reproducible timestamps from `SOURCE_DATE_EPOCH`
//! ([`epoch`]).
//!
//! It is also the one home of the small grammars several crates (and the operator) need, each
//! mirroring its upstream definition: OLM skipRanges and command-line versions
//! ([`version_range`], blang/semver), Go durations ([`duration`]), Dockerfile `LABEL`s
//! ([`dockerfile`], moby's parser), Kubernetes names ([`k8s_name`], apimachinery) and image
//! references ([`image_ref`], distribution/reference). And of how Go writes what upstream
//! writes: JSON ([`gojson`], encoding/json's escaping and map key order) and YAML ([`goyaml`],
//! go-yaml's emitter). And of the one lenient typed view of a ClusterServiceVersion ([`csv`]),
//! read in place over the raw JSON.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod confine;
pub mod csv;
pub mod dockerfile;
pub mod docs;
pub mod duration;
pub mod epoch;
pub mod findings;
pub mod fsio;
pub mod gojson;
pub mod goyaml;
pub mod image_ref;
pub mod k8s_name;
pub mod object;
pub mod rule;
pub mod version_range;

pub use findings::{Finding, Report, Severity};
pub use rule::{Findings, Rule, Upstream};
