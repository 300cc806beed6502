//! A client of operator-registry's `api.Registry` gRPC API (and `grpc.health.v1.Health`), for
//! any server that speaks it: `bundle-tool serve`, `catalog-server`, `opm serve`, and the
//! registry pods of OLM catalog sources.
//!
//! [`RegistryClient::query`] runs one [`Query`] (one RPC of operator-registry's
//! `pkg/api/registry.proto`, the same file as `proto/registry.proto`) and hands each answer
//! message to a callback as it arrives, so a `ListBundles` of a large catalog is never held
//! whole. [`to_json`] writes a message in the protobuf JSON mapping (field names as the
//! `.proto` declares them, lowerCamelCase; empty strings, empty lists and absent messages left
//! out), as grpcurl and Python's `google.protobuf.json_format.MessageToJson` print it.

use crate::pb;
use crate::pb::registry_client::RegistryClient as PbClient;
use futures::StreamExt;
use serde_json::{Map, Value};
use std::time::Duration;
use thiserror::Error;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

/// One RPC with its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// `ListPackages`: every package name.
    ListPackages,
    /// `GetPackage`: a package with its channels and their heads.
    GetPackage {
        /// Package name.
        name: String,
    },
    /// `GetBundle`: a bundle by package, channel and CSV name.
    GetBundle {
        /// Package name.
        package: String,
        /// Channel name.
        channel: String,
        /// CSV (bundle) name.
        csv_name: String,
    },
    /// `GetBundleForChannel` (deprecated upstream): the head of a channel.
    GetBundleForChannel {
        /// Package name.
        package: String,
        /// Channel name.
        channel: String,
    },
    /// `GetChannelEntriesThatReplace`: the entries that replace, skip or skipRange a CSV.
    GetChannelEntriesThatReplace {
        /// CSV (bundle) name.
        csv_name: String,
    },
    /// `GetBundleThatReplaces`: the bundle of a channel that replaces a CSV.
    GetBundleThatReplaces {
        /// CSV (bundle) name.
        csv_name: String,
        /// Package name.
        package: String,
        /// Channel name.
        channel: String,
    },
    /// `GetChannelEntriesThatProvide`: entries whose bundle provides an API.
    GetChannelEntriesThatProvide(Gvk),
    /// `GetLatestChannelEntriesThatProvide`: channel heads that provide an API.
    GetLatestChannelEntriesThatProvide(Gvk),
    /// `GetDefaultBundleThatProvides`: the default channel's head providing an API.
    GetDefaultBundleThatProvides(Gvk),
    /// `ListBundles`: every bundle, once per channel it is in.
    ListBundles,
    /// `grpc.health.v1.Health/Check` of the whole server (service "").
    Health,
}

/// An API, as the provider queries name it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gvk {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural (optional; the server ignores it).
    pub plural: String,
}

impl Query {
    /// The RPC's name, as in the `.proto`.
    pub fn method(&self) -> &'static str {
        match self {
            Query::ListPackages => "ListPackages",
            Query::GetPackage { .. } => "GetPackage",
            Query::GetBundle { .. } => "GetBundle",
            Query::GetBundleForChannel { .. } => "GetBundleForChannel",
            Query::GetChannelEntriesThatReplace { .. } => "GetChannelEntriesThatReplace",
            Query::GetBundleThatReplaces { .. } => "GetBundleThatReplaces",
            Query::GetChannelEntriesThatProvide(_) => "GetChannelEntriesThatProvide",
            Query::GetLatestChannelEntriesThatProvide(_) => "GetLatestChannelEntriesThatProvide",
            Query::GetDefaultBundleThatProvides(_) => "GetDefaultBundleThatProvides",
            Query::ListBundles => "ListBundles",
            Query::Health => "Health",
        }
    }
}

/// One answer message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Of `ListPackages`.
    PackageName(pb::PackageName),
    /// Of `GetPackage`.
    Package(pb::Package),
    /// Of the bundle RPCs.
    Bundle(Box<pb::Bundle>),
    /// Of the channel-entry RPCs.
    ChannelEntry(pb::ChannelEntry),
    /// Of `Health`: the serving status name (`SERVING`, `NOT_SERVING`...).
    Health(String),
}

