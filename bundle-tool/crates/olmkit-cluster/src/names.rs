//! Checks of user-given names and durations before they reach the API server.
//!
//! The API server would reject a bad name too, but only after some objects were applied; and a
//! bad `registryPoll.interval` is accepted by the CRD schema and only fails inside OLM. Checking
//! up front keeps install all-or-nothing and the message next to the flag that caused it.

use olmkit_core::duration;
use olmkit_core::image_ref::ImageRef;
use olmkit_core::k8s_name;
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

/// Checks an RFC 1123 label (namespace names), with apimachinery's `IsDNS1123Label` messages.
pub fn check_dns1123_label(what: &str, s: &str) -> Result<(), InvalidValueError> {
    let problems = k8s_name::dns1123_label_errors(s);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(invalid(what, s, problems.join(", ")))
    }
}

/// Checks an RFC 1123 subdomain (most object names), with apimachinery's `IsDNS1123Subdomain`
/// messages.
pub fn check_dns1123_subdomain(what: &str, s: &str) -> Result<(), InvalidValueError> {
    let problems = k8s_name::dns1123_subdomain_errors(s);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(invalid(what, s, problems.join(", ")))
    }
}

/// Parses a Go `time.ParseDuration` string as OLM parses `registryPoll.interval` (`10m`,
/// `1h30m`, `45s`, `250ms`); the grammar is [`olmkit_core::duration`].
pub fn parse_go_duration(what: &str, s: &str) -> Result<std::time::Duration, InvalidValueError> {
    duration::parse_duration(s).map_err(|e| invalid(what, s, e.to_string()))
}

/// True when an image reference pins a digest (`...@sha256:...`).
pub fn is_digest_ref(image: &str) -> bool {
    image.contains('@')
}

/// Checks that an image reference is one the kubelet and OLM accept (docker's
/// `ParseNormalizedNamed`, [`olmkit_core::image_ref`]) and that it names its registry and a tag
/// or digest, as OLM v1's CEL rules and any pull require.
pub fn check_image_ref(what: &str, image: &str) -> Result<(), InvalidValueError> {
    let parsed = ImageRef::parse(image).map_err(|e| invalid(what, image, e.to_string()))?;
    if parsed.tag.is_none() && parsed.digest.is_none() {
        return Err(invalid(
            what,
            image,
            "needs a tag or a digest (e.g. quay.io/example/catalog:v0.1.0)",
        ));
    }
    // Normalisation would read `catalog:v1` as docker.io/library/catalog; we want it explicit.
    if !image.split('@').next().unwrap_or(image).contains('/') {
        return Err(invalid(
            what,
            image,
            "needs a registry and repository (e.g. quay.io/example/catalog:v0.1.0)",
        ));
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
        let e = check_dns1123_label("--namespace", "a.b").unwrap_err();
        assert_eq!(e.reason, "must not contain dots");
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
        assert_eq!(e.reason, "time: unknown unit \"d\" in duration \"5d\"");
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
        let e = check_image_ref("--catalog-image", "quay.io/Example/cat:v1").unwrap_err();
        assert!(e.reason.contains("must be lowercase"), "{e}");
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
