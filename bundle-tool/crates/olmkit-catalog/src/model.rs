//! The catalog model: packages, their channels (each with its resolved upgrade graph) and
//! their bundles, built from a [`DeclarativeConfig`] the way operator-registry's
//! `declcfg.ConvertToModel` (`alpha/declcfg/declcfg_to_model.go`) builds `model.Model`.
//!
//! The conversion never fails: where opm stops at the first blob it cannot place (no name, a
//! duplicate, an unknown package, a property or version that does not parse), the model leaves
//! that blob out (or keeps it without the fact that did not parse) and records a [`Problem`].
//! The validator ([`crate::validate`]) words problems and judges the model; [`crate::graph`]
//! (and through it `explain`), the release planner ([`crate::release`]) and the catalog
//! server's index read the same model instead of rebuilding it.
//! Like opm, the first blob of a name wins; everything borrows from the config.

use crate::declcfg::{self, DeclarativeConfig, load::Origins};
use crate::property::{self, PropertyShapeError};
use olmkit_core::version_range::VersionRange;
use semver::Version;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A catalog as a model: every package that has an `olm.package` blob, by name.
#[derive(Debug, Default)]
pub struct Model<'a> {
    /// Packages by name.
    pub packages: BTreeMap<&'a str, Package<'a>>,
    /// What the conversion refused or could not read, in the order found.
    pub problems: Vec<Problem<'a>>,
    /// How many blobs of each kind the config held (accepted or not).
    pub blobs: BlobCounts,
}

/// Blob counts of a config, for messages about what a catalog holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlobCounts {
    /// `olm.package` blobs.
    pub packages: usize,
    /// `olm.channel` blobs.
    pub channels: usize,
    /// `olm.bundle` blobs.
    pub bundles: usize,
    /// `olm.deprecations` blobs.
    pub deprecations: usize,
    /// Blobs of other schemas.
    pub others: usize,
}

/// A package and everything that belongs to it.
#[derive(Debug)]
pub struct Package<'a> {
    /// Name.
    pub name: &'a str,
    /// The (first) `olm.package` blob.
    pub blob: &'a declcfg::Package,
    /// Its file.
    pub file: Option<&'a str>,
    /// Channels by name (the first blob of each name).
    pub channels: BTreeMap<&'a str, Channel<'a>>,
    /// Bundles in blob order (the first blob of each name).
    pub bundles: Vec<Bundle<'a>>,
    /// The (first) `olm.deprecations` blob, as written.
    pub deprecation: Option<Deprecation<'a>>,
    by_name: HashMap<&'a str, usize>,
}

/// A channel with its resolved upgrade graph.
#[derive(Debug)]
pub struct Channel<'a> {
    /// Name.
    pub name: &'a str,
    /// The `olm.channel` blob (its entries as written).
    pub blob: &'a declcfg::Channel,
    /// Its file.
    pub file: Option<&'a str>,
    /// Its position in the config's channels (callers that must keep the order the catalog
    /// lists channels in sort by it; [`Package::channels`] is by name).
    pub index: usize,
    /// Entries that no entry replaces or skips, sorted (one for a valid channel).
    pub heads: Vec<&'a str>,
    /// `replaces`, `skips` and `skipRange` edges, sorted by (from, to, kind): the one
    /// computation of a channel's upgrade edges, which `graph` draws and `explain` follows.
    pub edges: Vec<Edge<'a>>,
    /// Names that edges come from but that are not entries, sorted: what `replaces` or
    /// `skips` point at, and bundles of other channels that a `skipRange` covers.
    pub external: Vec<&'a str>,
}

/// A bundle.
#[derive(Debug)]
pub struct Bundle<'a> {
    /// Name.
    pub name: &'a str,
    /// The `olm.bundle` blob.
    pub blob: &'a declcfg::Bundle,
    /// Its file.
    pub file: Option<&'a str>,
    /// Its position in the config's bundles, for callers that keep data per blob (the
    /// catalog server keeps each blob's byte span).
    pub index: usize,
    /// The version of its single `olm.package` property, when that parses (see
    /// [`bundle_version`]), whatever else is wrong with its properties.
    pub version: Option<Version>,
    /// Every well-known property has the shape its type calls for (otherwise opm's model
    /// would not hold the bundle, and neither a version).
    pub properties_ok: bool,
}

