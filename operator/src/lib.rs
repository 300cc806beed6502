//! The Memcached operator.
//!
//! Module ownership:
//! - [`webhook`]: the HTTPS conversion webhook (ConversionReview over rustls, hot cert reload).
//!
//! The controller, leader election, metrics, health and CLI modules are added by the operator
//! foundation work.

pub mod webhook;