/// A query failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The address is not `HOST:PORT`.
    #[error("invalid address {address:?}: {message}")]
    Address {
        /// What was given.
        address: String,
        /// Why it is not usable.
        message: String,
    },
    /// No connection could be made in time.
    #[error("cannot connect to {address}: {message}")]
    Connect {
        /// Where.
        address: String,
        /// Why.
        message: String,
    },
    /// The server answered the RPC with an error status.
    #[error("{method}: {code:?}: {message}")]
    Status {
        /// The RPC.
        method: &'static str,
        /// gRPC status code.
        code: tonic::Code,
        /// The server's message.
        message: String,
    },
    /// The RPC took longer than the deadline.
    #[error("{method}: no answer within {timeout:?}")]
    Timeout {
        /// The RPC.
        method: &'static str,
        /// The deadline.
        timeout: Duration,
    },
}

impl ClientError {
    /// True when the server said the thing asked for does not exist (gRPC `NOT_FOUND`).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            ClientError::Status {
                code: tonic::Code::NotFound,
                ..
            }
        )
    }
}

/// A connected client.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    registry: PbClient<Channel>,
    health: HealthClient<Channel>,
    timeout: Duration,
}

impl RegistryClient {
    /// Connects to `address` (`HOST:PORT`, as `opm serve`, grpcurl and catalog sources name
    /// servers; a leading `http://` is accepted) over plain HTTP/2, within `timeout`, which
    /// also bounds each RPC.
    pub async fn connect(address: &str, timeout: Duration) -> Result<Self, ClientError> {
        let uri = if address.contains("://") {
            address.to_string()
        } else {
            format!("http://{address}")
        };
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|e| ClientError::Address {
                address: address.to_string(),
                message: e.to_string(),
            })?
            .connect_timeout(timeout);
        let channel = match tokio::time::timeout(timeout, endpoint.connect()).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return Err(ClientError::Connect {
                    address: address.to_string(),
                    message: error_chain(&e),
                });
            }
            Err(_) => {
                return Err(ClientError::Connect {
                    address: address.to_string(),
                    message: format!("timed out after {timeout:?}"),
                });
            }
        };
        Ok(Self {
            // Bundles carry whole CSVs and manifests: far beyond tonic's 4 MiB default.
            registry: PbClient::new(channel.clone())
                .max_decoding_message_size(usize::MAX)
                .max_encoding_message_size(usize::MAX),
            health: HealthClient::new(channel),
            timeout,
        })
    }

    /// Runs `query`, handing each answer message to `each` as it arrives; returns how many
    /// there were.
    pub async fn query<E>(
        &mut self,
        query: &Query,
        mut each: impl FnMut(Message) -> Result<(), E>,
    ) -> Result<Result<usize, E>, ClientError> {
        let call = Call {
            method: query.method(),
            timeout: self.timeout,
        };
        let each = &mut each;
        let r = &mut self.registry;
        match query {
            Query::ListPackages => {
                let answers = r.list_packages(pb::ListPackageRequest {});
                call.stream(answers, Message::PackageName, each).await
            }
            Query::GetPackage { name } => {
                let answer = r.get_package(pb::GetPackageRequest { name: name.clone() });
                call.unary(answer, Message::Package, each).await
            }
            Query::GetBundle {
                package,
                channel,
                csv_name,
            } => {
                let answer = r.get_bundle(pb::GetBundleRequest {
                    pkg_name: package.clone(),
                    channel_name: channel.clone(),
                    csv_name: csv_name.clone(),
                });
                call.unary(answer, bundle_message, each).await
            }
            #[allow(deprecated)]
            Query::GetBundleForChannel { package, channel } => {
                let answer = r.get_bundle_for_channel(pb::GetBundleInChannelRequest {
                    pkg_name: package.clone(),
                    channel_name: channel.clone(),
                });
                call.unary(answer, bundle_message, each).await
            }
            Query::GetChannelEntriesThatReplace { csv_name } => {
                let answers = r.get_channel_entries_that_replace(pb::GetAllReplacementsRequest {
                    csv_name: csv_name.clone(),
                });
                call.stream(answers, Message::ChannelEntry, each).await
            }
            Query::GetBundleThatReplaces {
                csv_name,
                package,
                channel,
            } => {
                let answer = r.get_bundle_that_replaces(pb::GetReplacementRequest {
                    csv_name: csv_name.clone(),
                    pkg_name: package.clone(),
                    channel_name: channel.clone(),
                });
                call.unary(answer, bundle_message, each).await
            }
            Query::GetChannelEntriesThatProvide(g) => {
                let answers =
                    r.get_channel_entries_that_provide(pb::GetAllProvidersRequest::from(g));
                call.stream(answers, Message::ChannelEntry, each).await
            }
            Query::GetLatestChannelEntriesThatProvide(g) => {
                let answers = r.get_latest_channel_entries_that_provide(
                    pb::GetLatestProvidersRequest::from(g),
                );
                call.stream(answers, Message::ChannelEntry, each).await
            }
            Query::GetDefaultBundleThatProvides(g) => {
                let answer =
                    r.get_default_bundle_that_provides(pb::GetDefaultProviderRequest::from(g));
                call.unary(answer, bundle_message, each).await
            }
            Query::ListBundles => {
                let answers = r.list_bundles(pb::ListBundlesRequest {});
                call.stream(answers, bundle_message, each).await
            }
            Query::Health => {
                let answer = self.health.check(HealthCheckRequest {
                    service: String::new(),
                });
                call.unary(answer, health_message, each).await
            }
        }
    }
}

