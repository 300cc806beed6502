//! Which namespaces the controller watches, from `WATCH_NAMESPACE`.
//!
//! OLM passes the namespaces of the OperatorGroup in the `olm.targetNamespaces` annotation of the
//! operator's Deployment, which the manifest maps to `WATCH_NAMESPACE` with the downward API:
//! empty for AllNamespaces, one name for OwnNamespace/SingleNamespace, a comma-separated list for
//! MultiNamespace.

use thiserror::Error;

/// The namespaces the controller watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchScope {
    /// Every namespace (cluster-wide watches).
    All,
    /// Only these namespaces (one namespaced watch per namespace), sorted and distinct.
    Namespaces(Vec<String>),
}

/// `WATCH_NAMESPACE` holds something that is not a list of namespace names.
#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "WATCH_NAMESPACE entry {entry:?} is not a namespace name (lowercase letters, digits and '-', at most 63 characters)"
)]
pub struct ParseWatchScopeError {
    /// The offending entry.
    pub entry: String,
}

impl WatchScope {
    /// Parses `a,b` (spaces around names allowed, empty entries ignored); empty means all.
    pub fn parse(text: &str) -> Result<Self, ParseWatchScopeError> {
        let mut names = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            // Namespace names are DNS-1123 labels.
            if !olmkit_core::k8s_name::is_dns1123_label(entry) {
                return Err(ParseWatchScopeError {
                    entry: entry.to_string(),
                });
            }
            names.push(entry.to_string());
        }
        names.sort();
        names.dedup();
        Ok(if names.is_empty() {
            Self::All
        } else {
            Self::Namespaces(names)
        })
    }

    /// One entry per watch: `None` for cluster-wide, else each namespace.
    pub fn watches(&self) -> Vec<Option<String>> {
        match self {
            Self::All => vec![None],
            Self::Namespaces(ns) => ns.iter().cloned().map(Some).collect(),
        }
    }
}

impl std::fmt::Display for WatchScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("all namespaces"),
            Self::Namespaces(ns) => write!(f, "namespaces {}", ns.join(",")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_all() {
        assert_eq!(WatchScope::parse("").unwrap(), WatchScope::All);
        assert_eq!(WatchScope::parse(" , ").unwrap(), WatchScope::All);
        assert_eq!(WatchScope::All.watches(), vec![None]);
    }

    #[test]
    fn lists_are_sorted_and_deduplicated() {
        let s = WatchScope::parse("b, a,b,").unwrap();
        assert_eq!(s, WatchScope::Namespaces(vec!["a".into(), "b".into()]));
        assert_eq!(s.watches(), vec![Some("a".into()), Some("b".into())]);
        assert_eq!(s.to_string(), "namespaces a,b");
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["A", "a b", "-a", "a/b", &"x".repeat(64)] {
            assert!(WatchScope::parse(bad).is_err(), "{bad}");
        }
    }
}
