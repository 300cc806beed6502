//! Container image references (`[registry[:port]/]path[:tag][@digest]`), the docker way.
//!
//! Mirrors github.com/distribution/reference: the grammar of `regexp.go`, `Parse` and
//! `ParseNormalizedNamed` (the function the kubelet, opm's `validateImagePullSpec` and OLM use),
//! including its normalisation (`memcached` is `docker.io/library/memcached`,
//! `index.docker.io` is `docker.io`) and its error texts, plus go-digest's digest validation
//! (`sha256`, `sha384` and `sha512` with their exact lengths). Written by hand over bytes so
//! that `olmkit-core`, and the operator that uses it, need no regex engine.

use std::fmt;

const DEFAULT_DOMAIN: &str = "docker.io";
const LEGACY_DEFAULT_DOMAIN: &str = "index.docker.io";
const OFFICIAL_REPO_PREFIX: &str = "library/";
/// Longest repository path (`RepositoryNameTotalLengthMax`).
pub const REPOSITORY_NAME_MAX_LENGTH: usize = 255;

/// Why a text is not an image reference; the texts are distribution/reference's and go-digest's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseImageRefError {
    /// Outside the grammar (`ErrReferenceInvalidFormat`).
    #[error("invalid reference format")]
    InvalidFormat,
    /// Would parse in lower case (`ErrNameContainsUppercase`).
    #[error("repository name must be lowercase")]
    Uppercase,
    /// The repository part has capitals (`ParseNormalizedNamed`'s own check).
    #[error("invalid reference format: repository name ({0}) must be lowercase")]
    UppercaseRepository(String),
    /// A bare 64-hex-digit name, which docker takes for an image ID.
    #[error("invalid repository name ({0}), cannot specify 64-byte hexadecimal strings")]
    HexName(String),
    /// The path is longer than 255 characters (`ErrNameTooLong`).
    #[error("repository name must not be more than 255 characters")]
    NameTooLong,
    /// A digest that is not `algorithm:hex` (go-digest `ErrDigestInvalidFormat`).
    #[error("invalid checksum digest format")]
    DigestFormat,
    /// A digest of the wrong length for its algorithm (`ErrDigestInvalidLength`).
    #[error("invalid checksum digest length")]
    DigestLength,
    /// A digest algorithm other than sha256/384/512 (`ErrDigestUnsupported`).
    #[error("unsupported digest algorithm")]
    DigestAlgorithm,
}

