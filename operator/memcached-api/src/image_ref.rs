//! Parsing of container image references (`[registry/]path[:tag][@digest]`).
//!
//! The operator refuses a spec whose image it cannot parse instead of handing the kubelet a
//! reference that fails at pull time. The grammar is the kubelet's own (distribution/reference
//! `ParseNormalizedNamed`); its one implementation is [`olmkit_core::image_ref`], shared with
//! bundle-tool, so the operator and the tools that package it agree on every reference.

pub use olmkit_core::image_ref::{ImageRef, ParseImageRefError};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_common_forms() {
        for ok in [
            "memcached",
            "memcached:1.6",
            "docker.io/library/memcached:1.6.39-alpine",
            "localhost:5000/team/memcached",
            "quay.io/org/img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "registry.example.com:443/a/b/c:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "[::1]:5000/img:tag",
        ] {
            assert!(ImageRef::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "Memcached",
            "memcached:",
            "a//b",
            "-a",
            "img@sha256:xyz",
            "img:tag with space",
            "UPPER.io:x/y",
            "img::tag",
        ] {
            assert!(ImageRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn splits_and_normalises_like_the_kubelet() {
        let r = ImageRef::parse("docker.io/library/memcached:1.6").unwrap();
        assert_eq!(r.domain, "docker.io");
        assert_eq!(r.path, "library/memcached");
        assert_eq!(r.tag.as_deref(), Some("1.6"));
        assert_eq!(ImageRef::parse("memcached:1.6").unwrap(), r);
    }
}
