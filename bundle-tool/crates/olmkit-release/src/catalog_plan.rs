//! Release and promotion planning: pure functions from a catalog to a list of changes, the
//! updated (validated) catalog and a human-readable plan.
//!
//! Releasing a bundle adds its `olm.bundle` blob and one entry per target channel that
//! `replaces` the channel's head, so every channel keeps exactly one head and no bundle is
//! stranded. A version that is not greater than a target channel's head is refused; so is a
//! version that is already released with different content, while the same content in the
//! same channels is an idempotent no-op (a re-run of a release that succeeded). Promotion adds
//! an already released bundle to another channel under the same rules. The changes are
//! returned as olmkit-catalog's [`Change`]s so that the caller can plan on a catalog loaded
//! without bundle objects and apply them to the full files it rewrites.
//!
//! Every lookup (heads, versions, channels, bundles) reads the package's
//! [`olmkit_catalog::model`], the same one the validator judges; the result is checked by
//! [`olmkit_catalog::validate`].

use olmkit_catalog::change::{Change, apply};
use olmkit_catalog::declcfg::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};
use olmkit_catalog::model::{self, Model};
use olmkit_catalog::property;
use olmkit_catalog::validate::validate;
use olmkit_core::findings::Report;
use olmkit_core::version_range::VersionRange;
use semver::Version;
use std::fmt::Write as _;
use thiserror::Error;

/// A release or promotion that would break the catalog, refused before any write.
#[derive(Debug, Error)]
pub enum PlanReleaseError {
    /// The bundle blob has no usable `olm.package` property.
    #[error("bundle {bundle:?}: {message}")]
    BadBundle {
        /// Bundle name.
        bundle: String,
        /// What is wrong.
        message: String,
    },
    /// The version is not above the head of a target channel.
    #[error(
        "version {version} is not greater than {head} ({head_version}), the head of channel {channel:?}"
    )]
    NotGreater {
        /// New version.
        version: String,
        /// Channel.
        channel: String,
        /// Head bundle.
        head: String,
        /// Head version.
        head_version: String,
    },
    /// The version (or name) is already released with other content.
    #[error("{version} is already released as {existing} with different content{detail}")]
    AlreadyReleased {
        /// Version.
        version: String,
        /// Existing bundle name.
        existing: String,
        /// What differs.
        detail: String,
    },
    /// A target channel has no single head, so there is nothing safe to replace.
    #[error(
        "channel {channel:?} of package {package:?} has {count} heads ({heads}); fix it first (bundle-tool catalog validate)"
    )]
    BrokenChannel {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// Number of heads.
        count: usize,
        /// Head names.
        heads: String,
    },
    /// Promotion of a bundle that does not exist.
    #[error("package {package:?} has no bundle with version {version}{known}")]
    UnknownVersion {
        /// Package.
        package: String,
        /// Version asked for.
        version: String,
        /// Known versions hint.
        known: String,
    },
    /// Promotion of a version older than the target's head (it would fork or strand).
    #[error(
        "{bundle} ({version}) is older than {head} ({head_version}), the head of channel {channel:?}: adding it would create a second head or a stranded bundle"
    )]
    WouldFork {
        /// Bundle.
        bundle: String,
        /// Its version.
        version: String,
        /// Channel.
        channel: String,
        /// Head.
        head: String,
        /// Head version.
        head_version: String,
    },
    /// The option values are unusable.
    #[error("{0}")]
    Options(String),
    /// The resulting catalog does not validate (a bug or a pre-existing problem).
    #[error("the catalog would not be valid after this change:\n{}", .0.render_text())]
    Invalid(Report),
}

/// How to set the new entries' `skipRange`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SkipRangeMode {
    /// No skipRange.
    #[default]
    None,
    /// `<new version`: any older version may jump straight to the new one.
    BelowNew,
    /// An explicit blang range.
    Explicit(String),
}

/// What to release.
#[derive(Clone, Debug)]
pub struct ReleaseRequest {
    /// The rendered bundle blob.
    pub bundle: Bundle,
    /// Target channels (at least one).
    pub channels: Vec<String>,
    /// New default channel (must be a target or existing channel); for a new package the
    /// first target channel is used when unset.
    pub default_channel: Option<String>,
    /// skipRange of the new entries.
    pub skip_range: SkipRangeMode,
}

/// Whether anything changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The catalog changes.
    Changed,
    /// Already done: same content in the same channels.
    NoOp,
}

