//! Replaying how OLM resolves upgrades through a catalog.
//!
//! OLM v0 (Subscriptions): with CSV `X` installed, the resolver looks in the subscribed channel
//! for bundles whose entry `replaces` X, lists X in `skips`, or whose `skipRange` contains X's
//! version; among them it prefers the one closest to the channel head (the channel order is
//! the replaces chain from the head). Each InstallPlan performs one such hop; the new CSV's
//! `spec.replaces` names the CSV it replaced. When nothing qualifies the Subscription stays on
//! X; after a channel switch that means the switch silently does nothing ("no operators found
//! in channel ... that upgrade from X"). OLM v1 (ClusterExtensions, `CatalogProvided` upgrade
//! policy): the successors of X are the same three kinds of edges within the channel, and it
//! jumps straight to the highest-versioned non-deprecated successor.
//!
//! These functions are pure and work on [`PackageGraph`]s, so the cluster commands can say
//! which CSV a channel switch leads to.

use crate::graph::{ChannelGraph, EdgeKind, PackageGraph};
use serde::Serialize;
use thiserror::Error;

/// A question explain cannot answer.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ExplainError {
    /// No such channel.
    #[error("package {package:?} has no channel {channel:?} (channels: {known})")]
    UnknownChannel {
        /// Package.
        package: String,
        /// Channel asked for.
        channel: String,
        /// Known channels.
        known: String,
    },
    /// The installed CSV is not in the catalog and has no known version.
    #[error(
        "{csv:?} is not a bundle of package {package:?}; pass the name of an installed CSV such as {example:?}"
    )]
    UnknownBundle {
        /// Package.
        package: String,
        /// CSV asked for.
        csv: String,
        /// A bundle that exists.
        example: String,
    },
}

/// Which OLM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Olm {
    /// OLM v0 (Subscription, InstallPlan, CSV).
    V0,
    /// OLM v1 (ClusterExtension).
    V1,
}

/// One upgrade step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// CSV installed before the step.
    pub from: String,
    /// CSV installed after it.
    pub to: String,
    /// Version of `to`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The edge that allowed it (the strongest one when several do).
    pub edge: EdgeKind,
    /// Other bundles that were also valid successors (v0 takes the one nearest the head,
    /// v1 the highest version).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<String>,
}

/// Why a path ends before the head, and which edge would fix it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingEdge {
    /// Where the path is stuck.
    pub stuck_at: String,
    /// Channel head that is not reached.
    pub head: String,
    /// A concrete fix (`add replaces: x to y`).
    pub suggestion: String,
}

/// The upgrades OLM would perform from one installed CSV.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePath {
    /// OLM version replayed.
    pub olm: Olm,
    /// Package.
    pub package: String,
    /// Channel followed.
    pub channel: String,
    /// Installed CSV at the start.
    pub from: String,
    /// Steps, one per InstallPlan (v0) or per resolution (v1).
    pub steps: Vec<Step>,
    /// Channel head (if the channel has exactly one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// True when the last CSV is the head.
    pub reaches_head: bool,
    /// What is missing when the head is not reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<MissingEdge>,
}

impl UpgradePath {
    /// The CSV installed at the end.
    pub fn final_csv(&self) -> &str {
        self.steps
            .last()
            .map(|s| s.to.as_str())
            .unwrap_or(&self.from)
    }
}

/// Bundles of `channel` that are direct successors of `installed` (by replaces, skips or
/// skipRange), with the strongest edge kind for each, sorted by name. These are the
/// channel's edges from `installed` as the catalog model resolves them
/// ([`crate::model::Channel::edges`]), the same ones `graph` draws: one computation for both.
/// `_pkg` is kept for callers; the edges already carry every bundle version they need.
pub fn successors(
    _pkg: &PackageGraph,
    channel: &ChannelGraph,
    installed: &str,
) -> Vec<(String, EdgeKind)> {
    let mut out: Vec<(String, EdgeKind)> = Vec::new();
    // Sorted by (from, to, kind), and `Replaces < Skips < SkipRange`: the first edge to each
    // successor is the strongest.
    for e in channel.successors_of(installed) {
        if e.to == installed || !channel.contains(&e.to) {
            continue;
        }
        match out.last() {
            Some((to, _)) if *to == e.to => {}
            _ => out.push((e.to.clone(), e.kind)),
        }
    }
    out
}

