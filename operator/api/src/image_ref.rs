//! Parsing of container image references (`[registry/]path[:tag][@digest]`).
//!
//! The operator refuses a spec whose image it cannot parse instead of handing the kubelet a
//! reference that fails at pull time; the grammar follows the distribution reference format.

use thiserror::Error;

/// A parsed image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host (with port), if the reference names one.
    pub registry: Option<String>,
    /// Repository path.
    pub repository: String,
    /// Tag, if any.
    pub tag: Option<String>,
    /// Digest (`algorithm:hex`), if any.
    pub digest: Option<String>,
}

/// Why a string is not an image reference.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ParseImageRefError {
    /// The reference is empty.
    #[error("image reference is empty")]
    Empty,
    /// The reference is longer than 255 characters in its name part.
    #[error("image name is longer than 255 characters")]
    TooLong,
    /// The reference contains characters or structure outside the grammar.
    #[error("invalid image reference {0:?}: {1}")]
    Invalid(String, &'static str),
}

fn is_path_component(s: &str) -> bool {
    // [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
    if s.is_empty() {
        return false;
    }
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if alnum(c) {
            i += 1;
            continue;
        }
        // separator
        let start = i;
        if c == b'.' {
            i += 1;
        } else if c == b'_' {
            i += 1;
            if i < b.len() && b[i] == b'_' {
                i += 1;
            }
        } else if c == b'-' {
            while i < b.len() && b[i] == b'-' {
                i += 1;
            }
        } else {
            return false;
        }
        if i == start || i >= b.len() || !alnum(b[i]) {
            return false;
        }
    }
    true
}

fn is_registry(s: &str) -> bool {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(']') || h.ends_with(']') => (h, Some(p)),
        _ => (s, None),
    };
    if let Some(p) = port
        && (p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()))
    {
        return false;
    }
    if host.starts_with('[') && host.ends_with(']') {
        return host.len() > 2;
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

impl ImageRef {
    /// Parses `s` as an image reference.
    pub fn parse(s: &str) -> Result<Self, ParseImageRefError> {
        if s.is_empty() {
            return Err(ParseImageRefError::Empty);
        }
        let invalid = |why| ParseImageRefError::Invalid(s.to_string(), why);
        let (rest, digest) = match s.split_once('@') {
            Some((r, d)) => {
                let (alg, hex) = d
                    .split_once(':')
                    .ok_or_else(|| invalid("digest has no algorithm"))?;
                let alg_ok = !alg.is_empty()
                    && alg.bytes().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || b"+._-".contains(&c)
                    });
                let hex_ok = hex.len() >= 32
                    && hex
                        .bytes()
                        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
                if !alg_ok || !hex_ok {
                    return Err(invalid("malformed digest"));
                }
                (r, Some(d.to_string()))
            }
            None => (s, None),
        };
        // A tag follows the last ':' after the last '/'.
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let tag = &rest[last_slash + i + 1..];
                let ok = !tag.is_empty()
                    && tag.len() <= 128
                    && tag.as_bytes()[0] != b'.'
                    && tag.as_bytes()[0] != b'-'
                    && tag
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c));
                if !ok {
                    return Err(invalid("malformed tag"));
                }
                (&rest[..last_slash + i], Some(tag.to_string()))
            }
            None => (rest, None),
        };
        if name.len() > 255 {
            return Err(ParseImageRefError::TooLong);
        }
        let mut parts: Vec<&str> = name.split('/').collect();
        let registry = if parts.len() > 1
            && (parts[0].contains('.')
                || parts[0].contains(':')
                || parts[0] == "localhost"
                || parts[0].bytes().any(|c| c.is_ascii_uppercase()))
        {
            let r = parts.remove(0);
            if !is_registry(r) {
                return Err(invalid("malformed registry host"));
            }
            Some(r.to_string())
        } else {
            None
        };
        if parts.iter().any(|p| !is_path_component(p)) {
            return Err(invalid(
                "repository path must be lowercase letters, digits and separators",
            ));
        }
        Ok(ImageRef {
            registry,
            repository: parts.join("/"),
            tag,
            digest,
        })
    }
}

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
    fn splits_parts() {
        let r = ImageRef::parse("docker.io/library/memcached:1.6").unwrap();
        assert_eq!(r.registry.as_deref(), Some("docker.io"));
        assert_eq!(r.repository, "library/memcached");
        assert_eq!(r.tag.as_deref(), Some("1.6"));
    }
}