impl Bundle<'_> {
    /// The version opm's model would hold: only when all properties parse.
    pub fn model_version(&self) -> Option<&Version> {
        self.version.as_ref().filter(|_| self.properties_ok)
    }
}

/// A package's `olm.deprecations` blob.
#[derive(Debug)]
pub struct Deprecation<'a> {
    /// The blob (entries as written, checked by the validator).
    pub blob: &'a declcfg::Deprecation,
    /// Its file.
    pub file: Option<&'a str>,
    /// Message by (schema, name) of the object, first entry first (a lookup per bundle must
    /// not scan every entry: a package may hold thousands of both).
    messages: HashMap<(&'a str, &'a str), &'a str>,
}

impl<'a> Deprecation<'a> {
    fn new(blob: &'a declcfg::Deprecation, file: Option<&'a str>) -> Self {
        let mut messages = HashMap::new();
        for e in &blob.entries {
            messages
                .entry((e.reference.schema.as_str(), e.reference.name.as_str()))
                .or_insert(e.message.as_str());
        }
        Deprecation {
            blob,
            file,
            messages,
        }
    }

    /// The message of the entry that deprecates the object `name` of `schema`
    /// (`olm.package`, `olm.channel` or `olm.bundle`; the package's own entry has an empty
    /// name, which the validator enforces). The first entry wins; the validator reports
    /// repeats.
    pub fn message(&self, schema: &str, name: &str) -> Option<&'a str> {
        self.messages.get(&(schema, name)).copied()
    }
}

/// Kind of an upgrade edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum EdgeKind {
    /// `replaces`.
    Replaces,
    /// `skips`.
    Skips,
    /// `skipRange`.
    SkipRange,
}

impl EdgeKind {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Replaces => "replaces",
            EdgeKind::Skips => "skips",
            EdgeKind::SkipRange => "skipRange",
        }
    }
}

/// An upgrade edge: a cluster running `from` may upgrade to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge<'a> {
    /// Installed bundle.
    pub from: &'a str,
    /// Successor.
    pub to: &'a str,
    /// Why.
    pub kind: EdgeKind,
}

/// A blob the conversion could not place, or a fact it could not read, with the blob's file.
#[derive(Debug)]
pub struct Problem<'a> {
    /// File of the blob.
    pub file: Option<&'a str>,
    /// What went wrong.
    pub kind: ProblemKind<'a>,
}

