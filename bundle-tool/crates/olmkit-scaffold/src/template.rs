//! A small line-oriented template language for the files in `templates/`.
//!
//! - `{{name}}` inside a line is replaced by the value of `name`;
//! - a line that holds only `{{name}}` (plus indentation) inserts the value as a block: every
//!   line of it indented like the placeholder, and nothing at all when the value is empty (so
//!   optional blocks leave no blank line behind);
//! - lines holding only `{{#if flag}}`, `{{#unless flag}}`, `{{else}}` or `{{/if}}` keep or
//!   drop the lines between them (nesting allowed) and disappear themselves.
//!
//! An unknown name or flag, or an unbalanced condition, is an error naming the template, so a
//! typo in a template fails its tests instead of shipping `{{` to users.

use std::collections::BTreeMap;

use crate::ScaffoldError;

/// The values and flags a template is rendered with.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    values: BTreeMap<&'static str, String>,
    flags: BTreeMap<&'static str, bool>,
}

impl Vars {
    /// Sets a value.
    pub fn set(&mut self, name: &'static str, value: impl Into<String>) -> &mut Self {
        self.values.insert(name, value.into());
        self
    }

    /// Sets a flag.
    pub fn flag(&mut self, name: &'static str, on: bool) -> &mut Self {
        self.flags.insert(name, on);
        self
    }
}

fn template_error(template: &str, message: String) -> ScaffoldError {
    ScaffoldError::Internal(format!("template {template}: {message}"))
}

enum Directive<'a> {
    If(&'a str, bool),
    Else,
    End,
}

fn directive(line: &str) -> Option<Directive<'_>> {
    let t = line.trim();
    let inner = t.strip_prefix("{{")?.strip_suffix("}}")?;
    if let Some(flag) = inner.strip_prefix("#if ") {
        Some(Directive::If(flag.trim(), true))
    } else if let Some(flag) = inner.strip_prefix("#unless ") {
        Some(Directive::If(flag.trim(), false))
    } else if inner == "else" {
        Some(Directive::Else)
    } else if inner == "/if" {
        Some(Directive::End)
    } else {
        None
    }
}

/// Renders `text` (the template named `name`).
pub fn render(name: &str, text: &str, vars: &Vars) -> Result<String, ScaffoldError> {
    // Each open condition: (its own value, whether every enclosing one holds).
    let mut stack: Vec<(bool, bool)> = Vec::new();
    let mut out = String::with_capacity(text.len());
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let active = stack.last().is_none_or(|(own, outer)| *own && *outer);
        if let Some(d) = directive(line) {
            match d {
                Directive::If(flag, want) => {
                    let value = *vars.flags.get(flag).ok_or_else(|| {
                        template_error(name, format!("line {}: unknown flag {flag:?}", n + 1))
                    })?;
                    stack.push((value == want, active));
                }
                Directive::Else => {
                    let top = stack.last_mut().ok_or_else(|| {
                        template_error(name, format!("line {}: else without if", n + 1))
                    })?;
                    top.0 = !top.0;
                }
                Directive::End => {
                    stack.pop().ok_or_else(|| {
                        template_error(name, format!("line {}: /if without if", n + 1))
                    })?;
                }
            }
            continue;
        }
        if !active {
            continue;
        }
        let body = line.trim_end_matches('\n');
        let trimmed = body.trim_start();
        let indent = &body[..body.len() - trimmed.len()];
        if let Some(var) = trimmed
            .strip_prefix("{{")
            .and_then(|r| r.strip_suffix("}}"))
            .filter(|v| !v.contains("{{") && !v.contains('}'))
        {
            let value = vars.values.get(var).ok_or_else(|| {
                template_error(name, format!("line {}: unknown value {var:?}", n + 1))
            })?;
            for l in value.lines() {
                if !l.is_empty() {
                    out.push_str(indent);
                }
                out.push_str(l);
                out.push('\n');
            }
            continue;
        }
        out.push_str(&substitute(name, n + 1, line, vars)?);
    }
    if !stack.is_empty() {
        return Err(template_error(name, "an {{#if}} is not closed".into()));
    }
    Ok(out)
}

fn substitute(
    name: &str,
    line_no: usize,
    line: &str,
    vars: &Vars,
) -> Result<String, ScaffoldError> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        // `{{{name}}`: a literal `{` before a placeholder (Rust's `use a::{B, C}`).
        if rest[start + 2..].starts_with('{') {
            out.push_str(&rest[..=start]);
            rest = &rest[start + 1..];
            continue;
        }
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| template_error(name, format!("line {line_no}: unclosed {{{{")))?;
        let var = &after[..end];
        let value = vars.values.get(var).ok_or_else(|| {
            template_error(name, format!("line {line_no}: unknown value {var:?}"))
        })?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        let mut v = Vars::default();
        v.set("kind", "Whalesay")
            .set("block", "a\n\nb")
            .set("empty", "")
            .flag("yes", true)
            .flag("no", false);
        v
    }

    #[test]
    fn a_brace_before_a_placeholder_is_literal() {
        assert_eq!(
            render("t", "use a::{{{kind}}, B};\n", &vars()).unwrap(),
            "use a::{Whalesay, B};\n"
        );
    }

    #[test]
    fn values_blocks_and_conditions() {
        let t = "kind {{kind}}!\n  {{block}}\n  {{empty}}\n{{#if yes}}\nin\n{{#if no}}\nnot\n{{else}}\nelse\n{{/if}}\n{{/if}}\n{{#unless yes}}\nhidden\n{{/unless}}\n";
        // `{{/unless}}` is not a directive: the test shows the error it gives.
        assert!(render("t", t, &vars()).is_err());
        let t = t.replace("{{/unless}}", "{{/if}}");
        assert_eq!(
            render("t", &t, &vars()).unwrap(),
            "kind Whalesay!\n  a\n\n  b\nin\nelse\n"
        );
    }

    #[test]
    fn unknown_names_are_errors() {
        let e = render("x.rs", "{{nope}}\n", &vars())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("template x.rs: line 1: unknown value \"nope\""),
            "{e}"
        );
        let e = render("x.rs", "{{#if nope}}\n{{/if}}\n", &vars()).unwrap_err();
        assert!(e.to_string().contains("unknown flag"), "{e}");
        assert!(render("x.rs", "{{#if yes}}\n", &vars()).is_err());
        assert!(render("x.rs", "a {{kind\n", &vars()).is_err());
    }
}
