//! Hub-and-spoke conversion between the served versions of a custom resource.
//!
//! Kubernetes calls a CRD's conversion webhook with objects of any served version and the
//! version it wants back. Converting every pair directly grows quadratically with the number of
//! versions; controller-runtime's answer (`conversion.Hub` / `conversion.Convertible`) is one
//! *hub* version (usually the storage version) and, for every other version (a *spoke*), one
//! conversion to the hub and one from it. This module is that framework for kube-rs types:
//!
//! - implement [`Spoke<Hub>`] for each spoke type (`into_hub`, `from_hub`);
//! - list them in a [`HubAndSpoke`]; it converts raw objects (JSON text, as a ConversionReview
//!   carries them) between any two served versions through the hub, checks group, kind and
//!   version, names the field serde could not read, and copies an object already in the
//!   desired version through byte for byte;
//! - hand it to the webhook server (`webhook`, feature `manager`) as a [`Converter`].
//!
//! Lossless round trips are the spoke's business: a spoke that cannot express a hub field keeps
//! it somewhere (the Memcached operator stores such fields in an annotation; see
//! [`preserved`]) and puts it back on the way up. Problems that must not fail a conversion are
//! returned as warnings for the caller to log.
//!
//! ```
//! use olmkit_runtime::conversion::{Converted, Converter, HubAndSpoke, Spoke};
//!
//! mod v1 {
//!     use kube::CustomResource;
//!     use schemars::JsonSchema;
//!     use serde::{Deserialize, Serialize};
//!     #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
//!     #[kube(group = "demo.example.com", version = "v1", kind = "Widget", namespaced)]
//!     pub struct WidgetSpec { pub replicas: i32 }
//! }
//! mod v1alpha1 {
//!     use kube::CustomResource;
//!     use schemars::JsonSchema;
//!     use serde::{Deserialize, Serialize};
//!     #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
//!     #[kube(group = "demo.example.com", version = "v1alpha1", kind = "Widget", namespaced)]
//!     pub struct WidgetSpec { pub size: i32 }
//! }
//!
//! impl Spoke<v1::Widget> for v1alpha1::Widget {
//!     fn into_hub(self) -> Converted<v1::Widget> {
//!         Converted::clean(v1::Widget {
//!             metadata: self.metadata,
//!             spec: v1::WidgetSpec { replicas: self.spec.size },
//!         })
//!     }
//!     fn from_hub(hub: v1::Widget) -> Self {
//!         v1alpha1::Widget {
//!             metadata: hub.metadata,
//!             spec: v1alpha1::WidgetSpec { size: hub.spec.replicas },
//!         }
//!     }
//! }
//!
//! let widgets = HubAndSpoke::<v1::Widget>::new().spoke::<v1alpha1::Widget>();
//! let old = r#"{"apiVersion":"demo.example.com/v1alpha1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":3}}"#;
//! let new = widgets.convert_str(old, "demo.example.com/v1").unwrap();
//! assert!(new.object.contains(r#""replicas":3"#));
//! ```

pub mod preserved;

use std::borrow::Cow;
use std::fmt;

use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The result of a conversion and what it noticed on the way.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted<T> {
    /// The converted object.
    pub object: T,
    /// Problems that did not stop the conversion (the webhook logs them).
    pub warnings: Vec<String>,
}

impl<T> Converted<T> {
    /// A conversion that noticed nothing.
    pub fn clean(object: T) -> Self {
        Self {
            object,
            warnings: Vec::new(),
        }
    }

    /// Converts the object, keeping the warnings.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Converted<U> {
        Converted {
            object: f(self.object),
            warnings: self.warnings,
        }
    }
}

/// A served version other than the hub: converts to the hub and back.
///
/// `from_hub(into_hub(x))` must give `x` back (and `into_hub(from_hub(h))` must give `h`):
/// the API server converts objects on every read and write in another version, so anything lost
/// on the way is lost for good.
pub trait Spoke<H>: Resource<DynamicType = ()> + Serialize + DeserializeOwned {
    /// This version's object as the hub version.
    fn into_hub(self) -> Converted<H>;
    /// A hub object as this version.
    fn from_hub(hub: H) -> Self;
}

