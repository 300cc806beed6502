//! `olm.skipRange` version ranges (blang/semver `ParseRange`): their one home is `olmkit-core`.
pub use olmkit_core::version_range::*;
