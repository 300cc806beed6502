//! Stranded-bundle and replaces-chain verdicts against operator-registry's
//! `Channel.validateReplacesChain`: bundles skipped by ANY entry are never stranded, and the
//! walk from the head stops before an edge into a skipped bundle.
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{Channel, ChannelEntry};
use olmkit_catalog::validate::{check_channel_graph, rules};

fn entry(name: &str, replaces: &str, skips: &[&str]) -> ChannelEntry {
    ChannelEntry {
        name: name.into(),
        replaces: replaces.into(),
        skips: skips.iter().map(|s| s.to_string()).collect(),
        skip_range: String::new(),
    }
}

fn channel(entries: Vec<ChannelEntry>) -> Channel {
    Channel {
        schema: "olm.channel".into(),
        name: "c".into(),
        package: "p".into(),
        entries,
        properties: Vec::new(),
    }
}

/// The stranded bundles opm would name, or None when the channel is fine.
fn stranded(entries: Vec<ChannelEntry>) -> Option<String> {
    let findings = check_channel_graph("p", &channel(entries), &|_| None);
    let f = findings
        .iter()
        .find(|f| f.rule == rules::STRANDED_BUNDLE.id)?;
    Some(f.message.rsplit(": ").next().unwrap().to_string())
}

fn rule_ids(entries: Vec<ChannelEntry>) -> Vec<String> {
    check_channel_graph("p", &channel(entries), &|_| None)
        .iter()
        .map(|f| f.rule.to_string())
        .collect()
}

#[test]
fn a_bundle_skipped_off_the_chain_is_not_stranded() {
    // x is not on the head's chain but skips b: opm subtracts b anyway (a chain-only rule would
    // call b stranded).
    let got = stranded(vec![
        entry("a", "", &[]),
        entry("b", "", &[]),
        entry("x", "", &["b"]),
        entry("head", "a", &["x"]),
    ]);
    assert_eq!(got, None);
    // b2 is skipped (by x, off the chain); b, replaced only by b2, is stranded.
    let got = stranded(vec![
        entry("a", "", &[]),
        entry("b", "", &[]),
        entry("b2", "b", &[]),
        entry("x", "", &["b2"]),
        entry("head", "a", &["x"]),
    ]);
    assert_eq!(got.as_deref(), Some("b"));
}

#[test]
fn the_walk_stops_before_a_skipped_bundle() {
    // head replaces b, which some other entry skips: the walk stops at head, so a (replaced by
    // b only) is stranded, as in opm.
    let got = stranded(vec![
        entry("a", "", &[]),
        entry("b", "a", &[]),
        entry("c", "b", &["b"]),
    ]);
    assert_eq!(got.as_deref(), Some("a"));
}

#[test]
fn grafana_like_channel_strands_only_what_opm_strands() {
    // A v5-style channel: a replaces chain with skips from entries on and off the chain.
    // Entries skipped by any entry (s1..s3 by the head, o1/o2 by an off-chain entry "side"
    // that is itself skipped by the head) are never stranded; the chain stops before the
    // skipped "m2", so m1 (only reachable through it) is stranded, like old1.
    let got = stranded(vec![
        entry("old1", "", &[]),
        entry("m1", "old1", &[]),
        entry("m2", "m1", &[]),
        entry("o1", "", &[]),
        entry("o2", "", &[]),
        entry("side", "", &["o1", "o2"]),
        entry("s1", "", &[]),
        entry("s2", "", &[]),
        entry("s3", "", &[]),
        entry("m3", "m2", &["m2"]),
        entry("head", "m3", &["s1", "s2", "s3", "side"]),
    ]);
    assert_eq!(got.as_deref(), Some("m1, old1"));
}

#[test]
fn a_clean_chain_has_no_finding_and_a_cycle_is_named() {
    assert!(rule_ids(vec![entry("a", "", &[]), entry("b", "a", &[])]).is_empty());
    let ids = rule_ids(vec![
        entry("a", "b", &[]),
        entry("b", "a", &[]),
        entry("h", "a", &[]),
    ]);
    assert_eq!(ids, vec![rules::REPLACES_CYCLE.id.to_string()]);
}
