//! The upgrade graph of a package, per channel: nodes in semver order, `replaces`, `skips` and
//! `skipRange` edges, heads (computed like opm: from replaces and skips only), the default
//! channel and deprecations. This is the model behind `bundle-tool graph`, `explain` and the
//! release planner; [`crate::graph_render`] draws it.

use crate::declcfg::{
    ChannelEntry, DeclarativeConfig, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};
use crate::property;
use crate::validate::{bundle_version, channel_heads};
use crate::version_range::VersionRange;
use semver::Version;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

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
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Edge {
    /// Installed bundle.
    pub from: String,
    /// Successor.
    pub to: String,
    /// Why.
    pub kind: EdgeKind,
}

/// A bundle in a channel graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// Bundle name.
    pub name: String,
    /// Its version, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Deprecation message (bundle, or inherited from nothing else).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    /// False for a name that edges point at but that is not an entry of the channel.
    pub in_channel: bool,
    /// The entry's edges, as written.
    #[serde(skip)]
    pub entry: ChannelEntry,
    #[serde(skip)]
    version_parsed: Option<Version>,
}

impl Node {
    /// The parsed version.
    pub fn semver(&self) -> Option<&Version> {
        self.version_parsed.as_ref()
    }
}

/// The graph of one channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelGraph {
    /// Channel name.
    pub name: String,
    /// Nodes in ascending semver order (unknown versions last, by name), then names that are
    /// only edge targets.
    pub nodes: Vec<Node>,
    /// All edges, sorted.
    pub edges: Vec<Edge>,
    /// Entries nothing replaces or skips (one for a valid channel).
    pub heads: Vec<String>,
    /// Whether this is the package's default channel.
    pub is_default: bool,
    /// Channel deprecation message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
}

impl ChannelGraph {
    /// The single head, if there is exactly one.
    pub fn head(&self) -> Option<&str> {
        match self.heads.as_slice() {
            [h] => Some(h),
            _ => None,
        }
    }
    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }
    /// Whether `name` is an entry of the channel.
    pub fn contains(&self, name: &str) -> bool {
        self.node(name).is_some_and(|n| n.in_channel)
    }
    /// Edges into `name` (its successors point at it? no: edges whose `from` is `name`).
    pub fn successors_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Edge> + 'a {
        self.edges.iter().filter(move |e| e.from == name)
    }
}

/// The graphs of one package.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageGraph {
    /// Package name.
    pub package: String,
    /// Default channel.
    pub default_channel: String,
    /// Package deprecation message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    /// Channels sorted by name.
    pub channels: Vec<ChannelGraph>,
    /// Versions of every bundle of the package (bundle name -> version).
    #[serde(skip)]
    pub versions: BTreeMap<String, Version>,
    /// Display names from `olm.csv.metadata` (bundle name -> display name).
    #[serde(skip)]
    pub display_names: BTreeMap<String, String>,
}

impl PackageGraph {
    /// A channel by name.
    pub fn channel(&self, name: &str) -> Option<&ChannelGraph> {
        self.channels.iter().find(|c| c.name == name)
    }
    /// Version of a bundle, by name.
    pub fn version_of(&self, bundle: &str) -> Option<&Version> {
        self.versions.get(bundle)
    }
    /// All versions in ascending order (the x axis of drawings).
    pub fn ordered_bundles(&self) -> Vec<String> {
        let mut names: BTreeSet<String> = BTreeSet::new();
        for c in &self.channels {
            names.extend(c.nodes.iter().map(|n| n.name.clone()));
        }
        let mut v: Vec<String> = names.into_iter().collect();
        v.sort_by(|a, b| cmp_by_version(&self.versions, a, b));
        v
    }
}

