//! Validation of a File-Based Catalog with every rule `opm validate` enforces.
//!
//! opm checks in two stages, and so do we: converting blobs into its model
//! (`declcfg_to_model.go`: names, duplicates, `olm.package` property, versions, image pull
//! specs, channel membership, deprecations) is [`crate::model::Model::new`], whose problems
//! are worded here; validating the model (`model.go`: default channel, one head per channel
//! computed from `replaces` and `skips` only, no replaces cycle, no stranded bundle, skips,
//! skipRange, unique versions) is small functions (one per rule, or per check where opm words
//! a few rules from one walk), their rule ids listed in [`RULES`], and kept one file per area ([`package`], [`channel`], [`bundle`], [`graph`], [`deprecation`]).
//!
//! opm stops at the first error; this validator reports every problem, each with a stable rule
//! id, the package/channel/bundle it concerns and the file it came from, and keeps opm's
//! wording in the message so that people searching for an opm error find it. What opm accepts
//! but is likely a mistake (an empty catalog) is a warning. It never does I/O.

mod bundle;
mod channel;
mod deprecation;
mod grammar;
mod graph;
mod package;

pub use crate::model::{bundle_version, channel_heads};
pub use grammar::{dns1123_label_errors, image_pullspec_error};
pub use graph::check_channel_graph;

use crate::declcfg::{DeclarativeConfig, load::Origins};
use crate::model::{Model, Problem, ProblemKind};
use olmkit_core::findings::{Finding, Report, Severity};

/// Stable rule ids of catalog findings.
pub mod rules {
    /// Package blob without a name.
    pub const PACKAGE_NAME: &str = "package-name";
    /// Two `olm.package` blobs with one name.
    pub const DUPLICATE_PACKAGE: &str = "duplicate-package";
    /// A channel, bundle or deprecation of a package that has no `olm.package` blob.
    pub const UNKNOWN_PACKAGE: &str = "unknown-package";
    /// A channel without a name.
    pub const CHANNEL_NAME: &str = "channel-name";
    /// Two channels with one name in a package.
    pub const DUPLICATE_CHANNEL: &str = "duplicate-channel";
    /// Two entries with one name in a channel.
    pub const DUPLICATE_ENTRY: &str = "duplicate-channel-entry";
    /// A bundle without a package.
    pub const BUNDLE_PACKAGE: &str = "bundle-package";
    /// Two bundles with one name in a package.
    pub const DUPLICATE_BUNDLE: &str = "duplicate-bundle";
    /// A property whose value does not parse.
    pub const BUNDLE_PROPERTIES: &str = "bundle-properties";
    /// Not exactly one `olm.package` property, or one naming another package.
    pub const PACKAGE_PROPERTY: &str = "package-property";
    /// A version that is not semver.
    pub const BUNDLE_VERSION: &str = "bundle-version";
    /// An image pull spec that does not parse.
    pub const IMAGE_PULLSPEC: &str = "image-pullspec";
    /// A bundle without image and objects.
    pub const BUNDLE_IMAGE: &str = "bundle-image";
    /// A bundle in no channel.
    pub const BUNDLE_NOT_IN_CHANNEL: &str = "bundle-not-in-channel";
    /// A channel entry without a bundle blob.
    pub const ENTRY_WITHOUT_BUNDLE: &str = "entry-without-bundle";
    /// A default channel that is unset or does not exist.
    pub const DEFAULT_CHANNEL: &str = "default-channel";
    /// A package without channels.
    pub const PACKAGE_CHANNELS: &str = "package-channels";
    /// A channel without entries.
    pub const CHANNEL_EMPTY: &str = "channel-empty";
    /// Zero or several channel heads.
    pub const CHANNEL_HEAD: &str = "channel-head";
    /// A cycle in the replaces chain.
    pub const REPLACES_CYCLE: &str = "replaces-cycle";
    /// A bundle that no upgrade path from the head reaches.
    pub const STRANDED_BUNDLE: &str = "stranded-bundle";
    /// An empty `skips` item.
    pub const EMPTY_SKIP: &str = "empty-skip";
    /// A skipRange that does not parse.
    pub const SKIP_RANGE: &str = "skip-range";
    /// Several bundles with one version.
    pub const DUPLICATE_VERSION: &str = "duplicate-version";
    /// A broken `olm.deprecations` blob.
    pub const DEPRECATION: &str = "deprecation";
    /// A catalog without any `olm.package` blob (opm accepts it: a warning).
    pub const EMPTY_CATALOG: &str = "empty-catalog";
}

