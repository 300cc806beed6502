//! The one check a release makes on its inputs before planning: no input object larger than
//! etcd stores ([`MAX_STORED_OBJECT_BYTES`]). Its own module so that planning (which runs it
//! first) and validation (which applies the same limit to the generated bundle) share it
//! without depending on each other.

use olmkit_bundle::generate::GenerateInputs;
use thiserror::Error;

/// The largest object the API server can store: etcd's default request limit
/// (`--max-request-bytes`, 1.5 MiB), which an object's JSON must fit in.
pub const MAX_STORED_OBJECT_BYTES: usize = 1_572_864;

/// An input object is larger than etcd stores.
#[derive(Debug, Error)]
#[error(
    "{document} is {size} bytes as JSON, more than the {MAX_STORED_OBJECT_BYTES} bytes (1.5 MiB) etcd stores in one object (its default --max-request-bytes): no API server accepts it, so it cannot be released"
)]
pub struct ObjectTooLarge {
    /// `<file> document <n> (<Kind> <name>)`.
    pub document: String,
    /// Its size as compact JSON.
    pub size: usize,
}

impl ObjectTooLarge {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        vec![
            "shrink it (a ConfigMap's data belongs in an image or a volume; for CRDs, drop descriptions with controller-gen crd:maxDescLen=0)".into(),
            "nothing was released".into(),
        ]
    }
}

/// Refuses input objects larger than etcd stores, naming the document (file, position, kind
/// and name), before anything is generated.
pub fn check_input_sizes(inputs: &GenerateInputs) -> Result<(), ObjectTooLarge> {
    for d in inputs.manifests.iter().chain(&inputs.base_csv) {
        let size = json_size(&d.object);
        if size > MAX_STORED_OBJECT_BYTES {
            return Err(ObjectTooLarge {
                document: d.label(),
                size,
            });
        }
    }
    Ok(())
}

/// The size of `v` as compact JSON (what the API server stores).
pub(crate) fn json_size(v: &serde_json::Value) -> usize {
    serde_json::to_vec(v).map_or(0, |v| v.len())
}