/// Position of every entry in the channel's order as OLM v0 sorts it: the replaces chain from
/// the head first (head = 0), then the rest by descending version.
fn channel_order(pkg: &PackageGraph, channel: &ChannelGraph) -> Vec<String> {
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut cur = channel.head().map(String::from);
    while let Some(name) = cur {
        if !seen.insert(name.clone()) {
            break;
        }
        let Some(n) = channel.node(&name).filter(|n| n.in_channel) else {
            break;
        };
        order.push(name);
        cur = (!n.entry.replaces.is_empty()).then(|| n.entry.replaces.clone());
    }
    let mut rest: Vec<&str> = channel
        .nodes
        .iter()
        .filter(|n| n.in_channel && !seen.contains(&n.name))
        .map(|n| n.name.as_str())
        .collect();
    rest.sort_by(|a, b| match (pkg.version_of(a), pkg.version_of(b)) {
        (Some(x), Some(y)) => y.cmp_precedence(x),
        _ => a.cmp(b),
    });
    order.extend(rest.into_iter().map(String::from));
    order
}

fn find_channel<'a>(
    pkg: &'a PackageGraph,
    channel: &str,
) -> Result<&'a ChannelGraph, ExplainError> {
    pkg.channel(channel)
        .ok_or_else(|| ExplainError::UnknownChannel {
            package: pkg.package.clone(),
            channel: channel.to_string(),
            known: pkg
                .channels
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

fn check_known(pkg: &PackageGraph, csv: &str) -> Result<(), ExplainError> {
    let known = pkg.versions.contains_key(csv) || pkg.channels.iter().any(|c| c.contains(csv));
    if known {
        Ok(())
    } else {
        Err(ExplainError::UnknownBundle {
            package: pkg.package.clone(),
            csv: csv.to_string(),
            example: pkg.versions.keys().next().cloned().unwrap_or_default(),
        })
    }
}

/// Suggests the edge that would let `stuck` move on towards `head`.
fn suggest(pkg: &PackageGraph, channel: &ChannelGraph, stuck: &str) -> Option<MissingEdge> {
    let head = channel.head()?;
    if head == stuck {
        return None;
    }
    // The entry that should accept `stuck`: the oldest channel entry newer than it, so the
    // rest of the chain is reused; the head when versions are unknown.
    let stuck_v = pkg.version_of(stuck);
    let target = stuck_v
        .and_then(|sv| {
            channel
                .nodes
                .iter()
                .filter(|n| n.in_channel && n.name != stuck)
                .filter_map(|n| pkg.version_of(&n.name).map(|v| (n, v)))
                .filter(|(_, v)| v.cmp_precedence(sv).is_gt())
                .min_by(|a, b| a.1.cmp_precedence(b.1))
                .map(|(n, _)| n.name.clone())
        })
        .unwrap_or_else(|| head.to_string());
    let in_channel = channel.contains(stuck);
    let why = if in_channel {
        format!(
            "{stuck} is in channel {} but no entry replaces, skips or skipRanges it",
            channel.name
        )
    } else {
        format!(
            "{stuck} is not in channel {c} and no entry of {c} replaces, skips or skipRanges it",
            c = channel.name
        )
    };
    Some(MissingEdge {
        stuck_at: stuck.to_string(),
        head: head.to_string(),
        suggestion: format!(
            "{why}: add `skips: [{stuck}]` or `replaces: {stuck}` to {target} (or widen its skipRange to include {})",
            stuck_v
                .map(|v| v.to_string())
                .unwrap_or_else(|| "its version".into())
        ),
    })
}

/// Replays OLM v0 from `installed` in `channel` until nothing upgrades it.
pub fn explain_v0(
    pkg: &PackageGraph,
    channel: &str,
    installed: &str,
) -> Result<UpgradePath, ExplainError> {
    let ch = find_channel(pkg, channel)?;
    check_known(pkg, installed)?;
    let order = channel_order(pkg, ch);
    let rank = |name: &str| order.iter().position(|n| n == name).unwrap_or(usize::MAX);
    let mut steps = Vec::new();
    let mut cur = installed.to_string();
    let mut visited = std::collections::HashSet::from([cur.clone()]);
    loop {
        let mut cands = successors(pkg, ch, &cur);
        cands.retain(|(n, _)| !visited.contains(n));
        if cands.is_empty() {
            break;
        }
        cands.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then_with(|| a.1.cmp(&b.1)));
        let (next, edge) = cands.remove(0);
        steps.push(Step {
            from: cur.clone(),
            to: next.clone(),
            version: pkg.version_of(&next).map(|v| v.to_string()),
            edge,
            alternatives: cands.into_iter().map(|c| c.0).collect(),
        });
        visited.insert(next.clone());
        cur = next;
    }
    Ok(finish(pkg, ch, Olm::V0, installed, steps))
}

/// Replays OLM v1 from `installed` in `channel`: highest-version successor each time,
/// non-deprecated ones first.
pub fn explain_v1(
    pkg: &PackageGraph,
    channel: &str,
    installed: &str,
) -> Result<UpgradePath, ExplainError> {
    let ch = find_channel(pkg, channel)?;
    check_known(pkg, installed)?;
    let mut steps = Vec::new();
    let mut cur = installed.to_string();
    let mut visited = std::collections::HashSet::from([cur.clone()]);
    loop {
        let mut cands = successors(pkg, ch, &cur);
        cands.retain(|(n, _)| !visited.contains(n));
        if cands.is_empty() {
            break;
        }
        let deprecated = |n: &str| ch.node(n).is_some_and(|x| x.deprecated.is_some());
        cands.sort_by(|a, b| {
            deprecated(&a.0).cmp(&deprecated(&b.0)).then_with(|| {
                match (pkg.version_of(&a.0), pkg.version_of(&b.0)) {
                    (Some(x), Some(y)) => y.cmp_precedence(x),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (None, None) => a.0.cmp(&b.0),
                }
            })
        });
        let (next, edge) = cands.remove(0);
        steps.push(Step {
            from: cur.clone(),
            to: next.clone(),
            version: pkg.version_of(&next).map(|v| v.to_string()),
            edge,
            alternatives: cands.into_iter().map(|c| c.0).collect(),
        });
        visited.insert(next.clone());
        cur = next;
    }
    Ok(finish(pkg, ch, Olm::V1, installed, steps))
}

fn finish(
    pkg: &PackageGraph,
    ch: &ChannelGraph,
    olm: Olm,
    installed: &str,
    steps: Vec<Step>,
) -> UpgradePath {
    let last = steps
        .last()
        .map(|s| s.to.clone())
        .unwrap_or_else(|| installed.to_string());
    let head = ch.head().map(String::from);
    let reaches_head = head.as_deref() == Some(last.as_str());
    let missing = if reaches_head {
        None
    } else {
        suggest(pkg, ch, &last)
    };
    UpgradePath {
        olm,
        package: pkg.package.clone(),
        channel: ch.name.clone(),
        from: installed.to_string(),
        steps,
        head,
        reaches_head,
        missing,
    }
}

/// Renders a v0 path as the `kubectl get csv` tables a user would see after each InstallPlan.
pub fn render_v0_text(pkg: &PackageGraph, path: &UpgradePath, initial_replaces: &str) -> String {
    let display = |n: &str| pkg.display_names.get(n).cloned().unwrap_or_default();
    let version = |n: &str| pkg.version_of(n).map(|v| v.to_string()).unwrap_or_default();
    let table = |name: &str, replaces: &str| -> String {
        let rows = [
            ["NAME", "DISPLAY", "VERSION", "REPLACES", "PHASE"].map(String::from),
            [
                name.to_string(),
                display(name),
                version(name),
                replaces.to_string(),
                "Succeeded".to_string(),
            ],
        ];
        let widths: Vec<usize> = (0..5)
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        rows.iter()
            .map(|r| {
                let cells: Vec<String> = r
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
                    .collect();
                format!("  {}\n", cells.join("   ").trim_end())
            })
            .collect()
    };
    let mut out = format!(
        "OLM v0: Subscription to package {} channel {}, installed {}\n\n",
        path.package, path.channel, path.from
    );
    out.push_str("$ kubectl get csv   # now\n");
    out.push_str(&table(&path.from, initial_replaces));
    for (i, s) in path.steps.iter().enumerate() {
        let alt = if s.alternatives.is_empty() {
            String::new()
        } else {
            format!("; also possible: {}", s.alternatives.join(", "))
        };
        out.push_str(&format!(
            "\nInstallPlan {}: {} -> {} (by {} edge{alt})\n$ kubectl get csv\n",
            i + 1,
            s.from,
            s.to,
            s.edge.as_str()
        ));
        out.push_str(&table(&s.to, &s.from));
    }
    out.push('\n');
    out.push_str(&summary(path));
    out
}

/// Renders a v1 path (`kubectl get clusterextension` after each resolution).
pub fn render_v1_text(pkg: &PackageGraph, path: &UpgradePath) -> String {
    let version = |n: &str| pkg.version_of(n).map(|v| v.to_string()).unwrap_or_default();
    let mut out = format!(
        "OLM v1: ClusterExtension for package {} channel {}, installed {}\n",
        path.package, path.channel, path.from
    );
    out.push_str(&format!(
        "  start: {} ({})\n",
        path.from,
        version(&path.from)
    ));
    for (i, s) in path.steps.iter().enumerate() {
        out.push_str(&format!(
            "  resolution {}: {} ({}) by {} edge\n",
            i + 1,
            s.to,
            version(&s.to),
            s.edge.as_str()
        ));
    }
    out.push_str(&summary(path));
    out
}

fn summary(path: &UpgradePath) -> String {
    match (&path.head, path.reaches_head, &path.missing) {
        (_, true, _) => format!(
            "result: reaches the channel head {} in {} step(s)\n",
            path.final_csv(),
            path.steps.len()
        ),
        (Some(h), false, Some(m)) => format!(
            "result: stops at {} and never reaches the head {h}\n  fix: {}\n",
            m.stuck_at, m.suggestion
        ),
        (None, _, _) => format!(
            "result: stops at {}; channel {} has no single head (run `bundle-tool catalog validate`)\n",
            path.final_csv(),
            path.channel
        ),
        (Some(h), false, None) => format!("result: stops at {}; head is {h}\n", path.final_csv()),
    }
}

/// A channel a user might switch to but whose bundles cannot be reached from another channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SwitchGap {
    /// Package.
    pub package: String,
    /// Channel the user is on.
    pub from_channel: String,
    /// Channel switched to.
    pub to_channel: String,
    /// Bundles of `from_channel` that would stay where they are after the switch.
    pub stranded: Vec<String>,
    /// Fix for the newest of them.
    pub suggestion: String,
}

