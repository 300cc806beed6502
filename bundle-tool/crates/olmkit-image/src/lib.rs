//! Daemonless, reproducible OCI images: builder, OCI layout, registry push, inspect.
//!
//! The crate is split the way the data flows: [`tree`] (the files of a layer) → [`layer`]
//! (deterministic tar+gzip) → [`build`] (pure "files → image" builder producing exact
//! manifest/config bytes) → writers: [`layout`] (OCI image layout directory) and [`push`]
//! (any OCI registry), both behind [`publish::Publisher`]. [`inspect`] reads images back from
//! either place.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod auth;
pub mod build;
pub mod digest;
pub mod dockerfile;
pub mod elf;
pub mod error;
pub mod images;
pub mod inspect;
pub mod layer;
pub mod layout;
pub mod paths;
pub mod pin;
pub mod publish;
pub mod pull;
pub mod push;
pub mod remote;
pub mod tree;

pub use build::{
    BuildImageError, Image, ImageSpec, LayerSpec, Platform, RuntimeConfig, build_image,
};
pub use digest::Digest;
pub use layer::Blob;
pub use tree::{FileTree, Owner};
