//! Channel graph rules (`model.go` `Channel.Validate`, `Channel.Head`,
//! `Channel.validateReplacesChain`): at least one entry, exactly one head computed from
//! `replaces` and `skips` only, no cycle in the replaces chain, no stranded bundle. When there
//! are several heads, the hint names the edge that would join them.

use super::object_path;
use super::rules::{CHANNEL_EMPTY, CHANNEL_HEAD, REPLACES_CYCLE, STRANDED_BUNDLE};
use crate::declcfg;
use crate::model::{Channel, Package, channel_heads};
use olmkit_core::Findings;
use olmkit_core::findings::Finding;
use olmkit_core::version_range::VersionRange;
use std::collections::{HashMap, HashSet};

/// The graph rules for one channel of the model, with the versions opm's model holds.
pub(super) fn check(pkg: &Package<'_>, c: &Channel<'_>, out: &mut Findings) {
    let version_of = |name: &str| pkg.bundle(name).and_then(|b| b.model_version()).cloned();
    for f in check_channel_graph(pkg.name, c.blob, &version_of) {
        out.push(match c.file {
            Some(file) => f.file(file),
            None => f,
        });
    }
}

/// opm's `validateReplacesChain` plus the empty-channel check, as findings (without file).
pub fn check_channel_graph(
    pkg: &str,
    c: &declcfg::Channel,
    version_of: &dyn Fn(&str) -> Option<semver::Version>,
) -> Vec<Finding> {
    let mut out = Findings::new(false);
    let path = object_path(pkg, Some(&c.name), None);
    let ctx = format!("invalid channel {:?}", c.name);
    if let Some(head) = head(&mut out, &path, &ctx, c, version_of) {
        match replaces_chain(c, head) {
            Ok(on_chain) => stranded(&mut out, &path, &ctx, c, &on_chain),
            Err(cycle) => {
                out.at(None, Some(&path))
                    .error(
                        &REPLACES_CYCLE,
                        format!(
                            "{ctx}: detected cycle in replaces chain of upgrade graph: {}",
                            cycle.join(" -> ")
                        ),
                    )
                    .hint("a bundle must replace an older one; break the loop");
            }
        }
    }
    out.into_findings()
}

/// `model.go` `Channel.Validate` (at least one entry) and `Channel.Head` (exactly one entry
/// that nothing replaces or skips): the head, when there is exactly one.
fn head<'c>(
    out: &mut Findings,
    path: &str,
    ctx: &str,
    c: &'c declcfg::Channel,
    version_of: &dyn Fn(&str) -> Option<semver::Version>,
) -> Option<&'c str> {
    let at = out.at(None, Some(path));
    if c.entries.is_empty() {
        at.error(
            &CHANNEL_EMPTY,
            format!("{ctx}: channel must contain at least one bundle"),
        );
        return None;
    }
    let heads = channel_heads(c);
    match heads.as_slice() {
        [] => {
            at.error(&CHANNEL_HEAD, format!("{ctx}: no channel head found in graph"))
                .hint("every entry is replaced or skipped by another: remove the edge that points at the newest bundle");
            None
        }
        [one] => Some(*one),
        many => {
            let mut hint = String::from(
                "a channel needs exactly one entry that nothing replaces or skips (skipRange does not count)",
            );
            if let Some(h) = suggest_head_fix(c, many, version_of) {
                hint = format!("{hint}; {h}");
            }
            at.error(
                &CHANNEL_HEAD,
                format!(
                    "{ctx}: multiple channel heads found in graph: {}",
                    many.join(", ")
                ),
            )
            .hint(hint);
            None
        }
    }
}

/// operator-registry `alpha/model/model.go` `Channel.validateReplacesChain`: walk the replaces
/// chain from the head, stopping before an edge into a bundle that ANY entry of the channel
/// skips. The entries on the chain, or the cycle found (its first entry repeated at the end).
fn replaces_chain<'c>(
    c: &'c declcfg::Channel,
    head: &'c str,
) -> Result<HashSet<&'c str>, Vec<&'c str>> {
    let by_name: HashMap<&str, &declcfg::ChannelEntry> =
        c.entries.iter().map(|e| (e.name.as_str(), e)).collect();
    let skipped = skipped(c);
    let mut chain: Vec<&str> = vec![head];
    let mut on_chain: HashSet<&str> = HashSet::from([head]);
    let mut cur = by_name.get(head).copied();
    while let Some(e) = cur {
        let next = e.replaces.as_str();
        if skipped.contains(next) {
            break;
        }
        if on_chain.contains(next) {
            let start = chain.iter().position(|n| *n == next).unwrap_or(0);
            let mut cycle: Vec<&str> = chain[start..].to_vec();
            cycle.push(next);
            return Err(cycle);
        }
        on_chain.insert(next);
        chain.push(next);
        cur = by_name.get(next).copied();
    }
    Ok(on_chain)
}

/// Every name some entry of the channel skips.
fn skipped(c: &declcfg::Channel) -> HashSet<&str> {
    c.entries
        .iter()
        .flat_map(|e| e.skips.iter().map(String::as_str))
        .collect()
}

/// `Channel.validateReplacesChain`: stranded are the entries neither on the replaces chain
/// from the head nor skipped by any entry.
fn stranded(
    out: &mut Findings,
    path: &str,
    ctx: &str,
    c: &declcfg::Channel,
    on_chain: &HashSet<&str>,
) {
    let skipped = skipped(c);
    let mut stranded: Vec<&str> = c
        .entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| !on_chain.contains(n) && !skipped.contains(n))
        .collect();
    stranded.sort();
    stranded.dedup();
    if !stranded.is_empty() {
        out.at(None, Some(path))
            .error(
                &STRANDED_BUNDLE,
                format!(
                    "{ctx}: channel contains one or more stranded bundles: {}",
                    stranded.join(", ")
                ),
            )
            .hint("an installed stranded bundle can never upgrade: make the replaces chain from the head pass through it, or skip it");
    }
}

/// For several heads, names the edge that would join them: the newest head should replace
/// (or skip) each other head. When its skipRange already covers one, says so: that is the
/// classic "skipRange-only" mistake (opm and OLM v0 compute heads without skipRange).
fn suggest_head_fix(
    c: &declcfg::Channel,
    heads: &[&str],
    version_of: &dyn Fn(&str) -> Option<semver::Version>,
) -> Option<String> {
    let newest = heads
        .iter()
        .filter_map(|h| version_of(h).map(|v| (*h, v)))
        .max_by(|a, b| a.1.cmp_precedence(&b.1))?;
    let entry = c.entries.iter().find(|e| e.name == newest.0)?;
    let range = VersionRange::parse(&entry.skip_range).ok();
    let mut parts = Vec::new();
    for h in heads.iter().filter(|h| **h != newest.0) {
        let covered = range
            .as_ref()
            .zip(version_of(h))
            .is_some_and(|(r, v)| r.contains(&v));
        if covered {
            parts.push(format!(
                "{} covers {h} only by skipRange: add `skips: [{h}]` or `replaces: {h}` to {}",
                newest.0, newest.0
            ));
        } else {
            parts.push(format!(
                "add `replaces: {h}` (or `skips: [{h}]`) to {}",
                newest.0
            ));
        }
    }
    Some(parts.join("; "))
}
