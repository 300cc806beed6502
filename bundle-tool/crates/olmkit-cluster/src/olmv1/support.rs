//! Can OLM v1 install this bundle? The checks live with the other bundle validators
//! ([`olmkit_bundle::validate::olmv1`], so validating a bundle needs no cluster client); this
//! module runs them on a [`BundleFacts`], the bundle as read from a directory or a catalog.

use super::BundleFacts;
use olmkit_core::findings::Report;

/// Manifest kinds OLM v1's registry+v1 renderer accepts besides the CSV (operator-controller
/// `CheckObjectSupport`).
pub use olmkit_bundle::validate::olmv1::SUPPORTED_KINDS;

/// Checks a bundle against OLM v1's rules; every problem is reported.
pub fn check_olmv1_support(facts: &BundleFacts) -> Report {
    olmkit_bundle::validate::olmv1::check_olmv1_support(&facts.olmv1_view())
}
