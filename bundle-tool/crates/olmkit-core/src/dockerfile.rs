//! The Dockerfile `LABEL` grammar, in one place: how a label value is quoted when a
//! `bundle.Dockerfile` or `catalog.Dockerfile` is written ([`label_value`]), and how `LABEL`
//! instructions are read back ([`parse_labels`]).
//!
//! Mirrors what Docker's (moby/buildkit) parser accepts for `LABEL k=v [k2=v2 ...]`: unquoted
//! values end at whitespace, double-quoted ones may hold whitespace with `\` escaping the next
//! character, and `\` at the end of a line continues the instruction. Writing quotes only
//! when a value would otherwise read back differently (whitespace, quotes, `\`, `$`), as
//! operator-sdk's `bundle.Dockerfile` template leaves plain values bare.

use std::collections::BTreeMap;

/// A `LABEL` value as written: bare when it reads back unchanged, else double-quoted with `\`,
/// `"` and `$` (variable expansion) escaped.
pub fn label_value(v: &str) -> String {
    let plain = !v.is_empty()
        && v.chars()
            .all(|c| !c.is_whitespace() && !matches!(c, '"' | '\\' | '$' | '\''));
    if plain {
        v.to_string()
    } else {
        let escaped = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('$', "\\$");
        format!("\"{escaped}\"")
    }
}

/// Parses the `LABEL` instructions of a Dockerfile (`LABEL k=v [k2=v2 ...]`, quoted or not,
/// with line continuations).
pub fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    for line in joined.lines() {
        let line = line.trim();
        let Some(rest) = line
            .strip_prefix("LABEL ")
            .or_else(|| line.strip_prefix("label "))
        else {
            continue;
        };
        let mut chars = rest.chars().peekable();
        while let Some((key, val)) = next_pair(&mut chars) {
            labels.insert(key.trim_matches('"').to_string(), val);
        }
    }
    labels
}

/// The next `key=value` of a `LABEL` instruction; `None` at its end (or at a word that is no
/// pair, which ends the instruction).
fn next_pair(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<(String, String)> {
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    let mut key = String::new();
    while let Some(&c) = chars.peek() {
        if c == '=' || c.is_whitespace() {
            break;
        }
        key.push(c);
        chars.next();
    }
    if key.is_empty() || chars.next() != Some('=') {
        return None;
    }
    let mut val = String::new();
    if chars.peek() == Some(&'"') {
        chars.next();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        val.push(n)
                    }
                }
                '"' => break,
                c => val.push(c),
            }
        }
    } else {
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            val.push(c);
            chars.next();
        }
    }
    Some((key, val))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_with_quotes_and_continuations() {
        let l = parse_labels(
            "FROM scratch\nLABEL a=b \"c.d\"=\"e f\" \\\n  g=h\nLABEL operators.operatorframework.io.bundle.channels.v1=alpha,stable\n",
        );
        assert_eq!(l["a"], "b");
        assert_eq!(l["c.d"], "e f");
        assert_eq!(l["g"], "h");
        assert_eq!(
            l["operators.operatorframework.io.bundle.channels.v1"],
            "alpha,stable"
        );
    }

    #[test]
    fn values_are_quoted_only_when_needed_and_read_back_unchanged() {
        assert_eq!(label_value("plain/value:1"), "plain/value:1");
        assert_eq!(label_value(""), "\"\"");
        assert_eq!(label_value("a b"), "\"a b\"");
        assert_eq!(label_value("it's"), "\"it's\"");
        for v in ["plain", "", "with space \"q\" $x", "back\\slash", "it's"] {
            let text = format!("FROM scratch\nLABEL k={}\n", label_value(v));
            assert_eq!(parse_labels(&text)["k"], v, "{text}");
        }
    }
}
