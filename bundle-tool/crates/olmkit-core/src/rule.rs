//! Validator rules, and the one-line way checks report findings of them.
//!
//! The bundle and catalog validators each list their rules in a `RULES` table of [`Rule`]s
//! (one `pub const` per rule, so checks name a rule by constant and `--help`, documentation and
//! the rule meta-tests read the same table). Every rule says which upstream function(s) it
//! mirrors, or that it is bundle-tool's own judgement ([`Upstream::Stricter`]).
//!
//! Checks report into [`Findings`]: `out.at(file, path).error(&RULE, msg).hint(..)`.
//! `stricter` is for what upstream accepts but bundle-tool judges worth fixing: a warning, an
//! error only when the validator runs strict (the bundle validator's `strict` suite), so that
//! upstream's verdict stays the specification by default.

use crate::findings::{Finding, Report};
use std::fmt;

/// What a rule mirrors upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upstream {
    /// The upstream function(s) it mirrors, e.g. `operator-framework/api validateBundleSize`.
    Mirrors(&'static str),
    /// bundle-tool's own judgement, stricter than upstream (which accepts what it reports).
    Stricter,
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Upstream::Mirrors(s) => f.write_str(s),
            Upstream::Stricter => f.write_str("none: stricter than upstream"),
        }
    }
}

/// One validation rule: a stable id, the suite that runs it, what it mirrors and what it checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Stable id, the `rule` of its findings (`csv-name`, `channel-head`).
    pub id: &'static str,
    /// The suite that runs it (`default`, `operatorhub`, `olm-v1`...).
    pub suite: &'static str,
    /// The upstream function(s) it mirrors.
    pub upstream: Upstream,
    /// What it checks, in one line (for `--help` and documentation).
    pub description: &'static str,
}

impl Rule {
    /// A rule (for `const` tables).
    pub const fn new(
        id: &'static str,
        suite: &'static str,
        upstream: Upstream,
        description: &'static str,
    ) -> Self {
        Self {
            id,
            suite,
            upstream,
            description,
        }
    }
}

/// The findings of one validation run.
#[derive(Clone, Debug, Default)]
pub struct Findings {
    findings: Vec<Finding>,
    strict: bool,
}

impl Findings {
    /// No findings yet; with `strict`, [`At::stricter`] reports errors instead of warnings.
    pub fn new(strict: bool) -> Self {
        Self {
            findings: Vec::new(),
            strict,
        }
    }

    /// Where the next finding points: a file (relative to the input root) and a field path
    /// or catalog object (an empty path is no path).
    pub fn at<'s, 'p>(&'s mut self, file: Option<&'p str>, path: Option<&'p str>) -> At<'s, 'p> {
        At {
            out: self,
            file,
            path,
        }
    }

    /// Adds a finding built elsewhere.
    pub fn push(&mut self, finding: Finding) {
        self.findings.push(finding);
    }

    /// The findings so far, in the order reported.
    pub fn as_slice(&self) -> &[Finding] {
        &self.findings
    }

    /// The findings, in the order reported.
    pub fn into_findings(self) -> Vec<Finding> {
        self.findings
    }

    /// The report: every finding, normalized ([`Report::normalize`]).
    pub fn into_report(self) -> Report {
        let mut report = Report {
            findings: self.findings,
        };
        report.normalize();
        report
    }
}

/// A place to report a finding at; see [`Findings::at`].
pub struct At<'s, 'p> {
    out: &'s mut Findings,
    file: Option<&'p str>,
    path: Option<&'p str>,
}

impl<'s> At<'s, '_> {
    /// An error: upstream refuses this too.
    pub fn error(self, rule: &Rule, message: impl Into<String>) -> Reported<'s> {
        self.add(Finding::error(rule.id, message))
    }

    /// A warning: upstream warns too, or nothing is refused.
    pub fn warning(self, rule: &Rule, message: impl Into<String>) -> Reported<'s> {
        self.add(Finding::warning(rule.id, message))
    }

    /// What upstream accepts but bundle-tool judges worth fixing: a warning, an error when
    /// strict.
    pub fn stricter(self, rule: &Rule, message: impl Into<String>) -> Reported<'s> {
        if self.out.strict {
            self.error(rule, message)
        } else {
            self.warning(rule, message)
        }
    }

    fn add(self, mut f: Finding) -> Reported<'s> {
        f.file = self.file.map(str::to_string);
        f.path = self.path.filter(|p| !p.is_empty()).map(str::to_string);
        let list = &mut self.out.findings;
        list.push(f);
        let last = list.len() - 1;
        Reported(&mut list[last])
    }
}

/// The finding just reported, to add a hint to.
pub struct Reported<'s>(&'s mut Finding);

impl Reported<'_> {
    /// Says how to fix it.
    pub fn hint(self, hint: impl Into<String>) {
        self.0.hint = Some(hint.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Severity;

    const R: Rule = Rule::new("r", "default", Upstream::Stricter, "a test rule");

    #[test]
    fn stricter_is_a_warning_unless_strict() {
        for (strict, want) in [(false, Severity::Warning), (true, Severity::Error)] {
            let mut out = Findings::new(strict);
            out.at(Some("f.yaml"), Some("")).stricter(&R, "m").hint("h");
            out.at(None, Some("a.b")).error(&R, "e");
            let r = out.into_report();
            let f = r.findings.iter().find(|f| f.message == "m").unwrap();
            assert_eq!(f.severity, want);
            assert_eq!(
                (f.file.as_deref(), f.path.as_deref(), f.hint.as_deref()),
                (Some("f.yaml"), None, Some("h"))
            );
            assert_eq!(r.findings[0].severity, Severity::Error);
        }
        assert_eq!(R.upstream.to_string(), "none: stricter than upstream");
    }
}