fn bundle_message(b: pb::Bundle) -> Message {
    Message::Bundle(Box::new(b))
}

fn health_message(h: tonic_health::pb::HealthCheckResponse) -> Message {
    Message::Health(h.status().as_str_name().to_string())
}

/// The provider requests name a GVK the same way.
macro_rules! from_gvk {
    ($($request:ty),*) => {$(
        impl From<&Gvk> for $request {
            fn from(g: &Gvk) -> Self {
                Self {
                    group: g.group.clone(),
                    version: g.version.clone(),
                    kind: g.kind.clone(),
                    plural: g.plural.clone(),
                }
            }
        }
    )*};
}
from_gvk!(
    pb::GetAllProvidersRequest,
    pb::GetLatestProvidersRequest,
    pb::GetDefaultProviderRequest
);

/// One RPC being run: its name (for errors) and how long each answer may take.
#[derive(Clone, Copy)]
struct Call {
    method: &'static str,
    timeout: Duration,
}

impl Call {
    fn status(self, s: tonic::Status) -> ClientError {
        ClientError::Status {
            method: self.method,
            code: s.code(),
            message: s.message().to_string(),
        }
    }

    fn deadline(self) -> ClientError {
        ClientError::Timeout {
            method: self.method,
            timeout: self.timeout,
        }
    }

    /// Runs a unary RPC: one answer.
    async fn unary<T, E>(
        self,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
        wrap: impl FnOnce(T) -> Message,
        each: &mut impl FnMut(Message) -> Result<(), E>,
    ) -> Result<Result<usize, E>, ClientError> {
        let answer = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.deadline())?
            .map_err(|s| self.status(s))?
            .into_inner();
        Ok(each(wrap(answer)).map(|()| 1))
    }

    /// Runs a server-streaming RPC, each answer within the timeout; stops at the first answer
    /// `each` refuses.
    async fn stream<T, E>(
        self,
        call: impl Future<Output = Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>>,
        wrap: impl Fn(T) -> Message,
        each: &mut impl FnMut(Message) -> Result<(), E>,
    ) -> Result<Result<usize, E>, ClientError> {
        let mut s = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.deadline())?
            .map_err(|st| self.status(st))?
            .into_inner();
        let mut n = 0;
        while let Some(m) = tokio::time::timeout(self.timeout, s.next())
            .await
            .map_err(|_| self.deadline())?
        {
            if let Err(e) = each(wrap(m.map_err(|st| self.status(st))?)) {
                return Ok(Err(e));
            }
            n += 1;
        }
        Ok(Ok(n))
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// Adds `key: value` unless `value` is the proto3 default (the JSON mapping leaves those out).
fn put_str(m: &mut Map<String, Value>, key: &str, value: &str) {
    if !value.is_empty() {
        m.insert(key.into(), Value::String(value.into()));
    }
}

fn put_list(m: &mut Map<String, Value>, key: &str, values: Vec<Value>) {
    if !values.is_empty() {
        m.insert(key.into(), Value::Array(values));
    }
}

fn deprecation(m: &mut Map<String, Value>, d: Option<&pb::Deprecation>) {
    if let Some(d) = d {
        let mut o = Map::new();
        put_str(&mut o, "message", &d.message);
        m.insert("deprecation".into(), Value::Object(o));
    }
}

fn gvks(list: &[pb::GroupVersionKind]) -> Vec<Value> {
    list.iter()
        .map(|g| {
            let mut o = Map::new();
            put_str(&mut o, "group", &g.group);
            put_str(&mut o, "version", &g.version);
            put_str(&mut o, "kind", &g.kind);
            put_str(&mut o, "plural", &g.plural);
            Value::Object(o)
        })
        .collect()
}

fn type_values<'a>(list: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<Value> {
    list.map(|(t, v)| {
        let mut o = Map::new();
        put_str(&mut o, "type", t);
        put_str(&mut o, "value", v);
        Value::Object(o)
    })
    .collect()
}

