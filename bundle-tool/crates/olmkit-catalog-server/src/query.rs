//! The semantics of each `api.Registry` RPC, as operator-registry's FBC server implements them
//! (`pkg/cache/cache.go`, `pkg/cache/pkgs.go`, `pkg/registry/conversion.go`,
//! `pkg/api/model_to_api.go`, `pkg/server/server.go`).
//!
//! Quirks kept on purpose, because clients were written against them:
//! - `GetBundle`, `GetBundleForChannel`, `GetBundleThatReplaces` and
//!   `GetDefaultBundleThatProvides` return bundles with `replaces` and `skips` cleared (the old
//!   SQLite server did not fill them); `ListBundles` fills them but clears `csvJson` and
//!   `object` of every bundle that has an image (`bundlePath`);
//! - `skipRange` comes from the channel entry; `version` from the `olm.package` property;
//!   `providedApis`/`requiredApis` from `olm.gvk`/`olm.gvk.required` (no `plural`);
//!   `dependencies` turn `olm.gvk.required` into `olm.gvk` and `olm.package.required` into
//!   `olm.package` with a `version` range; `properties` leave out `olm.bundle.object` and
//!   `olm.csv.metadata`;
//! - `GetChannelEntriesThatProvide` lists every skip of a providing bundle, even skips of
//!   bundles outside the channel; `GetLatestChannelEntriesThatProvide` looks at channel heads
//!   only and lists only skips inside the channel;
//! - channels in `GetPackage` are sorted by name; `ListBundles` is ordered by channel, then
//!   package, then bundle name.
//!
//! Where opm's order is Go map order (random), ours is sorted by package, channel and bundle,
//! so answers are reproducible. Errors keep opm's messages but carry gRPC codes (`NOT_FOUND`
//! instead of opm's `UNKNOWN`) so clients can tell a missing bundle from a broken server.

use crate::catalog::{Catalog, ChannelBundle};
use crate::index_pb;
use crate::limits::{cut, echo};
use crate::pb;
use tonic::Status;

/// Why a query failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// The package, channel, bundle or provider does not exist.
    NotFound(String),
    /// The request is malformed.
    InvalidArgument(String),
    /// The catalog on disk could not be read.
    Internal(String),
}

impl From<QueryError> for Status {
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::NotFound(m) => Status::not_found(m),
            QueryError::InvalidArgument(m) => Status::invalid_argument(m),
            QueryError::Internal(m) => Status::internal(m),
        }
    }
}

type Result<T> = std::result::Result<T, QueryError>;

fn deprecation(d: &Option<index_pb::Deprecation>) -> Option<pb::Deprecation> {
    d.as_ref().map(|d| pb::Deprecation {
        message: d.message.clone(),
    })
}

fn gvks(list: &[index_pb::Gvk]) -> Vec<pb::GroupVersionKind> {
    list.iter()
        .map(|g| pb::GroupVersionKind {
            group: g.group.clone(),
            version: g.version.clone(),
            kind: g.kind.clone(),
            plural: String::new(),
        })
        .collect()
}

/// Which of a bundle's heavy fields to fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// Single-bundle RPCs: payload always, `replaces`/`skips` cleared.
    Trimmed,
    /// `ListBundles`: edges kept, payload only for bundles without an image.
    Listed,
}

fn api_bundle(cat: &Catalog, m: ChannelBundle<'_>, shape: Shape) -> Result<pb::Bundle> {
    let b = m.bundle;
    let wants_payload = match shape {
        Shape::Trimmed => true,
        Shape::Listed => b.image.is_empty(),
    };
    let payload = if wants_payload {
        cat.payload(m.package, b)
            .map_err(|e| QueryError::Internal(format!("convert bundle {:?}: {e}", b.name)))?
    } else {
        Default::default()
    };
    let (replaces, skips) = match shape {
        Shape::Trimmed => (String::new(), Vec::new()),
        Shape::Listed => (m.entry.replaces.clone(), m.entry.skips.clone()),
    };
    Ok(pb::Bundle {
        csv_name: b.name.clone(),
        package_name: b.package.clone(),
        channel_name: m.channel.name.clone(),
        csv_json: payload.csv_json,
        object: payload.objects,
        bundle_path: b.image.clone(),
        provided_apis: gvks(&b.provided),
        required_apis: gvks(&b.required),
        version: b.version.clone(),
        skip_range: m.entry.skip_range.clone(),
        dependencies: b
            .dependencies
            .iter()
            .map(|d| pb::Dependency {
                r#type: d.r#type.clone(),
                value: d.value.clone(),
            })
            .collect(),
        properties: b
            .properties
            .iter()
            .map(|p| pb::Property {
                r#type: p.r#type.clone(),
                value: p.value.clone(),
            })
            .collect(),
        replaces,
        skips,
        deprecation: deprecation(&b.deprecation),
    })
}

