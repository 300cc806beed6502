//! Conformance with operator-sdk v1.38 on real bundles: for every bundle of the corpus in
//! `../shared/conformance` (471 community-operators bundles) and both suites (default and
//! operatorhub), bundle-tool's verdict equals operator-sdk's, every upstream error has a
//! counterpart error of ours and no error of ours lacks an upstream one (see
//! `common/upstream.rs` for the message-to-rule table).
//!
//! This is the one suite allowed to read `../shared`. When the corpus is absent it says so
//! loudly and skips. `conformance_report`
//! (ignored; `make conformance` runs it) prints the agreement matrix and the time per bundle.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::upstream;

use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use upstream::{Ours, Upstream, Which, disagreements, ours, ours_in, read_jsonl};

/// The suites the corpus records, in the order [`ours_by_bundle`] keeps our verdicts.
const SUITES: [Which; 2] = [Which::Default, Which::OperatorHub];

/// Known, justified disagreements: (package, version, suite, reason). The goal is none.
const EXCEPTIONS: &[(&str, &str, &str, &str)] = &[];

/// operator-sdk's figure for the same set on the same machine (corpus README).
const UPSTREAM_MEDIAN_MS: f64 = 98.0;
const UPSTREAM_MAX_MS: f64 = 1870.0;

fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/conformance")
        });
    let dir = dir.canonicalize().unwrap_or(dir);
    if dir.join("operator-sdk/default.jsonl").is_file() {
        return Some(dir);
    }
    let banner = format!(
        "\n==================== CONFORMANCE CORPUS MISSING ====================\n\
         {} has no operator-sdk/default.jsonl: the conformance suite did NOT run.\n\
         Set CONFORMANCE_DIR or provide ../shared/conformance.\n\
         ====================================================================\n",
        dir.display()
    );
    // The project builds and tests without ../shared: a missing corpus skips (loudly), also in
    // CI. Straight to stderr: the test harness captures eprintln!, and a skip must be seen.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), banner.as_bytes());
    None
}

fn bundle_dir(corpus: &Path, package: &str, version: &str) -> PathBuf {
    corpus.join("bundles").join(package).join(version)
}

fn is_exception(up: &Upstream, which: Which) -> bool {
    EXCEPTIONS
        .iter()
        .any(|(p, v, s, _)| *p == up.package && *v == up.version && *s == which.name())
}

/// Our verdicts in both suites for every bundle either suite's record names, keyed by
/// (package, version): each bundle loaded once, in parallel, by whichever suite's test asks
/// first (the other waits for it).
fn ours_by_bundle(corpus: &Path) -> &'static BTreeMap<(String, String), [Ours; 2]> {
    static OURS: OnceLock<BTreeMap<(String, String), [Ours; 2]>> = OnceLock::new();
    OURS.get_or_init(|| {
        let mut bundles = BTreeSet::new();
        for which in SUITES {
            for up in read_jsonl(&corpus.join(format!("operator-sdk/{}.jsonl", which.name()))) {
                bundles.insert((up.package, up.version));
            }
        }
        bundles
            .into_par_iter()
            .map(|(package, version)| {
                let ours = ours_in(&bundle_dir(corpus, &package, &version), SUITES);
                ((package, version), ours)
            })
            .collect()
    })
}

/// Compares every bundle of one suite; returns (upstream passed, we passed, disagreements)
/// per bundle, in corpus order.
fn compare(corpus: &Path, which: Which) -> Vec<(Upstream, bool, Vec<String>)> {
    let rows = read_jsonl(&corpus.join(format!("operator-sdk/{}.jsonl", which.name())));
    let ours = ours_by_bundle(corpus);
    let at = SUITES.iter().position(|w| *w == which).unwrap();
    rows.into_iter()
        .map(|up| {
            let o = &ours[&(up.package.clone(), up.version.clone())][at];
            let d = disagreements(&up, o);
            (up, o.error_rules.is_empty(), d)
        })
        .collect()
}

