//! The generic "files → image" builder and the [`Image`] it produces.
//!
//! [`build_image`] is pure: an [`ImageSpec`] (layer trees, runtime config, labels, platform,
//! creation time) goes in, an [`Image`] (exact manifest bytes, config bytes and layer blobs,
//! all content-addressed) comes out, with no I/O. Manifest and config are serialized as
//! compact JSON with object keys sorted, so the manifest digest depends only on the inputs —
//! oci-spec keeps labels and annotations in hash maps, whose iteration order is random.
//! Writers ([`crate::layout`], [`crate::push`]) take the resulting bytes as they are.

use crate::digest::Digest;
use crate::layer::{Blob, Layer, build_layer};
use crate::tree::FileTree;
use oci_spec::image::{
    Arch, ConfigBuilder, DescriptorBuilder, HistoryBuilder, ImageConfiguration,
    ImageConfigurationBuilder, ImageManifest, ImageManifestBuilder, MediaType, Os, RootFsBuilder,
};
use serde::Serialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// Media type of OCI image manifests.
pub const MEDIA_TYPE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of OCI image configs.
pub const MEDIA_TYPE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// Media type of OCI image indexes.
pub const MEDIA_TYPE_INDEX: &str = "application/vnd.oci.image.index.v1+json";

pub use crate::error::BuildImageError;

/// Operating system and CPU architecture of an image, in GOOS/GOARCH terms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Platform {
    /// `linux`.
    pub os: String,
    /// `amd64`, `arm64`, ...
    pub architecture: String,
    /// CPU variant (`v8` for arm64), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl Platform {
    /// `linux/amd64`.
    pub fn linux_amd64() -> Self {
        Self {
            os: "linux".into(),
            architecture: "amd64".into(),
            variant: None,
        }
    }

    /// Parses `os/arch[/variant]`.
    pub fn parse(s: &str) -> Result<Self, BuildImageError> {
        let invalid = || BuildImageError::Invalid {
            what: format!("platform {s:?}"),
            reason: "expected os/arch[/variant], e.g. linux/amd64".into(),
        };
        let parts: Vec<&str> = s.split('/').collect();
        let ok = |p: &&str| {
            !p.is_empty()
                && p.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
        };
        match parts.as_slice() {
            [os, arch] if ok(os) && ok(arch) => Ok(Self {
                os: os.to_string(),
                architecture: arch.to_string(),
                variant: None,
            }),
            [os, arch, v] if ok(os) && ok(arch) && ok(v) => Ok(Self {
                os: os.to_string(),
                architecture: arch.to_string(),
                variant: Some(v.to_string()),
            }),
            _ => Err(invalid()),
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// One layer to build: its files and the history line describing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerSpec {
    /// The files.
    pub tree: FileTree,
    /// `created_by` of the layer's history entry, e.g. `bundle-tool: operator binary`.
    pub created_by: String,
}

/// How a container of the image runs (the config's `config` object).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// `uid:gid` (numeric, so `runAsNonRoot` can verify it) or a user name.
    pub user: Option<String>,
    /// Program and fixed arguments.
    pub entrypoint: Vec<String>,
    /// Default arguments.
    pub cmd: Vec<String>,
    /// `NAME=value` entries.
    pub env: Vec<String>,
    /// Working directory.
    pub working_dir: Option<String>,
    /// `port/proto` entries, e.g. `50051/tcp`.
    pub exposed_ports: Vec<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Signal that stops the container, e.g. `SIGTERM`.
    pub stop_signal: Option<String>,
}

/// Everything an image is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageSpec {
    /// Layers, base first.
    pub layers: Vec<LayerSpec>,
    /// Runtime configuration.
    pub config: RuntimeConfig,
    /// Manifest annotations.
    pub annotations: BTreeMap<String, String>,
    /// Creation time: the config's `created`, every history entry's time and every tar mtime.
    pub created: jiff::Timestamp,
    /// Target platform.
    pub platform: Platform,
    /// Author recorded in the config, if any.
    pub author: Option<String>,
}

