//! The upgrade graph of a package, per channel: nodes in semver order, `replaces`, `skips` and
//! `skipRange` edges, heads (computed like opm: from replaces and skips only), the default
//! channel and deprecations: a view of the catalog [`crate::model`] for `bundle-tool graph`,
//! `explain` and the cluster commands; [`crate::graph_draw`] draws it.

use crate::declcfg::{
    ChannelEntry, DeclarativeConfig, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};
use crate::model::{self, Model};
use crate::property;
use semver::Version;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub use crate::model::EdgeKind;

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
    /// Edges whose `from` is `name` (its upgrades), in edge order.
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
    let model = Model::new(cfg, None);
    model.packages.values().map(package_graph).collect()
}

/// The graph of one package of the model.
pub fn package_graph(p: &model::Package<'_>) -> PackageGraph {
    let mut versions = BTreeMap::new();
    let mut display_names = BTreeMap::new();
    for b in &p.bundles {
        if let Some(v) = &b.version {
            versions.insert(b.name.to_string(), v.clone());
        }
        if let Some(d) = b
            .blob
            .properties
            .iter()
            .find(|pr| pr.type_ == property::CSV_METADATA)
            .and_then(|pr| pr.value.get("displayName"))
            .and_then(|v| v.as_str())
        {
            display_names.insert(b.name.to_string(), d.to_string());
        }
    }
    // Deprecation messages as the model resolves them (the catalog server reads the same).
    let dep = p.deprecation.as_ref();
    let message = |schema: &str, name: &str| {
        dep.and_then(|d| d.message(schema, name))
            .map(str::to_string)
    };
    let pkg_dep = message(SCHEMA_PACKAGE, "");
    let default_channel = p.blob.default_channel.as_str();
    let channels = p
        .channels
        .values()
        .map(|c| channel_graph(c, &versions, dep, default_channel))
        .collect();
    PackageGraph {
        package: p.name.to_string(),
        default_channel: default_channel.to_string(),
        deprecated: pkg_dep,
        channels,
        versions,
        display_names,
    }
}

fn channel_graph(
    c: &model::Channel<'_>,
    versions: &BTreeMap<String, Version>,
    dep: Option<&model::Deprecation<'_>>,
    default_channel: &str,
) -> ChannelGraph {
    let message = |schema: &str, name: &str| {
        dep.and_then(|d| d.message(schema, name))
            .map(str::to_string)
    };
    let node = |name: &str, entry: ChannelEntry, in_channel: bool| Node {
        name: name.to_string(),
        version: versions.get(name).map(|v| v.to_string()),
        deprecated: message(SCHEMA_BUNDLE, name),
        in_channel,
        entry,
        version_parsed: versions.get(name).cloned(),
    };
    let mut nodes: Vec<Node> = Vec::new();
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for e in c.entries() {
        if names.insert(&e.name) {
            nodes.push(node(&e.name, e.clone(), true));
        }
    }
    nodes.sort_by(|a, b| cmp_by_version(versions, &a.name, &b.name));
    for &x in &c.external {
        let entry = ChannelEntry {
            name: x.to_string(),
            ..Default::default()
        };
        nodes.push(node(x, entry, false));
    }
    ChannelGraph {
        name: c.name.to_string(),
        heads: c.heads.iter().map(|h| h.to_string()).collect(),
        nodes,
        edges: c
            .edges
            .iter()
            .map(|e| Edge {
                from: e.from.to_string(),
                to: e.to.to_string(),
                kind: e.kind,
            })
            .collect(),
        is_default: c.name == default_channel,
        deprecated: message(SCHEMA_CHANNEL, c.name),
    }
}
