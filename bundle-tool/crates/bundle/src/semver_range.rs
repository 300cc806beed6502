//! `olm.skipRange` values: blang/semver ranges as OLM and opm parse them.
//!
//! OLM reads a CSV's `olm.skipRange` annotation with `blang/semver/v4.ParseRange`, whose syntax
//! differs from Cargo's `semver::VersionReq`: comparators are separated by spaces (AND) and
//! `||` (OR), versions must be full `MAJOR.MINOR.PATCH` (`>=4.8 <4.9` is rejected), `x`
//! wildcards expand (`1.2.x` = `>=1.2.0 <1.3.0`), and the operators are `= == ! != > >= < <=`.
//! This module parses exactly that grammar so a range we accept is one OLM accepts.

use semver::Version;
use std::cmp::Ordering;
use std::fmt;

/// A skipRange could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid semver range {range:?}: {reason}")]
pub struct ParseRangeError {
    /// The input.
    pub range: String,
    /// What is wrong.
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Version,
}

impl Comparator {
    fn matches(&self, v: &Version) -> bool {
        let c = v.cmp_precedence(&self.version);
        match self.op {
            Op::Eq => c == Ordering::Equal,
            Op::Ne => c != Ordering::Equal,
            Op::Gt => c == Ordering::Greater,
            Op::Ge => c != Ordering::Less,
            Op::Lt => c == Ordering::Less,
            Op::Le => c != Ordering::Greater,
        }
    }
}

/// A parsed range: OR of AND-groups of comparators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemverRange {
    alternatives: Vec<Vec<Comparator>>,
    source: String,
}

impl fmt::Display for SemverRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

const OPS: [(&str, Op); 9] = [
    (">=", Op::Ge),
    ("<=", Op::Le),
    ("!=", Op::Ne),
    ("==", Op::Eq),
    (">", Op::Gt),
    ("<", Op::Lt),
    ("=", Op::Eq),
    ("!", Op::Ne),
    ("", Op::Eq),
];

fn is_wild(s: &str) -> bool {
    matches!(s, "x" | "X" | "*")
}

impl SemverRange {
    /// Parses `input` with blang/semver's range grammar.
    pub fn parse(input: &str) -> Result<Self, ParseRangeError> {
        let err = |reason: String| ParseRangeError {
            range: input.to_string(),
            reason,
        };
        if input.trim().is_empty() {
            return Err(err("empty range".into()));
        }
        // blang joins an operator written apart from its version ("> 1.0.0").
        let mut tokens: Vec<String> = Vec::new();
        let mut pending_op: Option<String> = None;
        for raw in input.split_whitespace() {
            if raw == "||" {
                if pending_op.is_some() {
                    return Err(err("operator without a version before `||`".into()));
                }
                tokens.push(raw.to_string());
                continue;
            }
            if let Some(op) = pending_op.take() {
                tokens.push(format!("{op}{raw}"));
            } else if raw.chars().all(|c| "<>=!".contains(c)) {
                pending_op = Some(raw.to_string());
            } else {
                tokens.push(raw.to_string());
            }
        }
        if pending_op.is_some() {
            return Err(err("operator without a version at the end".into()));
        }
        let mut alternatives = vec![Vec::new()];
        for tok in tokens {
            if tok == "||" {
                if alternatives.last().is_some_and(Vec::is_empty) {
                    return Err(err("empty alternative around `||`".into()));
                }
                alternatives.push(Vec::new());
                continue;
            }
            let comps = parse_comparator(&tok).map_err(err)?;
            if let Some(last) = alternatives.last_mut() {
                last.extend(comps);
            }
        }
        if alternatives.iter().any(Vec::is_empty) {
            return Err(err("empty alternative around `||`".into()));
        }
        Ok(Self {
            alternatives,
            source: input.to_string(),
        })
    }

    /// True if `version` is in the range.
    pub fn contains(&self, version: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|group| group.iter().all(|c| c.matches(version)))
    }
}