/// Why one object could not be converted. The messages name group, kind and versions, as the
/// API server shows them to the user.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The object is not a JSON object.
    #[error("object is not a JSON object")]
    NotAnObject,
    /// `apiVersion` is missing or not a string.
    #[error("object has no apiVersion string")]
    MissingApiVersion,
    /// No `group/` prefix (core-group objects such as `v1` Pods end up here).
    #[error("apiVersion {api_version:?} has no group; expected {group}/<version>")]
    NoGroup {
        /// The rejected value.
        api_version: String,
        /// The resource's group.
        group: String,
    },
    /// Another API group.
    #[error("apiVersion {api_version:?} is not in group {group}")]
    ForeignGroup {
        /// The rejected value.
        api_version: String,
        /// The resource's group.
        group: String,
    },
    /// The right group but a version that is not served.
    #[error("apiVersion {api_version:?} is not a served version ({served})")]
    UnknownVersion {
        /// The rejected value.
        api_version: String,
        /// The served versions, comma-separated, oldest first.
        served: String,
    },
    /// `kind` is not the resource's kind.
    #[error("kind {found:?} is not {kind}")]
    WrongKind {
        /// The kind found (empty when missing).
        found: String,
        /// The resource's kind.
        kind: String,
    },
    /// The object does not fit the schema of its version.
    #[error("not a valid {group}/{version} {kind}: {source}")]
    Malformed {
        /// The resource's group.
        group: String,
        /// The version the object claims.
        version: String,
        /// The resource's kind.
        kind: String,
        /// What serde found wrong, with the field.
        source: serde_json::Error,
    },
    /// The converted object could not be encoded (a bug, not bad input).
    #[error("cannot encode the converted object: {0}")]
    Encode(serde_json::Error),
}

/// What a conversion webhook needs from the resource's versions, object-safe.
pub trait Converter: Send + Sync {
    /// The API group.
    fn group(&self) -> &str;
    /// The kind.
    fn kind(&self) -> &str;
    /// Served versions, oldest first, the hub last.
    fn versions(&self) -> Vec<&str>;
    /// Checks that `api_version` (`group/version`) is served; the error says why not.
    fn check_api_version(&self, api_version: &str) -> Result<(), ConvertError>;
    /// Converts one object given as JSON text to `desired_api_version`, returning JSON text (the
    /// same text when it already is in that version).
    fn convert_str<'a>(
        &self,
        object: &'a str,
        desired_api_version: &str,
    ) -> Result<Converted<Cow<'a, str>>, ConvertError>;
}

type Up<H> = fn(&str) -> Result<Converted<H>, serde_json::Error>;
type Down<H> = fn(H) -> Result<String, serde_json::Error>;

struct SpokeEntry<H> {
    version: String,
    up: Up<H>,
    down: Down<H>,
}

/// The served versions of one resource: the hub `H` and its spokes.
pub struct HubAndSpoke<H> {
    group: String,
    kind: String,
    hub_version: String,
    spokes: Vec<SpokeEntry<H>>,
}

impl<H> fmt::Debug for HubAndSpoke<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubAndSpoke")
            .field("group", &self.group)
            .field("kind", &self.kind)
            .field("hub", &self.hub_version)
            .field(
                "spokes",
                &self.spokes.iter().map(|s| &s.version).collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn up<H, S: Spoke<H>>(text: &str) -> Result<Converted<H>, serde_json::Error> {
    serde_json::from_str::<S>(text).map(S::into_hub)
}

fn down<H, S: Spoke<H>>(hub: H) -> Result<String, serde_json::Error> {
    serde_json::to_string(&S::from_hub(hub))
}

/// Whether the JSON text `text` is an object: its first byte after JSON's whitespace is `{`.
pub(crate) fn opens_an_object(text: &str) -> bool {
    text.trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
}

/// The fields that say what an object is, read without building the rest.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "apiVersion", default, borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
}

