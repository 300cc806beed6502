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
mod graph;
mod package;

pub use bundle::image_pullspec_error;
pub use graph::check_channel_graph;

use crate::declcfg::{DeclarativeConfig, load::Origins};
use crate::model::{Model, Problem, ProblemKind};
use olmkit_core::{Findings, Report, Rule};

/// Every catalog rule, one constant each ([`olmkit_core::Rule`]): a rule that mirrors opm
/// reports errors (opm refuses the catalog); bundle-tool's own ([`olmkit_core::Upstream::Stricter`]) warns.
pub mod rules {
    use olmkit_core::{Rule, Upstream};

    /// The catalog validator has one suite: every rule always runs.
    const SUITE: &str = "default";
    const CONVERT: &str = "alpha/declcfg/declcfg_to_model.go ConvertToModel";

    /// Package blob without a name.
    pub const PACKAGE_NAME: Rule = Rule::new(
        "package-name",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "a package has a name that is a DNS-1123 label",
    );

    /// Two `olm.package` blobs with one name.
    pub const DUPLICATE_PACKAGE: Rule = Rule::new(
        "duplicate-package",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "one olm.package blob per package",
    );

    /// A channel, bundle or deprecation of a package that has no `olm.package` blob.
    pub const UNKNOWN_PACKAGE: Rule = Rule::new(
        "unknown-package",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "channels and bundles belong to a package that has an olm.package blob",
    );

    /// A channel without a name.
    pub const CHANNEL_NAME: Rule = Rule::new(
        "channel-name",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "a channel has a name",
    );

    /// Two channels with one name in a package.
    pub const DUPLICATE_CHANNEL: Rule = Rule::new(
        "duplicate-channel",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "one olm.channel blob per channel name and package",
    );

    /// Two entries with one name in a channel.
    pub const DUPLICATE_ENTRY: Rule = Rule::new(
        "duplicate-channel-entry",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "a channel lists each bundle once",
    );

    /// A bundle without a package.
    pub const BUNDLE_PACKAGE: Rule = Rule::new(
        "bundle-package",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "a bundle names its package",
    );

    /// Two bundles with one name in a package.
    pub const DUPLICATE_BUNDLE: Rule = Rule::new(
        "duplicate-bundle",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "one olm.bundle blob per bundle name and package",
    );

    /// A property whose value does not parse.
    pub const BUNDLE_PROPERTIES: Rule = Rule::new(
        "bundle-properties",
        SUITE,
        Upstream::Mirrors("alpha/property/property.go Parse"),
        "well-known properties have the shape of their type",
    );

    /// Not exactly one `olm.package` property, or one naming another package.
    pub const PACKAGE_PROPERTY: Rule = Rule::new(
        "package-property",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "a bundle has exactly one olm.package property, naming its own package",
    );

    /// A version that is not semver.
    pub const BUNDLE_VERSION: Rule = Rule::new(
        "bundle-version",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "the olm.package version is semver",
    );

    /// An image pull spec that does not parse.
    pub const IMAGE_PULLSPEC: Rule = Rule::new(
        "image-pullspec",
        SUITE,
        Upstream::Mirrors("alpha/declcfg/declcfg_to_model.go validateImagePullSpec"),
        "bundle and related images are valid pull specs",
    );

    /// A bundle without image and objects.
    pub const BUNDLE_IMAGE: Rule = Rule::new(
        "bundle-image",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Bundle.Validate"),
        "a bundle has an image or its objects",
    );

    /// A bundle in no channel.
    pub const BUNDLE_NOT_IN_CHANNEL: Rule = Rule::new(
        "bundle-not-in-channel",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "every bundle is in a channel",
    );

    /// A channel entry without a bundle blob.
    pub const ENTRY_WITHOUT_BUNDLE: Rule = Rule::new(
        "entry-without-bundle",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "every channel entry has an olm.bundle blob",
    );

    /// A default channel that is unset or does not exist.
    pub const DEFAULT_CHANNEL: Rule = Rule::new(
        "default-channel",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Package.Validate"),
        "the default channel is set and exists",
    );

    /// A package without channels.
    pub const PACKAGE_CHANNELS: Rule = Rule::new(
        "package-channels",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Package.Validate"),
        "a package has at least one channel",
    );

    /// A channel without entries.
    pub const CHANNEL_EMPTY: Rule = Rule::new(
        "channel-empty",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Channel.Validate"),
        "a channel has at least one entry",
    );

    /// Zero or several channel heads.
    pub const CHANNEL_HEAD: Rule = Rule::new(
        "channel-head",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Channel.Head"),
        "a channel has exactly one head (from replaces and skips; skipRange does not count)",
    );

    /// A cycle in the replaces chain.
    pub const REPLACES_CYCLE: Rule = Rule::new(
        "replaces-cycle",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Channel.validateReplacesChain"),
        "the replaces chain from the head has no cycle",
    );

    /// A bundle that no upgrade path from the head reaches.
    pub const STRANDED_BUNDLE: Rule = Rule::new(
        "stranded-bundle",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Channel.validateReplacesChain"),
        "every entry is on the replaces chain from the head or skipped",
    );