/// For every ordered pair of channels of a package, the bundles of the first whose
/// Subscription would not move after switching to the second (neither already in it nor
/// upgradable by it). Used by `bundle-tool catalog check`.
pub fn channel_switch_gaps(pkg: &PackageGraph) -> Vec<SwitchGap> {
    let mut out = Vec::new();
    for from in &pkg.channels {
        for to in &pkg.channels {
            if from.name == to.name || to.nodes.iter().all(|n| !n.in_channel) {
                continue;
            }
            let mut stranded: Vec<String> = from
                .nodes
                .iter()
                .filter(|n| n.in_channel && !to.contains(&n.name))
                .filter(|n| successors(pkg, to, &n.name).is_empty())
                .map(|n| n.name.clone())
                .collect();
            // Bundles newer than the target's head are not expected to move down.
            if let Some(h) = to.head().and_then(|h| pkg.version_of(h)) {
                stranded.retain(|n| {
                    pkg.version_of(n)
                        .is_none_or(|v| v.cmp_precedence(h).is_lt())
                });
            }
            if stranded.is_empty() {
                continue;
            }
            let newest = stranded
                .iter()
                .max_by(|a, b| match (pkg.version_of(a), pkg.version_of(b)) {
                    (Some(x), Some(y)) => x.cmp_precedence(y),
                    _ => a.cmp(b),
                })
                .cloned()
                .unwrap_or_default();
            let suggestion = suggest(pkg, to, &newest)
                .map(|m| m.suggestion)
                .unwrap_or_else(|| format!("add an edge from {newest} into channel {}", to.name));
            out.push(SwitchGap {
                package: pkg.package.clone(),
                from_channel: from.name.clone(),
                to_channel: to.name.clone(),
                stranded,
                suggestion,
            });
        }
    }
    out
}

/// What a Subscription on `installed` does after switching to `to_channel` (OLM v0): the
/// path's `final_csv()` is where it ends; no steps means the switch does nothing.
pub fn channel_switch_target(
    pkg: &PackageGraph,
    to_channel: &str,
    installed: &str,
) -> Result<UpgradePath, ExplainError> {
    explain_v0(pkg, to_channel, installed)
}