fn check_suite(which: Which) {
    let Some(corpus) = corpus() else { return };
    let results = compare(&corpus, which);
    assert!(
        results.len() > 400,
        "the corpus has {} bundles",
        results.len()
    );
    let mut failures = Vec::new();
    for (up, _, d) in &results {
        if !d.is_empty() && !is_exception(up, which) {
            failures.push(format!(
                "{}/{} ({}):\n  {}",
                up.package,
                up.version,
                which.name(),
                d.join("\n  ")
            ));
        }
    }
    let stale: Vec<_> = EXCEPTIONS
        .iter()
        .filter(|(p, v, s, _)| {
            *s == which.name()
                && results
                    .iter()
                    .any(|(up, _, d)| up.package == *p && up.version == *v && d.is_empty())
        })
        .collect();
    assert!(
        stale.is_empty(),
        "exceptions that now conform (remove them): {stale:?}"
    );
    assert!(
        failures.is_empty(),
        "{} of {} bundles disagree with operator-sdk:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}

#[test]
fn default_suite_matches_operator_sdk() {
    check_suite(Which::Default);
}

#[test]
fn operatorhub_suite_matches_operator_sdk() {
    check_suite(Which::OperatorHub);
}

/// The latest bundle of each package: the highest version folder (semver order when the
/// folder names parse, name order otherwise).
fn latest(rows: &[Upstream]) -> Vec<&Upstream> {
    let key = |v: &str| semver::Version::parse(v.trim_start_matches('v')).ok();
    let mut by_package: BTreeMap<&str, &Upstream> = BTreeMap::new();
    for r in rows {
        let newer = by_package.get(r.package.as_str()).is_none_or(|cur| {
            match (key(&r.version), key(&cur.version)) {
                (Some(a), Some(b)) => a > b,
                _ => r.version > cur.version,
            }
        });
        if newer {
            by_package.insert(&r.package, r);
        }
    }
    by_package.into_values().collect()
}

fn matrix_line(name: &str, results: &[(Upstream, bool, Vec<String>)]) -> String {
    let count = |f: &dyn Fn(bool, bool) -> bool| {
        results
            .iter()
            .filter(|(up, we, _)| f(up.passed, *we))
            .count()
    };
    let both_pass = count(&|u, w| u && w);
    let both_fail = count(&|u, w| !u && !w);
    let only_we = count(&|u, w| u && !w);
    let only_up = count(&|u, w| !u && w);
    let detail = results.iter().filter(|(_, _, d)| !d.is_empty()).count();
    format!(
        "| {name:<17} | {:>7} | {both_pass:>9} | {both_fail:>9} | {only_we:>12} | {only_up:>19} | {detail:>21} |",
        results.len()
    )
}

/// Prints the agreement matrix of both suites and the time per bundle over the latest-333
/// set (`make conformance`).
#[test]
#[ignore = "a report, run by `make conformance`"]
fn conformance_report() {
    let Some(corpus) = corpus() else { return };
    println!(
        "Agreement with operator-sdk v1.38 ({}):\n",
        corpus.display()
    );
    println!(
        "| suite             | bundles | both pass | both fail | only we fail | only upstream fails | message disagreements |"
    );
    println!(
        "|-------------------|---------|-----------|-----------|--------------|---------------------|-----------------------|"
    );
    let rows = read_jsonl(&corpus.join("operator-sdk/default.jsonl"));
    let set = latest(&rows);
    let in_set = |up: &Upstream| {
        set.iter()
            .any(|l| l.package == up.package && l.version == up.version)
    };
    for which in [Which::Default, Which::OperatorHub] {
        let results = compare(&corpus, which);
        println!("{}", matrix_line(which.name(), &results));
        let latest_results: Vec<_> = results.iter().filter(|r| in_set(&r.0)).cloned().collect();
        println!(
            "{}",
            matrix_line(
                &format!("{} ({})", which.name(), set.len()),
                &latest_results
            )
        );
        for (up, _, d) in results.iter().filter(|(_, _, d)| !d.is_empty()) {
            println!("    {}/{}: {}", up.package, up.version, d.join("; "));
        }
    }
    // Timing: one bundle at a time, load + validate (default suite), after one untimed run
    // that compiles the embedded schemas (once per process, as in the CLI).
    let _ = ours(
        &bundle_dir(&corpus, &set[0].package, &set[0].version),
        Which::Default,
    );
    let mut times: Vec<Duration> = set
        .iter()
        .map(|up| {
            let t = Instant::now();
            let _ = ours(
                &bundle_dir(&corpus, &up.package, &up.version),
                Which::Default,
            );
            t.elapsed()
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = ms(times[times.len() / 2]);
    let max = ms(*times.last().unwrap());
    let total: f64 = times.iter().map(|d| ms(*d)).sum();
    println!(
        "\nTime per bundle over the latest-{} set (load + validate, one thread, this build's profile):",
        set.len()
    );
    println!("| tool          | median    | max        | total     |");
    println!("|---------------|-----------|------------|-----------|");
    println!(
        "| bundle-tool   | {median:>6.1} ms | {max:>7.1} ms | {:>6.2} s |",
        total / 1000.0
    );
    println!(
        "| operator-sdk  | {UPSTREAM_MEDIAN_MS:>6.1} ms | {UPSTREAM_MAX_MS:>7.1} ms |           |"
    );
}