/// A message as a JSON value in the protobuf JSON mapping, fields in declaration order.
pub fn to_value(msg: &Message) -> Value {
    let mut m = Map::new();
    match msg {
        Message::PackageName(p) => put_str(&mut m, "name", &p.name),
        Message::Package(p) => {
            put_str(&mut m, "name", &p.name);
            let channels = p
                .channels
                .iter()
                .map(|c| {
                    let mut o = Map::new();
                    put_str(&mut o, "name", &c.name);
                    put_str(&mut o, "csvName", &c.csv_name);
                    deprecation(&mut o, c.deprecation.as_ref());
                    Value::Object(o)
                })
                .collect();
            put_list(&mut m, "channels", channels);
            put_str(&mut m, "defaultChannelName", &p.default_channel_name);
            deprecation(&mut m, p.deprecation.as_ref());
        }
        Message::ChannelEntry(e) => {
            put_str(&mut m, "packageName", &e.package_name);
            put_str(&mut m, "channelName", &e.channel_name);
            put_str(&mut m, "bundleName", &e.bundle_name);
            put_str(&mut m, "replaces", &e.replaces);
        }
        Message::Bundle(b) => {
            put_str(&mut m, "csvName", &b.csv_name);
            put_str(&mut m, "packageName", &b.package_name);
            put_str(&mut m, "channelName", &b.channel_name);
            put_str(&mut m, "csvJson", &b.csv_json);
            put_list(
                &mut m,
                "object",
                b.object.iter().map(|s| Value::String(s.clone())).collect(),
            );
            put_str(&mut m, "bundlePath", &b.bundle_path);
            put_list(&mut m, "providedApis", gvks(&b.provided_apis));
            put_list(&mut m, "requiredApis", gvks(&b.required_apis));
            put_str(&mut m, "version", &b.version);
            put_str(&mut m, "skipRange", &b.skip_range);
            put_list(
                &mut m,
                "dependencies",
                type_values(
                    b.dependencies
                        .iter()
                        .map(|d| (d.r#type.as_str(), d.value.as_str())),
                ),
            );
            put_list(
                &mut m,
                "properties",
                type_values(
                    b.properties
                        .iter()
                        .map(|p| (p.r#type.as_str(), p.value.as_str())),
                ),
            );
            put_str(&mut m, "replaces", &b.replaces);
            put_list(
                &mut m,
                "skips",
                b.skips.iter().map(|s| Value::String(s.clone())).collect(),
            );
            deprecation(&mut m, b.deprecation.as_ref());
        }
        Message::Health(status) => put_str(&mut m, "status", status),
    }
    Value::Object(m)
}

/// A message as grpcurl and `MessageToJson` print it: indented by two spaces, one object per
/// message, followed by a newline.
pub fn to_json(msg: &Message) -> String {
    let mut out = serde_json::to_string_pretty(&to_value(msg)).unwrap_or_default();
    out.push('\n');
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn json_mapping_leaves_defaults_out_and_keeps_declaration_order() {
        let b = pb::Bundle {
            csv_name: "op.v1.0.0".into(),
            package_name: "op".into(),
            channel_name: "stable".into(),
            version: "1.0.0".into(),
            provided_apis: vec![pb::GroupVersionKind {
                group: "cache.example.com".into(),
                version: "v1".into(),
                kind: "Memcached".into(),
                plural: "memcacheds".into(),
            }],
            properties: vec![pb::Property {
                r#type: "olm.package".into(),
                value: r#"{"packageName":"op","version":"1.0.0"}"#.into(),
            }],
            deprecation: Some(pb::Deprecation::default()),
            ..Default::default()
        };
        assert_eq!(
            to_json(&Message::Bundle(Box::new(b))),
            r#"{
  "csvName": "op.v1.0.0",
  "packageName": "op",
  "channelName": "stable",
  "providedApis": [
    {
      "group": "cache.example.com",
      "version": "v1",
      "kind": "Memcached",
      "plural": "memcacheds"
    }
  ],
  "version": "1.0.0",
  "properties": [
    {
      "type": "olm.package",
      "value": "{\"packageName\":\"op\",\"version\":\"1.0.0\"}"
    }
  ],
  "deprecation": {}
}
"#
        );
        assert_eq!(
            to_json(&Message::PackageName(pb::PackageName::default())),
            "{}\n"
        );
    }

    #[tokio::test]
    async fn a_closed_port_is_a_connection_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let e = RegistryClient::connect(&addr, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::Connect { .. }), "{e}");
        assert!(e.to_string().contains(&addr), "{e}");
    }
}