impl<H> HubAndSpoke<H>
where
    H: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
{
    /// The hub alone; add spokes with [`HubAndSpoke::spoke`].
    pub fn new() -> Self {
        Self {
            group: H::group(&()).into_owned(),
            kind: H::kind(&()).into_owned(),
            hub_version: H::version(&()).into_owned(),
            spokes: Vec::new(),
        }
    }

    /// Adds a spoke version (list them oldest first).
    ///
    /// # Panics
    /// When `S` is of another group or kind than the hub, or its version is already listed: a
    /// programming error the operator's own tests hit at once.
    #[must_use]
    pub fn spoke<S: Spoke<H>>(mut self) -> Self {
        assert_eq!(S::group(&()), self.group.as_str(), "spoke of another group");
        assert_eq!(S::kind(&()), self.kind.as_str(), "spoke of another kind");
        let version = S::version(&()).into_owned();
        assert!(
            !self.served_versions().contains(&version.as_str()),
            "version {version} listed twice"
        );
        self.spokes.push(SpokeEntry {
            version,
            up: up::<H, S>,
            down: down::<H, S>,
        });
        self
    }

    /// Served versions, oldest first, the hub last.
    pub fn served_versions(&self) -> Vec<&str> {
        self.spokes
            .iter()
            .map(|s| s.version.as_str())
            .chain(std::iter::once(self.hub_version.as_str()))
            .collect()
    }

    fn served(&self) -> String {
        self.served_versions().join(", ")
    }

    /// The served version an `apiVersion` names.
    fn version_of<'v>(&'v self, api_version: &str) -> Result<&'v str, ConvertError> {
        let Some((group, version)) = api_version.split_once('/') else {
            return Err(ConvertError::NoGroup {
                api_version: api_version.to_string(),
                group: self.group.clone(),
            });
        };
        if group != self.group {
            return Err(ConvertError::ForeignGroup {
                api_version: api_version.to_string(),
                group: self.group.clone(),
            });
        }
        self.served_versions()
            .into_iter()
            .find(|v| *v == version)
            .ok_or_else(|| ConvertError::UnknownVersion {
                api_version: api_version.to_string(),
                served: self.served(),
            })
    }

    fn malformed(&self, version: &str, source: serde_json::Error) -> ConvertError {
        ConvertError::Malformed {
            group: self.group.clone(),
            version: version.to_string(),
            kind: self.kind.clone(),
            source,
        }
    }

    /// Reads `text` (of `version`) as the hub.
    fn read_as_hub(&self, text: &str, version: &str) -> Result<Converted<H>, ConvertError> {
        if version == self.hub_version {
            return serde_json::from_str(text)
                .map(Converted::clean)
                .map_err(|e| self.malformed(version, e));
        }
        let spoke = self.spokes.iter().find(|s| s.version == version);
        match spoke {
            Some(s) => (s.up)(text).map_err(|e| self.malformed(version, e)),
            None => Err(ConvertError::UnknownVersion {
                api_version: format!("{}/{version}", self.group),
                served: self.served(),
            }),
        }
    }

    /// Writes the hub as `version`.
    fn write_hub_as(&self, hub: H, version: &str) -> Result<String, ConvertError> {
        if version == self.hub_version {
            return serde_json::to_string(&hub).map_err(ConvertError::Encode);
        }
        let spoke = self.spokes.iter().find(|s| s.version == version);
        match spoke {
            Some(s) => (s.down)(hub).map_err(ConvertError::Encode),
            None => Err(ConvertError::UnknownVersion {
                api_version: format!("{}/{version}", self.group),
                served: self.served(),
            }),
        }
    }

    /// The served version `object` claims, checking its kind.
    fn source_version<'v>(&'v self, object: &str) -> Result<&'v str, ConvertError> {
        // A text that does not open with `{` is no object, whatever follows: said without a
        // parse error, which serde_json formats into a message even when nobody reads it (a
        // review of 1.5 million `0`s is one of the webhook's load tests).
        if !opens_an_object(object) {
            return Err(ConvertError::NotAnObject);
        }
        let head: Head<'_> = match serde_json::from_str(object) {
            Ok(head) => head,
            Err(_) => return Err(self.head_problem(object)),
        };
        let api_version = head.api_version.ok_or(ConvertError::MissingApiVersion)?;
        let version = self.version_of(&api_version)?;
        match head.kind.as_deref() {
            Some(k) if k == self.kind => Ok(version),
            other => Err(ConvertError::WrongKind {
                found: other.unwrap_or_default().to_string(),
                kind: self.kind.clone(),
            }),
        }
    }

    /// Why the head of `object` could not be read: not an object, `apiVersion` not a string,
    /// or (the version being served) `kind` not a string.
    fn head_problem(&self, object: &str) -> ConvertError {
        match serde_json::from_str::<serde_json::Value>(object) {
            Ok(serde_json::Value::Object(map)) => match map.get("apiVersion") {
                Some(serde_json::Value::String(api_version)) => {
                    match self.version_of(api_version) {
                        Err(e) => e,
                        Ok(_) => ConvertError::WrongKind {
                            found: String::new(),
                            kind: self.kind.clone(),
                        },
                    }
                }
                _ => ConvertError::MissingApiVersion,
            },
            _ => ConvertError::NotAnObject,
        }
    }
}

impl<H> Default for HubAndSpoke<H>
where
    H: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<H> Converter for HubAndSpoke<H>
where
    H: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync,
{
    fn group(&self) -> &str {
        &self.group
    }

    fn kind(&self) -> &str {
        &self.kind
    }

    fn versions(&self) -> Vec<&str> {
        self.served_versions()
    }

    fn check_api_version(&self, api_version: &str) -> Result<(), ConvertError> {
        self.version_of(api_version).map(|_| ())
    }

    fn convert_str<'a>(
        &self,
        object: &'a str,
        desired_api_version: &str,
    ) -> Result<Converted<Cow<'a, str>>, ConvertError> {
        let target = self.version_of(desired_api_version)?;
        let source = self.source_version(object)?;
        if source == target {
            return Ok(Converted::clean(Cow::Borrowed(object)));
        }
        let hub = self.read_as_hub(object, source)?;
        let warnings = hub.warnings;
        let text = self.write_hub_as(hub.object, target)?;
        Ok(Converted {
            object: Cow::Owned(text),
            warnings,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