/// A checked plan.
#[derive(Clone, Debug)]
pub struct ReleasePlan {
    /// Package concerned.
    pub package: String,
    /// Bundle concerned.
    pub bundle: String,
    /// Its version.
    pub version: Version,
    /// The changes, in order.
    pub changes: Vec<Change>,
    /// Changed or no-op.
    pub outcome: Outcome,
    /// The catalog after the changes (validated).
    pub catalog: DeclarativeConfig,
}

impl ReleasePlan {
    /// The plan as text (`--plan` output).
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        if self.outcome == Outcome::NoOp {
            let _ = writeln!(
                out,
                "{} ({}) is already in the catalog with the same content and channels: nothing to do",
                self.bundle, self.version
            );
            return out;
        }
        let _ = writeln!(
            out,
            "plan for {} ({}) in package {}:",
            self.bundle, self.version, self.package
        );
        for c in &self.changes {
            match c {
                Change::AddPackage(p) => {
                    let _ = writeln!(
                        out,
                        "  + package {} (default channel {})",
                        p.name, p.default_channel
                    );
                }
                Change::SetDefaultChannel { from, to, .. } => {
                    let _ = writeln!(out, "  ~ default channel: {from} -> {to}");
                }
                Change::AddBundle(b) => {
                    let _ = writeln!(out, "  + bundle {} image {}", b.name, b.image);
                }
                Change::AddChannel(ch) => {
                    for e in &ch.entries {
                        let _ = writeln!(
                            out,
                            "  + channel {} (new): {}{}",
                            ch.name,
                            e.name,
                            edges_text(e)
                        );
                    }
                }
                Change::AddEntry {
                    channel,
                    entry,
                    old_head,
                    ..
                } => {
                    let _ = writeln!(
                        out,
                        "  ~ channel {channel}: {}{} (head {old_head} -> {})",
                        entry.name,
                        edges_text(entry),
                        entry.name
                    );
                }
            }
        }
        let report = validate(&self.catalog.only_package(&self.package), None);
        let c = report.counts();
        let _ = writeln!(
            out,
            "result: catalog valid ({} package(s), {} bundle(s), {} warning(s))",
            self.catalog.packages.len(),
            self.catalog.bundles.len(),
            c.warnings
        );
        out
    }
}

fn edges_text(e: &ChannelEntry) -> String {
    let mut s = String::new();
    if !e.replaces.is_empty() {
        let _ = write!(s, " replaces {}", e.replaces);
    }
    if !e.skips.is_empty() {
        let _ = write!(s, " skips [{}]", e.skips.join(", "));
    }
    if !e.skip_range.is_empty() {
        let _ = write!(s, " skipRange {:?}", e.skip_range);
    }
    s
}

fn version_of_blob(b: &Bundle) -> Result<(String, Version), PlanReleaseError> {
    let bad = |message: String| PlanReleaseError::BadBundle {
        bundle: b.name.clone(),
        message,
    };
    let pkgs = property::packages(&b.properties);
    match pkgs.as_slice() {
        [Ok(p)] => {
            if p.package_name != b.package {
                return Err(bad(format!(
                    "olm.package property names {:?}, blob says {:?}",
                    p.package_name, b.package
                )));
            }
            let v = Version::parse(&p.version)
                .map_err(|e| bad(format!("version {:?} is not semver: {e}", p.version)))?;
            Ok((p.package_name.clone(), v))
        }
        _ => Err(bad(format!(
            "must have exactly 1 olm.package property, found {}",
            pkgs.len()
        ))),
    }
}

/// Compares two bundle blobs for release idempotency. Bundles loaded without objects compare
/// on everything else.
fn same_content(a: &Bundle, b: &Bundle) -> Result<(), String> {
    let strip = |x: &Bundle| -> Bundle {
        let mut x = x.clone();
        if x.omitted_objects > 0 || a.omitted_objects > 0 || b.omitted_objects > 0 {
            x.properties.retain(|p| p.type_ != property::BUNDLE_OBJECT);
        }
        x.omitted_objects = 0;
        x
    };
    let (sa, sb) = (strip(a), strip(b));
    if sa.image != sb.image {
        return Err(format!(": image {} vs {}", sa.image, sb.image));
    }
    if sa.name != sb.name {
        return Err(format!(": name {} vs {}", sa.name, sb.name));
    }
    if sa != sb {
        return Err(": properties or related images differ".into());
    }
    Ok(())
}

