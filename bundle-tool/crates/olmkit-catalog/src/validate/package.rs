//! Package rules: names, duplicates, the default channel, channels present, unique versions,
//! and the catalog-wide check that there is a package at all.

use super::object_path;
use super::rules::{
    DEFAULT_CHANNEL, DUPLICATE_PACKAGE, DUPLICATE_VERSION, EMPTY_CATALOG, PACKAGE_CHANNELS,
    PACKAGE_NAME,
};
use crate::declcfg::{self, SCHEMA_PACKAGE};
use crate::model::{Model, Package};
use olmkit_core::Findings;
use std::collections::{BTreeMap, BTreeSet};

/// `olm.package` blob without a name (`ConvertToModel`: "config contains package with no name").
pub(super) fn no_name(out: &mut Findings, file: Option<&str>, index: usize) {
    out.at(file, Some(&format!("{SCHEMA_PACKAGE} blob #{index}")))
        .error(&PACKAGE_NAME, "config contains package with no name");
}

/// A second `olm.package` blob of a name (`ConvertToModel`).
pub(super) fn duplicate(out: &mut Findings, file: Option<&str>, p: &declcfg::Package) {
    out.at(file, Some(&object_path(&p.name, None, None)))
        .error(
            &DUPLICATE_PACKAGE,
            format!("duplicate package {:?}", p.name),
        )
        .hint("keep exactly one olm.package blob per package");
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
    out.at(None, None).warning(&EMPTY_CATALOG, format!(
                "found 0 packages: the catalog has no olm.package blob ({} channel, {} bundle, {} deprecation and {} other blobs)",
                b.channels, b.bundles, b.deprecations, b.others
            )).hint("the loader does not follow symbolic links to directories (like opm): copy linked package directories into the catalog; check also that .indexignore does not exclude them");
}

/// Package name is a DNS-1123 label (`ConvertToModel`, Kubernetes `IsDNS1123Label`).
fn check_name(pkg: &Package<'_>, out: &mut Findings) {
    let errs = olmkit_core::k8s_name::dns1123_label_errors(pkg.name);
    if !errs.is_empty() {
        out.at(pkg.file, Some(&object_path(pkg.name, None, None)))
            .error(
                &PACKAGE_NAME,
                format!("invalid package name {:?}: [{}]", pkg.name, errs.join(", ")),
            )
            .hint("use lowercase letters, digits and '-' only");
    }
}

/// Default channel set and existing, at least one channel (`model.go` `Package.Validate`).
pub(super) fn check_default_channel(pkg: &Package<'_>, out: &mut Findings) {
    let name = pkg.name;
    let default = pkg.blob.default_channel.as_str();
    if default.is_empty() {
        out.at(pkg.file, Some(&object_path(name, None, None)))
            .error(
                &DEFAULT_CHANNEL,
                format!("invalid package {name:?}: default channel must be set"),
            )
            .hint("set `defaultChannel` in the olm.package blob");
    } else if pkg.channel(default).is_none() {
        // opm synthesises an empty default channel, which then fails its channel checks.
        out.at(pkg.file, Some(&object_path(name, Some(default), None))).error(&DEFAULT_CHANNEL, format!("invalid channel {default:?}: channel must contain at least one bundle")).hint(format!(
                "package {name:?} references non-existent default channel {default:?}: add that channel or set defaultChannel to an existing one"
            ));
    }
    if pkg.channels.is_empty() && default.is_empty() {
        out.at(pkg.file, Some(&object_path(name, None, None)))
            .error(
                &PACKAGE_CHANNELS,
                format!("invalid package {name:?}: package must contain at least one channel"),
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
    out.at(pkg.file, Some(&object_path(pkg.name, None, None)))
        .error(
            &DUPLICATE_VERSION,
            format!(
                "invalid package {:?}: duplicate versions found in bundles: [{}]",
                pkg.name,
                parts.join(" ")
            ),
        )
        .hint("every bundle of a package needs its own version");
}
