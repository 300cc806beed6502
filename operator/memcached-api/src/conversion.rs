//! Lossless conversion between the served versions, hub-and-spoke through v1.
//!
//! Owns the conversion rules between `v1alpha1`, `v1beta1` and `v1` (the hub), both typed
//! ([`v1alpha1_to_v1`], [`v1_to_v1beta1`], [`AnyMemcached::convert`], ...) and on raw JSON objects
//! as a ConversionReview carries them ([`convert_json`]). Everything here is pure: no I/O, no
//! logging; problems that must not fail a conversion come back as [`ConversionWarning`]s for the
//! caller to log.
//!
//! Rules:
//! - Every conversion goes through v1. A spoke (`v1alpha1`, `v1beta1`) converted from v1 keeps the
//!   v1 fields it cannot express in the operator-owned annotation [`crate::CONVERSION_ANNOTATION`]
//!   (a JSON document shaped like the v1 object, holding only those fields); converting the spoke
//!   back to v1 restores them and removes the annotation. Only values that the way back would not
//!   rebuild by itself are stored: a field at its schema default, an absent optional field or an
//!   empty list is not, so objects that lose nothing carry no annotation.
//! - `v1alpha1.spec.size` is `v1.spec.replicas`, copied as is. Both versions share the schema bounds
//!   (0..=1000); an out-of-range value that reached storage some other way is carried over
//!   unchanged rather than clamped, so nothing is silently rewritten and the operator's validation
//!   reports it.
//! - Metadata is carried over unchanged (the API server rejects a conversion that changes
//!   anything but labels and annotations) except for the conversion annotation.
//! - A v1 object that itself carries the conversion annotation (a user copied it, or set a value of
//!   their own) keeps it: the value is stored inside the spoke's annotation and put back on the way
//!   up, so even a colliding user annotation survives round trips.
//! - A spoke whose conversion annotation does not parse converts as if the annotation were absent
//!   (v1-only fields take their defaults) and keeps the unreadable value on the v1 object, with a
//!   [`ConversionWarning`]; failing instead would make the object unreadable in every version.
//! - Fields a spoke has natively always win over the same field inside the annotation.
//!
//! Known limit: an `annotations: {}` map that becomes empty after the conversion annotation is
//! removed comes back absent. The API server never sends empty metadata maps (they are omitted on
//! encoding), so the difference cannot be observed through it.

mod preserved;
mod spokes;

#[cfg(test)]
mod strategies;
#[cfg(test)]
mod tests;

use serde_json::Value;
use std::fmt;
use std::str::FromStr;

pub use spokes::{v1_to_v1alpha1, v1_to_v1beta1, v1alpha1_to_v1, v1beta1_to_v1};

/// A served version of the Memcached resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// `cache.example.com/v1alpha1`.
    V1alpha1,
    /// `cache.example.com/v1beta1`.
    V1beta1,
    /// `cache.example.com/v1`, the hub and storage version.
    V1,
}

impl Version {
    /// Every served version, oldest first.
    pub const ALL: [Version; 3] = [Version::V1alpha1, Version::V1beta1, Version::V1];

    /// The bare version, e.g. `v1beta1`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1alpha1 => "v1alpha1",
            Version::V1beta1 => "v1beta1",
            Version::V1 => "v1",
        }
    }

    /// The full `apiVersion`, e.g. `cache.example.com/v1beta1`.
    pub fn api_version(self) -> &'static str {
        match self {
            Version::V1alpha1 => "cache.example.com/v1alpha1",
            Version::V1beta1 => "cache.example.com/v1beta1",
            Version::V1 => "cache.example.com/v1",
        }
    }

    /// Parses a full `apiVersion` such as `cache.example.com/v1`.
    pub fn from_api_version(api_version: &str) -> Result<Self, ParseApiVersionError> {
        let Some((group, version)) = api_version.split_once('/') else {
            return Err(ParseApiVersionError::NoGroup {
                api_version: api_version.to_string(),
            });
        };
        if group != crate::GROUP {
            return Err(ParseApiVersionError::ForeignGroup {
                api_version: api_version.to_string(),
            });
        }
        version
            .parse()
            .map_err(|_| ParseApiVersionError::UnknownVersion {
                api_version: api_version.to_string(),
            })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Version {
    type Err = ParseApiVersionError;

    /// Parses a bare version such as `v1alpha1`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "v1alpha1" => Ok(Version::V1alpha1),
            "v1beta1" => Ok(Version::V1beta1),
            "v1" => Ok(Version::V1),
            other => Err(ParseApiVersionError::UnknownVersion {
                api_version: other.to_string(),
            }),
        }
    }
}

