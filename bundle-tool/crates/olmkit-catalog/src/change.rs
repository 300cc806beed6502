//! Changes to a catalog, as data: what a release or a promotion adds (a package, a bundle, a
//! channel or an entry, a new default channel), and [`apply`], the pure graph edit that makes
//! them to a [`DeclarativeConfig`]. olmkit-release plans them; [`crate::catalog_dir`] writes
//! them into the files it rewrites.

use crate::declcfg::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package};

/// One change to a catalog.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A new package.
    AddPackage(Package),
    /// Change the default channel.
    SetDefaultChannel {
        /// Package.
        package: String,
        /// Previous value.
        from: String,
        /// New value.
        to: String,
    },
    /// A new bundle blob.
    AddBundle(Bundle),
    /// A new channel (with its first entry).
    AddChannel(Channel),
    /// A new entry in an existing channel.
    AddEntry {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// The entry.
        entry: ChannelEntry,
        /// Head before the change.
        old_head: String,
    },
}

/// Applies changes to a catalog (any catalog that holds the package: the graph-only model
/// used for planning or the full blobs being rewritten).
pub fn apply(cfg: &mut DeclarativeConfig, changes: &[Change]) {
    for c in changes {
        match c {
            Change::AddPackage(p) => cfg.packages.push(p.clone()),
            Change::SetDefaultChannel { package, to, .. } => {
                for p in cfg.packages.iter_mut().filter(|p| &p.name == package) {
                    p.default_channel = to.clone();
                }
            }
            Change::AddBundle(b) => cfg.bundles.push(b.clone()),
            Change::AddChannel(ch) => cfg.channels.push(ch.clone()),
            Change::AddEntry {
                package,
                channel,
                entry,
                ..
            } => {
                if let Some(ch) = cfg
                    .channels
                    .iter_mut()
                    .find(|c| &c.package == package && &c.name == channel)
                {
                    ch.entries.push(entry.clone());
                }
            }
        }
    }
}
