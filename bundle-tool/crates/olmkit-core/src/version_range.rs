//! `olm.skipRange` version ranges: the grammar and matching of blang/semver v4 `ParseRange`.
//!
//! OLM v0 (resolver, registry source), opm (`alpha/model` validation, `declcfg` writers) and
//! OLM v1 (registry+v1 bundles) all evaluate skipRanges with `semver.ParseRange` from
//! github.com/blang/semver/v4, whose syntax differs from Cargo's `VersionReq`:
//!
//! * comparators are separated by spaces (AND) and `||` (OR); AND binds tighter, no brackets;
//! * an operator may stand apart from its version (`>= 1.0.0`);
//! * operators are `= == ! != > >= < <=`, a bare version means `=` (no `~` or `^`);
//! * versions must be full `MAJOR.MINOR.PATCH[-pre][+build]` (`>=4.8` is refused);
//! * `x` wildcards expand to bounds (`1.2.x` = `>=1.2.0 <1.3.0`, `>1.x` = `>=2.0.0`), and, as
//!   blang does, `1.x.x` is a *patch* wildcard (`>=1.0.0 <1.1.0`) and `!=1.x` is an AND of
//!   `<1.0.0 >=2.0.0` that matches nothing: OLM evaluates them that way, so we do too;
//! * matching compares by semver precedence (build metadata ignored) and, unlike npm ranges,
//!   pre-releases are not excluded.
//!
//! Where blang is lax in ways that are bugs rather than grammar we refuse instead: an empty
//! alternative (`1.0.0 || || 2.0.0`, which blang accepts and then panics on when matching) and a
//! one-character token (which blang silently drops). The error texts are blang's, which opm
//! prints after `invalid skipRange "...": `.

use semver::Version;
use std::cmp::Ordering;
use std::fmt;

/// A version given on the command line (`--version` of `generate bundle` and `release`,
/// `promote`'s version): `MAJOR.MINOR.PATCH[-pre][+build]`, with or without a leading `v`, as
/// operator-sdk takes `generate bundle --version`. The one place that lexical rule lives;
/// callers name the flag in their own errors.
pub fn parse_version_flag(text: &str) -> Result<Version, semver::Error> {
    Version::parse(text.trim_start_matches('v'))
}

/// A range could not be parsed. `reason` is blang's wording; [`fmt::Display`] shows only it,
/// because callers name the range themselves (`invalid skipRange ">=1.0": ...`, as opm does).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ParseRangeError {
    /// The range as given.
    pub range: String,
    /// What is wrong with it.
    pub reason: String,
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

/// A parsed range: an OR of AND-groups of comparators. Displays as the text it was parsed from.
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

impl std::str::FromStr for VersionRange {
    type Err = ParseRangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Splits on spaces, except spaces that follow an operator character (`>= 1.0.0` is one token),
/// then removes the spaces left inside tokens (blang's `splitAndTrim`).
fn split_and_trim(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut last_char = 0u8;
    for (i, &c) in s.as_bytes().iter().enumerate() {
        if c == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if i > start {
                out.push(s[start..i].to_string());
            }
            start = i + 1;
        } else if c != b' ' {
            last_char = c;
        }
    }
    if start < s.len() {
        out.push(s[start..].to_string());
    }
    out.into_iter()
        .map(|t| t.replace(' ', ""))
        .filter(|t| !t.is_empty())
        .collect()
}

/// Splits `>=1.0.0` into `(">=", "1.0.0")` at the first digit (blang's `splitComparatorVersion`).
fn split_comparator_version(token: &str) -> Result<(&str, &str), String> {
    let i = token
        .find(|c: char| c.is_ascii_digit())
        .ok_or_else(|| format!("Could not get version from string: {token:?}"))?;
    Ok((token[..i].trim(), &token[i..]))
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

/// Which part a trailing `x` stands for, from the number of dotted parts (blang's
/// `getWildcardType`): `1.x` is minor, `1.2.x` and `1.x.x` are patch.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wildcard {
    None,
    Minor,
    Patch,
}

/// The lower bound of a wildcard version: the first `.x` becomes `.0` and a missing patch is
/// added (blang's `createVersionFromWildcard`).
fn flatten_wildcard(v: &str) -> String {
    let v = v.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
    if v.split('.').count() == 2 {
        format!("{v}.0")
    } else {
        v
    }
}

/// `flat` with the dotted part at `index` incremented; `None` when that part is not a number
/// (blang then builds a comparator without a version, which fails to parse).
fn increment_part(flat: &str, index: usize) -> Option<String> {
    let mut parts: Vec<String> = flat.split('.').map(str::to_string).collect();
    let n: u64 = parts.get(index)?.parse().ok()?;
    // Go's uint64 addition wraps, so blang turns the largest number into 0; so do we, instead
    // of panicking on input such as `>18446744073709551615.x`.
    parts[index] = n.wrapping_add(1).to_string();
    Some(parts.join("."))
}