/// An `apiVersion` that names no served version of the Memcached resource.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseApiVersionError {
    /// No `group/` prefix (core-group objects such as `v1` Pods end up here).
    #[error("apiVersion {api_version:?} has no group; expected cache.example.com/<version>")]
    NoGroup {
        /// The rejected value.
        api_version: String,
    },
    /// Another API group.
    #[error("apiVersion {api_version:?} is not in group cache.example.com")]
    ForeignGroup {
        /// The rejected value.
        api_version: String,
    },
    /// The right group but a version this build does not serve.
    #[error("apiVersion {api_version:?} is not a served version (v1alpha1, v1beta1, v1)")]
    UnknownVersion {
        /// The rejected value.
        api_version: String,
    },
}

/// Something a conversion noticed but did not fail on; callers log it (it reaches them as the
/// message text in [`Converted::warnings`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConversionWarning {
    /// The conversion annotation on a spoke does not parse: the v1-only fields took their
    /// defaults and the value was kept verbatim on the v1 object.
    #[error(
        "annotation {annotation} does not parse ({reason}); v1-only fields take their defaults and the value is kept as is",
        annotation = crate::CONVERSION_ANNOTATION
    )]
    UnreadableAnnotation {
        /// Why it does not parse.
        reason: String,
    },
}

pub use olmkit_runtime::conversion::{ConvertError as ConvertObjectError, Converted};
use olmkit_runtime::conversion::{Converter, HubAndSpoke, Spoke};

impl Spoke<crate::v1::Memcached> for crate::v1alpha1::Memcached {
    fn into_hub(self) -> Converted<crate::v1::Memcached> {
        v1alpha1_to_v1(self)
    }
    fn from_hub(hub: crate::v1::Memcached) -> Self {
        v1_to_v1alpha1(hub)
    }
}

impl Spoke<crate::v1::Memcached> for crate::v1beta1::Memcached {
    fn into_hub(self) -> Converted<crate::v1::Memcached> {
        v1beta1_to_v1(self)
    }
    fn from_hub(hub: crate::v1::Memcached) -> Self {
        v1_to_v1beta1(hub)
    }
}

/// The served versions of Memcached for the conversion webhook: v1 the hub, v1alpha1 and
/// v1beta1 its spokes.
pub fn converter() -> HubAndSpoke<crate::v1::Memcached> {
    HubAndSpoke::new()
        .spoke::<crate::v1alpha1::Memcached>()
        .spoke::<crate::v1beta1::Memcached>()
}

static CONVERTER: std::sync::LazyLock<HubAndSpoke<crate::v1::Memcached>> =
    std::sync::LazyLock::new(converter);

/// A Memcached object of any served version.
// Objects move through here once per conversion; boxing the v1 variant would cost an allocation
// on the hot path for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum AnyMemcached {
    /// A `v1alpha1` object.
    V1alpha1(crate::v1alpha1::Memcached),
    /// A `v1beta1` object.
    V1beta1(crate::v1beta1::Memcached),
    /// A `v1` object.
    V1(crate::v1::Memcached),
}

impl AnyMemcached {
    /// The version of the object.
    pub fn version(&self) -> Version {
        match self {
            AnyMemcached::V1alpha1(_) => Version::V1alpha1,
            AnyMemcached::V1beta1(_) => Version::V1beta1,
            AnyMemcached::V1(_) => Version::V1,
        }
    }

    /// Converts to the hub version.
    pub fn into_hub(self) -> Converted<crate::v1::Memcached> {
        match self {
            AnyMemcached::V1alpha1(o) => v1alpha1_to_v1(o),
            AnyMemcached::V1beta1(o) => v1beta1_to_v1(o),
            AnyMemcached::V1(o) => Converted::clean(o),
        }
    }

    /// Converts a hub object to `target`.
    pub fn from_hub(hub: crate::v1::Memcached, target: Version) -> Self {
        match target {
            Version::V1alpha1 => AnyMemcached::V1alpha1(v1_to_v1alpha1(hub)),
            Version::V1beta1 => AnyMemcached::V1beta1(v1_to_v1beta1(hub)),
            Version::V1 => AnyMemcached::V1(hub),
        }
    }

