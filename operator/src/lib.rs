//! The Memcached operator.
//!
//! Module ownership:
//! - [`cli`]: the command line (`operator run`, `operator crd`, `operator webhook`).
//! - [`run`]: `operator run`, the controller process (controller, leader election, metrics,
//!   health, webhook).
//! - [`webhook`]: the HTTPS conversion webhook (ConversionReview over rustls, hot cert reload).

pub mod cli;
pub mod run;
pub mod webhook;
