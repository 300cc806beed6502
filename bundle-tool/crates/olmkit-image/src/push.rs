//! Pushing an [`Image`] to any OCI registry, byte for byte.
//!
//! Blobs the registry already has are skipped (HEAD first), the others are uploaded a few at a
//! time, then the manifest is PUT with our exact bytes and the OCI media type — oci-client's
//! `push_manifest` would re-serialize it and change the digest. Finally the manifest digest is
//! read back from the registry and compared with ours: a push only succeeds when the registry
//! serves the image under the digest we computed.
//!
//! A tag already in the registry is never replaced by different content unless the caller
//! says so ([`ExistingTag::Overwrite`]): a published tag is what clusters pull, and a re-run
//! of an old release must not silently swap what it names. The tag is checked before any blob
//! is uploaded; [`tag_digest`] lets a caller check all its tags before pushing any.

use crate::build::{Image, MEDIA_TYPE_MANIFEST};
use crate::digest::Digest;
use crate::remote::{RegistryError, RemoteOptions, Session};
use futures::{StreamExt, TryStreamExt};
use oci_client::Reference;
/// Which access [`tag_digest`] authenticates for.
pub use oci_client::RegistryOperation;
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
    /// The tag already names other content in the registry.
    #[error(
        "{reference} already exists in the registry with digest {existing}, and this image is {ours}: refusing to overwrite a published tag with different content"
    )]
    TagExists {
        /// The target.
        reference: String,
        /// What the registry serves under the tag.
        existing: String,
        /// The image's digest.
        ours: Digest,
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
            PushImageError::WrongDigest { .. } | PushImageError::TagExists { .. } => true,
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
            PushImageError::TagExists { .. } => vec![
                "publish the change under a new tag (release a new version), or pass --force to overwrite the tag".into(),
            ],
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

/// What [`push_with`] does when the tag already names other content in the registry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExistingTag {
    /// Fail with [`PushImageError::TagExists`] before uploading anything.
    #[default]
    Refuse,
    /// Move the tag to the pushed image (`--force`).
    Overwrite,
}

/// The digest the registry serves under `reference`'s tag, `None` when the tag (or the
/// repository) does not exist. `operation` is the access to authenticate for: a check before
/// a push asks for push access, as the push will (some registries deny a pull-only token for
/// a repository that does not exist yet).
pub async fn tag_digest(
    reference: &Reference,
    opts: &RemoteOptions,
    operation: RegistryOperation,
) -> Result<Option<String>, PushImageError> {
    let whole = reference.whole();
    let reg = |error: RegistryError| PushImageError::Registry {
        reference: whole.clone(),
        error,
    };
    let session = Session::new(reference, opts).map_err(reg)?;
    session
        .authenticate(reference, operation)
        .await
        .map_err(reg)?;
    existing_digest(&session, reference).await.map_err(reg)
}

async fn existing_digest(
    session: &Session,
    reference: &Reference,
) -> Result<Option<String>, RegistryError> {
    match session
        .call("check the existing tag", reference, || {
            session
                .client
                .fetch_manifest_digest(reference, &session.auth.auth)
        })
        .await
    {
        Ok(d) => Ok(Some(d)),
        Err(RegistryError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Pushes `image` to `reference` and verifies the digest the registry serves; refuses to move
/// a tag that names other content ([`push_with`] with [`ExistingTag::Refuse`]).
pub async fn push(
    image: &Image,
    reference: &Reference,
    opts: &PushOptions,
) -> Result<PushReport, PushImageError> {
    push_with(image, reference, opts, ExistingTag::Refuse).await
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

/// Pushes `image` to `reference` and verifies the digest the registry serves. A tag that
/// already names other content is refused or overwritten as `existing` says.
pub async fn push_with(
    image: &Image,
    reference: &Reference,
    opts: &PushOptions,
    existing: ExistingTag,
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
    if reference.digest().is_none()
        && existing == ExistingTag::Refuse
        && let Some(d) = existing_digest(&session, reference).await.map_err(reg)?
        && d != image.digest().to_string()
    {
        return Err(PushImageError::TagExists {
            reference: whole,
            existing: d,
            ours: image.digest().clone(),
        });
    }

    let results = upload_blobs(&session, reference, image)
        .await
        .map_err(reg)?;
    let served = upload_manifest(&session, reference, image)
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

/// Uploads the image's blobs the registry lacks, a few at a time; for each blob, whether it
/// was there already and how many bytes went up.
async fn upload_blobs(
    session: &Session,
    reference: &Reference,
    image: &Image,
) -> Result<Vec<(bool, u64)>, RegistryError> {
    futures::stream::iter(image.blobs())
        .map(|blob| async move {
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
        })
        .buffer_unordered(UPLOAD_CONCURRENCY)
        .try_collect()
        .await
}

/// PUTs the manifest with our exact bytes and the OCI media type, then returns the digest the
/// registry serves for it.
async fn upload_manifest(
    session: &Session,
    reference: &Reference,
    image: &Image,
) -> Result<String, RegistryError> {
    let content_type = http_header(MEDIA_TYPE_MANIFEST);
    session
        .call("upload manifest", reference, || {
            session.client.push_manifest_raw(
                reference,
                image.manifest.data.clone(),
                content_type.clone(),
            )
        })
        .await?;
    session
        .call("verify manifest digest", reference, || {
            session
                .client
                .fetch_manifest_digest(reference, &session.auth.auth)
        })
        .await
}

fn http_header(value: &'static str) -> http::HeaderValue {
    http::HeaderValue::from_static(value)
}
