//! The helpers the suites of this test binary share, each compiled once (a suite takes one
//! with `use crate::harness::<name> as <its local name>;`).

pub mod operator_harness;
pub mod operator_olm;
