//! Stage 6, publish ([`Built::publish`] → [`Published`]): the images go to the OCI layout
//! (`--layout`) and, when the caller passes one, to a registry, each through olmkit-image's
//! [`Publisher`]. Every target of a publisher is checked before it publishes anything (a
//! registry refuses, before the first push, a tag that names other content), so a refusal
//! moves no tag. Nothing under `bundle/` or the catalog is written here: a failure leaves them
//! as they were, and the next run publishes again.

use crate::build::Built;
use crate::{Release, ReleaseConfig};
use olmkit_image::layout::WriteLayoutError;
use olmkit_image::publish::{LayoutPublisher, Named, PublishError, Publisher};

/// Where publishing stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishPhase {
    /// Checking the targets: nothing was published by this publisher.
    Check,
    /// Publishing: some images may be published, the others not.
    Publish,
}

/// Publishing failed; nothing under `bundle/` or the catalog was changed. It displays and
/// chains as the publisher's error itself.
#[derive(Debug)]
pub struct ReleasePublishError {
    /// Where it stopped.
    pub phase: PublishPhase,
    /// What failed.
    pub error: PublishError,
}

impl std::fmt::Display for ReleasePublishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for ReleasePublishError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl ReleasePublishError {
    /// `hint:` lines: the publisher's, then what the failure means for the release.
    pub fn hints(&self) -> Vec<String> {
        let mut hints = match &self.error {
            PublishError::Push(e) => e.hints(),
            _ => Vec::new(),
        };
        hints.extend(self.hint().map(String::from));
        hints
    }

    /// True when the input or the environment is at fault (names, credentials, the registry).
    pub fn is_user_error(&self) -> bool {
        match &self.error {
            PublishError::Layout(e) => matches!(
                e,
                WriteLayoutError::NotALayout { .. } | WriteLayoutError::InvalidRefName { .. }
            ),
            PublishError::Reference(_) => true,
            PublishError::Push(e) => e.is_user_error(),
        }
    }

    /// What the failure means for the release, for a registry (the layout's own errors say
    /// it all).
    pub fn hint(&self) -> Option<&'static str> {
        match (&self.error, self.phase) {
            (PublishError::Layout(_), _) => None,
            (_, PublishPhase::Check) => {
                Some("nothing was pushed and nothing under bundle/ or catalog/ was changed")
            }
            (_, PublishPhase::Publish) => Some(
                "nothing under bundle/ or catalog/ was changed; re-run the release once the registry works",
            ),
        }
    }
}

/// A release with its images published: the sixth stage, which
/// [`Published::commit`](crate::commit) commits.
#[derive(Debug)]
pub struct Published {
    pub(crate) config: ReleaseConfig,
    pub(crate) release: Release,
}

impl Published {
    /// The release as decided, its images marked pushed.
    pub fn release(&self) -> &Release {
        &self.release
    }
}

impl Built {
    /// Writes the images into the OCI layout (when there are any), then, with `registry`,
    /// pushes them there.
    pub async fn publish(
        mut self,
        registry: Option<&dyn Publisher>,
    ) -> Result<Published, ReleasePublishError> {
        if !self.release.images.is_empty() {
            let layout = LayoutPublisher {
                dir: self.config.layout.clone(),
            };
            publish_to(&layout, &self.release).await?;
            if let Some(registry) = registry {
                publish_to(registry, &self.release).await?;
                for i in &mut self.release.images {
                    i.pushed = true;
                }
            }
        }
        Ok(Published {
            config: self.config,
            release: self.release,
        })
    }
}

/// Checks every image's target with `publisher`, then publishes them all.
async fn publish_to(
    publisher: &dyn Publisher,
    release: &Release,
) -> Result<(), ReleasePublishError> {
    let named: Vec<Named<'_>> = release
        .images
        .iter()
        .map(|i| Named {
            image: &i.image,
            reference: &i.reference,
        })
        .collect();
    let failed = |phase| move |error| ReleasePublishError { phase, error };
    publisher
        .check(&named)
        .await
        .map_err(failed(PublishPhase::Check))?;
    publisher
        .publish(&named)
        .await
        .map_err(failed(PublishPhase::Publish))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn registry_failures_say_that_bundle_and_catalog_are_untouched() {
        let reference = || {
            PublishError::Reference(olmkit_image::remote::RegistryError::InvalidReference {
                reference: "x".into(),
                message: "bad".into(),
            })
        };
        let check = ReleasePublishError {
            phase: PublishPhase::Check,
            error: reference(),
        };
        assert_eq!(
            check.hint(),
            Some("nothing was pushed and nothing under bundle/ or catalog/ was changed")
        );
        let publish = ReleasePublishError {
            phase: PublishPhase::Publish,
            error: reference(),
        };
        assert!(publish.hint().unwrap().ends_with("once the registry works"));
        let layout = ReleasePublishError {
            phase: PublishPhase::Publish,
            error: PublishError::Layout(olmkit_image::layout::WriteLayoutError::InvalidRefName {
                name: "x".into(),
                reason: "bad".into(),
            }),
        };
        assert_eq!(layout.hint(), None);
    }
}