/// The blobs of `package` alone (packages plan and validate independently, which keeps a
/// release into a 7,000-bundle catalog fast), and the `olm.package` blob added to them when the
/// catalog has none: then the package is new, or (in a catalog opm would refuse) its channels
/// and bundles are listed without it, and they join the package as they will once the blob is
/// written.
fn package_scope(
    cfg: &DeclarativeConfig,
    package: &str,
    default_channel: &str,
) -> (DeclarativeConfig, Option<Package>) {
    let mut scope = cfg.only_package(package);
    if !scope.packages.is_empty() {
        return (scope, None);
    }
    let blob = Package {
        schema: SCHEMA_PACKAGE.into(),
        name: package.to_string(),
        default_channel: default_channel.to_string(),
        icon: None,
        description: String::new(),
        properties: Vec::new(),
    };
    scope.packages.push(blob.clone());
    (scope, Some(blob))
}

/// The package in the model of its [`package_scope`].
fn model_package<'m, 'a>(
    model: &'m Model<'a>,
    package: &str,
) -> Result<&'m model::Package<'a>, PlanReleaseError> {
    model
        .package(package)
        .ok_or_else(|| PlanReleaseError::Options(format!("{package:?} is not a package name")))
}

/// The head of a channel that must have exactly one, with its version when known.
fn single_head(
    pkg: &model::Package<'_>,
    ch: &model::Channel<'_>,
) -> Result<(String, Option<Version>), PlanReleaseError> {
    match ch.heads.as_slice() {
        [h] => Ok((h.to_string(), pkg.version_of(h).cloned())),
        many => Err(PlanReleaseError::BrokenChannel {
            package: pkg.name.to_string(),
            channel: ch.name.to_string(),
            count: many.len(),
            heads: many.join(", "),
        }),
    }
}

/// The existing bundle a new channel's first entry should replace: the highest version below
/// `version`, so that users of other channels can switch to it.
fn bridge(pkg: &model::Package<'_>, version: &Version, except: &str) -> String {
    pkg.bundles
        .iter()
        .filter(|b| b.name != except)
        .filter_map(|b| Some((b.name, b.version.as_ref()?)))
        .filter(|(_, v)| v.cmp_precedence(version).is_lt())
        .max_by(|a, b| a.1.cmp_precedence(b.1))
        .map(|(name, _)| name.to_string())
        .unwrap_or_default()
}

/// How a bundle joins channel `channel` of `pkg`, with `edges`' name, skips and skipRange: an
/// entry that replaces the channel's single head, or, for a new or empty channel, the channel
/// with one entry that replaces the newest lower version released elsewhere (see [`bridge`]).
/// A version not above the head is refused with `not_above(head, head_version)`, which
/// says whether that is a release or a promotion.
fn join_channel(
    pkg: &model::Package<'_>,
    channel: &str,
    edges: &ChannelEntry,
    version: &Version,
    not_above: impl FnOnce(String, String) -> PlanReleaseError,
) -> Result<Change, PlanReleaseError> {
    let Some(ch) = pkg.channel(channel).filter(|ch| !ch.entries().is_empty()) else {
        return Ok(Change::AddChannel(Channel {
            schema: SCHEMA_CHANNEL.into(),
            name: channel.to_string(),
            package: pkg.name.to_string(),
            entries: vec![ChannelEntry {
                replaces: bridge(pkg, version, &edges.name),
                ..edges.clone()
            }],
            properties: Vec::new(),
        }));
    };
    let (head, head_v) = single_head(pkg, ch)?;
    if let Some(hv) = head_v.filter(|hv| !version.cmp_precedence(hv).is_gt()) {
        return Err(not_above(head, hv.to_string()));
    }
    Ok(Change::AddEntry {
        package: pkg.name.to_string(),
        channel: channel.to_string(),
        entry: ChannelEntry {
            replaces: head.clone(),
            ..edges.clone()
        },
        old_head: head,
    })
}

/// The bundle of `pkg` whose version equals `version` (build metadata ignored).
fn released<'m, 'a>(
    pkg: &'m model::Package<'a>,
    version: &Version,
) -> Option<&'m model::Bundle<'a>> {
    pkg.bundles.iter().find(|b| {
        b.version
            .as_ref()
            .is_some_and(|v| v.cmp_precedence(version).is_eq())
    })
}