/// A built (or loaded) image: exact manifest and config bytes and the layer blobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// The manifest; its digest is the image digest.
    pub manifest: Blob,
    /// The config.
    pub config: Blob,
    /// Layer blobs, base first.
    pub layers: Vec<Blob>,
    /// Platform from the config (for index entries).
    pub platform: Platform,
}

impl Image {
    /// The image (manifest) digest.
    pub fn digest(&self) -> &Digest {
        &self.manifest.digest
    }

    /// Config and layer blobs, in the order a registry needs them before the manifest.
    pub fn blobs(&self) -> impl Iterator<Item = &Blob> {
        std::iter::once(&self.config).chain(self.layers.iter())
    }

    /// Sum of the compressed sizes of config and layers (what a pull downloads).
    pub fn compressed_size(&self) -> u64 {
        self.blobs().map(Blob::size).sum()
    }

    /// Assembles an image from stored parts, checking that the manifest references exactly
    /// this config and these layers.
    pub fn from_parts(
        manifest: Vec<u8>,
        config: Vec<u8>,
        layers: Vec<Blob>,
    ) -> Result<Self, AssembleImageError> {
        let m: ImageManifest = serde_json::from_slice(&manifest).map_err(|e| {
            AssembleImageError(format!("manifest is not an OCI image manifest: {e}"))
        })?;
        let config_blob = Blob::new(m.config().media_type().to_string(), config);
        if m.config().digest().to_string() != config_blob.digest.to_string() {
            return Err(AssembleImageError(format!(
                "config digest {} does not match the manifest's {}",
                config_blob.digest,
                m.config().digest()
            )));
        }
        if m.layers().len() != layers.len() {
            return Err(AssembleImageError(format!(
                "manifest lists {} layers, {} given",
                m.layers().len(),
                layers.len()
            )));
        }
        for (d, b) in m.layers().iter().zip(&layers) {
            if d.digest().to_string() != b.digest.to_string() {
                return Err(AssembleImageError(format!(
                    "layer {} does not match the manifest's {}",
                    b.digest,
                    d.digest()
                )));
            }
        }
        let cfg: ImageConfiguration = serde_json::from_slice(&config_blob.data)
            .map_err(|e| AssembleImageError(format!("config is not an OCI image config: {e}")))?;
        let platform = Platform {
            os: cfg.os().to_string(),
            architecture: cfg.architecture().to_string(),
            variant: cfg.variant().clone(),
        };
        let media_type = m
            .media_type()
            .as_ref()
            .map(|t| t.to_string())
            .unwrap_or_else(|| MEDIA_TYPE_MANIFEST.to_string());
        Ok(Self {
            manifest: Blob::new(media_type, manifest),
            config: config_blob,
            layers,
            platform,
        })
    }
}

/// Stored manifest, config and layers do not form one image.
#[derive(Debug, Error)]
#[error("inconsistent image: {0}")]
pub struct AssembleImageError(pub String);

/// Serializes `value` as compact JSON with every object's keys sorted.
pub fn canonical_json<T: Serialize>(
    what: &'static str,
    value: &T,
) -> Result<Vec<u8>, BuildImageError> {
    let assemble = |e: serde_json::Error| BuildImageError::Assemble {
        what,
        message: e.to_string(),
    };
    let mut v = serde_json::to_value(value).map_err(assemble)?;
    olmkit_core::gojson::sort_keys(&mut v);
    serde_json::to_vec(&v).map_err(assemble)
}

/// The image config's `config` section (user, entrypoint, command, environment, labels...);
/// empty fields are left out.
fn runtime_config(c: &RuntimeConfig) -> Result<oci_spec::image::Config, BuildImageError> {
    let mut cfg = ConfigBuilder::default();
    if let Some(u) = &c.user {
        cfg = cfg.user(u.clone());
    }
    if !c.entrypoint.is_empty() {
        cfg = cfg.entrypoint(c.entrypoint.clone());
    }
    if !c.cmd.is_empty() {
        cfg = cfg.cmd(c.cmd.clone());
    }
    if !c.env.is_empty() {
        cfg = cfg.env(c.env.clone());
    }
    if let Some(w) = &c.working_dir {
        cfg = cfg.working_dir(w.clone());
    }
    if !c.exposed_ports.is_empty() {
        cfg = cfg.exposed_ports(c.exposed_ports.clone());
    }
    if !c.labels.is_empty() {
        cfg = cfg.labels(
            c.labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<std::collections::HashMap<_, _>>(),
        );
    }
    if let Some(s) = &c.stop_signal {
        cfg = cfg.stop_signal(s.clone());
    }
    cfg.build().map_err(assemble("config"))
}