    /// An empty `skips` item.
    pub const EMPTY_SKIP: Rule = Rule::new(
        "empty-skip",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Bundle.Validate"),
        "no empty skips item",
    );

    /// A skipRange that does not parse.
    pub const SKIP_RANGE: Rule = Rule::new(
        "skip-range",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Bundle.Validate"),
        "a skipRange is a blang/semver range",
    );

    /// Several bundles with one version.
    pub const DUPLICATE_VERSION: Rule = Rule::new(
        "duplicate-version",
        SUITE,
        Upstream::Mirrors("alpha/model/model.go Package.validateUniqueBundleVersions"),
        "the bundles in a package's channels have distinct versions",
    );

    /// A broken `olm.deprecations` blob.
    pub const DEPRECATION: Rule = Rule::new(
        "deprecation",
        SUITE,
        Upstream::Mirrors(CONVERT),
        "one olm.deprecations blob per known package, whose entries name existing objects and carry a message",
    );

    /// A catalog without any `olm.package` blob (opm accepts it: a warning).
    pub const EMPTY_CATALOG: Rule = Rule::new(
        "empty-catalog",
        SUITE,
        Upstream::Stricter,
        "the catalog has at least one olm.package blob (opm accepts an empty one)",
    );
}

/// Every catalog rule (the meta-test `tests/it/model_rules.rs` keeps it complete).
pub const RULES: &[&Rule] = &[
    &rules::PACKAGE_NAME,
    &rules::DUPLICATE_PACKAGE,
    &rules::UNKNOWN_PACKAGE,
    &rules::CHANNEL_NAME,
    &rules::DUPLICATE_CHANNEL,
    &rules::DUPLICATE_ENTRY,
    &rules::BUNDLE_PACKAGE,
    &rules::DUPLICATE_BUNDLE,
    &rules::BUNDLE_PROPERTIES,
    &rules::PACKAGE_PROPERTY,
    &rules::BUNDLE_VERSION,
    &rules::IMAGE_PULLSPEC,
    &rules::BUNDLE_IMAGE,
    &rules::BUNDLE_NOT_IN_CHANNEL,
    &rules::ENTRY_WITHOUT_BUNDLE,
    &rules::DEFAULT_CHANNEL,
    &rules::PACKAGE_CHANNELS,
    &rules::CHANNEL_EMPTY,
    &rules::CHANNEL_HEAD,
    &rules::REPLACES_CYCLE,
    &rules::STRANDED_BUNDLE,
    &rules::EMPTY_SKIP,
    &rules::SKIP_RANGE,
    &rules::DUPLICATE_VERSION,
    &rules::DEPRECATION,
    &rules::EMPTY_CATALOG,
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

/// Validates a catalog. `origins` (from [`crate::declcfg::load::load_dir_with_files`]) adds
/// file names to the findings.
pub fn validate(cfg: &DeclarativeConfig, origins: Option<&Origins>) -> Report {
    validate_model(&Model::new(cfg, origins))
}

/// Validates a model: its conversion problems, then every rule of [`RULES`].
pub fn validate_model(model: &Model<'_>) -> Report {
    let mut out = Findings::new(false);
    for p in &model.problems {
        report_problem(&mut out, p);
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
    out.into_report()
}

/// Words a conversion problem (each in the file of the area it concerns).
fn report_problem(out: &mut Findings, p: &Problem<'_>) {
    let file = p.file;
    match &p.kind {
        ProblemKind::PackageNoName { index } => package::no_name(out, file, *index),
        ProblemKind::DuplicatePackage(blob) => package::duplicate(out, file, blob),
        ProblemKind::ChannelUnknownPackage(c) => channel::unknown_package(out, file, c),
        ProblemKind::ChannelNoName(c) => channel::no_name(out, file, c),
        ProblemKind::DuplicateChannel(c) => channel::duplicate(out, file, c),
        ProblemKind::DuplicateEntry(c, entry) => channel::duplicate_entry(out, file, c, entry),
        ProblemKind::BundleNoPackage(b) => bundle::no_package(out, file, b),
        ProblemKind::BundleUnknownPackage(b) => bundle::unknown_package(out, file, b),
        ProblemKind::DuplicateBundle(b) => bundle::duplicate(out, file, b),
        ProblemKind::BadProperty(b, e) => bundle::bad_property(out, file, b, e),
        ProblemKind::PackagePropertyCount(b, n) => bundle::package_property_count(out, file, b, *n),
        ProblemKind::PackagePropertyMismatch(b, named) => {
            bundle::package_property_mismatch(out, file, b, named)
        }
        ProblemKind::BadVersion {
            bundle: b,
            version,
            error,
        } => bundle::bad_version(out, file, b, version, error),
        ProblemKind::DeprecationNoPackage { index } => deprecation::no_package(out, file, *index),
        ProblemKind::DeprecationUnknownPackage(d) => deprecation::unknown_package(out, file, d),
        ProblemKind::DuplicateDeprecation(d) => deprecation::duplicate(out, file, d),
    }
}
