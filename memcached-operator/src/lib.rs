//! The Memcached operator.
//!
//! Module ownership:
//! - [`cli`]: the command line (`operator run`, `operator crd`, `operator rbac`, `operator webhook`).
//! - [`run`]: `operator run`, the controller process (wiring, flags, signals, shutdown).
//! - [`controller`]: the reconciler: pure desired-state, status and event decisions plus the
//!   thin I/O shell that applies them.
//! - [`leader`]: leader election on a Lease.
//! - [`scope`]: the watched namespaces (`WATCH_NAMESPACE`).
//! - [`metrics`]: Prometheus metrics; [`http`]: the `/metrics`, `/healthz`, `/readyz` servers.
//! - [`rbac`]: the table of API calls and the roles generated from it.
//! - [`telemetry`]: structured logging.
//! - [`webhook`]: the HTTPS conversion webhook (ConversionReview over rustls, hot cert reload).

// Tests may unwrap: a panic is the failure report there.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::field_reassign_with_default))]

pub mod cli;
pub mod controller;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod rbac;
pub mod run;
pub mod scope;
pub mod telemetry;
pub mod webhook;