/// A parsed, normalised image reference. Displays in its full form
/// (`docker.io/library/memcached:1.6`), which parses back to the same value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ImageRef {
    /// Registry host with its port, e.g. `quay.io`, `localhost:5000`, `docker.io`.
    pub domain: String,
    /// Repository path, e.g. `example/memcached-operator`, `library/memcached`.
    pub path: String,
    /// Tag, if given.
    pub tag: Option<String>,
    /// Digest `algorithm:hex`, if given.
    pub digest: Option<String>,
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ImageRef {
    type Err = ParseImageRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl ImageRef {
    /// Parses and normalises `s` as distribution/reference `ParseNormalizedNamed` does.
    pub fn parse(s: &str) -> Result<Self, ParseImageRefError> {
        if s.len() == 64
            && s.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        {
            return Err(ParseImageRefError::HexName(s.to_string()));
        }
        let (domain, remainder) = split_docker_domain(s);
        let remote = remainder.split(':').next().unwrap_or_default();
        if remote.bytes().any(|c| c.is_ascii_uppercase()) {
            return Err(ParseImageRefError::UppercaseRepository(remote.to_string()));
        }
        let parsed = parse_strict(&format!("{domain}/{remainder}"))?;
        Ok(Self {
            // `domain/...` always yields a domain; fall back to it rather than panic.
            domain: parsed.domain.unwrap_or(domain),
            path: parsed.path,
            tag: parsed.tag,
            digest: parsed.digest,
        })
    }

    /// `domain/path`, without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }
}

/// `reference` without its tag and digest, spelled as written (no `docker.io/library/`
/// normalisation): what a Deployment's `image` is compared and rewritten by, where
/// [`ImageRef::parse`] would change the spelling. A `:` before the last `/` is a registry port,
/// not a tag (`localhost:5000/op`), as in distribution/reference's grammar.
pub fn repository_as_written(reference: &str) -> &str {
    let no_digest = reference.split('@').next().unwrap_or(reference);
    let last_slash = no_digest.rfind('/').map_or(0, |i| i + 1);
    match no_digest[last_slash..].rfind(':') {
        Some(i) => &no_digest[..last_slash + i],
        None => no_digest,
    }
}

/// The registry and remainder of a reference, with docker's defaults (`splitDockerDomain`).
fn split_docker_domain(name: &str) -> (String, String) {
    let Some((first, rest)) = name.split_once('/') else {
        return (
            DEFAULT_DOMAIN.to_string(),
            format!("{OFFICIAL_REPO_PREFIX}{name}"),
        );
    };
    let (domain, remote) = if first == "localhost"
        || first.contains(['.', ':'])
        || first.bytes().any(|c| c.is_ascii_uppercase())
    {
        let d = if first == LEGACY_DEFAULT_DOMAIN {
            DEFAULT_DOMAIN
        } else {
            first
        };
        (d.to_string(), rest.to_string())
    } else {
        (DEFAULT_DOMAIN.to_string(), name.to_string())
    };
    if domain == DEFAULT_DOMAIN && !remote.contains('/') {
        return (domain, format!("{OFFICIAL_REPO_PREFIX}{remote}"));
    }
    (domain, remote)
}

/// A reference as `Parse` splits it (no defaults).
struct Strict {
    domain: Option<String>,
    path: String,
    tag: Option<String>,
    digest: Option<String>,
}

/// distribution/reference `Parse`: the grammar, then the length and digest checks.
fn parse_strict(s: &str) -> Result<Strict, ParseImageRefError> {
    // `ErrNameEmpty` cannot happen: the input always starts with `domain/`.
    let Some(r) = match_reference(s) else {
        if match_reference(&s.to_lowercase()).is_some() {
            return Err(ParseImageRefError::Uppercase);
        }
        return Err(ParseImageRefError::InvalidFormat);
    };
    if r.path.len() > REPOSITORY_NAME_MAX_LENGTH {
        return Err(ParseImageRefError::NameTooLong);
    }
    if let Some(d) = &r.digest {
        validate_digest(d)?;
    }
    Ok(r)
}

/// `ReferenceRegexp`: `name(:tag)?(@digest)?` where name is `(domainAndPort/)?remoteName`.
fn match_reference(s: &str) -> Option<Strict> {
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (s, None),
    };
    if digest.is_some_and(|d| !is_digest_pattern(d)) {
        return None;
    }
    // A tag follows the last ':' that no '/' follows; an earlier ':' belongs to the port.
    let after_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[after_slash..].rfind(':') {
        Some(i) => (&rest[..after_slash + i], Some(&rest[after_slash + i + 1..])),
        None => (rest, None),
    };
    if tag.is_some_and(|t| !is_tag(t)) {
        return None;
    }
    // The regex prefers taking the first component as the domain when it can.
    let (domain, path) = match name.split_once('/') {
        Some((d, p)) if is_domain_and_port(d) && is_remote_name(p) => (Some(d), p),
        _ if is_remote_name(name) => (None, name),
        _ => return None,
    };
    Some(Strict {
        domain: domain.map(str::to_string),
        path: path.to_string(),
        tag: tag.map(str::to_string),
        digest: digest.map(str::to_string),
    })
}

/// `[\w][\w.-]{0,127}`.
fn is_tag(t: &str) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    (1..=128).contains(&t.len())
        && t.bytes().next().is_some_and(word)
        && t.bytes().all(|c| word(c) || c == b'.' || c == b'-')
}

