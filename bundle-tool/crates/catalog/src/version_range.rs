//! `olm.skipRange` version ranges, with the grammar and matching of blang/semver v4.
//!
//! OLM v0, opm and (for registry+v1 bundles) OLM v1 all evaluate skipRanges with blang's
//! `ParseRange`, whose syntax differs from Cargo's `VersionReq`: comparators are separated by
//! spaces (AND) and `||` (OR), an operator may be followed by spaces (`>= 1.0.0`), a bare
//! version means `=`, `x` wildcards expand to bounds, and versions must be full `x.y.z`.
//! Matching compares by semver precedence (build metadata ignored) and, unlike npm ranges,
//! pre-releases are not excluded.

use semver::Version;
use std::cmp::Ordering;
use std::fmt;
use thiserror::Error;

/// A range could not be parsed. The texts are blang's, which opm prints and tests compare.
#[derive(Debug, Error)]
pub enum ParseVersionRangeError {
    /// The range starts with `||`.
    #[error("First element in range is '||'")]
    LeadingOr,
    /// The range ends with `||`.
    #[error("Last element in range is '||'")]
    TrailingOr,
    /// A token (or the whole range) has no version in it.
    #[error("Could not get version from string: {0:?}")]
    NoVersion(String),
    /// A comparator operator is not one blang knows.
    #[error("Could not parse comparator {op:?} in {token:?}")]
    Comparator {
        /// The operator text.
        op: String,
        /// The token it was found in.
        token: String,
    },
    /// A wildcard version (`1.x`, `1.2.x`) is malformed.
    #[error("Could not parse version {version:?} in {token:?}")]
    Wildcard {
        /// The version part of the token.
        version: String,
        /// The token.
        token: String,
    },
    /// A version is not a full `x.y.z[-pre][+build]` semver.
    #[error("Could not parse version {version:?} in {token:?}: {source}")]
    Version {
        /// The version part of the token.
        version: String,
        /// The token.
        token: String,
        /// What semver said.
        source: semver::Error,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Version,
}

impl Comparator {
    fn matches(&self, v: &Version) -> bool {
        let o = v.cmp_precedence(&self.version);
        match self.op {
            Op::Eq => o == Ordering::Equal,
            Op::Ne => o != Ordering::Equal,
            Op::Gt => o == Ordering::Greater,
            Op::Ge => o != Ordering::Less,
            Op::Lt => o == Ordering::Less,
            Op::Le => o != Ordering::Greater,
        }
    }
}

/// A parsed range: OR of ANDs of comparators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionRange {
    source: String,
    any_of: Vec<Vec<Comparator>>,
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Splits on spaces, except spaces that follow an operator character (`>= 1.0.0` is one
/// token), and removes the remaining spaces inside tokens.
fn split_and_trim(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut last = 0usize;
    let mut last_char = 0u8;
    for (i, &c) in b.iter().enumerate() {
        if c == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if i > last {
                out.push(s[last..i].to_string());
            }
            last = i + 1;
        } else if c != b' ' {
            last_char = c;
        }
    }
    if last < b.len() {
        out.push(s[last..].to_string());
    }
    out.into_iter()
        .map(|t| t.replace(' ', ""))
        .filter(|t| !t.is_empty())
        .collect()
}

fn split_comparator_version(s: &str) -> Result<(&str, &str), ParseVersionRangeError> {
    let i = s
        .find(|c: char| c.is_ascii_digit())
        .ok_or_else(|| ParseVersionRangeError::NoVersion(s.to_string()))?;
    Ok((s[..i].trim(), &s[i..]))
}

fn parse_op(op: &str) -> Option<Op> {
    Some(match op {
        "" | "=" | "==" => Op::Eq,
        "!=" | "!" => Op::Ne,
        ">" => Op::Gt,
        ">=" => Op::Ge,
        "<" => Op::Lt,
        "<=" => Op::Le,
        _ => return None,
    })
}

/// Parses a full `x.y.z[-pre][+build]` version like blang's strict `Parse`.
pub fn parse_version(s: &str) -> Result<Version, semver::Error> {
    Version::parse(s)
}

/// Expands `x` wildcards (`1.2.x`, `1.x`, `>1.x`...) into plain comparators, as blang does.
fn expand_wildcard(token: &str) -> Result<Vec<String>, ParseVersionRangeError> {
    if !token.contains('x') {
        return Ok(vec![token.to_string()]);
    }
    let (op, v) = split_comparator_version(token)?;
    let bad_version = || ParseVersionRangeError::Wildcard {
        version: v.to_string(),
        token: token.to_string(),
    };
    let parts: Vec<&str> = v.split('.').collect();
    // Which component is the first wildcard: 2 = minor (`1.x`, `1.x.x`), 3 = patch (`1.2.x`).
    let wildcard = match parts.as_slice() {
        [_, "x"] | [_, "x", "x"] => 2,
        [_, _, "x"] => 3,
        _ => return Err(bad_version()),
    };
    let major: u64 = parts
        .first()
        .and_then(|p| p.parse().ok())
        .ok_or_else(bad_version)?;
    let minor: u64 = if wildcard == 3 {
        parts
            .get(1)
            .and_then(|p| p.parse().ok())
            .ok_or_else(bad_version)?
    } else {
        0
    };
    let flat = format!("{major}.{minor}.0");
    let incremented = if wildcard == 3 {
        format!("{major}.{}.0", minor + 1)
    } else {
        format!("{}.0.0", major + 1)
    };
    Ok(match op {
        ">" => vec![format!(">={incremented}")],
        ">=" => vec![format!(">={flat}")],
        "<" => vec![format!("<{flat}")],
        "<=" => vec![format!("<{incremented}")],
        "" | "=" | "==" => vec![format!(">={flat}"), format!("<{incremented}")],
        "!=" | "!" => vec![format!("<{flat}"), format!(">={incremented}")],
        _ => {
            return Err(ParseVersionRangeError::Comparator {
                op: op.to_string(),
                token: token.to_string(),
            });
        }
    })
}

impl VersionRange {
    /// Parses a range; the error is blang's wording.
    pub fn parse(s: &str) -> Result<Self, ParseVersionRangeError> {
        let tokens = split_and_trim(s);
        let mut groups: Vec<Vec<String>> = vec![Vec::new()];
        for (i, t) in tokens.iter().enumerate() {
            if t == "||" {
                if i == 0 {
                    return Err(ParseVersionRangeError::LeadingOr);
                }
                if i == tokens.len() - 1 {
                    return Err(ParseVersionRangeError::TrailingOr);
                }
                groups.push(Vec::new());
            } else if let Some(g) = groups.last_mut() {
                g.push(t.clone());
            }
        }
        let mut any_of = Vec::new();
        for g in groups {
            let mut all_of = Vec::new();
            for t in g {
                for t in expand_wildcard(&t)? {
                    let (op, v) = split_comparator_version(&t)?;
                    let op = parse_op(op).ok_or_else(|| ParseVersionRangeError::Comparator {
                        op: op.to_string(),
                        token: t.clone(),
                    })?;
                    let version =
                        parse_version(v).map_err(|source| ParseVersionRangeError::Version {
                            version: v.to_string(),
                            token: t.clone(),
                            source,
                        })?;
                    all_of.push(Comparator { op, version });
                }
            }
            any_of.push(all_of);
        }
        if any_of.iter().all(Vec::is_empty) {
            return Err(ParseVersionRangeError::NoVersion(s.to_string()));
        }
        Ok(Self {
            source: s.to_string(),
            any_of,
        })
    }