/// One catalog rule: its id, severity, what it checks and the upstream code it mirrors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Stable id (one of [`rules`]).
    pub id: &'static str,
    /// Severity of its findings.
    pub severity: Severity,
    /// What it checks, in one line.
    pub description: &'static str,
    /// The operator-registry function it mirrors (`""` for bundle-tool's own rules).
    pub upstream: &'static str,
}

const fn error(id: &'static str, description: &'static str, upstream: &'static str) -> Rule {
    Rule {
        id,
        severity: Severity::Error,
        description,
        upstream,
    }
}

const CONVERT: &str = "alpha/declcfg/declcfg_to_model.go ConvertToModel";

/// Every catalog rule: id, severity, what it checks and the opm function it mirrors (the
/// meta-test `tests/it/model_rules.rs` keeps it complete).
pub const RULES: &[Rule] = &[
    error(
        rules::PACKAGE_NAME,
        "a package has a name that is a DNS-1123 label",
        CONVERT,
    ),
    error(
        rules::DUPLICATE_PACKAGE,
        "one olm.package blob per package",
        CONVERT,
    ),
    error(
        rules::UNKNOWN_PACKAGE,
        "channels and bundles belong to a package that has an olm.package blob",
        CONVERT,
    ),
    error(rules::CHANNEL_NAME, "a channel has a name", CONVERT),
    error(
        rules::DUPLICATE_CHANNEL,
        "one olm.channel blob per channel name and package",
        CONVERT,
    ),
    error(
        rules::DUPLICATE_ENTRY,
        "a channel lists each bundle once",
        CONVERT,
    ),
    error(rules::BUNDLE_PACKAGE, "a bundle names its package", CONVERT),
    error(
        rules::DUPLICATE_BUNDLE,
        "one olm.bundle blob per bundle name and package",
        CONVERT,
    ),
    error(
        rules::BUNDLE_PROPERTIES,
        "well-known properties have the shape of their type",
        "alpha/property/property.go Parse",
    ),
    error(
        rules::PACKAGE_PROPERTY,
        "a bundle has exactly one olm.package property, naming its own package",
        CONVERT,
    ),
    error(
        rules::BUNDLE_VERSION,
        "the olm.package version is semver",
        CONVERT,
    ),
    error(
        rules::IMAGE_PULLSPEC,
        "bundle and related images are valid pull specs",
        "alpha/declcfg/declcfg_to_model.go validateImagePullSpec",
    ),
    error(
        rules::BUNDLE_IMAGE,
        "a bundle has an image or its objects",
        "alpha/model/model.go Bundle.Validate",
    ),
    error(
        rules::BUNDLE_NOT_IN_CHANNEL,
        "every bundle is in a channel",
        CONVERT,
    ),
    error(
        rules::ENTRY_WITHOUT_BUNDLE,
        "every channel entry has an olm.bundle blob",
        CONVERT,
    ),
    error(
        rules::DEFAULT_CHANNEL,
        "the default channel is set and exists",
        "alpha/model/model.go Package.Validate",
    ),
    error(
        rules::PACKAGE_CHANNELS,
        "a package has at least one channel",
        "alpha/model/model.go Package.Validate",
    ),
    error(
        rules::CHANNEL_EMPTY,
        "a channel has at least one entry",
        "alpha/model/model.go Channel.Validate",
    ),
    error(
        rules::CHANNEL_HEAD,
        "a channel has exactly one head (from replaces and skips; skipRange does not count)",
        "alpha/model/model.go Channel.Head",
    ),
    error(
        rules::REPLACES_CYCLE,
        "the replaces chain from the head has no cycle",
        "alpha/model/model.go Channel.validateReplacesChain",
    ),
    error(
        rules::STRANDED_BUNDLE,
        "every entry is on the replaces chain from the head or skipped",
        "alpha/model/model.go Channel.validateReplacesChain",
    ),
    error(
        rules::EMPTY_SKIP,
        "no empty skips item",
        "alpha/model/model.go Bundle.Validate",
    ),
    error(
        rules::SKIP_RANGE,
        "a skipRange is a blang/semver range",
        "alpha/model/model.go Bundle.Validate",
    ),
    error(
        rules::DUPLICATE_VERSION,
        "the bundles in a package's channels have distinct versions",
        "alpha/model/model.go Package.validateUniqueBundleVersions",
    ),
    error(
        rules::DEPRECATION,
        "one olm.deprecations blob per known package, whose entries name existing objects and carry a message",
        CONVERT,
    ),
    Rule {
        id: rules::EMPTY_CATALOG,
        severity: Severity::Warning,
        description: "the catalog has at least one olm.package blob (opm accepts an empty one)",
        upstream: "",
    },
];

