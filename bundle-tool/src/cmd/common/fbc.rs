//! File-Based Catalog output shared by several commands: the blob formats of `render` and
//! `catalog from-bundles`, and catalog changes as JSON (`promote`, `release`).

use clap::ValueEnum;
use olmkit_catalog::change::Change;
use olmkit_catalog::declcfg::WriteFormat;
use serde_json::{Value, json};

/// Output format of rendered blobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum FbcFormat {
    /// opm's JSON (4-space indent).
    #[default]
    Json,
    /// opm's YAML (`---` separated, keys sorted).
    Yaml,
    /// One compact JSON object per line (catalogd's form).
    Jsonl,
}

impl From<FbcFormat> for WriteFormat {
    fn from(f: FbcFormat) -> Self {
        match f {
            FbcFormat::Json => WriteFormat::Json,
            FbcFormat::Yaml => WriteFormat::Yaml,
            FbcFormat::Jsonl => WriteFormat::JsonLines,
        }
    }
}

/// One [`Change`] as JSON, tagged by `op` (the verb of its text line).
pub(crate) fn change_json(c: &Change) -> Value {
    match c {
        Change::AddPackage(p) => json!({
            "op": "addPackage",
            "package": p.name,
            "defaultChannel": p.default_channel,
        }),
        Change::SetDefaultChannel { package, from, to } => json!({
            "op": "setDefaultChannel",
            "package": package,
            "from": from,
            "to": to,
        }),
        Change::AddBundle(b) => json!({ "op": "addBundle", "bundle": b.name, "image": b.image }),
        Change::AddChannel(ch) => json!({
            "op": "addChannel",
            "channel": ch.name,
            "entries": ch.entries,
        }),
        Change::AddEntry {
            channel,
            entry,
            old_head,
            ..
        } => json!({
            "op": "addEntry",
            "channel": channel,
            "entry": entry,
            "oldHead": old_head,
            "newHead": entry.name,
        }),
    }
}
