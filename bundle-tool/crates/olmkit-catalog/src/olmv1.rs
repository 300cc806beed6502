//! OLM v1 support of a bundle directory, as `bundle-tool validate` and `release` report it:
//! the bundle crate's pure checks (`olmkit_bundle::validate::olmv1`, operator-controller's
//! registry+v1 limits) fed with the properties opm would render for the bundle, so that
//! validating a bundle needs neither the cluster client nor a second copy of opm's rules.

use crate::render::{RenderBundleError, RenderOptions};
use crate::render_opm::render_bundle;
use olmkit_bundle::validate::olmv1::{
    Olmv1Bundle, Olmv1Property, check_olmv1_support, render_failed,
};
use olmkit_core::Finding;

/// The OLM v1 findings of a loaded bundle directory. When the bundle cannot be rendered, one
/// `olmv1-render` error says why (the other checks need the rendered properties); without a
/// CSV, none: the default suite reports that.
pub fn bundle_findings(bundle: &olmkit_bundle::Bundle) -> Vec<Finding> {
    // opm's rules, with one olm.csv.metadata instead of every manifest embedded.
    let mut options = RenderOptions::opm();
    options.bundle_objects = false;
    let rendered = match render_bundle(bundle, "bundle-image.invalid/placeholder:latest", &options)
    {
        Ok(r) => r,
        Err(RenderBundleError::NoCsv(_)) => return Vec::new(),
        Err(e) => {
            let file = match &e {
                RenderBundleError::Missing { file, .. }
                | RenderBundleError::Invalid { file, .. } => Some(file.as_str()),
                _ => None,
            };
            return vec![render_failed(file, e.to_string())];
        }
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