/// Rewrites a token containing `x` into plain comparators (blang's `expandWildcardVersion`).
fn expand_wildcard(token: &str) -> Result<Vec<String>, String> {
    if !token.contains('x') {
        return Ok(vec![token.to_string()]);
    }
    let (op, v) = split_comparator_version(token)?;
    let parts: Vec<&str> = v.split('.').collect();
    let wildcard = match (parts.last(), parts.len()) {
        (Some(&"x"), 2) => Wildcard::Minor,
        (Some(&"x"), 3) => Wildcard::Patch,
        _ => Wildcard::None,
    };
    let flat = flatten_wildcard(v);
    // The exclusive upper bound of the wildcard's span; empty when there is none, which makes
    // the comparator below versionless and so an error, as in blang.
    let upper = || {
        match wildcard {
            Wildcard::Patch => increment_part(&flat, 1),
            Wildcard::Minor => increment_part(&flat, 0),
            Wildcard::None => None,
        }
        .unwrap_or_default()
    };
    Ok(match op {
        ">" => vec![format!(">={}", upper())],
        ">=" => vec![format!(">={flat}")],
        "<" => vec![format!("<{flat}")],
        "<=" => vec![format!("<{}", upper())],
        "" | "=" | "==" => vec![format!(">={flat}"), format!("<{}", upper())],
        "!=" | "!" => vec![format!("<{flat}"), format!(">={}", upper())],
        // blang leaves an unknown operator with an empty comparator, refused as versionless.
        _ => vec![String::new()],
    })
}

fn parse_comparator(token: &str) -> Result<Comparator, String> {
    let (op_str, v) = split_comparator_version(token)?;
    let op = parse_op(op_str)
        .ok_or_else(|| format!("Could not parse comparator {op_str:?} in {token:?}"))?;
    let version = Version::parse(v)
        .map_err(|e| format!("Could not parse version {v:?} in {token:?}: {e}"))?;
    Ok(Comparator { op, version })
}