fn cmp_by_version(versions: &BTreeMap<String, Version>, a: &str, b: &str) -> std::cmp::Ordering {
    match (versions.get(a), versions.get(b)) {
        (Some(x), Some(y)) => x.cmp_precedence(y).then_with(|| a.cmp(b)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// Builds the graph of every package of a catalog (bundles may be loaded without objects).
pub fn package_graphs(cfg: &DeclarativeConfig) -> Vec<PackageGraph> {
    let mut out = Vec::new();
    for p in &cfg.packages {
        let mut versions = BTreeMap::new();
        let mut display_names = BTreeMap::new();
        for b in cfg.bundles.iter().filter(|b| b.package == p.name) {
            if let Some(v) = bundle_version(b) {
                versions.insert(b.name.clone(), v);
            }
            if let Some(d) = b
                .properties
                .iter()
                .find(|pr| pr.type_ == property::CSV_METADATA)
                .and_then(|pr| pr.value.get("displayName"))
                .and_then(|v| v.as_str())
            {
                display_names.insert(b.name.clone(), d.to_string());
            }
        }
        let mut pkg_dep = None;
        let mut ch_dep: BTreeMap<&str, String> = BTreeMap::new();
        let mut b_dep: BTreeMap<&str, String> = BTreeMap::new();
        for d in cfg.deprecations.iter().filter(|d| d.package == p.name) {
            for e in &d.entries {
                match e.reference.schema.as_str() {
                    SCHEMA_PACKAGE => pkg_dep = Some(e.message.clone()),
                    SCHEMA_CHANNEL => {
                        ch_dep.insert(&e.reference.name, e.message.clone());
                    }
                    SCHEMA_BUNDLE => {
                        b_dep.insert(&e.reference.name, e.message.clone());
                    }
                    _ => {}
                }
            }
        }
        let mut channels: Vec<ChannelGraph> = cfg
            .channels
            .iter()
            .filter(|c| c.package == p.name)
            .map(|c| channel_graph(c, &versions, &b_dep, &p.default_channel, &ch_dep))
            .collect();
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        channels.dedup_by(|a, b| a.name == b.name);
        out.push(PackageGraph {
            package: p.name.clone(),
            default_channel: p.default_channel.clone(),
            deprecated: pkg_dep,
            channels,
            versions,
            display_names,
        });
    }
    out.sort_by(|a, b| a.package.cmp(&b.package));
    out
}

fn channel_graph(
    c: &crate::declcfg::Channel,
    versions: &BTreeMap<String, Version>,
    b_dep: &BTreeMap<&str, String>,
    default_channel: &str,
    ch_dep: &BTreeMap<&str, String>,
) -> ChannelGraph {
    let mut nodes: Vec<Node> = Vec::new();
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for e in &c.entries {
        if names.insert(&e.name) {
            nodes.push(Node {
                name: e.name.clone(),
                version: versions.get(&e.name).map(|v| v.to_string()),
                deprecated: b_dep.get(e.name.as_str()).cloned(),
                in_channel: true,
                entry: e.clone(),
                version_parsed: versions.get(&e.name).cloned(),
            });
        }
    }
    let mut edges: BTreeSet<Edge> = BTreeSet::new();
    let mut external: BTreeSet<String> = BTreeSet::new();
    for e in &c.entries {
        if !e.replaces.is_empty() {
            edges.insert(Edge {
                from: e.replaces.clone(),
                to: e.name.clone(),
                kind: EdgeKind::Replaces,
            });
            if !names.contains(e.replaces.as_str()) {
                external.insert(e.replaces.clone());
            }
        }
        for s in e.skips.iter().filter(|s| !s.is_empty()) {
            edges.insert(Edge {
                from: s.clone(),
                to: e.name.clone(),
                kind: EdgeKind::Skips,
            });
            if !names.contains(s.as_str()) {
                external.insert(s.clone());
            }
        }
    }
    // skipRange edges come from every node shown: entries and outside names with a version.
    let all: Vec<String> = c
        .entries
        .iter()
        .map(|e| e.name.clone())
        .chain(external.iter().cloned())
        .collect();
    for e in &c.entries {
        if let Ok(r) = VersionRange::parse(&e.skip_range) {
            for other in &all {
                if *other == e.name {
                    continue;
                }
                if let Some(v) = versions.get(other)
                    && r.contains(v)
                {
                    edges.insert(Edge {
                        from: other.clone(),
                        to: e.name.clone(),
                        kind: EdgeKind::SkipRange,
                    });
                }
            }
        }
    }
    nodes.sort_by(|a, b| cmp_by_version(versions, &a.name, &b.name));
    for x in external {
        nodes.push(Node {
            version: versions.get(&x).map(|v| v.to_string()),
            version_parsed: versions.get(&x).cloned(),
            deprecated: b_dep.get(x.as_str()).cloned(),
            in_channel: false,
            entry: ChannelEntry {
                name: x.clone(),
                ..Default::default()
            },
            name: x,
        });
    }
    ChannelGraph {
        name: c.name.clone(),
        heads: channel_heads(c).into_iter().map(String::from).collect(),
        nodes,
        edges: edges.into_iter().collect(),
        is_default: c.name == default_channel,
        deprecated: ch_dep.get(c.name.as_str()).cloned(),
    }
}
