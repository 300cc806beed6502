//! The run-bundle catalog: File-Based Catalog blobs for one package, one channel
//! ([`super::CHANNEL`]) and the bundles `run bundle` and `run bundle-upgrade` put into it;
//! checked with the catalog validator (what `opm serve` would refuse is refused here), and split
//! into ConfigMap-sized JSON files.
//!
//! The catalog is kept in ConfigMaps (one file each, [`super::CATALOG_FILE`]) because that is the
//! one place both the registry pod and a later `run bundle-upgrade` (from any machine) can read
//! it. A ConfigMap holds at most 1 MiB, so the blobs are spread over as many ConfigMaps as
//! needed ([`PARTITION_BYTES`] each); one blob larger than that cannot be stored.

use super::bundle::BundleToRun;
use olmkit_catalog::declcfg::{
    self, Blob, Channel, ChannelEntry, DeclarativeConfig, LoadOptions, Package, WriteFormat,
};
use olmkit_catalog::model::bundle_version;
use olmkit_core::version_range::VersionRange;
use thiserror::Error;

/// The most catalog bytes put into one ConfigMap (the API server allows 1 MiB of data).
pub const PARTITION_BYTES: usize = 900 * 1024;

/// A catalog could not be built, stored or read back.
#[derive(Debug, Error)]
pub enum RunCatalogError {
    /// The catalog is not valid (what `opm serve` would refuse to serve).
    #[error("the catalog of package {package} would not be valid:\n{report}")]
    Invalid {
        /// Package.
        package: String,
        /// The validator's findings.
        report: String,
    },
    /// One blob is larger than a ConfigMap can hold.
    #[error(
        "{what} is {size} bytes as catalog JSON; a ConfigMap holds at most {PARTITION_BYTES} bytes of it"
    )]
    TooLarge {
        /// Which blob.
        what: String,
        /// Its size.
        size: usize,
    },
    /// The blobs could not be written.
    #[error("cannot write the catalog: {0}")]
    Render(String),
    /// The ConfigMaps hold something that is not a catalog.
    #[error("ConfigMap {config_map}: not a run-bundle catalog: {message}")]
    Unreadable {
        /// The ConfigMap.
        config_map: String,
        /// Why.
        message: String,
    },
    /// The bundle is already in the catalog.
    #[error("{csv} is already in the run-bundle catalog of package {package} (bundles: {bundles})")]
    AlreadyThere {
        /// The CSV.
        csv: String,
        /// Package.
        package: String,
        /// The bundles in the catalog.
        bundles: String,
    },
    /// The bundle belongs to another package.
    #[error("the bundle is of package {bundle_package}, but the catalog is of package {package}")]
    OtherPackage {
        /// The catalog's package.
        package: String,
        /// The bundle's.
        bundle_package: String,
    },
    /// The channel has no single head to upgrade from.
    #[error("the run-bundle channel of package {package} has no single head: {heads}")]
    NoHead {
        /// Package.
        package: String,
        /// Its heads.
        heads: String,
    },
}

/// The catalog `run bundle` starts with: the package, channel [`super::CHANNEL`] with the one
/// bundle, and the bundle.
pub fn initial_catalog(b: &BundleToRun) -> DeclarativeConfig {
    DeclarativeConfig {
        packages: vec![Package {
            schema: declcfg::SCHEMA_PACKAGE.into(),
            name: b.package.clone(),
            default_channel: super::CHANNEL.into(),
            icon: None,
            description: String::new(),
            properties: Vec::new(),
        }],
        channels: vec![Channel {
            schema: declcfg::SCHEMA_CHANNEL.into(),
            name: super::CHANNEL.into(),
            package: b.package.clone(),
            entries: vec![ChannelEntry {
                name: b.csv_name.clone(),
                ..Default::default()
            }],
            properties: Vec::new(),
        }],
        bundles: vec![b.fbc.clone()],
        ..Default::default()
    }
}

/// The catalog after `run bundle-upgrade` added a bundle.
#[derive(Clone, Debug, PartialEq)]
pub struct UpgradedCatalog {
    /// The new catalog.
    pub config: DeclarativeConfig,
    /// The new channel entry.
    pub entry: ChannelEntry,
    /// The head it upgrades from.
    pub from: String,
    /// Explanations for stderr.
    pub notes: Vec<String>,
    /// Where the run-bundle catalog differs from what the CSV alone would do.
    pub warnings: Vec<String>,
}

/// The bundles of the run-bundle channel, in channel order.
pub fn bundle_names(cfg: &DeclarativeConfig) -> Vec<String> {
    cfg.channels
        .iter()
        .flat_map(|c| c.entries.iter().map(|e| e.name.clone()))
        .collect()
}