    /// Converts to `target` through the hub; converting to the object's own version returns it
    /// unchanged.
    pub fn convert(self, target: Version) -> Converted<AnyMemcached> {
        if self.version() == target {
            return Converted::clean(self);
        }
        self.into_hub().map(|hub| Self::from_hub(hub, target))
    }

    /// Reads an object of the version its `apiVersion` names.
    pub fn from_json(object: Value) -> Result<Self, ConvertObjectError> {
        let version = source_version(&object)?;
        Self::from_json_as(object, version)
    }

    fn from_json_as(object: Value, version: Version) -> Result<Self, ConvertObjectError> {
        let malformed = |source| ConvertObjectError::Malformed {
            group: crate::GROUP.to_string(),
            version: version.as_str().to_string(),
            kind: crate::KIND.to_string(),
            source,
        };
        Ok(match version {
            Version::V1alpha1 => {
                AnyMemcached::V1alpha1(serde_json::from_value(object).map_err(malformed)?)
            }
            Version::V1beta1 => {
                AnyMemcached::V1beta1(serde_json::from_value(object).map_err(malformed)?)
            }
            Version::V1 => AnyMemcached::V1(serde_json::from_value(object).map_err(malformed)?),
        })
    }

    /// The object as JSON, with `apiVersion` and `kind`.
    pub fn to_json(&self) -> Result<Value, ConvertObjectError> {
        match self {
            AnyMemcached::V1alpha1(o) => serde_json::to_value(o),
            AnyMemcached::V1beta1(o) => serde_json::to_value(o),
            AnyMemcached::V1(o) => serde_json::to_value(o),
        }
        .map_err(ConvertObjectError::Encode)
    }
}

impl serde::Serialize for AnyMemcached {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AnyMemcached::V1alpha1(o) => o.serialize(serializer),
            AnyMemcached::V1beta1(o) => o.serialize(serializer),
            AnyMemcached::V1(o) => o.serialize(serializer),
        }
    }
}

impl From<crate::v1alpha1::Memcached> for AnyMemcached {
    fn from(o: crate::v1alpha1::Memcached) -> Self {
        AnyMemcached::V1alpha1(o)
    }
}
impl From<crate::v1beta1::Memcached> for AnyMemcached {
    fn from(o: crate::v1beta1::Memcached) -> Self {
        AnyMemcached::V1beta1(o)
    }
}
impl From<crate::v1::Memcached> for AnyMemcached {
    fn from(o: crate::v1::Memcached) -> Self {
        AnyMemcached::V1(o)
    }
}

/// The served version a raw object claims, checking group and kind.
pub fn source_version(object: &Value) -> Result<Version, ConvertObjectError> {
    let text = serde_json::to_string(object).map_err(ConvertObjectError::Encode)?;
    let map = object.as_object().ok_or(ConvertObjectError::NotAnObject)?;
    let api_version = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or(ConvertObjectError::MissingApiVersion)?;
    CONVERTER.check_api_version(api_version)?;
    // Converting to its own version checks the kind and returns the text untouched.
    CONVERTER.convert_str(&text, api_version)?;
    Version::from_api_version(api_version).map_err(|_| ConvertObjectError::NotAnObject)
}

/// Converts one raw object, as found in a ConversionReview, to `target`.
///
/// An object already in `target` comes back untouched (not re-encoded).
pub fn convert_json(
    object: Value,
    target: Version,
) -> Result<Converted<Value>, ConvertObjectError> {
    let text = serde_json::to_string(&object).map_err(ConvertObjectError::Encode)?;
    let converted = CONVERTER.convert_str(&text, target.api_version())?;
    if matches!(converted.object, std::borrow::Cow::Borrowed(_)) {
        return Ok(Converted::clean(object));
    }
    let value = serde_json::from_str(&converted.object).map_err(ConvertObjectError::Encode)?;
    Ok(Converted {
        object: value,
        warnings: converted.warnings,
    })
}

/// Converts one object given as JSON text to `target`, returning JSON text: the webhook's path
/// (`olmkit_runtime::conversion::HubAndSpoke` over [`converter`]); an object already in `target`
/// comes back as the same text.
pub fn convert_json_str(
    object: &str,
    target: Version,
) -> Result<Converted<std::borrow::Cow<'_, str>>, ConvertObjectError> {
    CONVERTER.convert_str(object, target.api_version())
}
