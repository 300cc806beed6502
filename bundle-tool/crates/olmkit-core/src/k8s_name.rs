//! Kubernetes name syntax: DNS-1123 labels and subdomains, DNS-1035 labels, and label values.
//!
//! Mirrors k8s.io/apimachinery `pkg/util/validation` (`IsDNS1123Label`, `IsDNS1123Subdomain`,
//! `IsDNS1035Label`)
//! and `pkg/api/validate/content` (`IsLabelValue`): each check returns the list of problems with
//! upstream's exact texts (empty when the value is valid), because opm, operator-sdk and the API
//! server print those texts and users search for them. Checked on bytes, as Go's `len` and
//! regular expressions do, so a non-ASCII character is simply outside the allowed set.

/// Longest DNS-1123 label (`DNS1123LabelMaxLength`).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest DNS-1123 subdomain (`DNS1123SubdomainMaxLength`).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest label value (`LabelValueMaxLength`).
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// apimachinery `MaxLenError` (the `pkg/util/validation` wording).
fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// apimachinery `RegexError`: the message, the examples and the pattern.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let quoted: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        quoted.join(" or ")
    )
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, anchored.
fn matches_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// Labels joined by single dots, anchored.
fn matches_subdomain(s: &str) -> bool {
    s.split('.').all(matches_label)
}

/// Empty, or `[A-Za-z0-9]` at both ends with `[-A-Za-z0-9_.]` between, anchored.
fn matches_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.is_empty()
        || (b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric)
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c)))
}

/// The problems that make `value` not a DNS-1123 label, as apimachinery `IsDNS1123Label`.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_label(value) {
        if matches_subdomain(value) {
            // A valid subdomain but not a label; the length is already reported, so it is dots.
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(LABEL_MSG, LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// The problems that make `value` not a DNS-1123 subdomain, as apimachinery
/// `IsDNS1123Subdomain` (253 characters in all; no per-label limit).
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_subdomain(value) {
        errs.push(regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// The problems that make `value` not a DNS-1035 label (the syntax of Service names and of a
/// CRD's names and version names), as apimachinery `IsDNS1035Label`.
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1035_label(value) {
        errs.push(regex_error(
            DNS1035_MSG,
            DNS1035_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// True when `value` is a DNS-1035 label.
pub fn is_dns1035_label(value: &str) -> bool {
    value.len() <= DNS1123_LABEL_MAX_LENGTH && matches_dns1035_label(value)
}

/// A DNS-1123 label that starts with a letter, anchored.
fn matches_dns1035_label(s: &str) -> bool {
    matches_label(s) && s.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
}

/// The problems that make `value` not a label value, as apimachinery `IsLabelValue` (whose
/// length message, from `pkg/api/validate/content`, says "bytes").
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {LABEL_VALUE_MAX_LENGTH} bytes"
        ));
    }
    if !matches_label_value(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// True when `value` is a DNS-1123 label.
pub fn is_dns1123_label(value: &str) -> bool {
    value.len() <= DNS1123_LABEL_MAX_LENGTH && matches_label(value)
}

/// True when `value` is a DNS-1123 subdomain.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= DNS1123_SUBDOMAIN_MAX_LENGTH && matches_subdomain(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1035_labels_start_with_a_letter() {
        assert!(is_dns1035_label("my-name") && dns1035_label_errors("abc-123").is_empty());
        assert!(!is_dns1035_label("1abc") && !is_dns1035_label("a.b") && !is_dns1035_label(""));
        assert_eq!(
            dns1035_label_errors("1abc"),
            [
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(
            dns1035_label_errors(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
    }
    use proptest::prelude::*;

    #[test]
    fn labels() {
        for ok in ["a", "operators", "123-abc", "a--b", &"a".repeat(63)] {
            assert!(dns1123_label_errors(ok).is_empty(), "{ok}");
            assert!(is_dns1123_label(ok));
        }
        assert_eq!(
            dns1123_label_errors("Bad"),
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(dns1123_label_errors("a.b"), ["must not contain dots"]);
        assert_eq!(
            dns1123_label_errors(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert_eq!(
            dns1123_label_errors(&format!("{}.b", "a".repeat(63))).len(),
            2
        );
        for bad in ["", "-a", "a-", "a_b", "é"] {
            assert_eq!(dns1123_label_errors(bad).len(), 1, "{bad}");
            assert!(!is_dns1123_label(bad));
        }
    }

    #[test]
    fn subdomains() {
        for ok in [
            "memcacheds.cache.example.com",
            "memcached-operator.v0.1.0",
            &"a".repeat(64),
        ] {
            assert!(dns1123_subdomain_errors(ok).is_empty(), "{ok}");
            assert!(is_dns1123_subdomain(ok));
        }
        assert_eq!(
            dns1123_subdomain_errors("a..b"),
            [
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert_eq!(
            dns1123_subdomain_errors(&"a".repeat(254)),
            ["must be no more than 253 characters"]
        );
        for bad in ["", ".a", "a.", "A.b", "a.-b", "a b"] {
            assert_eq!(dns1123_subdomain_errors(bad).len(), 1, "{bad}");
        }
    }

    #[test]
    fn label_values() {
        for ok in ["", "MyValue", "my_value", "12345", "a.b-c"] {
            assert!(label_value_errors(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            label_value_errors(&"a".repeat(64)),
            ["must be no more than 63 bytes"]
        );
        assert!(label_value_errors("_a")[0].starts_with("a valid label must be an empty string"));
        assert_eq!(label_value_errors("a/b").len(), 1);
    }

    proptest! {
        // The hand-written matchers agree with upstream's regular expressions.
        #[test]
        fn label_agrees_with_regex(s in "[a-z0-9.A-Z_-]{0,70}") {
            let re = regex_lite_label(&s);
            prop_assert_eq!(is_dns1123_label(&s), re && s.len() <= 63);
        }

        #[test]
        fn every_label_is_a_subdomain(s in "[a-z0-9-]{1,63}") {
            prop_assert_eq!(is_dns1123_label(&s), is_dns1123_subdomain(&s));
        }

        #[test]
        fn joined_labels_are_subdomains(parts in proptest::collection::vec("[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", 1..6)) {
            prop_assert!(dns1123_subdomain_errors(&parts.join(".")).is_empty());
        }
    }

    /// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` written as a tiny automaton, independent of
    /// `matches_label`, for the property above.
    fn regex_lite_label(s: &str) -> bool {
        let mut chars = s.chars().peekable();
        let Some(first) = chars.next() else {
            return false;
        };
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return false;
        }
        let mut last = first;
        for c in chars {
            if !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                return false;
            }
            last = c;
        }
        last != '-'
    }
}