/// Adds `b` to the catalog as the new head of [`super::CHANNEL`].
///
/// The entry takes its edges from the CSV (`spec.replaces`, `spec.skips`, the
/// `olm.skipRange` annotation), as a published catalog would. The run-bundle channel must keep
/// one head and a path from the installed CSV, so when the CSV's `replaces` is not the channel's
/// head and its `skips` do not name it, `replaces` becomes the head (as operator-sdk does), with
/// a note; and when none of the CSV's own edges reaches the head, a warning says that a real
/// catalog with this bundle would not upgrade from it.
pub fn add_upgrade(
    cfg: &DeclarativeConfig,
    b: &BundleToRun,
) -> Result<UpgradedCatalog, RunCatalogError> {
    let package = cfg
        .packages
        .first()
        .map(|p| p.name.clone())
        .unwrap_or_default();
    if package != b.package {
        return Err(RunCatalogError::OtherPackage {
            package,
            bundle_package: b.package.clone(),
        });
    }
    let names = bundle_names(cfg);
    if names.contains(&b.csv_name) || cfg.bundles.iter().any(|x| x.name == b.csv_name) {
        return Err(RunCatalogError::AlreadyThere {
            csv: b.csv_name.clone(),
            package,
            bundles: names.join(", "),
        });
    }
    let channel = cfg
        .channels
        .iter()
        .find(|c| c.name == super::CHANNEL)
        .ok_or_else(|| RunCatalogError::NoHead {
            package: package.clone(),
            heads: format!("there is no channel {}", super::CHANNEL),
        })?;
    let heads = olmkit_catalog::model::channel_heads(channel);
    let [head] = heads.as_slice() else {
        return Err(RunCatalogError::NoHead {
            package,
            heads: heads.join(", "),
        });
    };
    let head = head.to_string();
    let head_version = cfg
        .bundles
        .iter()
        .find(|x| x.name == head)
        .and_then(bundle_version);
    let e = &b.edges;
    let skip_range_covers = !e.skip_range.is_empty()
        && head_version
            .as_ref()
            .is_some_and(|v| VersionRange::parse(&e.skip_range).is_ok_and(|r| r.contains(v)));
    let by_replaces = e.replaces == head;
    let by_skips = e.skips.contains(&head);
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    let replaces = if by_replaces || by_skips {
        e.replaces.clone()
    } else {
        let csv_says = if e.replaces.is_empty() {
            "has no spec.replaces".to_string()
        } else {
            format!("replaces {}", e.replaces)
        };
        notes.push(format!(
            "{} {csv_says}; in the run-bundle catalog it replaces {head}, the bundle installed before (as operator-sdk does)",
            b.csv_name
        ));
        if !skip_range_covers {
            warnings.push(format!(
                "{} neither replaces, skips nor skipRanges {head}: in a catalog built from these bundles, OLM would not upgrade {head} to it",
                b.csv_name
            ));
        }
        head.clone()
    };
    let entry = ChannelEntry {
        name: b.csv_name.clone(),
        replaces,
        skips: e.skips.clone(),
        skip_range: e.skip_range.clone(),
    };
    let mut config = cfg.clone();
    if let Some(c) = config
        .channels
        .iter_mut()
        .find(|c| c.name == super::CHANNEL)
    {
        c.entries.push(entry.clone());
    }
    config.bundles.push(b.fbc.clone());
    Ok(UpgradedCatalog {
        config,
        entry,
        from: head,
        notes,
        warnings,
    })
}

/// Refuses a catalog the validator finds errors in.
pub fn check_catalog(cfg: &DeclarativeConfig) -> Result<(), RunCatalogError> {
    let report = olmkit_catalog::validate::validate(cfg, None);
    if report.has_errors() {
        return Err(RunCatalogError::Invalid {
            package: cfg
                .packages
                .first()
                .map(|p| p.name.clone())
                .unwrap_or_default(),
            report: report.render_text().trim_end().to_string(),
        });
    }
    Ok(())
}

fn blob_label(b: &Blob) -> String {
    match b {
        Blob::Bundle(x) => format!("bundle {}", x.name),
        Blob::Channel(x) => format!("channel {}", x.name),
        Blob::Package(x) => format!("package {}", x.name),
        other => format!("{} blob", other.schema()),
    }
}

