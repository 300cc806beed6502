//! What several commands share, so that no command module imports from another: each
//! submodule holds the flags, loaders, error mappings and output pieces of one area.

pub mod cluster;
pub mod fbc;
pub mod inputs;
pub mod pending;
pub mod registry;
