//! Stage 5, build ([`Validated::build`] → [`Built`]): the operator (unless built for the CSV
//! already), bundle and catalog images ([`crate::images`]), with the catalog entries planned
//! between the bundle and catalog images ([`crate::plan::plan_catalog`]): they name the bundle
//! image, by digest with `--use-image-digests`, and the catalog image packs them. The operator
//! image is checked against the CSV before anything is written.

use crate::images::{ImageKind, ImagesError, bundle_step, catalog_step, check_operator, no_repo};
use crate::plan::plan_catalog;
use crate::validate::Validated;
use crate::{Event, Progress, Release, ReleaseConfig, Stage};

/// A release with its images built and its catalog changes planned: the fifth stage, which
/// [`Built::publish`](crate::publish) publishes. With `--plan` it is the last one: its
/// [`Release`] is what would be released.
#[derive(Debug)]
pub struct Built {
    pub(crate) config: ReleaseConfig,
    pub(crate) release: Release,
}

impl Built {
    /// The release as decided.
    pub fn release(&self) -> &Release {
        &self.release
    }
}

impl Validated {
    /// Builds the operator (unless built for the CSV already) and bundle images, plans the
    /// catalog entries naming the bundle image, then builds the catalog image; checks the
    /// operator image against the CSV.
    pub fn build(self, progress: &mut Progress<'_>) -> Result<Built, ImagesError> {
        let Validated {
            config,
            catalog,
            decisions,
            mut images,
            bundle,
            checked,
        } = self;
        if config.images_on() {
            progress(Event::Stage(Stage::Images));
        }
        let bundle_ref = bundle_step(&config, &decisions, &bundle, &mut images, progress)?;
        check_operator(&images, &checked.loaded)?;
        let image_in_catalog = match &decisions.recorded_image {
            // A released version keeps the bundle image its catalog entry names.
            Some(image) => image.clone(),
            None => bundle_ref.ok_or_else(|| no_repo(ImageKind::Bundle))?,
        };
        let plan = plan_catalog(&decisions, &catalog, &checked.loaded, &image_in_catalog)
            .map_err(|e| ImagesError::CatalogPlan(Box::new(e)))?;
        catalog_step(&config, &decisions, &catalog, &plan, &mut images, progress)?;
        let mut notes = bundle.notes.clone();
        notes.extend(checked.notes);
        notes.extend(images.notes);
        let release = Release {
            package: decisions.package,
            version: decisions.version,
            csv_name: bundle.csv_name.clone(),
            bundle_dir: decisions.bundle_dir,
            generated: bundle,
            bundle_unchanged: checked.bundle_unchanged,
            plan,
            catalog,
            report: checked.report,
            notes,
            images: images.images,
            skipped_catalog: images.skipped_catalog,
            _staging: images.staging,
        };
        Ok(Built { config, release })
    }
}