/// `pathComponent(/pathComponent)*`.
fn is_remote_name(s: &str) -> bool {
    s.split('/').all(is_path_component)
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`: alphanumeric runs joined by one separator each.
fn is_path_component(s: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    let mut i = 0;
    loop {
        let start = i;
        while i < b.len() && alnum(b[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == b.len() {
            return true;
        }
        let sep_start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &s[sep_start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-')) {
            return false;
        }
    }
}

/// `host(:[0-9]+)?` where host is a dotted domain name or a bracketed IPv6 address.
fn is_domain_and_port(s: &str) -> bool {
    let (host, port) = if s.starts_with('[') {
        let Some(end) = s.find(']') else {
            return false;
        };
        (&s[..=end], &s[end + 1..])
    } else {
        match s.find(':') {
            Some(i) => (&s[..i], &s[i..]),
            None => (s, ""),
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()));
    port_ok && is_host(host)
}

fn is_host(host: &str) -> bool {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !inner.is_empty() && inner.bytes().all(|c| c.is_ascii_hexdigit() || c == b':');
    }
    host.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    })
}

/// `[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[[:xdigit:]]{32,}`.
fn is_digest_pattern(d: &str) -> bool {
    let Some((alg, hex)) = d.split_once(':') else {
        return false;
    };
    let alg_ok = alg.split(['-', '_', '+', '.']).all(|part| {
        part.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
            && part.bytes().all(|c| c.is_ascii_alphanumeric())
    });
    alg_ok && hex.len() >= 32 && hex.bytes().all(|c| c.is_ascii_hexdigit())
}

/// go-digest `Digest.Validate` for a digest that matched the reference grammar.
fn validate_digest(d: &str) -> Result<(), ParseImageRefError> {
    let (alg, hex) = d.split_once(':').ok_or(ParseImageRefError::DigestFormat)?;
    let size = match alg {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ParseImageRefError::DigestAlgorithm),
    };
    if hex.len() != size {
        return Err(ParseImageRefError::DigestLength);
    }
    if !hex
        .bytes()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    {
        return Err(ParseImageRefError::DigestFormat);
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn repository_as_written_drops_only_tag_and_digest() {
        assert_eq!(repository_as_written("quay.io/x/op:0.1.0"), "quay.io/x/op");
        assert_eq!(
            repository_as_written("localhost:5000/x/op"),
            "localhost:5000/x/op"
        );
        assert_eq!(
            repository_as_written("localhost:5000/x/op:v1"),
            "localhost:5000/x/op"
        );
        assert_eq!(repository_as_written("b:v1"), "b");
        assert_eq!(repository_as_written("controller"), "controller");
        let d = format!("quay.io/x/op@sha256:{}", "a".repeat(64));
        assert_eq!(repository_as_written(&d), "quay.io/x/op");
        assert_eq!(
            repository_as_written(&format!("quay.io/x/op:1@sha256:{}", "a".repeat(64))),
            "quay.io/x/op"
        );
    }

    use super::*;
    use proptest::prelude::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn parse(s: &str) -> ImageRef {
        ImageRef::parse(s).unwrap()
    }

    #[test]
    fn normalises_like_docker() {
        let r = parse("memcached");
        assert_eq!(
            (r.domain.as_str(), r.path.as_str()),
            ("docker.io", "library/memcached")
        );
        assert_eq!(r.tag, None);
        assert_eq!(
            parse("memcached:1.6").to_string(),
            "docker.io/library/memcached:1.6"
        );
        assert_eq!(parse("team/app").name(), "docker.io/team/app");
        assert_eq!(parse("index.docker.io/app").name(), "docker.io/library/app");
        assert_eq!(parse("localhost/app").name(), "localhost/app");
        let r = parse("localhost:5000/team/memcached");
        assert_eq!(
            (r.domain.as_str(), r.path.as_str()),
            ("localhost:5000", "team/memcached")
        );
        let r = parse(&format!("registry.example.com:443/a/b/c:v1@{SHA}"));
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.digest.as_deref(), Some(SHA));
        assert_eq!(parse("[::1]:5000/img:tag").domain, "[::1]:5000");
        assert_eq!(parse("Quay.io/x").domain, "Quay.io");
        // `localhost:5000` alone is the image `localhost` with tag `5000`.
        assert_eq!(
            parse("localhost:5000").to_string(),
            "docker.io/library/localhost:5000"
        );
        assert_eq!(parse("a__b.c---d_e/f").path, "a__b.c---d_e/f");
    }

    #[test]
    fn refuses_with_upstream_texts() {
        let e = |s: &str| ImageRef::parse(s).unwrap_err().to_string();
        assert_eq!(e(""), "invalid reference format");
        assert_eq!(
            e("Memcached"),
            "invalid reference format: repository name (library/Memcached) must be lowercase"
        );
        assert_eq!(
            e("UPPER/Case:v1"),
            "invalid reference format: repository name (Case) must be lowercase"
        );
        assert_eq!(e("quay.io/x@sha256:xyz"), "invalid reference format");
        assert_eq!(
            e(&format!("quay.io/x@sha256:{}", "A".repeat(64))),
            "invalid checksum digest format"
        );
        assert_eq!(
            e(&format!("quay.io/x@sha256:{}", "a".repeat(40))),
            "invalid checksum digest length"
        );
        assert_eq!(
            e(&format!("quay.io/x@md5:{}", "a".repeat(32))),
            "unsupported digest algorithm"
        );
        assert_eq!(
            e(&"a".repeat(64)),
            format!(
                "invalid repository name ({}), cannot specify 64-byte hexadecimal strings",
                "a".repeat(64)
            )
        );
        assert_eq!(
            e(&format!("quay.io/{}", "a".repeat(256))),
            "repository name must not be more than 255 characters"
        );
        for bad in [
            "memcached:",
            "a//b",
            "-a",
            "img:tag with space",
            "UPPER.io:x/y",
            "img::tag",
            "a/b/",
            "a_-b",
            "quay.io:/x",
            "[::1/x",
            "x:-tag",
            &format!("x:{}", "t".repeat(129)),
        ] {
            assert!(ImageRef::parse(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,80}") {
            let _ = ImageRef::parse(&s);
        }

        #[test]
        fn display_parses_back(
            domain in "(localhost|[a-z]([a-z0-9-]{0,6}[a-z0-9])?\\.[a-z]{2,4})(:[0-9]{1,5})?",
            path in "[a-z0-9]{1,8}((__|[._]|-{1,2})[a-z0-9]{1,8}){0,2}(/[a-z0-9]{1,8}){0,2}",
            tag in proptest::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}"),
            hex in proptest::option::of("[0-9a-f]{64}"),
        ) {
            // docker.io would gain `library/` on a one-part path.
            prop_assume!(!domain.starts_with("docker.io"));
            let r = ImageRef { domain, path, tag, digest: hex.map(|h| format!("sha256:{h}")) };
            prop_assert_eq!(ImageRef::parse(&r.to_string()), Ok(r.clone()));
        }
    }
}