fn find_channel<'a>(
    cat: &'a Catalog,
    pkg: &str,
    channel: &str,
    pkg_not_found: impl FnOnce() -> String,
) -> Result<(&'a index_pb::Package, &'a index_pb::Channel)> {
    let p = cat
        .package(pkg)
        .ok_or_else(|| QueryError::NotFound(pkg_not_found()))?;
    let c = cat.channel(p, channel).ok_or_else(|| {
        QueryError::NotFound(format!(
            "package {}, channel {} not found",
            echo(pkg),
            echo(channel)
        ))
    })?;
    Ok((p, c))
}

/// `ListPackages`: every package name, sorted.
pub fn list_packages(cat: &Catalog) -> Vec<pb::PackageName> {
    cat.packages()
        .iter()
        .map(|p| pb::PackageName {
            name: p.name.clone(),
        })
        .collect()
}

/// `GetPackage`.
pub fn get_package(cat: &Catalog, name: &str) -> Result<pb::Package> {
    let p = cat
        .package(name)
        .ok_or_else(|| QueryError::NotFound(format!("package {} not found", echo(name))))?;
    Ok(pb::Package {
        name: p.name.clone(),
        channels: p
            .channels
            .iter()
            .map(|c| pb::Channel {
                name: c.name.clone(),
                csv_name: c.head.clone(),
                deprecation: deprecation(&c.deprecation),
            })
            .collect(),
        default_channel_name: p.default_channel.clone(),
        deprecation: deprecation(&p.deprecation),
    })
}

/// `GetBundle`.
pub fn get_bundle(cat: &Catalog, pkg: &str, channel: &str, csv: &str) -> Result<pb::Bundle> {
    let (p, c) = find_channel(cat, pkg, channel, || {
        format!("package {} not found", echo(pkg))
    })?;
    let m = cat.channel_bundle(p, c, csv).ok_or_else(|| {
        QueryError::NotFound(format!(
            "package {}, channel {}, bundle {} not found",
            echo(pkg),
            echo(channel),
            echo(csv)
        ))
    })?;
    api_bundle(cat, m, Shape::Trimmed)
}

/// `GetBundleForChannel`: the channel head.
pub fn get_bundle_for_channel(cat: &Catalog, pkg: &str, channel: &str) -> Result<pb::Bundle> {
    let (p, c) = find_channel(cat, pkg, channel, || {
        format!("package {} not found", echo(pkg))
    })?;
    let m = cat.channel_bundle(p, c, &c.head).ok_or_else(|| {
        QueryError::Internal(format!("channel {} has no head bundle", echo(channel)))
    })?;
    api_bundle(cat, m, Shape::Trimmed)
}

fn entry(m: &ChannelBundle<'_>, replaces: &str) -> pb::ChannelEntry {
    pb::ChannelEntry {
        package_name: m.package.name.clone(),
        channel_name: m.channel.name.clone(),
        bundle_name: m.entry.name.clone(),
        replaces: replaces.to_string(),
    }
}

fn members(cat: &Catalog) -> impl Iterator<Item = ChannelBundle<'_>> + '_ {
    cat.packages().iter().flat_map(move |p| {
        p.channels.iter().flat_map(move |c| {
            c.entries
                .iter()
                .filter_map(move |e| cat.channel_bundle(p, c, &e.name))
        })
    })
}

/// `GetChannelEntriesThatReplace`: entries whose bundle replaces or skips `name`. Each entry
/// carries the bundle's `replaces`, as opm does.
pub fn channel_entries_that_replace(cat: &Catalog, name: &str) -> Result<Vec<pb::ChannelEntry>> {
    let mut out = Vec::new();
    for m in members(cat) {
        if m.entry.replaces == name {
            out.push(entry(&m, &m.entry.replaces));
        }
        for s in &m.entry.skips {
            if s == name && *s != m.entry.replaces {
                out.push(entry(&m, &m.entry.replaces));
            }
        }
    }
    if out.is_empty() {
        return Err(QueryError::NotFound(format!(
            "no channel entries found that replace {}",
            cut(name)
        )));
    }
    Ok(out)
}

