//! Bundle rules: package, duplicates, properties, the `olm.package` property and its version,
//! image pull specs, an image or objects, membership in a channel.

use super::{Findings, grammar::image_pullspec_error, object_path, rules};
use crate::declcfg;
use crate::model::{Bundle, Model, Package};
use crate::property::{self, PropertyShapeError};
use olmkit_core::findings::Finding;

fn path(b: &declcfg::Bundle) -> String {
    object_path(&b.package, None, Some(&b.name))
}

/// A bundle without a package (`ConvertToModel`).
pub(super) fn no_package(b: &declcfg::Bundle) -> Finding {
    Finding::error(
        rules::BUNDLE_PACKAGE,
        format!("package name must be set for bundle {:?}", b.name),
    )
    .path(path(b))
}

/// A bundle of a package without `olm.package` blob (`ConvertToModel`).
pub(super) fn unknown_package(b: &declcfg::Bundle) -> Finding {
    Finding::error(
        rules::UNKNOWN_PACKAGE,
        format!("unknown package {:?} for bundle {:?}", b.package, b.name),
    )
    .path(path(b))
}

/// A second bundle of a name in a package (`ConvertToModel`).
pub(super) fn duplicate(b: &declcfg::Bundle) -> Finding {
    Finding::error(
        rules::DUPLICATE_BUNDLE,
        format!("package {:?} has duplicate bundle {:?}", b.package, b.name),
    )
    .path(path(b))
}

/// A well-known property that does not parse (`ConvertToModel` via `property.Parse`).
pub(super) fn bad_property(b: &declcfg::Bundle, e: &PropertyShapeError) -> Finding {
    Finding::error(
        rules::BUNDLE_PROPERTIES,
        format!("parse properties for bundle {:?}: {e}", b.name),
    )
    .path(path(b))
}

/// Not exactly one `olm.package` property (`ConvertToModel`).
pub(super) fn package_property_count(b: &declcfg::Bundle, found: usize) -> Finding {
    Finding::error(
        rules::PACKAGE_PROPERTY,
        format!(
            "package {:?} bundle {:?} must have exactly 1 {:?} property, found {found}",
            b.package,
            b.name,
            property::PACKAGE,
        ),
    )
    .path(path(b))
    .hint(format!(
        "add `{{type: olm.package, value: {{packageName: {}, version: <semver>}}}}` to the bundle's properties",
        b.package
    ))
}

/// The `olm.package` property names another package (`ConvertToModel`).
pub(super) fn package_property_mismatch(b: &declcfg::Bundle, named: &str) -> Finding {
    Finding::error(
        rules::PACKAGE_PROPERTY,
        format!(
            "package {:?} does not match {:?} property {:?}",
            b.package,
            property::PACKAGE,
            named
        ),
    )
    .path(path(b))
}

/// The `olm.package` version is not semver (`ConvertToModel`).
pub(super) fn bad_version(b: &declcfg::Bundle, version: &str, error: &str) -> Finding {
    Finding::error(
        rules::BUNDLE_VERSION,
        format!(
            "error parsing bundle {:?} version {version:?}: {error}",
            b.name
        ),
    )
    .path(path(b))
    .hint("versions are semver without a leading `v`, e.g. 1.2.3")
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
        out.add(
            Finding::error(
                rules::IMAGE_PULLSPEC,
                format!(
                    "package {:?} bundle {:?} image: invalid image pull spec {:?}: {e}",
                    blob.package, blob.name, blob.image
                ),
            )
            .path(path(blob)),
            b.file,
        );
    }
    for (ri, rel) in blob.related_images.iter().enumerate() {
        if let Some(e) = image_pullspec_error(&rel.image) {
            out.add(
                Finding::error(
                    rules::IMAGE_PULLSPEC,
                    format!(
                        "package {:?} bundle {:?} relatedImages[{ri}].image: invalid image pull spec {:?}: {e}",
                        blob.package, blob.name, rel.image
                    ),
                )
                .path(path(blob)),
                b.file,
            );
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
        out.add(
            Finding::error(
                rules::BUNDLE_IMAGE,
                format!("invalid bundle {:?}: bundle image must be set", blob.name),
            )
            .path(path(blob)),
            b.file,
        );
    }
}

/// A bundle that no channel lists (`ConvertToModel`).
fn not_in_channel(pkg: &Package<'_>, b: &Bundle<'_>, out: &mut Findings) {
    out.add(
        Finding::error(
            rules::BUNDLE_NOT_IN_CHANNEL,
            format!(
                "package {:?}, bundle {:?} not found in any channel entries",
                pkg.name, b.name
            ),
        )
        .path(path(b.blob))
        .hint("add the bundle to a channel's entries or remove the olm.bundle blob"),
        b.file,
    );
}