/// What the conversion found wrong (operator-registry `ConvertToModel` errors, in its order).
#[derive(Debug)]
pub enum ProblemKind<'a> {
    /// `olm.package` blob number `index` has no name (left out).
    PackageNoName {
        /// Index in the config's packages.
        index: usize,
    },
    /// A second `olm.package` blob of a name (left out).
    DuplicatePackage(&'a declcfg::Package),
    /// A channel of a package without `olm.package` blob (left out).
    ChannelUnknownPackage(&'a declcfg::Channel),
    /// A channel without a name (left out).
    ChannelNoName(&'a declcfg::Channel),
    /// A second channel of a name in a package (left out).
    DuplicateChannel(&'a declcfg::Channel),
    /// An entry name listed twice in a channel (the channel is kept).
    DuplicateEntry(&'a declcfg::Channel, &'a str),
    /// A bundle without a package (left out).
    BundleNoPackage(&'a declcfg::Bundle),
    /// A bundle of a package without `olm.package` blob (left out).
    BundleUnknownPackage(&'a declcfg::Bundle),
    /// A second bundle of a name in a package (left out).
    DuplicateBundle(&'a declcfg::Bundle),
    /// A well-known property whose value does not have its shape.
    BadProperty(&'a declcfg::Bundle, PropertyShapeError),
    /// Not exactly one `olm.package` property.
    PackagePropertyCount(&'a declcfg::Bundle, usize),
    /// The `olm.package` property names another package.
    PackagePropertyMismatch(&'a declcfg::Bundle, String),
    /// The `olm.package` version is not semver.
    BadVersion {
        /// Bundle.
        bundle: &'a declcfg::Bundle,
        /// The version as written.
        version: String,
        /// What the parser said.
        error: String,
    },
    /// `olm.deprecations` blob number `index` has no package (left out).
    DeprecationNoPackage {
        /// Index in the config's deprecations.
        index: usize,
    },
    /// Deprecations of a package without `olm.package` blob (left out).
    DeprecationUnknownPackage(&'a declcfg::Deprecation),
    /// A second `olm.deprecations` blob for a package (left out).
    DuplicateDeprecation(&'a declcfg::Deprecation),
}

/// Which list of the config a blob index refers to, for [`Model::new`]'s file lookups.
fn file_of(list: Option<&Vec<String>>, i: usize) -> Option<&str> {
    list.and_then(|l| l.get(i)).map(String::as_str)
}

impl<'a> Model<'a> {
    /// Converts a config; `origins` (from [`crate::declcfg::load::load_dir_with_files`]) names
    /// the file of every blob.
    pub fn new(cfg: &'a DeclarativeConfig, origins: Option<&'a Origins>) -> Self {
        let mut m = Model {
            blobs: BlobCounts {
                packages: cfg.packages.len(),
                channels: cfg.channels.len(),
                bundles: cfg.bundles.len(),
                deprecations: cfg.deprecations.len(),
                others: cfg.others.len(),
            },
            ..Model::default()
        };
        m.add_packages(cfg, origins);
        m.add_channels(cfg, origins);
        m.add_bundles(cfg, origins);
        m.add_deprecations(cfg, origins);
        for p in m.packages.values_mut() {
            p.resolve_graphs();
        }
        m
    }

    /// A package by name.
    pub fn package(&self, name: &str) -> Option<&Package<'a>> {
        self.packages.get(name)
    }

    fn problem(&mut self, file: Option<&'a str>, kind: ProblemKind<'a>) {
        self.problems.push(Problem { file, kind });
    }

    fn add_packages(&mut self, cfg: &'a DeclarativeConfig, origins: Option<&'a Origins>) {
        for (i, p) in cfg.packages.iter().enumerate() {
            let file = file_of(origins.map(|o| &o.packages), i);
            if p.name.is_empty() {
                self.problem(file, ProblemKind::PackageNoName { index: i });
            } else if self.packages.contains_key(p.name.as_str()) {
                self.problem(file, ProblemKind::DuplicatePackage(p));
            } else {
                self.packages.insert(
                    &p.name,
                    Package {
                        name: &p.name,
                        blob: p,
                        file,
                        channels: BTreeMap::new(),
                        bundles: Vec::new(),
                        deprecation: None,
                        by_name: HashMap::new(),
                    },
                );
            }
        }
    }

    fn add_channels(&mut self, cfg: &'a DeclarativeConfig, origins: Option<&'a Origins>) {
        for (i, c) in cfg.channels.iter().enumerate() {
            let file = file_of(origins.map(|o| &o.channels), i);
            let Some(pkg) = self.packages.get_mut(c.package.as_str()) else {
                self.problem(file, ProblemKind::ChannelUnknownPackage(c));
                continue;
            };
            if c.name.is_empty() {
                self.problem(file, ProblemKind::ChannelNoName(c));
                continue;
            }
            if pkg.channels.contains_key(c.name.as_str()) {
                self.problem(file, ProblemKind::DuplicateChannel(c));
                continue;
            }
            pkg.channels.insert(
                &c.name,
                Channel {
                    name: &c.name,
                    blob: c,
                    file,
                    index: i,
                    heads: Vec::new(),
                    edges: Vec::new(),
                    external: Vec::new(),
                },
            );
            let mut seen = HashSet::new();
            for e in &c.entries {
                if !seen.insert(e.name.as_str()) {
                    self.problem(file, ProblemKind::DuplicateEntry(c, &e.name));
                }
            }
        }
    }

    fn add_bundles(&mut self, cfg: &'a DeclarativeConfig, origins: Option<&'a Origins>) {
        for (i, b) in cfg.bundles.iter().enumerate() {
            let file = file_of(origins.map(|o| &o.bundles), i);
            if b.package.is_empty() {
                self.problem(file, ProblemKind::BundleNoPackage(b));
                continue;
            }
            let Some(pkg) = self.packages.get_mut(b.package.as_str()) else {
                self.problem(file, ProblemKind::BundleUnknownPackage(b));
                continue;
            };
            if pkg.by_name.contains_key(b.name.as_str()) {
                self.problem(file, ProblemKind::DuplicateBundle(b));
                continue;
            }
            pkg.by_name.insert(&b.name, pkg.bundles.len());
            let (bundle, problems) = convert_bundle(b, i, file);
            pkg.bundles.push(bundle);
            for kind in problems {
                self.problem(file, kind);
            }
        }
    }

    fn add_deprecations(&mut self, cfg: &'a DeclarativeConfig, origins: Option<&'a Origins>) {
        for (i, d) in cfg.deprecations.iter().enumerate() {
            let file = file_of(origins.map(|o| &o.deprecations), i);
            if d.package.is_empty() {
                self.problem(file, ProblemKind::DeprecationNoPackage { index: i });
                continue;
            }
            let Some(pkg) = self.packages.get_mut(d.package.as_str()) else {
                self.problem(file, ProblemKind::DeprecationUnknownPackage(d));
                continue;
            };
            if pkg.deprecation.is_some() {
                self.problem(file, ProblemKind::DuplicateDeprecation(d));
                continue;
            }
            pkg.deprecation = Some(Deprecation::new(d, file));
        }
    }
}

/// Reads a bundle's properties and version the way opm's conversion does; the problems come
/// in opm's order (properties, then the `olm.package` property, then its version).
fn convert_bundle<'a>(
    b: &'a declcfg::Bundle,
    index: usize,
    file: Option<&'a str>,
) -> (Bundle<'a>, Vec<ProblemKind<'a>>) {
    let mut problems = Vec::new();
    for (i, p) in b.properties.iter().enumerate() {
        if let Err(e) = property::check_shape(p, i) {
            problems.push(ProblemKind::BadProperty(b, e));
        }
    }
    let properties_ok = problems.is_empty();
    if properties_ok {
        let pkg_props = property::packages(&b.properties);
        if pkg_props.len() != 1 {
            problems.push(ProblemKind::PackagePropertyCount(b, pkg_props.len()));
        } else if let Some(Ok(pp)) = pkg_props.first() {
            if pp.package_name != b.package {
                problems.push(ProblemKind::PackagePropertyMismatch(
                    b,
                    pp.package_name.clone(),
                ));
            }
            if let Err(e) = Version::parse(&pp.version) {
                problems.push(ProblemKind::BadVersion {
                    bundle: b,
                    version: pp.version.clone(),
                    error: e.to_string(),
                });
            }
        }
    }
    let bundle = Bundle {
        name: &b.name,
        blob: b,
        file,
        index,
        version: bundle_version(b),
        properties_ok,
    };
    (bundle, problems)
}

impl<'a> Package<'a> {
    /// A bundle by name.
    pub fn bundle(&self, name: &str) -> Option<&Bundle<'a>> {
        self.by_name.get(name).and_then(|&i| self.bundles.get(i))
    }

    /// The version of a bundle, by name (see [`Bundle::version`]).
    pub fn version_of(&self, name: &str) -> Option<&Version> {
        self.bundle(name).and_then(|b| b.version.as_ref())
    }

    /// A channel by name.
    pub fn channel(&self, name: &str) -> Option<&Channel<'a>> {
        self.channels.get(name)
    }

    /// The channels in the order the catalog lists them.
    pub fn channels_in_blob_order(&self) -> Vec<&Channel<'a>> {
        let mut v: Vec<&Channel<'a>> = self.channels.values().collect();
        v.sort_by_key(|c| c.index);
        v
    }

    /// Names of every entry of every channel.
    pub fn entry_names(&self) -> BTreeSet<&'a str> {
        self.channels
            .values()
            .flat_map(|c| c.blob.entries.iter().map(|e| e.name.as_str()))
            .collect()
    }

    fn resolve_graphs(&mut self) {
        let versions: HashMap<&'a str, &Version> = self
            .bundles
            .iter()
            .filter_map(|b| Some((b.name, b.version.as_ref()?)))
            .collect();
        for c in self.channels.values_mut() {
            c.heads = channel_heads(c.blob);
            let (edges, external) = channel_edges(c.blob, &versions);
            c.edges = edges;
            c.external = external;
        }
    }
}

impl<'a> Channel<'a> {
    /// The entries, as written.
    pub fn entries(&self) -> &'a [declcfg::ChannelEntry] {
        &self.blob.entries
    }

    /// The single head, if there is exactly one.
    pub fn head(&self) -> Option<&'a str> {
        match self.heads.as_slice() {
            [h] => Some(h),
            _ => None,
        }
    }
}

/// A channel's edges and the names outside it that edges come from. An entry is a successor
/// of a bundle it `replaces` or `skips`, or whose version its `skipRange` contains, wherever
/// that bundle is: OLM v0's resolver and OLM v1 (operator-controller `legacySuccessor`,
/// `catalogmetadata/filter/successors.go`) match the skipRange against the installed
/// bundle's version, not against the channel's entries, so a bundle of another channel of
/// the package (one installed from it, then switched) upgrades through it too.
fn channel_edges<'a>(
    c: &'a declcfg::Channel,
    versions: &HashMap<&'a str, &Version>,
) -> (Vec<Edge<'a>>, Vec<&'a str>) {
    let names: HashSet<&str> = c.entries.iter().map(|e| e.name.as_str()).collect();
    let mut edges: BTreeSet<Edge<'a>> = BTreeSet::new();
    let mut external: BTreeSet<&'a str> = BTreeSet::new();
    for e in &c.entries {
        let targets = std::iter::once((e.replaces.as_str(), EdgeKind::Replaces))
            .chain(e.skips.iter().map(|s| (s.as_str(), EdgeKind::Skips)));
        for (from, kind) in targets.filter(|(from, _)| !from.is_empty()) {
            edges.insert(Edge {
                from,
                to: &e.name,
                kind,
            });
            if !names.contains(from) {
                external.insert(from);
            }
        }
    }
    for e in &c.entries {
        let Ok(range) = VersionRange::parse(&e.skip_range) else {
            continue;
        };
        for (&other, v) in versions {
            if other != e.name && range.contains(v) {
                edges.insert(Edge {
                    from: other,
                    to: &e.name,
                    kind: EdgeKind::SkipRange,
                });
                if !names.contains(other) {
                    external.insert(other);
                }
            }
        }
    }
    (edges.into_iter().collect(), external.into_iter().collect())
}

/// The `olm.package` version of a bundle, if it has exactly one that parses.
pub fn bundle_version(b: &declcfg::Bundle) -> Option<Version> {
    let mut pkgs = property::packages(&b.properties).into_iter();
    match (pkgs.next(), pkgs.next()) {
        (Some(Ok(p)), None) => Version::parse(&p.version).ok(),
        _ => None,
    }
}

/// The channel head(s) computed like opm (`model.Channel.Head`): entries that no entry of the
/// channel replaces or skips. `skipRange` does not count.
pub fn channel_heads(c: &declcfg::Channel) -> Vec<&str> {
    let mut incoming: HashSet<&str> = HashSet::new();
    for e in &c.entries {
        if !e.replaces.is_empty() {
            incoming.insert(&e.replaces);
        }
        incoming.extend(e.skips.iter().map(String::as_str));
    }
    let mut heads: Vec<&str> = c
        .entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| !incoming.contains(n))
        .collect();
    heads.sort();
    heads.dedup();
    heads
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declcfg::ChannelEntry;
    use crate::property::Property;

    fn entry(name: &str, replaces: &str, skips: &[&str], range: &str) -> ChannelEntry {
        ChannelEntry {
            name: name.into(),
            replaces: replaces.into(),
            skips: skips.iter().map(|s| s.to_string()).collect(),
            skip_range: range.into(),
        }
    }

    fn bundle(pkg: &str, name: &str, version: &str) -> declcfg::Bundle {
        declcfg::Bundle {
            schema: declcfg::SCHEMA_BUNDLE.into(),
            name: name.into(),
            package: pkg.into(),
            image: format!("quay.io/x/{name}"),
            properties: vec![Property::package(pkg, version)],
            related_images: Vec::new(),
            omitted_objects: 0,
        }
    }

    fn cfg() -> DeclarativeConfig {
        let mut cfg = DeclarativeConfig::default();
        cfg.packages.push(declcfg::Package {
            schema: declcfg::SCHEMA_PACKAGE.into(),
            name: "p".into(),
            default_channel: "stable".into(),
            icon: None,
            description: String::new(),
            properties: Vec::new(),
        });
        cfg.channels.push(declcfg::Channel {
            name: "stable".into(),
            package: "p".into(),
            entries: vec![
                entry("p.v1", "p.v0", &[], ""),
                entry("p.v2", "p.v1", &["p.v1"], ">=0.0.0 <2.0.0"),
            ],
            schema: declcfg::SCHEMA_CHANNEL.into(),
            properties: Vec::new(),
        });
        cfg.bundles.push(bundle("p", "p.v1", "1.0.0"));
        cfg.bundles.push(bundle("p", "p.v2", "2.0.0"));
        cfg
    }

    #[test]
    fn resolves_heads_edges_and_outside_names() {
        let cfg = cfg();
        let m = Model::new(&cfg, None);
        assert!(m.problems.is_empty(), "{:?}", m.problems);
        let c = m.package("p").unwrap().channel("stable").unwrap();
        assert_eq!(c.head(), Some("p.v2"));
        assert_eq!(c.external, vec!["p.v0"]);
        let kinds: Vec<(&str, &str, EdgeKind)> =
            c.edges.iter().map(|e| (e.from, e.to, e.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                ("p.v0", "p.v1", EdgeKind::Replaces),
                ("p.v1", "p.v2", EdgeKind::Replaces),
                ("p.v1", "p.v2", EdgeKind::Skips),
                ("p.v1", "p.v2", EdgeKind::SkipRange),
            ]
        );
    }

    #[test]
    fn first_blob_wins_and_the_rest_are_problems() {
        let mut cfg = cfg();
        cfg.bundles.push(bundle("p", "p.v1", "9.0.0"));
        cfg.bundles.push(bundle("q", "q.v1", "1.0.0"));
        cfg.channels.push(cfg.channels[0].clone());
        let m = Model::new(&cfg, None);
        let p = m.package("p").unwrap();
        assert_eq!(p.version_of("p.v1"), Some(&Version::new(1, 0, 0)));
        assert_eq!(p.bundles.len(), 2);
        let kinds: Vec<String> = m
            .problems
            .iter()
            .map(|x| {
                format!("{:?}", x.kind)
                    .split('(')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                "DuplicateChannel",
                "DuplicateBundle",
                "BundleUnknownPackage"
            ]
        );
    }

    #[test]
    fn a_bad_property_hides_the_model_version_only() {
        let mut cfg = cfg();
        cfg.bundles[0]
            .properties
            .push(Property::new(property::GVK, serde_json::json!("nope")));
        let m = Model::new(&cfg, None);
        let b = m.package("p").unwrap().bundle("p.v1").unwrap();
        assert!(!b.properties_ok);
        assert_eq!(b.version, Some(Version::new(1, 0, 0)));
        assert_eq!(b.model_version(), None);
        assert!(matches!(m.problems[0].kind, ProblemKind::BadProperty(..)));
    }

    #[test]
    fn blob_order_and_deprecation_messages() {
        let mut cfg = cfg();
        let mut alpha = cfg.channels[0].clone();
        alpha.name = "alpha".into();
        cfg.channels.push(alpha);
        cfg.deprecations.push(declcfg::Deprecation {
            schema: declcfg::SCHEMA_DEPRECATIONS.into(),
            package: "p".into(),
            entries: vec![
                declcfg::DeprecationEntry {
                    reference: declcfg::PackageScopedReference {
                        schema: declcfg::SCHEMA_BUNDLE.into(),
                        name: "p.v1".into(),
                    },
                    message: "old".into(),
                },
                declcfg::DeprecationEntry {
                    reference: declcfg::PackageScopedReference {
                        schema: declcfg::SCHEMA_PACKAGE.into(),
                        name: String::new(),
                    },
                    message: "gone".into(),
                },
            ],
        });
        let m = Model::new(&cfg, None);
        let p = m.package("p").unwrap();
        let by_name: Vec<&str> = p.channels.values().map(|c| c.name).collect();
        let by_blob: Vec<&str> = p.channels_in_blob_order().iter().map(|c| c.name).collect();
        assert_eq!(by_name, ["alpha", "stable"]);
        assert_eq!(by_blob, ["stable", "alpha"]);
        assert_eq!(p.bundle("p.v2").map(|b| b.index), Some(1));
        let d = p.deprecation.as_ref().unwrap();
        assert_eq!(d.message(declcfg::SCHEMA_BUNDLE, "p.v1"), Some("old"));
        assert_eq!(d.message(declcfg::SCHEMA_PACKAGE, ""), Some("gone"));
        assert_eq!(d.message(declcfg::SCHEMA_BUNDLE, "p.v2"), None);
        assert_eq!(d.message(declcfg::SCHEMA_CHANNEL, "stable"), None);
    }
}
