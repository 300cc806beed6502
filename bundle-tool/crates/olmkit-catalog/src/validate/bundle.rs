//! Bundle rules: package, duplicates, properties, the `olm.package` property and its version,
//! image pull specs, an image or objects, membership in a channel.

use super::object_path;
use super::rules::{
    BUNDLE_IMAGE, BUNDLE_NOT_IN_CHANNEL, BUNDLE_PACKAGE, BUNDLE_PROPERTIES, BUNDLE_VERSION,
    DUPLICATE_BUNDLE, IMAGE_PULLSPEC, PACKAGE_PROPERTY, UNKNOWN_PACKAGE,
};
use crate::declcfg;
use crate::model::{Bundle, Model, Package};
use crate::property::{self, PropertyShapeError};
use olmkit_core::Findings;

/// Checks an image pull spec like docker's `ParseNormalizedNamed` (what opm's
/// `declcfg_to_model` calls, through `olmkit_core::image_ref`); `None` when valid. An empty
/// spec is allowed (opm renders `image: ""` for a bundle dir without an image template).
pub fn image_pullspec_error(spec: &str) -> Option<String> {
    if spec.is_empty() {
        return None;
    }
    olmkit_core::image_ref::ImageRef::parse(spec)
        .err()
        .map(|e| e.to_string())
}

fn path(b: &declcfg::Bundle) -> String {
    object_path(&b.package, None, Some(&b.name))
}

/// A bundle without a package (`ConvertToModel`).
pub(super) fn no_package(out: &mut Findings, file: Option<&str>, b: &declcfg::Bundle) {
    out.at(file, Some(&path(b))).error(
        &BUNDLE_PACKAGE,
        format!("package name must be set for bundle {:?}", b.name),
    );
}

/// A bundle of a package without `olm.package` blob (`ConvertToModel`).
pub(super) fn unknown_package(out: &mut Findings, file: Option<&str>, b: &declcfg::Bundle) {
    out.at(file, Some(&path(b))).error(
        &UNKNOWN_PACKAGE,
        format!("unknown package {:?} for bundle {:?}", b.package, b.name),
    );
}

/// A second bundle of a name in a package (`ConvertToModel`).
pub(super) fn duplicate(out: &mut Findings, file: Option<&str>, b: &declcfg::Bundle) {
    out.at(file, Some(&path(b))).error(
        &DUPLICATE_BUNDLE,
        format!("package {:?} has duplicate bundle {:?}", b.package, b.name),
    );
}

/// A well-known property that does not parse (`ConvertToModel` via `property.Parse`).
pub(super) fn bad_property(
    out: &mut Findings,
    file: Option<&str>,
    b: &declcfg::Bundle,
    e: &PropertyShapeError,
) {
    out.at(file, Some(&path(b))).error(
        &BUNDLE_PROPERTIES,
        format!("parse properties for bundle {:?}: {e}", b.name),
    );
}

/// Not exactly one `olm.package` property (`ConvertToModel`).
pub(super) fn package_property_count(
    out: &mut Findings,
    file: Option<&str>,
    b: &declcfg::Bundle,
    found: usize,
) {
    out.at(file, Some(&path(b))).error(&PACKAGE_PROPERTY, format!(
            "package {:?} bundle {:?} must have exactly 1 {:?} property, found {found}",
            b.package,
            b.name,
            property::PACKAGE,
        )).hint(format!(
        "add `{{type: olm.package, value: {{packageName: {}, version: <semver>}}}}` to the bundle's properties",
        b.package
    ));
}

/// The `olm.package` property names another package (`ConvertToModel`).
pub(super) fn package_property_mismatch(
    out: &mut Findings,
    file: Option<&str>,
    b: &declcfg::Bundle,
    named: &str,
) {
    out.at(file, Some(&path(b))).error(
        &PACKAGE_PROPERTY,
        format!(
            "package {:?} does not match {:?} property {:?}",
            b.package,
            property::PACKAGE,
            named
        ),
    );
}

/// The `olm.package` version is not semver (`ConvertToModel`).
pub(super) fn bad_version(
    out: &mut Findings,
    file: Option<&str>,
    b: &declcfg::Bundle,
    version: &str,
    error: &str,
) {
    out.at(file, Some(&path(b)))
        .error(
            &BUNDLE_VERSION,
            format!(
                "error parsing bundle {:?} version {version:?}: {error}",
                b.name
            ),
        )
        .hint("versions are semver without a leading `v`, e.g. 1.2.3");
}

/// Rules over every bundle of the model, in blob order per package.
pub(super) fn check(model: &Model<'_>, out: &mut Findings) {
    for pkg in model.packages.values() {
        let entries = pkg.entry_names();
        for b in &pkg.bundles {
            check_images(b, out);
            check_image_or_objects(b, out);
            if !entries.contains(b.name) {
                not_in_channel(pkg, b, out);
            }
        }
    }
}

/// Bundle and related images are pull specs (`ConvertToModel` `validateImagePullSpec`).
fn check_images(b: &Bundle<'_>, out: &mut Findings) {
    let blob = b.blob;
    if let Some(e) = image_pullspec_error(&blob.image) {
        out.at(b.file, Some(&path(blob))).error(
            &IMAGE_PULLSPEC,
            format!(
                "package {:?} bundle {:?} image: invalid image pull spec {:?}: {e}",
                blob.package, blob.name, blob.image
            ),
        );
    }
    for (ri, rel) in blob.related_images.iter().enumerate() {
        if let Some(e) = image_pullspec_error(&rel.image) {
            out.at(b.file, Some(&path(blob))).error(&IMAGE_PULLSPEC, format!(
                        "package {:?} bundle {:?} relatedImages[{ri}].image: invalid image pull spec {:?}: {e}",
                        blob.package, blob.name, rel.image
                    ));
        }
    }
}

/// An image, or the bundle's objects (`model.go` `Bundle.Validate`: "bundle image must be
/// set"; objects dropped by the loader count as present).
fn check_image_or_objects(b: &Bundle<'_>, out: &mut Findings) {
    let blob = b.blob;
    let has_objects = blob.omitted_objects > 0
        || blob
            .properties
            .iter()
            .any(|p| p.type_ == property::BUNDLE_OBJECT);
    if blob.image.is_empty() && !has_objects {
        out.at(b.file, Some(&path(blob))).error(
            &BUNDLE_IMAGE,
            format!("invalid bundle {:?}: bundle image must be set", blob.name),
        );
    }
}

/// A bundle that no channel lists (`ConvertToModel`).
fn not_in_channel(pkg: &Package<'_>, b: &Bundle<'_>, out: &mut Findings) {
    out.at(b.file, Some(&path(b.blob)))
        .error(
            &BUNDLE_NOT_IN_CHANNEL,
            format!(
                "package {:?}, bundle {:?} not found in any channel entries",
                pkg.name, b.name
            ),
        )
        .hint("add the bundle to a channel's entries or remove the olm.bundle blob");
}
