//! OLM v1 (operator-controller + catalogd): what a registry+v1 bundle needs to be installed as a
//! ClusterExtension, and whether OLM v1 can install it at all.
//!
//! [`BundleFacts`] is the bundle as OLM v1 sees it (CSV, other manifests, FBC properties), built
//! from a bundle directory or from a catalog bundle carrying `olm.bundle.object` properties.
//! [`support`] checks it against OLM v1's rules (pure, reports every problem; the rules are
//! olmkit-bundle's [`olmkit_bundle::validate::olmv1`], run on [`BundleFacts::olmv1_view`]); [`manifests`]
//! derives the ClusterCatalog, ClusterExtension and the installer ServiceAccount with the RBAC
//! OLM v1 needs to act on the bundle's behalf.

pub mod live;
pub mod manifests;
pub mod resolve;
pub mod support;

use base64::Engine;
use olmkit_bundle::validate::olmv1::{Olmv1Bundle, Olmv1Object, Olmv1Property};
use olmkit_catalog::declcfg::Bundle as CatalogBundle;
use olmkit_catalog::property;
use olmkit_catalog::property::Property;
use serde_json::Value;
use std::borrow::Cow;
use thiserror::Error;

/// One manifest of a bundle, with the file it came from when known.
#[derive(Clone, Debug, PartialEq)]
pub struct BundleObject {
    /// File (relative to the bundle or catalog root), if known.
    pub file: Option<String>,
    /// The object.
    pub object: Value,
}

impl BundleObject {
    /// A borrowed view for the OLM v1 checks.
    pub fn olmv1_view(&self) -> Olmv1Object<'_> {
        Olmv1Object {
            file: self.file.as_deref(),
            object: &self.object,
        }
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        olmkit_core::object::kind(&self.object)
    }
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        olmkit_core::object::name(&self.object)
    }
}

/// A bundle as OLM v1 sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct BundleFacts {
    /// Package name.
    pub package: String,
    /// Where the bundle came from, for messages (`bundle/` or `catalog bundle x.v1`).
    pub origin: String,
    /// The ClusterServiceVersion.
    pub csv: BundleObject,
    /// Every other manifest.
    pub objects: Vec<BundleObject>,
    /// FBC properties (dependencies appear here as `olm.gvk.required`, `olm.package.required`,
    /// `olm.constraint`).
    pub properties: Vec<Property>,
    /// The file the dependencies come from (`metadata/dependencies.yaml`), when known.
    pub dependencies_file: Option<String>,
}

/// A bundle could not be read for OLM v1.
#[derive(Debug, Error)]
pub enum ReadBundleFactsError {
    /// No CSV among the manifests.
    #[error("{0}: no ClusterServiceVersion found")]
    NoCsv(String),
    /// The catalog bundle carries no manifests.
    #[error(
        "{0}: the catalog has no olm.bundle.object properties for this bundle (it was rendered with olm.csv.metadata only)"
    )]
    NoObjects(String),
    /// An `olm.bundle.object` could not be decoded.
    #[error("{origin}: olm.bundle.object #{index}: {message}")]
    BadObject {
        /// The bundle.
        origin: String,
        /// Index of the property among the bundle's objects.
        index: usize,
        /// Why.
        message: String,
    },
    /// The bundle directory could not be rendered to find its properties.
    #[error(transparent)]
    Render(#[from] olmkit_catalog::render::RenderBundleError),
}

