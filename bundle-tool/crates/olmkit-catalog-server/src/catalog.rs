//! A loaded catalog: the index held in memory with lookups, and lazy access to payloads.
//!
//! Packages, channels and bundles are kept sorted in the index, so lookups are binary searches
//! and there is no second copy of the data in hash maps. The one derived structure is the
//! order in which `ListBundles` streams bundles.

use crate::index::OpenIndexError;
use crate::index_pb::{Bundle, CatalogIndex, Channel, Entry, Package};
use crate::payload::{self, Payload, ReadPayloadError, Source};
use std::path::{Path, PathBuf};

/// Sizes of a catalog, for logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packages.
    pub packages: usize,
    /// Channels.
    pub channels: usize,
    /// Distinct bundles.
    pub bundles: usize,
    /// Channel entries (a bundle in two channels counts twice).
    pub entries: usize,
    /// FBC files.
    pub files: usize,
}

/// A bundle as a member of one channel: what every bundle-returning RPC is about.
#[derive(Clone, Copy, Debug)]
pub struct ChannelBundle<'a> {
    /// Its package.
    pub package: &'a Package,
    /// The channel.
    pub channel: &'a Channel,
    /// Its entry in the channel (replaces, skips, skipRange).
    pub entry: &'a Entry,
    /// The bundle.
    pub bundle: &'a Bundle,
}

/// A catalog ready to be queried.
#[derive(Debug)]
pub struct Catalog {
    root: PathBuf,
    index: CatalogIndex,
    /// (package, channel, entry) positions in `ListBundles` order.
    list_order: Vec<(u32, u32, u32)>,
}

fn to_u32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

impl Catalog {
    /// Wraps an index of the catalog at `root`, checking that it is consistent (every channel
    /// entry has a bundle, every head is an entry). `origin` names the index in errors.
    pub fn new(root: &Path, index: CatalogIndex, origin: &Path) -> Result<Self, OpenIndexError> {
        let corrupt = |reason: String| OpenIndexError::Corrupt {
            path: origin.to_path_buf(),
            reason,
        };
        let sorted = |a: &[&str]| a.windows(2).all(|w| w[0] < w[1]);
        let names: Vec<&str> = index.packages.iter().map(|p| p.name.as_str()).collect();
        if !sorted(&names) {
            return Err(corrupt("packages are not sorted".into()));
        }
        if !index
            .bundles
            .windows(2)
            .all(|w| (&w[0].package, &w[0].name) < (&w[1].package, &w[1].name))
        {
            return Err(corrupt("bundles are not sorted".into()));
        }
        let mut cat = Catalog {
            root: root.to_path_buf(),
            index,
            list_order: Vec::new(),
        };
        let mut order = Vec::new();
        for (pi, p) in cat.index.packages.iter().enumerate() {
            let chans: Vec<&str> = p.channels.iter().map(|c| c.name.as_str()).collect();
            if !sorted(&chans) {
                return Err(corrupt(format!("channels of {:?} are not sorted", p.name)));
            }
            for (ci, c) in p.channels.iter().enumerate() {
                if !c.entries.iter().any(|e| e.name == c.head) {
                    return Err(corrupt(format!(
                        "head {:?} of channel {:?} is not one of its entries",
                        c.head, c.name
                    )));
                }
                for (ei, e) in c.entries.iter().enumerate() {
                    if cat.bundle(&p.name, &e.name).is_none() {
                        return Err(corrupt(format!(
                            "entry {:?} of channel {:?} has no bundle",
                            e.name, c.name
                        )));
                    }
                    order.push((to_u32(pi), to_u32(ci), to_u32(ei)));
                }
            }
        }
        // operator-registry streams bundles ordered by (channel, package, bundle name)
        // (pkg/cache bundleKeyComparator).
        order.sort_by(|a, b| {
            let key = |&(pi, ci, ei): &(u32, u32, u32)| {
                let p = &cat.index.packages[pi as usize];
                let c = &p.channels[ci as usize];
                (
                    c.name.as_str(),
                    p.name.as_str(),
                    c.entries[ei as usize].name.as_str(),
                )
            };
            key(a).cmp(&key(b))
        });
        cat.list_order = order;
        Ok(cat)
    }

    /// The catalog root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The index.
    pub fn index(&self) -> &CatalogIndex {
        &self.index
    }

    /// Sizes, for logs.
    pub fn stats(&self) -> Stats {
        Stats {
            packages: self.index.packages.len(),
            channels: self.index.packages.iter().map(|p| p.channels.len()).sum(),
            bundles: self.index.bundles.len(),
            entries: self.list_order.len(),
            files: self.index.files.len(),
        }
    }

    /// Packages, sorted by name.
    pub fn packages(&self) -> &[Package] {
        &self.index.packages
    }

    /// A package by name.
    pub fn package(&self, name: &str) -> Option<&Package> {
        self.index
            .packages
            .binary_search_by(|p| p.name.as_str().cmp(name))
            .ok()
            .and_then(|i| self.index.packages.get(i))
    }

    /// A channel of a package by name.
    pub fn channel<'a>(&self, package: &'a Package, name: &str) -> Option<&'a Channel> {
        package
            .channels
            .binary_search_by(|c| c.name.as_str().cmp(name))
            .ok()
            .and_then(|i| package.channels.get(i))
    }

    /// A bundle by package and name.
    pub fn bundle(&self, package: &str, name: &str) -> Option<&Bundle> {
        self.index
            .bundles
            .binary_search_by(|b| (b.package.as_str(), b.name.as_str()).cmp(&(package, name)))
            .ok()
            .and_then(|i| self.index.bundles.get(i))
    }

    /// The member of `channel` named `name`.
    pub fn channel_bundle<'a>(
        &'a self,
        package: &'a Package,
        channel: &'a Channel,
        name: &str,
    ) -> Option<ChannelBundle<'a>> {
        let entry = channel.entries.iter().find(|e| e.name == name)?;
        let bundle = self.bundle(&package.name, &entry.name)?;
        Some(ChannelBundle {
            package,
            channel,
            entry,
            bundle,
        })
    }

    /// Every channel member, in the order operator-registry's `ListBundles` uses.
    pub fn list_order(&self) -> impl Iterator<Item = ChannelBundle<'_>> + '_ {
        (0..self.list_order.len()).filter_map(move |i| self.list_entry(i))
    }

    /// How many bundles `ListBundles` streams.
    pub fn list_len(&self) -> usize {
        self.list_order.len()
    }

    /// The bundle at `position` of the `ListBundles` order.
    pub fn list_entry(&self, position: usize) -> Option<ChannelBundle<'_>> {
        let &(pi, ci, ei) = self.list_order.get(position)?;
        let package = self.index.packages.get(pi as usize)?;
        let channel = package.channels.get(ci as usize)?;
        let entry = channel.entries.get(ei as usize)?;
        let bundle = self.bundle(&package.name, &entry.name)?;
        Some(ChannelBundle {
            package,
            channel,
            entry,
            bundle,
        })
    }

    /// Where blobs are read from.
    pub fn source(&self) -> Source<'_> {
        Source {
            root: &self.root,
            files: &self.index.files,
        }
    }

    /// Reads a bundle's CSV and manifests from disk.
    pub fn payload(&self, package: &Package, bundle: &Bundle) -> Result<Payload, ReadPayloadError> {
        let Some(span) = &bundle.span else {
            return Ok(Payload::default());
        };
        payload::bundle_payload(&self.source(), span, package, &bundle.version)
    }
}
