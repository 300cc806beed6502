//! Pushing an [`Image`] to any OCI registry, byte for byte.
//!
//! Blobs the registry already has are skipped (HEAD first), the others are uploaded a few at a
//! time, then the manifest is PUT with our exact bytes and the OCI media type — oci-client's
//! `push_manifest` would re-serialize it and change the digest. Finally the manifest digest is
//! read back from the registry and compared with ours: a push only succeeds when the registry
//! serves the image under the digest we computed.

use crate::build::{Image, MEDIA_TYPE_MANIFEST};
use crate::digest::Digest;
use crate::remote::{RegistryError, RemoteOptions, Session};
use futures::{StreamExt, TryStreamExt};
use oci_client::{Reference, RegistryOperation};
use thiserror::Error;

/// How many blobs upload at the same time.
pub const UPLOAD_CONCURRENCY: usize = 3;

/// An image could not be pushed.
#[derive(Debug, Error)]
pub enum PushImageError {
    /// The registry failed or refused an operation.
    #[error("cannot push {reference}: {error}")]
    Registry {
        /// The target.
        reference: String,
        /// What failed.
        error: RegistryError,
    },
    /// The reference pins a digest that is not the image's.
    #[error("{reference} names digest {given}, but the image is {actual}")]
    WrongDigest {
        /// The target.
        reference: String,
        /// Digest in the reference.
        given: String,
        /// The image digest.
        actual: Digest,
    },
    /// After the push, the registry serves a different manifest digest.
    #[error(
        "after pushing {reference}, the registry reports digest {actual}, but the pushed manifest is {expected}"
    )]
    DigestMismatch {
        /// The target.
        reference: String,
        /// Our digest.
        expected: Digest,
        /// The registry's.
        actual: String,
    },
}

impl PushImageError {
    /// True for problems the user can fix: exit code 1.
    pub fn is_user_error(&self) -> bool {
        match self {
            PushImageError::Registry { error, .. } => error.is_user_error(),
            PushImageError::WrongDigest { .. } => true,
            PushImageError::DigestMismatch { .. } => false,
        }
    }
    /// What the user can do about it.
    pub fn hints(&self) -> Vec<String> {
        match self {
            PushImageError::Registry { error, .. } => error.hints(),
            PushImageError::WrongDigest { .. } => {
                vec!["push by tag (REPO:TAG), or drop the @digest part".into()]
            }
            PushImageError::DigestMismatch { .. } => {
                vec!["the registry rewrote the manifest; it may not support OCI manifests".into()]
            }
        }
    }
}

/// Options of [`push`].
#[derive(Clone, Debug, Default)]
pub struct PushOptions {
    /// Connection, credentials, retries, events.
    pub remote: RemoteOptions,
}

/// What a push did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushReport {
    /// The target, normalized (`registry/repository:tag`).
    pub reference: String,
    /// Manifest digest, as computed and as served by the registry.
    pub digest: Digest,
    /// Blobs uploaded.
    pub blobs_uploaded: usize,
    /// Blobs the registry already had.
    pub blobs_existing: usize,
    /// Bytes uploaded (blobs and manifest).
    pub bytes_uploaded: u64,
}

/// Pushes `image` to `reference` and verifies the digest the registry serves.
pub async fn push(
    image: &Image,
    reference: &Reference,
    opts: &PushOptions,
) -> Result<PushReport, PushImageError> {
    let whole = reference.whole();
    let reg = |error: RegistryError| PushImageError::Registry {
        reference: whole.clone(),
        error,
    };
    if let Some(d) = reference.digest()
        && d != image.digest().to_string()
    {
        return Err(PushImageError::WrongDigest {
            reference: whole.clone(),
            given: d.to_string(),
            actual: image.digest().clone(),
        });
    }
    let session = Session::new(reference, &opts.remote).map_err(reg)?;
    session
        .authenticate(reference, RegistryOperation::Push)
        .await
        .map_err(reg)?;

    let results: Vec<(bool, u64)> = futures::stream::iter(image.blobs())
        .map(|blob| {
            let session = &session;
            async move {
                let digest = blob.digest.to_string();
                let exists = session
                    .call("check blob", reference, || {
                        session.client.blob_exists(reference, &digest)
                    })
                    .await?;
                if !exists {
                    session
                        .call(
                            &format!("upload blob {}", blob.digest.short()),
                            reference,
                            || {
                                session
                                    .client
                                    .push_blob(reference, blob.data.clone(), &digest)
                            },
                        )
                        .await?;
                }
                session.emit_blob_done(digest, blob.size(), exists);
                Ok::<_, RegistryError>((exists, if exists { 0 } else { blob.size() }))
            }
        })
        .buffer_unordered(UPLOAD_CONCURRENCY)
        .try_collect()
        .await
        .map_err(reg)?;

    let content_type = http_header(MEDIA_TYPE_MANIFEST);
    session
        .call("upload manifest", reference, || {
            session.client.push_manifest_raw(
                reference,
                image.manifest.data.clone(),
                content_type.clone(),
            )
        })
        .await
        .map_err(reg)?;

    let served = session
        .call("verify manifest digest", reference, || {
            session
                .client
                .fetch_manifest_digest(reference, &session.auth.auth)
        })
        .await
        .map_err(reg)?;
    if served != image.digest().to_string() {
        return Err(PushImageError::DigestMismatch {
            reference: whole,
            expected: image.digest().clone(),
            actual: served,
        });
    }
    let blobs_existing = results.iter().filter(|(e, _)| *e).count();
    Ok(PushReport {
        reference: whole,
        digest: image.digest().clone(),
        blobs_uploaded: results.len() - blobs_existing,
        blobs_existing,
        bytes_uploaded: results.iter().map(|(_, b)| b).sum::<u64>() + image.manifest.size(),
    })
}

fn http_header(value: &'static str) -> http::HeaderValue {
    http::HeaderValue::from_static(value)
}
