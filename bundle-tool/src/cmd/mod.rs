//! One module per command group; each exposes its clap arguments and an async `run`.

pub mod approve;
pub mod catalog;
pub mod cleanup;
pub mod common;
pub mod explain;
pub mod generate;
pub mod graph;
pub mod image;
pub mod install;
pub mod promote;
pub mod query;
pub mod release;
pub mod render;
pub mod run;
pub mod scaffold;
pub mod serve;
pub mod status;
pub mod upgrade;
pub mod validate;