/// The image manifest: the config's and the layers' descriptors, and the annotations.
fn manifest(
    spec: &ImageSpec,
    config: &Blob,
    layers: &[Layer],
) -> Result<ImageManifest, BuildImageError> {
    let descriptor = |media: &str, digest: &Digest, size: u64| {
        DescriptorBuilder::default()
            .media_type(MediaType::from(media))
            .digest(digest.to_oci())
            .size(size)
            .build()
            .map_err(assemble("manifest"))
    };
    let layer_descriptors = layers
        .iter()
        .map(|l| descriptor(&l.blob.media_type, &l.blob.digest, l.blob.size()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(
            MEDIA_TYPE_CONFIG,
            &config.digest,
            config.size(),
        )?)
        .layers(layer_descriptors);
    if !spec.annotations.is_empty() {
        manifest = manifest.annotations(
            spec.annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<std::collections::HashMap<_, _>>(),
        );
    }
    manifest.build().map_err(assemble("manifest"))
}

fn assemble(what: &'static str) -> impl Fn(oci_spec::OciSpecError) -> BuildImageError {
    move |e| BuildImageError::Assemble {
        what,
        message: e.to_string(),
    }
}

/// Checks that a label or annotation key is usable (non-empty, no whitespace or `=`).
pub fn check_label_key(key: &str) -> Result<(), BuildImageError> {
    if key.is_empty() || key.contains('=') || key.chars().any(char::is_whitespace) {
        return Err(BuildImageError::Invalid {
            what: format!("label {key:?}"),
            reason: "label keys must be non-empty and contain no whitespace or `=`".into(),
        });
    }
    Ok(())
}

/// Builds every layer (in parallel) and assembles config and manifest.
pub fn build_image(spec: &ImageSpec) -> Result<Image, BuildImageError> {
    for k in spec.config.labels.keys().chain(spec.annotations.keys()) {
        check_label_key(k)?;
    }
    let mtime = u64::try_from(spec.created.as_second()).map_err(|_| BuildImageError::Invalid {
        what: "build time".into(),
        reason: "must not be before 1970-01-01 (check SOURCE_DATE_EPOCH)".into(),
    })?;
    let layers: Vec<Layer> = std::thread::scope(|s| {
        let handles: Vec<_> = spec
            .layers
            .iter()
            .map(|l| s.spawn(move || build_layer(&l.tree, mtime)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BuildImageError::Assemble {
                        what: "layers",
                        message: "a layer builder thread panicked".into(),
                    })
                })
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    assemble_image(spec, layers)
}

/// Assembles config and manifest around already built layers (one per `spec.layers` entry).
pub fn assemble_image(spec: &ImageSpec, layers: Vec<Layer>) -> Result<Image, BuildImageError> {
    let created = olmkit_core::epoch::rfc3339(spec.created);
    let runtime = runtime_config(&spec.config)?;
    let history = spec
        .layers
        .iter()
        .map(|l| {
            HistoryBuilder::default()
                .created(created.clone())
                .created_by(l.created_by.clone())
                .build()
                .map_err(assemble("config"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let rootfs = RootFsBuilder::default()
        .typ("layers")
        .diff_ids(
            layers
                .iter()
                .map(|l| l.diff_id.to_string())
                .collect::<Vec<_>>(),
        )
        .build()
        .map_err(assemble("config"))?;
    let mut image_config = ImageConfigurationBuilder::default()
        .created(created)
        .architecture(Arch::from(spec.platform.architecture.as_str()))
        .os(Os::from(spec.platform.os.as_str()))
        .config(runtime)
        .rootfs(rootfs)
        .history(history);
    if let Some(v) = &spec.platform.variant {
        image_config = image_config.variant(v.clone());
    }
    if let Some(a) = &spec.author {
        image_config = image_config.author(a.clone());
    }
    let image_config = image_config.build().map_err(assemble("config"))?;
    let config = Blob::new(MEDIA_TYPE_CONFIG, canonical_json("config", &image_config)?);

    let manifest = manifest(spec, &config, &layers)?;
    let manifest = Blob::new(MEDIA_TYPE_MANIFEST, canonical_json("manifest", &manifest)?);
    Ok(Image {
        manifest,
        config,
        layers: layers.into_iter().map(|l| l.blob).collect(),
        platform: spec.platform.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::FILE_MODE;
    use serde_json::Value;

    fn spec() -> ImageSpec {
        let mut a = FileTree::new();
        a.add_file("/a.txt", b"a".to_vec(), FILE_MODE).unwrap();
        let mut b = FileTree::new();
        b.add_file("/b.txt", b"b".to_vec(), FILE_MODE).unwrap();
        let mut labels = BTreeMap::new();
        for i in 0..20 {
            labels.insert(format!("label.{i}"), format!("v{i}"));
        }
        ImageSpec {
            layers: vec![
                LayerSpec {
                    tree: a,
                    created_by: "a".into(),
                },
                LayerSpec {
                    tree: b,
                    created_by: "b".into(),
                },
            ],
            config: RuntimeConfig {
                user: Some("65532:65532".into()),
                entrypoint: vec!["/a".into()],
                exposed_ports: vec!["9443/tcp".into(), "8080/tcp".into()],
                labels,
                ..Default::default()
            },
            annotations: BTreeMap::from([("org.opencontainers.image.title".into(), "t".into())]),
            created: jiff::Timestamp::from_second(1_700_000_000).unwrap(),
            platform: Platform::linux_amd64(),
            author: None,
        }
    }

    #[test]
    fn deterministic_despite_hash_maps() {
        let first = build_image(&spec()).unwrap();
        for _ in 0..5 {
            assert_eq!(build_image(&spec()).unwrap(), first);
        }
    }

    #[test]
    fn manifest_and_config_shape() {
        let img = build_image(&spec()).unwrap();
        let m: Value = serde_json::from_slice(&img.manifest.data).unwrap();
        assert_eq!(m["mediaType"], MEDIA_TYPE_MANIFEST);
        assert_eq!(m["config"]["digest"], img.config.digest.to_string());
        assert_eq!(m["layers"].as_array().unwrap().len(), 2);
        let c: Value = serde_json::from_slice(&img.config.data).unwrap();
        assert_eq!(c["created"], "2023-11-14T22:13:20Z");
        assert_eq!(c["rootfs"]["diff_ids"].as_array().unwrap().len(), 2);
        assert_eq!(c["history"][1]["created_by"], "b");
        let back = Image::from_parts(
            img.manifest.data.clone(),
            img.config.data.clone(),
            img.layers.clone(),
        )
        .unwrap();
        assert_eq!(back, img);
        let err = Image::from_parts(
            img.manifest.data.clone(),
            img.config.data.clone(),
            img.layers[..1].to_vec(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("2 layers"));
    }

    #[test]
    fn changing_one_layer_changes_only_that_layer() {
        let a = build_image(&spec()).unwrap();
        let mut s = spec();
        s.layers[1].tree = FileTree::new();
        s.layers[1]
            .tree
            .add_file("/b.txt", b"B".to_vec(), FILE_MODE)
            .unwrap();
        let b = build_image(&s).unwrap();
        assert_eq!(a.layers[0], b.layers[0]);
        assert_ne!(a.layers[1].digest, b.layers[1].digest);
        assert_ne!(a.digest(), b.digest());
    }

    #[test]
    fn bad_label_key_is_refused() {
        let mut s = spec();
        s.config.labels.insert("bad key".into(), "x".into());
        assert!(matches!(
            build_image(&s),
            Err(BuildImageError::Invalid { .. })
        ));
    }

    #[test]
    fn platform_parse() {
        assert_eq!(
            Platform::parse("linux/arm64/v8").unwrap().to_string(),
            "linux/arm64/v8"
        );
        assert!(Platform::parse("linux").is_err());
        assert!(Platform::parse("Linux/amd64").is_err());
    }
}
