//! A catalog server speaking operator-registry's `api.Registry` gRPC API: a drop-in for
//! `opm serve` that starts fast on big catalogs and keeps memory proportional to the upgrade
//! graph, not to the catalog's size.
//!
//! The pieces, from disk to wire:
//! - [`split`] cuts FBC files into documents and remembers each one's byte span;
//! - [`build`] turns a catalog directory into a [`CatalogIndex`] (the metadata every query
//!   needs plus the span of each blob), validating it with the same rules as `opm validate`;
//! - [`index`] reads and writes that index as a compact, deterministic file
//!   (`bundle-tool catalog index`), so the server can skip the scan;
//! - [`catalog`] answers lookups from the index and reads CSVs and manifests lazily
//!   ([`payload`], with Go-compatible JSON from [`gojson`]);
//! - [`query`] implements each RPC's semantics the way operator-registry's `pkg/cache` does;
//! - [`limits`] bounds streams and blocking work so no client starves another;
//! - [`service`] and [`server`] put it on the wire with health checks, reflection and graceful
//!   shutdown, over [`transport`] (connections, handshake and stall timeouts) and
//!   [`request_limit`] (request sizes and buffered bytes); [`probe`] is the
//!   `grpc_health_probe` the server also acts as in catalog images.

pub mod build;
pub mod catalog;
pub mod client;
pub mod gojson;
pub mod index;
pub mod limits;
pub mod payload;
pub mod probe;
pub mod query;
pub mod request_limit;
pub mod server;
pub mod service;
pub mod split;
pub mod transport;
pub mod watch;

pub mod pb;

pub mod index_pb;

/// The tonic version the generated clients and servers use (for callers building channels).
pub use tonic;
/// The tonic-health version the server uses (for callers probing health).
pub use tonic_health;

pub use build::{BuildIndexError, BuildOptions, build_index};
pub use catalog::Catalog;
pub use index::{OpenIndexError, WriteIndexError, default_index_path};
pub use index_pb::CatalogIndex;
pub use server::{ServeError, ServeOptions, serve};
