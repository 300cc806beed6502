//! Channel rules: names, duplicates, entries that have a bundle, and each entry's own edges
//! (`skips` items, `skipRange`). The channel's graph as a whole is [`super::graph`].

use super::object_path;
use super::rules::{
    CHANNEL_NAME, DUPLICATE_CHANNEL, DUPLICATE_ENTRY, EMPTY_SKIP, ENTRY_WITHOUT_BUNDLE, SKIP_RANGE,
    UNKNOWN_PACKAGE,
};
use crate::declcfg;
use crate::model::{Channel, Model};
use olmkit_core::Findings;
use olmkit_core::version_range::VersionRange;

/// A channel of a package without `olm.package` blob (`ConvertToModel`).
pub(super) fn unknown_package(out: &mut Findings, file: Option<&str>, c: &declcfg::Channel) {
    out.at(file, Some(&object_path(&c.package, Some(&c.name), None)))
        .error(
            &UNKNOWN_PACKAGE,
            format!("unknown package {:?} for channel {:?}", c.package, c.name),
        )
        .hint("add an olm.package blob for this package or fix the channel's `package`");
}

/// A channel without a name (`ConvertToModel`).
pub(super) fn no_name(out: &mut Findings, file: Option<&str>, c: &declcfg::Channel) {
    out.at(file, Some(&object_path(&c.package, None, None)))
        .error(
            &CHANNEL_NAME,
            format!("package {:?} contains channel with no name", c.package),
        );
}

/// A second channel of a name in a package (`ConvertToModel`).
pub(super) fn duplicate(out: &mut Findings, file: Option<&str>, c: &declcfg::Channel) {
    out.at(file, Some(&object_path(&c.package, Some(&c.name), None)))
        .error(
            &DUPLICATE_CHANNEL,
            format!("package {:?} has duplicate channel {:?}", c.package, c.name),
        )
        .hint("merge the entries of both olm.channel blobs into one");
}

/// An entry listed twice in a channel (`ConvertToModel`).
pub(super) fn duplicate_entry(
    out: &mut Findings,
    file: Option<&str>,
    c: &declcfg::Channel,
    entry: &str,
) {
    out.at(
        file,
        Some(&object_path(&c.package, Some(&c.name), Some(entry))),
    )
    .error(
        &DUPLICATE_ENTRY,
        format!(
            "invalid package {:?}, channel {:?}: duplicate entry {:?}",
            c.package, c.name, entry
        ),
    );
}

/// Every channel entry has an `olm.bundle` blob (`ConvertToModel`: "no olm.bundle blobs found
/// in package ... for olm.channel entries"); one finding per package, on its file.
pub(super) fn check_entries_have_bundles(model: &Model<'_>, out: &mut Findings) {
    for pkg in model.packages.values() {
        let missing: Vec<&str> = pkg
            .entry_names()
            .into_iter()
            .filter(|e| pkg.bundle(e).is_none())
            .collect();
        if missing.is_empty() {
            continue;
        }
        out.at(pkg.file, Some(&object_path(pkg.name, None, None)))
            .error(
                &ENTRY_WITHOUT_BUNDLE,
                format!(
                    "no olm.bundle blobs found in package {:?} for olm.channel entries [{}]",
                    pkg.name,
                    missing.join(" ")
                ),
            )
            .hint("render the missing bundles into the catalog or remove the entries");
    }
}

/// No empty `skips` item, a `skipRange` that parses (`model.go` `Bundle.Validate`).
pub(super) fn check_entry_edges(pkg: &str, c: &Channel<'_>, out: &mut Findings) {
    for e in c.entries() {
        let bpath = object_path(pkg, Some(c.name), Some(&e.name));
        for (k, s) in e.skips.iter().enumerate() {
            if s.is_empty() {
                out.at(c.file, Some(&bpath.clone())).error(
                    &EMPTY_SKIP,
                    format!("invalid bundle {:?}: skip[{k}] is empty", e.name),
                );
            }
        }
        if !e.skip_range.is_empty()
            && let Err(err) = VersionRange::parse(&e.skip_range)
        {
            out.at(c.file, Some(&bpath.clone()))
                .error(
                    &SKIP_RANGE,
                    format!(
                        "invalid bundle {:?}: invalid skipRange {:?}: {err}",
                        e.name, e.skip_range
                    ),
                )
                .hint("use blang/semver ranges such as '>=1.0.0 <1.2.0'");
        }
    }
}