/// Where a finding points: `package p / channel c / bundle b`.
pub fn object_path(package: &str, channel: Option<&str>, bundle: Option<&str>) -> String {
    let mut s = format!("package {package}");
    if let Some(c) = channel {
        s.push_str(&format!(" / channel {c}"));
    }
    if let Some(b) = bundle {
        s.push_str(&format!(" / bundle {b}"));
    }
    s
}

/// The findings so far.
#[derive(Default)]
pub(crate) struct Findings(Report);

impl Findings {
    /// Adds a finding about a blob of `file`.
    pub(crate) fn add(&mut self, f: Finding, file: Option<&str>) {
        let f = match file {
            Some(file) => f.file(file.to_string()),
            None => f,
        };
        self.0.push(f);
    }
}

/// Validates a catalog. `origins` (from [`crate::declcfg::load::load_dir_with_files`]) adds
/// file names to the findings.
pub fn validate(cfg: &DeclarativeConfig, origins: Option<&Origins>) -> Report {
    validate_model(&Model::new(cfg, origins))
}

/// Validates a model: its conversion problems, then every rule of [`RULES`].
pub fn validate_model(model: &Model<'_>) -> Report {
    let mut out = Findings::default();
    for p in &model.problems {
        out.add(problem_finding(p), p.file);
    }
    package::check(model, &mut out);
    bundle::check(model, &mut out);
    channel::check_entries_have_bundles(model, &mut out);
    deprecation::check(model, &mut out);
    for pkg in model.packages.values() {
        package::check_default_channel(pkg, &mut out);
        for c in pkg.channels.values() {
            graph::check(pkg, c, &mut out);
            channel::check_entry_edges(pkg.name, c, &mut out);
        }
        package::check_unique_versions(pkg, &mut out);
    }
    let mut report = out.0;
    report.normalize();
    report
}

/// Words a conversion problem (each in the file of the area it concerns).
fn problem_finding(p: &Problem<'_>) -> Finding {
    match &p.kind {
        ProblemKind::PackageNoName { index } => package::no_name(*index),
        ProblemKind::DuplicatePackage(blob) => package::duplicate(blob),
        ProblemKind::ChannelUnknownPackage(c) => channel::unknown_package(c),
        ProblemKind::ChannelNoName(c) => channel::no_name(c),
        ProblemKind::DuplicateChannel(c) => channel::duplicate(c),
        ProblemKind::DuplicateEntry(c, entry) => channel::duplicate_entry(c, entry),
        ProblemKind::BundleNoPackage(b) => bundle::no_package(b),
        ProblemKind::BundleUnknownPackage(b) => bundle::unknown_package(b),
        ProblemKind::DuplicateBundle(b) => bundle::duplicate(b),
        ProblemKind::BadProperty(b, e) => bundle::bad_property(b, e),
        ProblemKind::PackagePropertyCount(b, n) => bundle::package_property_count(b, *n),
        ProblemKind::PackagePropertyMismatch(b, named) => {
            bundle::package_property_mismatch(b, named)
        }
        ProblemKind::BadVersion {
            bundle: b,
            version,
            error,
        } => bundle::bad_version(b, version, error),
        ProblemKind::DeprecationNoPackage { index } => deprecation::no_package(*index),
        ProblemKind::DeprecationUnknownPackage(d) => deprecation::unknown_package(d),
        ProblemKind::DuplicateDeprecation(d) => deprecation::duplicate(d),
    }
}