/// `GetBundleThatReplaces`: the first bundle of the channel (in entry order) that replaces or
/// skips `name`.
pub fn bundle_that_replaces(
    cat: &Catalog,
    name: &str,
    pkg: &str,
    channel: &str,
) -> Result<pb::Bundle> {
    let (p, c) = find_channel(cat, pkg, channel, || {
        format!("package {} not found", cut(pkg))
    })?;
    for e in &c.entries {
        if (e.replaces == name || e.skips.iter().any(|s| s == name))
            && let Some(m) = cat.channel_bundle(p, c, &e.name)
        {
            return api_bundle(cat, m, Shape::Trimmed);
        }
    }
    Err(QueryError::NotFound(format!(
        "no entry found for package {}, channel {}",
        echo(pkg),
        echo(channel)
    )))
}

fn provides(b: &index_pb::Bundle, group: &str, version: &str, kind: &str) -> bool {
    b.provided
        .iter()
        .any(|g| g.group == group && g.version == version && g.kind == kind)
}

fn no_provider(group: &str, version: &str, kind: &str) -> QueryError {
    QueryError::NotFound(format!(
        "no channel entries found that provide group:{} version:{} kind:{}",
        echo(group),
        echo(version),
        echo(kind)
    ))
}

/// One entry for the bundle's `replaces` plus one per skip that differs from it; with
/// `in_channel_only`, skips of bundles outside the channel are left out.
fn entries_for(m: &ChannelBundle<'_>, in_channel_only: bool) -> Vec<pb::ChannelEntry> {
    let mut out = vec![entry(m, &m.entry.replaces)];
    for s in &m.entry.skips {
        let in_channel = m.channel.entries.iter().any(|e| e.name == *s);
        if *s != m.entry.replaces && (!in_channel_only || in_channel) {
            out.push(entry(m, s));
        }
    }
    out
}

/// `GetChannelEntriesThatProvide`.
pub fn channel_entries_that_provide(
    cat: &Catalog,
    group: &str,
    version: &str,
    kind: &str,
) -> Result<Vec<pb::ChannelEntry>> {
    let out: Vec<pb::ChannelEntry> = members(cat)
        .filter(|m| provides(m.bundle, group, version, kind))
        .flat_map(|m| entries_for(&m, false))
        .collect();
    if out.is_empty() {
        return Err(no_provider(group, version, kind));
    }
    Ok(out)
}

fn heads(cat: &Catalog) -> impl Iterator<Item = ChannelBundle<'_>> + '_ {
    cat.packages().iter().flat_map(move |p| {
        p.channels
            .iter()
            .filter_map(move |c| cat.channel_bundle(p, c, &c.head))
    })
}

/// `GetLatestChannelEntriesThatProvide`: channel heads only.
pub fn latest_channel_entries_that_provide(
    cat: &Catalog,
    group: &str,
    version: &str,
    kind: &str,
) -> Result<Vec<pb::ChannelEntry>> {
    let out: Vec<pb::ChannelEntry> = heads(cat)
        .filter(|m| provides(m.bundle, group, version, kind))
        .flat_map(|m| entries_for(&m, true))
        .collect();
    if out.is_empty() {
        return Err(no_provider(group, version, kind));
    }
    Ok(out)
}

/// `GetDefaultBundleThatProvides`: among the channel heads that provide the API, the one in
/// its package's default channel, packages taken in name order.
pub fn default_bundle_that_provides(
    cat: &Catalog,
    group: &str,
    version: &str,
    kind: &str,
) -> Result<pb::Bundle> {
    let latest = latest_channel_entries_that_provide(cat, group, version, kind)?;
    // Heads come in package-name order already, so the first default-channel entry wins,
    // as with opm's sort by package name.
    for e in &latest {
        let Some(p) = cat.package(&e.package_name) else {
            continue;
        };
        if e.channel_name == p.default_channel {
            return get_bundle(cat, &e.package_name, &e.channel_name, &e.bundle_name);
        }
    }
    Err(QueryError::NotFound(format!(
        "no entry found that provides group:{} version:{} kind:{}",
        echo(group),
        echo(version),
        echo(kind)
    )))
}

