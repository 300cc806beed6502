//! Findings of validators and the reports that carry them.
//!
//! A validator never stops at the first problem: it returns every [`Finding`], each naming the
//! file and the field path it concerns, and the caller decides the exit code from
//! [`Report::has_errors`]. Reports render as text for people (one line per finding, then `hint:`
//! lines) or as JSON for tools.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Blocks installation or release.
    Error,
    /// Works, but is likely a mistake or a bad practice.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One problem found in an input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Stable identifier of the rule that produced it, e.g. `csv-schema` or `channel-heads`.
    pub rule: String,
    /// File the finding concerns, relative to the input root when possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Field path inside the file (`spec.install.spec.deployments[0].name`), or the catalog
    /// object (`package foo / channel stable / bundle foo.v1.0.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Finding {
    /// An error finding.
    pub fn error(rule: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            rule: rule.into(),
            file: None,
            path: None,
            message: message.into(),
            hint: None,
        }
    }
    /// A warning finding.
    pub fn warning(rule: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(rule, message)
        }
    }
    /// Sets the file.
    pub fn file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }
    /// Sets the field path.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }
    /// Sets the hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.severity, self.rule)?;
        match (&self.file, &self.path) {
            (Some(file), Some(path)) => write!(f, " {file}: {path}:")?,
            (Some(file), None) => write!(f, " {file}:")?,
            (None, Some(path)) => write!(f, " {path}:")?,
            (None, None) => f.write_str(":")?,
        }
        write!(f, " {}", self.message)
    }
}

/// All findings of one run, in a stable order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The findings, errors first, then by file, path and rule.
    pub findings: Vec<Finding>,
}

/// Counts shown in report summaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Number of errors.
    pub errors: usize,
    /// Number of warnings.
    pub warnings: usize,
}

impl Report {
    /// An empty report.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds one finding.
    pub fn push(&mut self, finding: Finding) {
        self.findings.push(finding);
    }
    /// Adds many findings.
    pub fn extend(&mut self, findings: impl IntoIterator<Item = Finding>) {
        self.findings.extend(findings);
    }
    /// True if any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
    /// Error and warning counts.
    pub fn counts(&self) -> Counts {
        let errors = self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        Counts {
            errors,
            warnings: self.findings.len() - errors,
        }
    }
    /// Sorts findings deterministically (errors first) and drops exact duplicates.
    pub fn normalize(&mut self) {
        self.findings.sort_by(|a, b| {
            (a.severity, &a.file, &a.path, &a.rule, &a.message)
                .cmp(&(b.severity, &b.file, &b.path, &b.rule, &b.message))
        });
        self.findings.dedup();
    }
    /// Renders one line per finding followed by its `hint:` line, then a summary line.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            out.push_str(&f.to_string());
            out.push('\n');
            if let Some(h) = &f.hint {
                out.push_str("  hint: ");
                out.push_str(h);
                out.push('\n');
            }
        }
        let c = self.counts();
        out.push_str(&format!(
            "{} error(s), {} warning(s)\n",
            c.errors, c.warnings
        ));
        out
    }
    /// Renders `{"findings": [...], "errors": n, "warnings": n, "valid": bool}` as pretty JSON.
    pub fn render_json(&self) -> String {
        let c = self.counts();
        let v = serde_json::json!({
            "valid": !self.has_errors(),
            "errors": c.errors,
            "warnings": c.warnings,
            "findings": self.findings,
        });
        let mut s = serde_json::to_string_pretty(&v).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }
}

impl FromIterator<Finding> for Report {
    fn from_iter<T: IntoIterator<Item = Finding>>(iter: T) -> Self {
        Self {
            findings: iter.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json() {
        let mut r = Report::new();
        r.push(Finding::warning("w", "meh").file("a.yaml"));
        r.push(
            Finding::error("csv-schema", "bad")
                .file("csv.yaml")
                .path("spec.version")
                .hint("use semver"),
        );
        r.normalize();
        assert_eq!(
            r.render_text(),
            "error[csv-schema] csv.yaml: spec.version: bad\n  hint: use semver\nwarning[w] a.yaml: meh\n1 error(s), 1 warning(s)\n"
        );
        let v: serde_json::Value = serde_json::from_str(&r.render_json()).unwrap();
        assert_eq!(v["valid"], false);
        assert_eq!(v["findings"][0]["rule"], "csv-schema");
    }
}