/// The `skipRange` that `mode` gives a release of `version` (empty for none).
pub fn skip_range_for(mode: &SkipRangeMode, version: &Version) -> Result<String, PlanReleaseError> {
    match mode {
        SkipRangeMode::None => Ok(String::new()),
        SkipRangeMode::BelowNew => {
            let mut v = version.clone();
            v.build = semver::BuildMetadata::EMPTY;
            Ok(format!("<{v}"))
        }
        SkipRangeMode::Explicit(r) => {
            let parsed = VersionRange::parse(r)
                .map_err(|e| PlanReleaseError::Options(format!("invalid skipRange {r:?}: {e}")))?;
            if parsed.contains(version) {
                return Err(PlanReleaseError::Options(format!(
                    "skipRange {r:?} contains the new version {version} itself"
                )));
            }
            Ok(r.clone())
        }
    }
}

fn finish(
    cfg: &DeclarativeConfig,
    package: &str,
    bundle: &str,
    version: &Version,
    changes: Vec<Change>,
) -> Result<ReleasePlan, PlanReleaseError> {
    let mut catalog = cfg.clone();
    apply(&mut catalog, &changes);
    // Packages validate independently and only this one changed: checking it alone keeps a
    // release into a 7,000-bundle catalog fast.
    let mut report = validate(&catalog.only_package(package), None);
    report
        .findings
        .retain(|f| f.severity == olmkit_core::findings::Severity::Error);
    if report.has_errors() {
        return Err(PlanReleaseError::Invalid(report));
    }
    Ok(ReleasePlan {
        package: package.to_string(),
        bundle: bundle.to_string(),
        version: version.clone(),
        outcome: if changes.is_empty() {
            Outcome::NoOp
        } else {
            Outcome::Changed
        },
        changes,
        catalog,
    })
}

/// Plans the release of a new bundle into `cfg`.
pub fn plan_release(
    cfg: &DeclarativeConfig,
    req: &ReleaseRequest,
) -> Result<ReleasePlan, PlanReleaseError> {
    if req.channels.is_empty() {
        return Err(PlanReleaseError::Options(
            "at least one target channel is required".into(),
        ));
    }
    let (package, version) = version_of_blob(&req.bundle)?;
    let name = req.bundle.name.clone();
    let default = req
        .default_channel
        .clone()
        .or_else(|| req.channels.first().cloned())
        .unwrap_or_default();
    let (scope, added) = package_scope(cfg, &package, &default);
    let model = Model::new(&scope, None);
    let pkg = model_package(&model, &package)?;

    // Already released? Same name or same version (the first such blob).
    let existing = pkg.bundles.iter().find(|b| {
        b.name == name
            || b.version
                .as_ref()
                .is_some_and(|v| v.cmp_precedence(&version).is_eq())
    });
    if let Some(ex) = existing {
        return plan_rerun(cfg, req, pkg, ex, added.is_none(), &version);
    }

    let skip_range = skip_range_for(&req.skip_range, &version)?;
    let mut changes = Vec::new();
    match added {
        Some(blob) => changes.push(Change::AddPackage(blob)),
        None => {
            if let Some(d) = &req.default_channel
                && pkg.blob.default_channel != *d
            {
                changes.push(Change::SetDefaultChannel {
                    package: package.clone(),
                    from: pkg.blob.default_channel.clone(),
                    to: d.clone(),
                });
            }
        }
    }
    changes.push(Change::AddBundle(req.bundle.clone()));
    let edges = ChannelEntry {
        name: name.clone(),
        replaces: String::new(),
        skips: Vec::new(),
        skip_range,
    };
    for ch_name in &req.channels {
        changes.push(join_channel(
            pkg,
            ch_name,
            &edges,
            &version,
            |head, head_version| PlanReleaseError::NotGreater {
                version: version.to_string(),
                channel: ch_name.clone(),
                head,
                head_version,
            },
        )?);
    }
    finish(cfg, &package, &name, &version, changes)
}