    /// True if `v` is in the range.
    pub fn contains(&self, v: &Version) -> bool {
        self.any_of
            .iter()
            .any(|all| all.iter().all(|c| c.matches(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn blang_grammar() {
        let r = VersionRange::parse(">=0.3.2 <0.5.0").unwrap();
        assert!(r.contains(&v("0.3.2")));
        assert!(r.contains(&v("0.4.9-rc.1")));
        assert!(!r.contains(&v("0.5.0")));
        let r = VersionRange::parse(">= 1.0.0 < 2.0.0 || 3.0.0").unwrap();
        assert!(r.contains(&v("1.5.0")) && r.contains(&v("3.0.0")) && !r.contains(&v("2.5.0")));
        let r = VersionRange::parse("<0.2.0").unwrap();
        assert!(r.contains(&v("0.2.0-alpha")));
        assert!(r.contains(&v("0.1.0+build")));
        let r = VersionRange::parse("1.2.x").unwrap();
        assert!(r.contains(&v("1.2.7")) && !r.contains(&v("1.3.0")));
        let r = VersionRange::parse(">1.x").unwrap();
        assert!(r.contains(&v("2.0.0")) && !r.contains(&v("1.9.0")));
    }

    #[test]
    fn rejects_what_blang_rejects() {
        for bad in [
            ">=not-a-version",
            "",
            "|| 1.0.0",
            "1.0.0 ||",
            ">=1.0",
            "~1.0.0",
            "v1.0.0",
        ] {
            assert!(VersionRange::parse(bad).is_err(), "{bad}");
        }
    }
}
