//! Publishing built images: where they go is a [`Publisher`], an OCI image layout directory
//! ([`LayoutPublisher`]) or a registry ([`RegistryPublisher`]), so that a caller publishing
//! several images (a release) writes the same sequence for either: check every target first,
//! then publish them all.
//!
//! The registry publisher's check looks, before anything is pushed, at every tag it is about to
//! push: none may name other content (unless told to overwrite), so a refusal moves no tag at
//! all. A single image needs no separate check: [`push_with`] checks its tag before uploading
//! a blob.
//! It reports each push's start ([`RemoteEvent::PushStarted`]) through the connection's event
//! sink, so the caller can show one progress bar per image.

use crate::build::Image;
use crate::layout::{WriteLayoutError, WriteSummary, write_to_layout};
use crate::push::{
    ExistingTag, PushImageError, PushOptions, PushReport, RegistryOperation, push_with, tag_digest,
};
use crate::remote::{RegistryError, RemoteEvent, RemoteOptions, parse_reference};
use futures::future::LocalBoxFuture;
use std::path::PathBuf;
use thiserror::Error;

/// An image and the name it is published under (a layout's ref name, a registry reference).
#[derive(Clone, Copy, Debug)]
pub struct Named<'a> {
    /// The image.
    pub image: &'a Image,
    /// Its name: `registry/repository:tag`.
    pub reference: &'a str,
}

/// What a publisher did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Published {
    /// The images were written into an OCI image layout.
    Layout(WriteSummary),
    /// The images were pushed, in order.
    Registry(Vec<PushReport>),
}

/// Images could not be published.
#[derive(Debug, Error)]
pub enum PublishError {
    /// Writing the OCI image layout failed.
    #[error(transparent)]
    Layout(#[from] WriteLayoutError),
    /// A target is no image reference.
    #[error(transparent)]
    Reference(RegistryError),
    /// The registry refused or failed.
    #[error(transparent)]
    Push(#[from] PushImageError),
}

/// Where images are published.
pub trait Publisher {
    /// Checks, before anything is published, that every image may go where it goes.
    fn check<'a>(&'a self, images: &'a [Named<'a>])
    -> LocalBoxFuture<'a, Result<(), PublishError>>;
    /// Publishes the images.
    fn publish<'a>(
        &'a self,
        images: &'a [Named<'a>],
    ) -> LocalBoxFuture<'a, Result<Published, PublishError>>;
}

/// An OCI image layout directory: every image is written under its name, in one update of the
/// layout's index (other images are kept).
#[derive(Clone, Debug)]
pub struct LayoutPublisher {
    /// The layout directory (created if missing).
    pub dir: PathBuf,
}

impl Publisher for LayoutPublisher {
    fn check<'a>(
        &'a self,
        _images: &'a [Named<'a>],
    ) -> LocalBoxFuture<'a, Result<(), PublishError>> {
        Box::pin(async { Ok(()) })
    }

    fn publish<'a>(
        &'a self,
        images: &'a [Named<'a>],
    ) -> LocalBoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            let names: Vec<(&Image, &str)> =
                images.iter().map(|n| (n.image, n.reference)).collect();
            Ok(Published::Layout(write_to_layout(&self.dir, &names)?))
        })
    }
}

/// Any OCI registry, each image pushed to its reference.
#[derive(Clone, Debug, Default)]
pub struct RegistryPublisher {
    /// Connection, credentials, retries, events.
    pub remote: RemoteOptions,
    /// What a tag that already names other content gets.
    pub existing: ExistingTag,
}

impl RegistryPublisher {
    /// Checks, without pushing, that `image` may go to `target`: the tag is free or already
    /// names this image (then the push changes nothing).
    pub async fn check_one(&self, image: &Image, target: &str) -> Result<(), PublishError> {
        let reference = parse_reference(target).map_err(PublishError::Reference)?;
        if reference.digest().is_some() {
            return Ok(());
        }
        match tag_digest(&reference, &self.remote, RegistryOperation::Push).await? {
            Some(d) if d != image.digest().to_string() => Err(PushImageError::TagExists {
                reference: reference.whole(),
                existing: d,
                ours: image.digest().clone(),
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// Pushes `image` to `target`, reporting the push's start to the event sink.
    pub async fn push_one(&self, image: &Image, target: &str) -> Result<PushReport, PublishError> {
        let reference = parse_reference(target).map_err(PublishError::Reference)?;
        if let Some(sink) = &self.remote.events {
            sink(RemoteEvent::PushStarted {
                reference: reference.whole(),
                blobs: image.blobs().count(),
            });
        }
        let opts = PushOptions {
            remote: self.remote.clone(),
        };
        Ok(push_with(image, &reference, &opts, self.existing).await?)
    }
}

impl Publisher for RegistryPublisher {
    fn check<'a>(
        &'a self,
        images: &'a [Named<'a>],
    ) -> LocalBoxFuture<'a, Result<(), PublishError>> {
        Box::pin(async move {
            // Overwriting needs no check.
            if self.existing == ExistingTag::Overwrite {
                return Ok(());
            }
            for n in images {
                self.check_one(n.image, n.reference).await?;
            }
            Ok(())
        })
    }

    fn publish<'a>(
        &'a self,
        images: &'a [Named<'a>],
    ) -> LocalBoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            let mut reports = Vec::with_capacity(images.len());
            for n in images {
                reports.push(self.push_one(n.image, n.reference).await?);
            }
            Ok(Published::Registry(reports))
        })
    }
}