/// A release of a version (or name) that is already in the catalog: a no-op when the content
/// is the same and it is already in every target channel (and the default channel matches),
/// refused otherwise.
fn plan_rerun(
    cfg: &DeclarativeConfig,
    req: &ReleaseRequest,
    pkg: &model::Package<'_>,
    ex: &model::Bundle<'_>,
    package_existed: bool,
    version: &Version,
) -> Result<ReleasePlan, PlanReleaseError> {
    if let Err(detail) = same_content(ex.blob, &req.bundle) {
        return Err(PlanReleaseError::AlreadyReleased {
            version: version.to_string(),
            existing: ex.name.to_string(),
            detail,
        });
    }
    let missing: Vec<&str> = req
        .channels
        .iter()
        .filter(|c| {
            pkg.channel(c)
                .is_none_or(|ch| !ch.entries().iter().any(|e| e.name == ex.name))
        })
        .map(String::as_str)
        .collect();
    let default_ok = req
        .default_channel
        .as_ref()
        .is_none_or(|d| package_existed && pkg.blob.default_channel == *d);
    if missing.is_empty() && default_ok {
        return finish(cfg, pkg.name, ex.name, version, Vec::new());
    }
    Err(PlanReleaseError::AlreadyReleased {
        version: version.to_string(),
        existing: ex.name.to_string(),
        detail: format!(
            " in other channels (not in {}); use `bundle-tool promote {version} --to <channel>` to add it",
            missing.join(", ")
        ),
    })
}

/// Upgrade edges a release of `version` into `channels` will get, for its CSV: `spec.replaces`
/// is the edge of the first target channel (the head that channel has now, or for a new channel
/// the highest lower version released elsewhere), exactly what [`plan_release`] puts into that
/// channel's entry. When `version` is already released, its recorded entry is returned instead
/// (so that re-running a release regenerates the same CSV). `Ok(None)`: nothing to replace.
pub fn csv_edges(
    cfg: &DeclarativeConfig,
    package: &str,
    channels: &[String],
    version: &Version,
) -> Result<Option<ChannelEntry>, PlanReleaseError> {
    let (scope, _) = package_scope(cfg, package, "");
    let model = Model::new(&scope, None);
    let pkg = model_package(&model, package)?;
    if let Some(b) = released(pkg, version) {
        // Its entry in the first target channel that lists it, else in any channel.
        let entry = channels
            .iter()
            .filter_map(|name| pkg.channel(name))
            .chain(pkg.channels_in_blob_order())
            .find_map(|c| c.entries().iter().find(|e| e.name == b.name));
        return Ok(entry.cloned());
    }
    let Some(first) = channels.first() else {
        return Ok(None);
    };
    let replaces = match pkg.channel(first) {
        Some(ch) if !ch.entries().is_empty() => single_head(pkg, ch)?.0,
        _ => bridge(pkg, version, ""),
    };
    if replaces.is_empty() {
        return Ok(None);
    }
    Ok(Some(ChannelEntry {
        name: String::new(),
        replaces,
        skips: Vec::new(),
        skip_range: String::new(),
    }))
}

/// Plans adding the released bundle with `version` of `package` to `channel`.
pub fn plan_promote(
    cfg: &DeclarativeConfig,
    package: &str,
    version: &str,
    channel: &str,
) -> Result<ReleasePlan, PlanReleaseError> {
    let wanted = olmkit_core::version_range::parse_version_flag(version).map_err(|e| {
        PlanReleaseError::Options(format!("{version:?} is not a semver version: {e}"))
    })?;
    // Promotion never adds the package blob: without one, the plan fails validation below.
    let (scope, _) = package_scope(cfg, package, "");
    let model = Model::new(&scope, None);
    let pkg = model_package(&model, package)?;
    let bundle = released(pkg, &wanted).ok_or_else(|| {
        let mut known: Vec<String> = pkg
            .bundles
            .iter()
            .filter_map(|b| b.version.as_ref().map(Version::to_string))
            .collect();
        known.sort();
        PlanReleaseError::UnknownVersion {
            package: package.to_string(),
            version: version.to_string(),
            known: if known.is_empty() {
                String::new()
            } else {
                format!(" (released: {})", known.join(", "))
            },
        }
    })?;
    let name = bundle.name.to_string();
    // Its edges elsewhere: keep skips and skipRange, they describe what it can upgrade from.
    let template = pkg
        .channels_in_blob_order()
        .into_iter()
        .flat_map(|c| c.entries().iter())
        .find(|e| e.name == name)
        .cloned()
        .unwrap_or_default();
    let changes = if pkg
        .channel(channel)
        .is_some_and(|ch| ch.entries().iter().any(|e| e.name == name))
    {
        Vec::new()
    } else {
        let edges = ChannelEntry {
            name: name.clone(),
            replaces: String::new(),
            ..template
        };
        vec![join_channel(
            pkg,
            channel,
            &edges,
            &wanted,
            |head, head_version| PlanReleaseError::WouldFork {
                bundle: name.clone(),
                version: wanted.to_string(),
                channel: channel.to_string(),
                head,
                head_version,
            },
        )?]
    };
    finish(cfg, package, &name, &wanted, changes)
}