/// `ListBundles`: every channel member, in operator-registry's order. Payloads are read lazily
/// as the iterator advances, so a whole-catalog stream holds one bundle at a time.
pub fn list_bundles(cat: &Catalog) -> impl Iterator<Item = Result<pb::Bundle>> + '_ {
    cat.list_order()
        .map(move |m| api_bundle(cat, m, Shape::Listed))
}

/// Positions `start..start + n` of [`list_bundles`] (fewer at the end): what a `ListBundles`
/// stream produces next, one batch at a time, without borrowing the catalog between batches.
pub fn list_bundles_batch(cat: &Catalog, start: usize, n: usize) -> Vec<Result<pb::Bundle>> {
    (start..cat.list_len().min(start.saturating_add(n)))
        .filter_map(|i| cat.list_entry(i))
        .map(|m| api_bundle(cat, m, Shape::Listed))
        .collect()
}

/// Schemas operator-registry models itself; custom-schema queries refuse them.
const OLM_SCHEMAS: [&str; 4] = [
    olmkit_catalog::declcfg::SCHEMA_PACKAGE,
    olmkit_catalog::declcfg::SCHEMA_CHANNEL,
    olmkit_catalog::declcfg::SCHEMA_BUNDLE,
    olmkit_catalog::declcfg::SCHEMA_DEPRECATIONS,
];

/// `ExperimentalListPackageCustomSchemas`: blobs of a non-OLM schema, of one package (or of
/// every package when `package` is empty), in file order.
pub fn custom_blobs<'a>(
    cat: &'a Catalog,
    schema: &'a str,
    package: &'a str,
) -> Result<impl Iterator<Item = Result<prost_types::Struct>> + 'a> {
    let positions = custom_blob_positions(cat, schema, package)?;
    Ok(positions.into_iter().map(move |i| custom_blob_at(cat, i)))
}

/// Which of the index's other blobs [`custom_blobs`] returns, as positions, so a stream can read
/// them one batch at a time.
pub fn custom_blob_positions(cat: &Catalog, schema: &str, package: &str) -> Result<Vec<usize>> {
    if schema.is_empty() {
        return Err(QueryError::InvalidArgument("schema is required".into()));
    }
    if OLM_SCHEMAS.contains(&schema) {
        return Err(QueryError::InvalidArgument(format!(
            "schema {} is not a custom schema; use the Registry service",
            echo(schema)
        )));
    }
    if !package.is_empty() && cat.package(package).is_none() {
        return Err(QueryError::NotFound(format!(
            "package {} not found",
            echo(package)
        )));
    }
    Ok(cat
        .index()
        .others
        .iter()
        .enumerate()
        .filter(|(_, o)| o.schema == schema && (package.is_empty() || o.package == package))
        .map(|(i, _)| i)
        .collect())
}

/// The blob at `position` of the index's other blobs, read from disk.
pub fn custom_blob_at(cat: &Catalog, position: usize) -> Result<prost_types::Struct> {
    let span = cat
        .index()
        .others
        .get(position)
        .and_then(|o| o.span.as_ref())
        .ok_or_else(|| QueryError::Internal("blob without location".into()))?;
    match crate::payload::read_blob(&cat.source(), span) {
        Ok(olmkit_catalog::declcfg::Blob::Other(meta)) => Ok(to_struct(meta.blob)),
        Ok(_) => Err(QueryError::Internal(
            "the catalog index points at a blob of another schema".into(),
        )),
        Err(e) => Err(QueryError::Internal(e.to_string())),
    }
}

fn to_prost_value(v: serde_json::Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.into_iter().map(to_prost_value).collect(),
        }),
        serde_json::Value::Object(o) => Kind::StructValue(to_struct(serde_json::Value::Object(o))),
    };
    prost_types::Value { kind: Some(kind) }
}

fn to_struct(v: serde_json::Value) -> prost_types::Struct {
    match v {
        serde_json::Value::Object(o) => prost_types::Struct {
            fields: o.into_iter().map(|(k, v)| (k, to_prost_value(v))).collect(),
        },
        _ => prost_types::Struct::default(),
    }
}
