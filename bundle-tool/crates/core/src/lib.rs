//! Shared plumbing of bundle-tool's library crates.
//!
//! Owns what every command needs and nobody should write twice: all-or-nothing output
//! ([`fsio`]), findings and their text/JSON reports ([`findings`]), YAML/JSON documents with the
//! input named in every error ([`docs`]), and reproducible timestamps from `SOURCE_DATE_EPOCH`
//! ([`epoch`]).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod confine;
pub mod docs;
pub mod epoch;
pub mod findings;
pub mod fsio;
pub mod goyaml;

pub use findings::{Finding, Report, Severity};