impl VersionRange {
    /// Parses `s` as blang/semver v4 `ParseRange` does (see the module documentation for the
    /// few places where we refuse what blang would mis-handle).
    pub fn parse(s: &str) -> Result<Self, ParseRangeError> {
        let err = |reason: String| ParseRangeError {
            range: s.to_string(),
            reason,
        };
        let tokens = split_and_trim(s);
        if tokens.is_empty() {
            return Err(err(format!("Could not get version from string: {s:?}")));
        }
        if tokens.first().is_some_and(|t| t == "||") {
            return Err(err("First element in range is '||'".into()));
        }
        if tokens.last().is_some_and(|t| t == "||") {
            return Err(err("Last element in range is '||'".into()));
        }
        let mut any_of = Vec::new();
        for group in tokens.split(|t| t == "||") {
            if group.is_empty() {
                return Err(err("Empty element between '||' in range".into()));
            }
            let mut all_of = Vec::new();
            for token in group {
                if token.len() == 1 {
                    return Err(err(format!("Could not get version from string: {token:?}")));
                }
                for t in expand_wildcard(token).map_err(err)? {
                    all_of.push(parse_comparator(&t).map_err(err)?);
                }
            }
            any_of.push(all_of);
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
    use proptest::prelude::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn a_version_flag_may_start_with_v() {
        assert_eq!(parse_version_flag("v1.2.3-rc.1").unwrap(), v("1.2.3-rc.1"));
        assert_eq!(parse_version_flag("0.4.0").unwrap(), v("0.4.0"));
        for bad in ["", "v", "1.2", "one", ">=1.0.0"] {
            assert!(parse_version_flag(bad).is_err(), "{bad:?}");
        }
    }

    fn range(s: &str) -> VersionRange {
        VersionRange::parse(s).unwrap()
    }

    #[test]
    fn real_skip_ranges() {
        let r = range(">=0.1.0 <0.6.1");
        assert!(r.contains(&v("0.6.0")) && r.contains(&v("0.1.0")));
        assert!(!r.contains(&v("0.6.1")));
        let r = range(">=4.8.0 <4.9.0 || >=5.0.0");
        assert!(r.contains(&v("5.1.0")) && !r.contains(&v("4.9.0")));
        let r = range(">= 1.0.0 < 2.0.0 || 3.0.0");
        assert!(r.contains(&v("1.5.0")) && r.contains(&v("3.0.0")) && !r.contains(&v("2.5.0")));
        let r = range("> 1.0.0");
        assert!(r.contains(&v("1.0.1")) && !r.contains(&v("1.0.0")));
        assert_eq!(r.to_string(), "> 1.0.0");
    }

    #[test]
    fn prereleases_and_build_metadata() {
        let r = range("<0.2.0");
        assert!(r.contains(&v("0.2.0-alpha")));
        assert!(r.contains(&v("0.1.0+build")));
        assert!(range(">=0.3.2 <0.5.0").contains(&v("0.4.9-rc.1")));
        assert!(range("!=1.0.0").contains(&v("1.0.1")));
        assert!(!range("!1.0.0").contains(&v("1.0.0+meta")));
        // A pre-release containing `x` goes through blang's wildcard path unchanged for `>=`.
        assert!(range(">=1.0.0-xyz").contains(&v("1.0.0")));
    }

    #[test]
    fn wildcards_expand_like_blang() {
        let r = range("1.2.x");
        assert!(r.contains(&v("1.2.9")) && !r.contains(&v("1.3.0")) && !r.contains(&v("1.1.0")));
        let r = range(">1.x");
        assert!(r.contains(&v("2.0.0")) && !r.contains(&v("1.9.0")));
        let r = range("<=1.2.x");
        assert!(r.contains(&v("1.2.5")) && !r.contains(&v("1.3.0")));
        assert!(range("<1.2.x").contains(&v("1.1.9")));
        assert!(!range("<1.2.x").contains(&v("1.2.0")));
        assert!(range(">=1.x").contains(&v("1.0.0")));
        // blang's quirks, which OLM inherits.
        let r = range("1.x.x");
        assert!(r.contains(&v("1.0.5")) && !r.contains(&v("1.1.0")));
        let r = range("!=1.x");
        assert!(!r.contains(&v("0.9.0")) && !r.contains(&v("2.0.0")));
        // A part at u64::MAX wraps to 0 when incremented, as Go's uint64 does in blang: such
        // ranges parse instead of panicking.
        assert!(VersionRange::parse(">18446744073709551615.x").is_ok());
        assert!(VersionRange::parse("<=1.18446744073709551615.x").is_ok());
    }

    #[test]
    fn rejects_what_blang_rejects_with_its_words() {
        let reason = |s: &str| VersionRange::parse(s).unwrap_err().reason;
        assert_eq!(reason("|| 1.0.0"), "First element in range is '||'");
        assert_eq!(reason("1.0.0 ||"), "Last element in range is '||'");
        assert_eq!(
            reason(">=not-a-version"),
            "Could not get version from string: \">=not-a-version\""
        );
        assert!(reason(">=1.0").starts_with("Could not parse version \"1.0\" in \">=1.0\""));
        assert_eq!(
            reason("~1.0.0"),
            "Could not parse comparator \"~\" in \"~1.0.0\""
        );
        // `1.2.3.x` has no wildcard type: blang flattens it to a four-part version.
        assert!(reason("1.2.3.x").starts_with("Could not parse version \"1.2.3.0\""));
        // `1.x.3` neither: its lower bound parses, its upper bound has no version.
        assert_eq!(reason("1.x.3"), "Could not get version from string: \"<\"");
        for bad in [
            "",
            "   ",
            ">=",
            "foo",
            "v1.0.0",
            "^1.0.0",
            "x",
            "1.x.3",
            "1.0.0 || || 2.0.0",
            ">=1.0.0 <",
            "=1.0.0-x",
            "1.2.X",
            "*",
        ] {
            assert!(VersionRange::parse(bad).is_err(), "{bad}");
        }
        let e = VersionRange::parse(">=1.0").unwrap_err();
        assert_eq!(e.range, ">=1.0");
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = VersionRange::parse(&s);
        }

        #[test]
        fn bounds_agree_with_ordering(a in 0u64..20, b in 0u64..20, c in 0u64..20) {
            let r = range(&format!(">={a}.0.0 <{b}.0.0"));
            prop_assert_eq!(r.contains(&Version::new(c, 0, 0)), a <= c && c < b);
        }

        #[test]
        fn patch_wildcard_is_its_minor_line(a in 0u64..5, b in 0u64..5, m in 0u64..5, n in 0u64..5, p in 0u64..5) {
            let r = range(&format!("{a}.{b}.x"));
            prop_assert_eq!(r.contains(&Version::new(m, n, p)), m == a && n == b);
        }

        #[test]
        fn display_is_the_source(a in 0u64..100, b in 0u64..100) {
            let text = format!(">= {a}.0.0 || <{b}.1.0");
            prop_assert_eq!(range(&text).to_string(), text.clone());
            prop_assert_eq!(text.parse::<VersionRange>().unwrap(), range(&text));
        }
    }
}