impl BundleFacts {
    /// From a bundle directory (its properties, including dependencies, are rendered like
    /// `opm render` would).
    pub fn from_bundle_dir(dir: &olmkit_bundle::Bundle) -> Result<Self, ReadBundleFactsError> {
        let origin = dir.root.display().to_string();
        // opm's rules, with one olm.csv.metadata instead of every manifest embedded.
        let mut options = olmkit_catalog::render::RenderOptions::opm();
        options.bundle_objects = false;
        let rendered = olmkit_catalog::render_opm::render_bundle(
            dir,
            "bundle-image.invalid/placeholder:latest",
            &options,
        )?;
        let mut csv = None;
        let mut objects = Vec::new();
        for m in &dir.manifests {
            let o = BundleObject {
                file: Some(m.file.clone()),
                object: m.object.clone(),
            };
            if m.kind() == "ClusterServiceVersion" && csv.is_none() {
                csv = Some(o);
            } else {
                objects.push(o);
            }
        }
        let csv = csv.ok_or_else(|| ReadBundleFactsError::NoCsv(origin.clone()))?;
        Ok(Self {
            package: rendered.package,
            origin,
            csv,
            objects,
            properties: rendered.properties,
            dependencies_file: dir
                .dependencies
                .as_ref()
                .map(|_| "metadata/dependencies.yaml".to_string()),
        })
    }

    /// From a catalog `olm.bundle` blob that carries `olm.bundle.object` properties.
    pub fn from_catalog_bundle(
        bundle: &CatalogBundle,
        file: Option<&str>,
    ) -> Result<Self, ReadBundleFactsError> {
        let origin = format!("catalog bundle {}", bundle.name);
        let mut csv = None;
        let mut objects = Vec::new();
        let mut count = 0usize;
        for p in bundle
            .properties
            .iter()
            .filter(|p| p.type_ == property::BUNDLE_OBJECT)
        {
            let index = count;
            count += 1;
            let bad = |message: String| ReadBundleFactsError::BadObject {
                origin: origin.clone(),
                index,
                message,
            };
            let data = property::bundle_object_data(&p.value)
                .ok_or_else(|| bad("only inline `data` objects are supported".into()))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| bad(format!("invalid base64: {e}")))?;
            let object: Value =
                serde_json::from_slice(&bytes).map_err(|e| bad(format!("invalid JSON: {e}")))?;
            let o = BundleObject {
                file: file.map(String::from),
                object,
            };
            if o.kind() == "ClusterServiceVersion" && csv.is_none() {
                csv = Some(o);
            } else {
                objects.push(o);
            }
        }
        if count == 0 {
            return Err(ReadBundleFactsError::NoObjects(origin));
        }
        let csv = csv.ok_or_else(|| ReadBundleFactsError::NoCsv(origin.clone()))?;
        Ok(Self {
            package: bundle.package.clone(),
            origin,
            csv,
            objects,
            properties: bundle.properties.clone(),
            dependencies_file: file.map(String::from),
        })
    }

    /// The bundle as olmkit-bundle's OLM v1 checks read it (borrowed).
    pub fn olmv1_view(&self) -> Olmv1Bundle<'_> {
        Olmv1Bundle {
            package: &self.package,
            origin: Cow::Borrowed(&self.origin),
            csv: self.csv.olmv1_view(),
            objects: self.objects.iter().map(BundleObject::olmv1_view).collect(),
            properties: self
                .properties
                .iter()
                .map(|p| Olmv1Property {
                    type_: &p.type_,
                    value: &p.value,
                })
                .collect(),
            dependencies_file: self.dependencies_file.as_deref(),
        }
    }

    /// `metadata.name` of the CSV.
    pub fn csv_name(&self) -> &str {
        self.csv.name()
    }

    /// The CSV through the one lenient CSV view.
    pub fn csv_view(&self) -> olmkit_core::csv::Csv<'_> {
        olmkit_core::csv::Csv::new(&self.csv.object)
    }

    /// The CSV's install modes.
    pub fn install_modes(&self) -> Vec<crate::olm::InstallMode> {
        crate::olm::InstallMode::of_csv(self.csv_view())
    }

    /// The bundle's CRDs.
    pub fn crds(&self) -> impl Iterator<Item = &BundleObject> {
        self.objects
            .iter()
            .filter(|o| o.kind() == "CustomResourceDefinition")
    }

    /// Where findings about the CSV point.
    pub fn csv_file(&self) -> String {
        self.csv.file.clone().unwrap_or_else(|| self.origin.clone())
    }
}
