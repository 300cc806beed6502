//! Content digests (`sha256:<64 hex>`), the identity of every blob, layer and manifest.
//!
//! Only sha256 is produced and accepted: it is what the OCI image spec requires registries and
//! tools to support, and what every digest we compute or compare must be.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// A sha256 content digest.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest {
    hex: String,
}

/// A string is not a `sha256:<64 lowercase hex>` digest.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid digest {0:?}: expected sha256:<64 lowercase hex digits>")]
pub struct ParseDigestError(pub String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self {
            hex: hex::encode(Sha256::digest(bytes)),
        }
    }

    /// The 64 hex digits, without the algorithm.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// Short form for display (`sha256:0123456789ab`).
    pub fn short(&self) -> String {
        format!("sha256:{}", &self.hex[..12])
    }

    /// Converts to the oci-spec type.
    pub fn to_oci(&self) -> oci_spec::image::Digest {
        oci_spec::image::Digest::from_str(&self.to_string()).expect(
            "invariant: a Digest always holds 64 lowercase hex digits, which oci-spec accepts",
        )
    }
}

/// A streaming sha256 for content too large to hold twice.
#[derive(Default)]
pub struct Hasher(Sha256);

impl Hasher {
    /// A new hasher.
    pub fn new() -> Self {
        Self::default()
    }
    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    /// The digest of everything fed.
    pub fn finish(self) -> Digest {
        Digest {
            hex: hex::encode(self.0.finalize()),
        }
    }
}

impl fmt::Debug for Hasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hasher")
    }
}

impl std::io::Write for Hasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl FromStr for Digest {
    type Err = ParseDigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| ParseDigestError(s.to_string()))?;
        if hex.len() == 64 && hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Self {
                hex: hex.to_string(),
            })
        } else {
            Err(ParseDigestError(s.to_string()))
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest(sha256:{})", self.hex)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_value_and_roundtrip() {
        let d = Digest::of(b"");
        assert_eq!(
            d.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(d.to_string().parse::<Digest>().unwrap(), d);
        assert_eq!(d.to_oci().to_string(), d.to_string());
        let mut h = Hasher::new();
        h.update(b"ab");
        h.update(b"c");
        assert_eq!(h.finish(), Digest::of(b"abc"));
    }

    #[test]
    fn rejects_malformed() {
        for s in [
            "",
            "sha256:",
            "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
        ] {
            assert!(s.parse::<Digest>().is_err(), "{s}");
        }
    }
}