fn parse_comparator(tok: &str) -> Result<Vec<Comparator>, String> {
    let split = tok
        .find(|c: char| c.is_ascii_digit() || c == 'x' || c == 'X' || c == '*')
        .ok_or_else(|| format!("{tok:?} has no version"))?;
    let (op_str, ver) = tok.split_at(split);
    let op = OPS
        .iter()
        .find(|(s, _)| *s == op_str)
        .map(|(_, o)| *o)
        .ok_or_else(|| format!("{tok:?} has an unknown operator {op_str:?}"))?;
    let parts: Vec<&str> = ver.splitn(3, '.').collect();
    let wild_at = parts.iter().position(|p| is_wild(p));
    match wild_at {
        None => {
            let version = Version::parse(ver)
                .map_err(|e| format!("{ver:?} is not a MAJOR.MINOR.PATCH version: {e}"))?;
            Ok(vec![Comparator { op, version }])
        }
        Some(idx) => {
            if parts[idx..].iter().any(|p| !is_wild(p)) {
                return Err(format!("{ver:?} has a wildcard before a number"));
            }
            let num = |i: usize| -> Result<u64, String> {
                parts
                    .get(i)
                    .ok_or_else(|| format!("{ver:?} is incomplete"))?
                    .parse::<u64>()
                    .map_err(|_| format!("{ver:?} has a non-numeric field"))
            };
            // Lower bound and exclusive upper bound of the wildcard's span (`x` alone spans
            // every version).
            let (lo, hi) = match idx {
                0 => (Version::new(0, 0, 0), None),
                1 => {
                    let m = num(0)?;
                    (Version::new(m, 0, 0), Some(Version::new(m + 1, 0, 0)))
                }
                _ => {
                    let (m, n) = (num(0)?, num(1)?);
                    (Version::new(m, n, 0), Some(Version::new(m, n + 1, 0)))
                }
            };
            let ge = |v: Version| Comparator {
                op: Op::Ge,
                version: v,
            };
            let lt = |v: Version| Comparator {
                op: Op::Lt,
                version: v,
            };
            let none = || format!("{tok:?} matches no version");
            Ok(match (op, hi) {
                (Op::Eq, None) | (Op::Ge, _) | (Op::Le, None) => vec![ge(lo)],
                (Op::Eq, Some(hi)) => vec![ge(lo), lt(hi)],
                (Op::Gt, Some(hi)) => vec![ge(hi)],
                (Op::Le, Some(hi)) => vec![lt(hi)],
                (Op::Lt, Some(_)) => vec![lt(lo)],
                (Op::Gt, _) | (Op::Lt, None) => return Err(none()),
                // Outside the span is `<lo || >=hi`, not an AND-group; blang refuses it too.
                (Op::Ne, _) => {
                    return Err(format!("{tok:?}: `!=` with a wildcard is not supported"));
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn real_skip_ranges() {
        let r = SemverRange::parse(">=0.1.0 <0.6.1").unwrap();
        assert!(r.contains(&v("0.6.0")));
        assert!(r.contains(&v("0.1.0")));
        assert!(!r.contains(&v("0.6.1")));
        let r = SemverRange::parse(">=4.8.0 <4.9.0 || >=5.0.0").unwrap();
        assert!(r.contains(&v("5.1.0")));
        assert!(!r.contains(&v("4.9.0")));
        let r = SemverRange::parse("> 1.0.0").unwrap();
        assert!(r.contains(&v("1.0.1")));
    }

    #[test]
    fn rejects_what_blang_rejects() {
        for bad in [
            "",
            ">=4.8 <4.9",
            "foo",
            ">=1.0.0 ||",
            "~1.2.3",
            "^1.0.0",
            ">=",
            "1.0.0 || || 2.0.0",
        ] {
            assert!(SemverRange::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wildcards() {
        let r = SemverRange::parse("1.2.x").unwrap();
        assert!(r.contains(&v("1.2.9")));
        assert!(!r.contains(&v("1.3.0")));
        let r = SemverRange::parse(">1.x").unwrap();
        assert!(r.contains(&v("2.0.0")));
        assert!(!r.contains(&v("1.9.0")));
        let r = SemverRange::parse("<=1.2.x").unwrap();
        assert!(r.contains(&v("1.2.5")));
        assert!(!r.contains(&v("1.3.0")));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = SemverRange::parse(&s);
        }

        #[test]
        fn bounds_agree_with_ordering(a in 0u64..20, b in 0u64..20, c in 0u64..20) {
            let r = SemverRange::parse(&format!(">={a}.0.0 <{b}.0.0")).unwrap();
            prop_assert_eq!(r.contains(&Version::new(c, 0, 0)), a <= c && c < b);
        }
    }
}
