//! In-memory form of a registry+v1 bundle.
//!
//! Objects are kept as `serde_json::Value` so that any operator's manifests load, including
//! fields this tool does not know; typed views are accessors over the JSON (the CSV's is
//! [`olmkit_core::csv::Csv`], see [`Bundle::csv_view`]). [`Manifest`] is one object of a bundle
//! or of a manifest stream, with where it came from.

use olmkit_core::csv::Csv;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Annotation keys of the bundle format.
pub mod keys {
    /// `registry+v1`.
    pub const MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
    /// `manifests/`.
    pub const MANIFESTS: &str = "operators.operatorframework.io.bundle.manifests.v1";
    /// `metadata/`.
    pub const METADATA: &str = "operators.operatorframework.io.bundle.metadata.v1";
    /// Package name.
    pub const PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
    /// Comma-separated channels.
    pub const CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
    /// Default channel.
    pub const DEFAULT_CHANNEL: &str = "operators.operatorframework.io.bundle.channel.default.v1";
}

/// One object of a bundle's `manifests/` folder, or of a manifest stream (`kubectl kustomize`
/// output, `--input-dir` files), with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// Where the object is: for a bundle, the path relative to the bundle root (e.g.
    /// `manifests/foo.clusterserviceversion.yaml`); for a stream, a file path or `<stdin>`.
    pub file: String,
    /// 0-based position of the document in its file. Streams count empty documents too (so
    /// messages say "document 7" of the seventh `---` section a user sees); items of a `kind:
    /// List` document share their list's position.
    pub doc_index: usize,
    /// For items of a `kind: List` document of a stream, the 0-based item index.
    pub item: Option<usize>,
    /// The object.
    pub object: Value,
}

impl Manifest {
    /// The object `object`, document `doc_index` (0-based) of `file`, not a `List` item.
    pub fn new(file: impl Into<String>, doc_index: usize, object: Value) -> Self {
        Self {
            file: file.into(),
            doc_index,
            item: None,
            object,
        }
    }
    /// `kind` of the object, or "" when missing.
    pub fn kind(&self) -> &str {
        olmkit_core::object::kind(&self.object)
    }
    /// `apiVersion` of the object, or "" when missing.
    pub fn api_version(&self) -> &str {
        olmkit_core::object::api_version(&self.object)
    }
    /// `metadata.name` of the object, or "" when missing.
    pub fn name(&self) -> &str {
        olmkit_core::object::name(&self.object)
    }
    /// The object viewed as a ClusterServiceVersion (whatever its kind: the view is lenient).
    pub fn csv_view(&self) -> Csv<'_> {
        Csv::new(&self.object)
    }
    /// `<file> document <n>` (1-based, as a user counts), the position part of
    /// [`Manifest::label`].
    pub fn position(&self) -> String {
        let n = self.doc_index + 1;
        match self.item {
            Some(i) => format!("{} document {n} item {i}", self.file),
            None => format!("{} document {n}", self.file),
        }
    }
    /// `<file> document <n> (<Kind> <name>)`: how errors name this document.
    pub fn label(&self) -> String {
        let (kind, name) = (self.kind(), self.name());
        match (kind.is_empty(), name.is_empty()) {
            (true, _) => self.position(),
            (false, true) => format!("{} ({kind})", self.position()),
            (false, false) => format!("{} ({kind} {name})", self.position()),
        }
    }
}

/// A registry+v1 bundle as found on disk.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bundle {
    /// The bundle directory.
    pub root: PathBuf,
    /// Every object under `manifests/`, sorted by file name then document index.
    pub manifests: Vec<Manifest>,
    /// `metadata/annotations.yaml` `annotations:` map (empty if the file is missing).
    pub annotations: BTreeMap<String, String>,
    /// Path of the annotations file relative to the root, if present.
    pub annotations_file: Option<String>,
    /// `metadata/dependencies.yaml`, if present.
    pub dependencies: Option<Value>,
    /// `metadata/properties.yaml`, if present.
    pub properties: Option<Value>,
    /// `LABEL`s of `bundle.Dockerfile` in the root, if present.
    pub dockerfile_labels: Option<BTreeMap<String, String>>,
    /// Other files of the bundle (for example `tests/scorecard/config.yaml`), relative paths.
    pub other_files: Vec<String>,
    /// Text of `bundle.Dockerfile`, if present (validation checks its COPY sources).
    pub dockerfile: Option<String>,
    /// Raw bytes of every file under `manifests/`, by relative path (validation checks sizes).
    pub manifest_files: BTreeMap<String, Vec<u8>>,
    /// What the loader read only by being as lenient as Go's YAML decoder (duplicate keys,
    /// under-indented quoted scalars), or skipped as upstream does (a `metadata/` file other
    /// than the annotations that does not parse). Validation reports each as a warning.
    pub load_warnings: Vec<olmkit_core::docs::ParseWarning>,
}

impl Bundle {
    /// The ClusterServiceVersion, if the bundle has one.
    pub fn csv(&self) -> Option<&Manifest> {
        self.manifests
            .iter()
            .find(|m| m.kind() == "ClusterServiceVersion")
    }
    /// CustomResourceDefinitions shipped in the bundle.
    pub fn crds(&self) -> impl Iterator<Item = &Manifest> {
        self.manifests
            .iter()
            .filter(|m| m.kind() == "CustomResourceDefinition")
    }
    /// Package name from the annotations.
    pub fn package(&self) -> Option<&str> {
        self.annotations.get(keys::PACKAGE).map(String::as_str)
    }
    /// Channels from the annotations, trimmed, empty entries dropped.
    pub fn channels(&self) -> Vec<String> {
        self.annotations
            .get(keys::CHANNELS)
            .map(|c| {
                c.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }
    /// Default channel from the annotations.
    pub fn default_channel(&self) -> Option<&str> {
        self.annotations
            .get(keys::DEFAULT_CHANNEL)
            .map(String::as_str)
    }
    /// The ClusterServiceVersion viewed through [`Csv`], if the bundle has one.
    pub fn csv_view(&self) -> Option<Csv<'_>> {
        self.csv().map(Manifest::csv_view)
    }
    /// `metadata.name` of the CSV.
    pub fn csv_name(&self) -> Option<&str> {
        self.csv_view()?.name()
    }
    /// `spec.version` of the CSV.
    pub fn version(&self) -> Option<&str> {
        self.csv_view()?.version()
    }
    /// `spec.replaces` of the CSV.
    pub fn replaces(&self) -> Option<&str> {
        self.csv_view()?.replaces().filter(|s| !s.is_empty())
    }
    /// `spec.skips` of the CSV.
    pub fn skips(&self) -> Vec<String> {
        self.csv_view()
            .map(|c| c.skips().map(String::from).collect())
            .unwrap_or_default()
    }
    /// `olm.skipRange` annotation of the CSV.
    pub fn skip_range(&self) -> Option<&str> {
        self.csv_view()?.skip_range()
    }
}
