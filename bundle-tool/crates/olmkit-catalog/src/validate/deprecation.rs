//! Deprecation rules (`ConvertToModel`'s deprecation pass): one `olm.deprecations` blob per
//! known package, and entries that name an existing bundle, channel or the package itself,
//! each once and with a message.

use super::object_path;
use super::rules::DEPRECATION;
use crate::declcfg::{self, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE};
use crate::model::{Model, Package};
use olmkit_core::Findings;
use std::collections::HashSet;

/// A deprecation finding about `package`, in `file`.
fn report(out: &mut Findings, file: Option<&str>, package: &str, message: String) {
    out.at(file, Some(&object_path(package, None, None)))
        .error(&DEPRECATION, message);
}

/// Deprecation blob number `index` without a package.
pub(super) fn no_package(out: &mut Findings, file: Option<&str>, index: usize) {
    let message = format!("package name must be set for deprecation item {index}");
    report(out, file, "", message);
}

/// Deprecations of a package without `olm.package` blob.
pub(super) fn unknown_package(out: &mut Findings, file: Option<&str>, d: &declcfg::Deprecation) {
    let message = format!(
        "cannot apply deprecations to an unknown package {:?}",
        d.package
    );
    report(out, file, &d.package, message);
}

/// A second deprecation blob for a package.
pub(super) fn duplicate(out: &mut Findings, file: Option<&str>, d: &declcfg::Deprecation) {
    let message = format!(
        "expected a maximum of one deprecation per package: {:?}",
        d.package
    );
    report(out, file, &d.package, message);
}

/// The entries of every package's deprecation blob.
pub(super) fn check(model: &Model<'_>, out: &mut Findings) {
    for pkg in model.packages.values() {
        if let Some(d) = &pkg.deprecation {
            for message in entry_errors(pkg, d.blob) {
                report(out, d.file, pkg.name, message);
            }
        }
    }
}

/// What is wrong with each entry, in entry order.
fn entry_errors(pkg: &Package<'_>, d: &declcfg::Deprecation) -> Vec<String> {
    let package = &d.package;
    let mut errs = Vec::new();
    let mut refs = HashSet::new();
    for (j, e) in d.entries.iter().enumerate() {
        let r = &e.reference;
        if r.schema.is_empty() {
            errs.push(format!(
                "schema must be set for deprecation entry [{j}] for package {package:?}"
            ));
            continue;
        }
        if !refs.insert((r.schema.as_str(), r.name.as_str())) {
            errs.push(format!(
                "duplicate deprecation entry {{Schema:{:?}, Name:{:?}}} for package {package:?}",
                r.schema, r.name
            ));
            continue;
        }
        let unknown = match r.schema.as_str() {
            SCHEMA_BUNDLE => pkg.bundle(&r.name).is_none().then(|| {
                format!(
                    "cannot deprecate bundle {:?} for package {package:?}: bundle not found",
                    r.name
                )
            }),
            SCHEMA_CHANNEL => pkg.channel(&r.name).is_none().then(|| {
                format!(
                    "cannot deprecate channel {:?} for package {package:?}: channel not found",
                    r.name
                )
            }),
            SCHEMA_PACKAGE => (!r.name.is_empty()).then(|| {
                format!(
                    "package name must be empty for deprecated package {package:?} (specified {:?})",
                    r.name
                )
            }),
            _ => Some(format!(
                "cannot deprecate object {{Schema:{:?}, Name:{:?}}} referenced by entry {j} for package {package:?}: object schema unknown",
                r.schema, r.name
            )),
        };
        errs.extend(unknown);
        if e.message.is_empty() {
            errs.push(format!(
                "invalid deprecation: message must be set (entry [{j}] for package {package:?})"
            ));
        }
    }
    errs
}
