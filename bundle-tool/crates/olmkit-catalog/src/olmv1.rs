//! OLM v1 support of a bundle directory, as `bundle-tool validate` and `release` report it:
//! the bundle crate's pure checks (`olmkit_bundle::validate::olmv1`, operator-controller's
//! registry+v1 limits) fed with the properties opm would render for the bundle, so that
//! validating a bundle needs neither the cluster client nor a second copy of opm's rules.

use crate::render::{RenderOptions, render_bundle};
use olmkit_bundle::validate::olmv1::{Olmv1Bundle, Olmv1Property, check_olmv1_support};
use olmkit_core::Finding;

/// The OLM v1 findings of a loaded bundle directory. Empty when the bundle cannot be rendered
/// (no CSV, say): the default suite already reports why.
pub fn bundle_findings(bundle: &olmkit_bundle::Bundle) -> Vec<Finding> {
    // opm's rules, with one olm.csv.metadata instead of every manifest embedded.
    let mut options = RenderOptions::opm();
    options.bundle_objects = false;
    let Ok(rendered) = render_bundle(bundle, "bundle-image.invalid/placeholder:latest", &options)
    else {
        return Vec::new();
    };
    let properties = rendered
        .properties
        .iter()
        .map(|p| Olmv1Property {
            type_: &p.type_,
            value: &p.value,
        })
        .collect();
    Olmv1Bundle::from_bundle(bundle, &rendered.package, properties)
        .map(|view| check_olmv1_support(&view).findings)
        .unwrap_or_default()
}
