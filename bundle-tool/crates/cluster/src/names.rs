//! Checks of user-given names and durations before they reach the API server.
//!
//! The API server would reject a bad name too, but only after some objects were applied; and a
//! bad `registryPoll.interval` is accepted by the CRD schema and only fails inside OLM. Checking
//! up front keeps install all-or-nothing and the message next to the flag that caused it.

use thiserror::Error;

/// A user-given value is not acceptable.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{what} {value:?} is not valid: {reason}")]
pub struct InvalidValueError {
    /// Which flag or field (`--namespace`, `--poll-interval`...).
    pub what: String,
    /// The value.
    pub value: String,
    /// Why.
    pub reason: String,
}

fn invalid(what: &str, value: &str, reason: impl Into<String>) -> InvalidValueError {
    InvalidValueError {
        what: what.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

fn label_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// Checks an RFC 1123 label (namespace names).
pub fn check_dns1123_label(what: &str, s: &str) -> Result<(), InvalidValueError> {
    if label_ok(s) {
        Ok(())
    } else {
        Err(invalid(
            what,
            s,
            "must be at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit",
        ))
    }
}

/// Checks an RFC 1123 subdomain (most object names).
pub fn check_dns1123_subdomain(what: &str, s: &str) -> Result<(), InvalidValueError> {
    if !s.is_empty() && s.len() <= 253 && s.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(invalid(
            what,
            s,
            "must be at most 253 lowercase letters, digits, '-' or '.', each dot-separated part starting and ending with a letter or digit",
        ))
    }
}

/// Parses a Go `time.ParseDuration` string as OLM parses `registryPoll.interval` (`10m`,
/// `1h30m`, `45s`, `250ms`).
pub fn parse_go_duration(what: &str, s: &str) -> Result<std::time::Duration, InvalidValueError> {
    let bad = |reason: &str| invalid(what, s, reason.to_string());
    if s.is_empty() {
        return Err(bad("empty duration"));
    }
    let mut rest = s;
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(bad("expected a number, like 10m or 1h30m"));
        }
        let (num, tail) = rest.split_at(num_len);
        let value: f64 = num
            .parse()
            .map_err(|_| bad("expected a number, like 10m or 1h30m"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(bad("missing unit (use ns, us, ms, s, m or h)")),
            _ => return Err(bad("unknown unit (use ns, us, ms, s, m or h)")),
        };
        nanos += value * scale;
        rest = tail;
    }
    if !nanos.is_finite() || nanos > 1e18 {
        return Err(bad("too long"));
    }
    Ok(std::time::Duration::from_nanos(nanos as u64))
}

/// True when an image reference pins a digest (`...@sha256:...`).
pub fn is_digest_ref(image: &str) -> bool {
    image.contains('@')
}

/// Checks that an image reference has a repository and a tag or digest, as OLM v1's CEL rules
/// and any pull require.
pub fn check_image_ref(what: &str, image: &str) -> Result<(), InvalidValueError> {
    if image.is_empty() || image.chars().any(char::is_whitespace) {
        return Err(invalid(what, image, "an image reference has no spaces"));
    }
    let name_end = image.find('@').unwrap_or(image.len());
    let name = &image[..name_end];
    let last = name.rsplit('/').next().unwrap_or(name);
    let has_tag = last.contains(':');
    if name_end == image.len() && !has_tag {
        return Err(invalid(
            what,
            image,
            "needs a tag or a digest (e.g. quay.io/example/catalog:v0.1.0)",
        ));
    }
    if !name.contains('/') {
        return Err(invalid(
            what,
            image,
            "needs a registry and repository (e.g. quay.io/example/catalog:v0.1.0)",
        ));
    }
    if let Some(digest) = image.get(name_end + 1..) {
        let (alg, hex) = digest.split_once(':').unwrap_or((digest, ""));
        if alg.is_empty() || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(invalid(
                what,
                image,
                "the digest must be algorithm:hex with at least 32 hex digits",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(check_dns1123_label("--namespace", "operators").is_ok());
        assert!(check_dns1123_label("--namespace", "Operators").is_err());
        assert!(check_dns1123_label("--namespace", "-x").is_err());
        assert!(check_dns1123_label("--namespace", "a.b").is_err());
        assert!(check_dns1123_subdomain("--subscription", "memcached-operator.v0.1.0").is_ok());
        assert!(check_dns1123_subdomain("--subscription", "a..b").is_err());
        assert!(check_dns1123_subdomain("--subscription", "").is_err());
    }

    #[test]
    fn go_durations() {
        let secs = |s: &str| parse_go_duration("--poll-interval", s).map(|d| d.as_secs());
        assert_eq!(secs("10m"), Ok(600));
        assert_eq!(secs("1h30m"), Ok(5400));
        assert_eq!(secs("1.5h"), Ok(5400));
        assert_eq!(secs("45s"), Ok(45));
        assert_eq!(
            parse_go_duration("--timeout", "250ms").map(|d| d.as_millis()),
            Ok(250)
        );
        assert!(parse_go_duration("--poll-interval", "10").is_err());
        assert!(parse_go_duration("--poll-interval", "10 minutes").is_err());
        assert!(parse_go_duration("--poll-interval", "").is_err());
        let e = parse_go_duration("--poll-interval", "5d").unwrap_err();
        assert_eq!(e.what, "--poll-interval");
    }

    #[test]
    fn image_refs() {
        assert!(check_image_ref("--catalog-image", "quay.io/example/cat:v1").is_ok());
        assert!(check_image_ref("--catalog-image", "localhost:5000/cat:v1").is_ok());
        assert!(
            check_image_ref(
                "--catalog-image",
                "quay.io/example/cat@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
            )
            .is_ok()
        );
        assert!(check_image_ref("--catalog-image", "quay.io/example/cat").is_err());
        assert!(check_image_ref("--catalog-image", "localhost:5000/cat").is_err());
        assert!(check_image_ref("--catalog-image", "cat:v1").is_err());
        assert!(check_image_ref("--catalog-image", "quay.io/example/cat@sha256:xyz").is_err());
    }

    proptest! {
        #[test]
        fn duration_parser_never_panics(s in "\\PC{0,20}") {
            let _ = parse_go_duration("x", &s);
        }
        #[test]
        fn image_check_never_panics(s in "\\PC{0,60}") {
            let _ = check_image_ref("x", &s);
        }
    }
}