/// The catalog as JSON files (one compact blob per line), each at most [`PARTITION_BYTES`],
/// package and channel first.
pub fn partitions(cfg: &DeclarativeConfig) -> Result<Vec<String>, RunCatalogError> {
    let blobs: Vec<Blob> = cfg
        .packages
        .iter()
        .cloned()
        .map(Blob::Package)
        .chain(cfg.channels.iter().cloned().map(Blob::Channel))
        .chain(cfg.bundles.iter().cloned().map(Blob::Bundle))
        .chain(cfg.others.iter().cloned().map(Blob::Other))
        .collect();
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    for b in &blobs {
        let text = declcfg::write::render_blobs(std::slice::from_ref(b), WriteFormat::JsonLines)
            .map_err(|e| RunCatalogError::Render(e.to_string()))?;
        if text.len() > PARTITION_BYTES {
            return Err(RunCatalogError::TooLarge {
                what: blob_label(b),
                size: text.len(),
            });
        }
        if current.len() + text.len() > PARTITION_BYTES {
            parts.push(std::mem::take(&mut current));
        }
        current.push_str(&text);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    Ok(parts)
}

/// Reads a catalog back from the files of its ConfigMaps (`(ConfigMap name, file text)`).
pub fn from_partitions(parts: &[(String, String)]) -> Result<DeclarativeConfig, RunCatalogError> {
    let mut cfg = DeclarativeConfig::default();
    let opts = LoadOptions {
        keep_bundle_objects: true,
        ..Default::default()
    };
    for (name, text) in parts {
        let blobs = declcfg::load::load_bytes(name, text.as_bytes(), &opts).map_err(|e| {
            RunCatalogError::Unreadable {
                config_map: name.clone(),
                message: e.to_string(),
            }
        })?;
        for b in blobs {
            cfg.push(b.blob);
        }
    }
    if cfg.packages.len() != 1 {
        return Err(RunCatalogError::Unreadable {
            config_map: parts
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            message: format!("{} olm.package blobs, expected 1", cfg.packages.len()),
        });
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_bundle::bundle::BundleToRun;
    use std::path::Path;

    fn bundle(version: &str) -> BundleToRun {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../bundle/memcached-operator")
            .join(version);
        BundleToRun::load(&dir, version, "").unwrap()
    }

    #[test]
    fn the_initial_catalog_is_valid_and_round_trips_through_partitions() {
        let b = bundle("0.3.0");
        let cfg = initial_catalog(&b);
        check_catalog(&cfg).unwrap();
        let parts = partitions(&cfg).unwrap();
        assert_eq!(parts.len(), 1);
        let back = from_partitions(&[("cm".into(), parts[0].clone())]).unwrap();
        assert_eq!(bundle_names(&back), vec!["memcached-operator.v0.3.0"]);
        assert_eq!(back.bundles[0].properties, cfg.bundles[0].properties);
    }

    #[test]
    fn an_upgrade_uses_the_csv_replaces_when_it_names_the_head() {
        let cfg = initial_catalog(&bundle("0.3.0"));
        let up = add_upgrade(&cfg, &bundle("0.4.0")).unwrap();
        assert_eq!(up.from, "memcached-operator.v0.3.0");
        assert_eq!(up.entry.replaces, "memcached-operator.v0.3.0");
        assert_eq!(up.entry.skip_range, "<0.4.0");
        assert!(up.notes.is_empty() && up.warnings.is_empty());
        check_catalog(&up.config).unwrap();
        assert_eq!(
            olmkit_catalog::model::channel_heads(&up.config.channels[0]),
            vec!["memcached-operator.v0.4.0"]
        );
        // The same bundle twice is refused.
        let e = add_upgrade(&up.config, &bundle("0.4.0")).unwrap_err();
        assert!(matches!(e, RunCatalogError::AlreadyThere { .. }), "{e}");
    }

    #[test]
    fn an_upgrade_whose_csv_replaces_another_bundle_replaces_the_head_with_a_note() {
        // 0.3.0 replaces 0.2.0, skipRange <0.3.0 covers 0.1.0: a note, no warning.
        let cfg = initial_catalog(&bundle("0.1.0"));
        let up = add_upgrade(&cfg, &bundle("0.3.0")).unwrap();
        assert_eq!(up.entry.replaces, "memcached-operator.v0.1.0");
        assert_eq!(up.notes.len(), 1, "{:?}", up.notes);
        assert!(up.warnings.is_empty(), "{:?}", up.warnings);
        check_catalog(&up.config).unwrap();
        // 0.2.0 replaces 0.1.0 only; from 0.3.0 nothing leads to it: a warning too.
        let cfg = initial_catalog(&bundle("0.3.0"));
        let mut older = bundle("0.2.0");
        older.csv_name = "memcached-operator.v0.5.0".into();
        older.fbc.name = older.csv_name.clone();
        let up = add_upgrade(&cfg, &older).unwrap();
        assert_eq!(up.warnings.len(), 1, "{:?}", up.warnings);
    }

    #[test]
    fn oversized_blobs_are_refused_with_their_name() {
        let mut b = bundle("0.3.0");
        b.fbc
            .properties
            .push(olmkit_catalog::property::Property::bundle_object(
                "A".repeat(PARTITION_BYTES + 10),
            ));
        let e = partitions(&initial_catalog(&b)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bundle memcached-operator.v0.3.0 is "),
            "{e}"
        );
    }

    #[test]
    fn many_bundles_spread_over_several_partitions() {
        let mut cfg = initial_catalog(&bundle("0.3.0"));
        let one = cfg.bundles[0].clone();
        for i in 0..12 {
            let mut b = one.clone();
            b.name = format!("memcached-operator.v0.3.{}", i + 1);
            cfg.bundles.push(b);
        }
        let parts = partitions(&cfg).unwrap();
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| p.len() <= PARTITION_BYTES));
        let named: Vec<(String, String)> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("cm-{i}"), p.clone()))
            .collect();
        assert_eq!(from_partitions(&named).unwrap().bundles.len(), 13);
    }
}
