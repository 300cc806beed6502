//! Package rules: names, duplicates, the default channel, channels present, unique versions,
//! and the catalog-wide check that there is a package at all.

use super::{Findings, grammar::dns1123_label_errors, object_path, rules};
use crate::declcfg::{self, SCHEMA_PACKAGE};
use crate::model::{Model, Package};
use olmkit_core::findings::Finding;
use std::collections::{BTreeMap, BTreeSet};

/// `olm.package` blob without a name (`ConvertToModel`: "config contains package with no name").
pub(super) fn no_name(index: usize) -> Finding {
    Finding::error(rules::PACKAGE_NAME, "config contains package with no name")
        .path(format!("{SCHEMA_PACKAGE} blob #{index}"))
}

/// A second `olm.package` blob of a name (`ConvertToModel`).
pub(super) fn duplicate(p: &declcfg::Package) -> Finding {
    Finding::error(
        rules::DUPLICATE_PACKAGE,
        format!("duplicate package {:?}", p.name),
    )
    .path(object_path(&p.name, None, None))
    .hint("keep exactly one olm.package blob per package")
}

/// Catalog-wide and per-package name rules.
pub(super) fn check(model: &Model<'_>, out: &mut Findings) {
    check_not_empty(model, out);
    for pkg in model.packages.values() {
        check_name(pkg, out);
    }
}

/// A catalog with no `olm.package` blob. opm validates (and serves) it without a word, so a
/// catalog whose packages were never read (a directory linked in with a symbolic link, which
/// the loader does not descend, like opm; a `.indexignore` that excludes too much) would pass
/// silently: say how many packages were found.
fn check_not_empty(model: &Model<'_>, out: &mut Findings) {
    let b = &model.blobs;
    if b.packages > 0 {
        return;
    }
    out.add(
        Finding::warning(
            rules::EMPTY_CATALOG,
            format!(
                "found 0 packages: the catalog has no olm.package blob ({} channel, {} bundle, {} deprecation and {} other blobs)",
                b.channels, b.bundles, b.deprecations, b.others
            ),
        )
        .hint("the loader does not follow symbolic links to directories (like opm): copy linked package directories into the catalog; check also that .indexignore does not exclude them"),
        None,
    );
}

/// Package name is a DNS-1123 label (`ConvertToModel`, Kubernetes `IsDNS1123Label`).
fn check_name(pkg: &Package<'_>, out: &mut Findings) {
    let errs = dns1123_label_errors(pkg.name);
    if !errs.is_empty() {
        out.add(
            Finding::error(
                rules::PACKAGE_NAME,
                format!("invalid package name {:?}: [{}]", pkg.name, errs.join(", ")),
            )
            .path(object_path(pkg.name, None, None))
            .hint("use lowercase letters, digits and '-' only"),
            pkg.file,
        );
    }
}

/// Default channel set and existing, at least one channel (`model.go` `Package.Validate`).
pub(super) fn check_default_channel(pkg: &Package<'_>, out: &mut Findings) {
    let name = pkg.name;
    let default = pkg.blob.default_channel.as_str();
    if default.is_empty() {
        out.add(
            Finding::error(
                rules::DEFAULT_CHANNEL,
                format!("invalid package {name:?}: default channel must be set"),
            )
            .path(object_path(name, None, None))
            .hint("set `defaultChannel` in the olm.package blob"),
            pkg.file,
        );
    } else if pkg.channel(default).is_none() {
        // opm synthesises an empty default channel, which then fails its channel checks.
        out.add(
            Finding::error(
                rules::DEFAULT_CHANNEL,
                format!("invalid channel {default:?}: channel must contain at least one bundle"),
            )
            .path(object_path(name, Some(default), None))
            .hint(format!(
                "package {name:?} references non-existent default channel {default:?}: add that channel or set defaultChannel to an existing one"
            )),
            pkg.file,
        );
    }
    if pkg.channels.is_empty() && default.is_empty() {
        out.add(
            Finding::error(
                rules::PACKAGE_CHANNELS,
                format!("invalid package {name:?}: package must contain at least one channel"),
            )
            .path(object_path(name, None, None)),
            pkg.file,
        );
    }
}

/// Distinct versions among the bundles in channels: opm's model only holds those
/// (`model.go` `Package.validateUniqueBundleVersions`).
pub(super) fn check_unique_versions(pkg: &Package<'_>, out: &mut Findings) {
    if pkg.channels.is_empty() {
        return;
    }
    let entries = pkg.entry_names();
    let mut by_version: BTreeMap<String, (&semver::Version, BTreeSet<&str>)> = BTreeMap::new();
    for b in pkg.bundles.iter().filter(|b| entries.contains(b.name)) {
        if let Some(v) = b.model_version() {
            by_version
                .entry(v.to_string())
                .or_insert_with(|| (v, BTreeSet::new()))
                .1
                .insert(b.name);
        }
    }
    let mut dups: Vec<(&semver::Version, Vec<&str>)> = by_version
        .into_values()
        .filter(|(_, names)| names.len() > 1)
        .map(|(v, names)| (v, names.into_iter().collect()))
        .collect();
    if dups.is_empty() {
        return;
    }
    dups.sort_by(|a, b| a.0.cmp_precedence(b.0));
    let parts: Vec<String> = dups
        .iter()
        .map(|(v, names)| format!("{{{v}: [{}]}}", names.join(", ")))
        .collect();
    out.add(
        Finding::error(
            rules::DUPLICATE_VERSION,
            format!(
                "invalid package {:?}: duplicate versions found in bundles: [{}]",
                pkg.name,
                parts.join(" ")
            ),
        )
        .path(object_path(pkg.name, None, None))
        .hint("every bundle of a package needs its own version"),
        pkg.file,
    );
}
