//! Pulling an image's files out of an OCI layout or a registry into a fresh directory, bounded
//! and confined like every other input bundle-tool reads.
//!
//! What `opm render IMAGE` does first (operator-registry `alpha/action/render.go`,
//! `imageToDeclcfg`: `Registry.Pull`, `Registry.Labels`, `Registry.Unpack` into a temporary
//! directory, then a bundle or a catalog by the image's labels), for two sources:
//! - an OCI image layout as skopeo writes it, named `oci:DIR[:REF]` (containers/image's
//!   `oci:` transport: the first `:` after `DIR` separates the ref name; without one, the
//!   layout's only image);
//! - a registry (`[docker://]REGISTRY/REPO[:TAG|@DIGEST]`), with the push code's credentials
//!   and retries ([`crate::remote`]).
//!
//! The labels decide what is unpacked, before any layer is read: a bundle image
//! (`operators.operatorframework.io.bundle.package.v1`) gives `manifests/` and `metadata/`
//! (where operator-registry's `NewImageInput` looks), a catalog image
//! (`operators.operatorframework.io.index.configs.v1`) its configs directory; any other image
//! is refused with opm's message, and nothing else of it is written.
//!
//! Bounds ([`PullLimits`]): a manifest and a config are refused above 4 MiB; a layer's declared
//! size is checked before it is read and the bytes received are counted (a registry that sends
//! more is cut off), then its digest is checked; decompression stops past a total budget; each
//! file's size is checked from its tar header before it is written, and files are written only
//! under the directories the labels name. Confinement: entry names with `..` are refused,
//! absolute names are taken relative to the image root, only regular files and directories are
//! created (mode 0644/0755, owner the caller's); a symbolic or hard link becomes a copy of the
//! file it names inside the image, and a link whose target leaves the image root is refused,
//! naming it. So the unpacked tree holds no link at all. Whiteouts (`.wh.NAME`,
//! `.wh..wh..opq`) are applied as layers are stacked. A layout's blobs are opened through
//! `olmkit_core::confine` (no link out of the layout is followed).
//!
//! A known gap: a registry manifest is fetched by oci-client, which reads the answer whole
//! before the 4 MiB check (bounded in time by the read timeout, not in bytes).

use crate::digest::Digest;
use crate::remote::{RegistryError, RemoteOptions, Session, parse_reference};
use oci_client::{Reference, RegistryOperation};
use olmkit_core::confine::{InputRoot, SizeLimit};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// The label of a bundle image's package (operator-registry `bundle.PackageLabel`).
pub const BUNDLE_PACKAGE_LABEL: &str = "operators.operatorframework.io.bundle.package.v1";
/// The label of a catalog image's configs directory (`containertools.ConfigsLocationLabel`).
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// Media types accepted for a manifest.
const ACCEPTED: &[&str] = crate::inspect::ACCEPTED_MANIFEST_TYPES;

/// How much a pull may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PullLimits {
    /// A manifest, an index or a config: 4 MiB (the distribution spec's manifest bound).
    pub document: u64,
    /// One layer as stored (compressed): 2 GiB.
    pub layer: u64,
    /// Everything decompressed from all layers, files not unpacked included: 16 GiB.
    pub decompressed: u64,
    /// Everything written: 4 GiB.
    pub written: u64,
    /// One file of a bundle image (`MANIFEST_FILE`, 64 MiB).
    pub bundle_file: SizeLimit,
    /// One file of a catalog image (`IMAGE_LAYER_FILE`, 4 GiB).
    pub catalog_file: SizeLimit,
}

impl Default for PullLimits {
    fn default() -> Self {
        Self {
            document: 4 << 20,
            layer: 2 << 30,
            decompressed: 16 << 30,
            written: 4 << 30,
            bundle_file: olmkit_core::confine::MANIFEST_FILE,
            catalog_file: olmkit_core::confine::IMAGE_LAYER_FILE,
        }
    }
}

/// Where an image comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageSource {
    /// `oci:DIR[:REF]`.
    Layout {
        /// The layout directory.
        dir: PathBuf,
        /// The `org.opencontainers.image.ref.name` (the only image when `None`).
        name: Option<String>,
    },
    /// A registry reference.
    Registry(String),
}

impl ImageSource {
    /// Parses `oci:DIR[:REF]`, `docker://REF` or a plain reference.
    pub fn parse(s: &str) -> Result<Self, PullError> {
        if let Some(rest) = s.strip_prefix("oci:") {
            let (dir, name) = match rest.split_once(':') {
                Some((d, n)) if !n.is_empty() => (d, Some(n.to_string())),
                Some((d, _)) => (d, None),
                None => (rest, None),
            };
            if dir.is_empty() {
                return Err(PullError::Reference {
                    reference: s.to_string(),
                    message: "oci: needs a layout directory (oci:DIR[:REF])".into(),
                });
            }
            return Ok(ImageSource::Layout {
                dir: PathBuf::from(dir),
                name,
            });
        }
        let r = s.strip_prefix("docker://").unwrap_or(s);
        parse_reference(r).map_err(|e| PullError::Reference {
            reference: s.to_string(),
            message: e.to_string(),
        })?;
        Ok(ImageSource::Registry(r.to_string()))
    }

    /// The image reference a catalog records for this image (an `olm.bundle`'s `image`): the
    /// registry reference as given, or for a layout the ref name when it is a full image
    /// reference (what `image build --tag` and `skopeo copy ... oci:DIR:REF` record), else
    /// the `oci:` name itself.
    pub fn catalog_image(&self, given: &str) -> String {
        match self {
            ImageSource::Registry(r) => r.clone(),
            ImageSource::Layout { name: Some(n), .. }
                if olmkit_core::image_ref::ImageRef::parse(n).is_ok() && n.contains('/') =>
            {
                n.clone()
            }
            ImageSource::Layout { .. } => given.to_string(),
        }
    }
}

/// What kind of image was pulled, by its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// A bundle image: `manifests/` and `metadata/` at the root of the unpacked directory.
    Bundle,
    /// A catalog image: the FBC at this path below the unpacked directory.
    Catalog(PathBuf),
}

/// An unpacked image.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The image's config labels.
    pub labels: BTreeMap<String, String>,
    /// Its manifest digest.
    pub digest: String,
    /// What it is.
    pub kind: ImageKind,
    /// Files written.
    pub files: usize,
}

/// Pulling or unpacking failed; the destination may hold part of the image (callers unpack
/// into a temporary directory).
#[derive(Debug, Error)]
pub enum PullError {
    /// Not an image reference.
    #[error("{reference}: not an image reference: {message}")]
    Reference {
        /// What was given.
        reference: String,
        /// Why.
        message: String,
    },
    /// Reading the layout failed.
    #[error("{image}: {message}")]
    Layout {
        /// The image.
        image: String,
        /// What failed.
        message: String,
    },
    /// Talking to the registry failed.
    #[error("cannot pull {reference}: {error}")]
    Registry {
        /// The reference.
        reference: String,
        /// What failed.
        error: RegistryError,
    },
    /// A manifest, config or layer is malformed, too large, or not what its digest says.
    #[error("{image}: {message}")]
    Malformed {
        /// The image.
        image: String,
        /// What is wrong.
        message: String,
    },
    /// The image is neither a bundle nor a catalog (opm's message).
    #[error("render {image:?}: image type could not be determined{found}")]
    UnknownKind {
        /// The image.
        image: String,
        /// `: image has no labels`, or the labels found.
        found: String,
    },
    /// A layer entry was refused.
    #[error("{image}: layer {layer}: {entry}: {message}")]
    Entry {
        /// The image.
        image: String,
        /// The layer digest.
        layer: String,
        /// The entry name.
        entry: String,
        /// Why.
        message: String,
    },
    /// Writing the unpacked files failed.
    #[error("{path}: {source}")]
    Write {
        /// Where.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl PullError {
    /// True for problems with the input (exit 1).
    pub fn is_user_error(&self) -> bool {
        match self {
            PullError::Registry { error, .. } => error.is_user_error(),
            PullError::Write { .. } => false,
            _ => true,
        }
    }

    /// What the user can do about it.
    pub fn hints(&self) -> Vec<String> {
        match self {
            PullError::Registry { error, .. } => error.hints(),
            PullError::Layout { .. } => {
                vec!["name an image of the layout as oci:DIR:REF (bundle-tool image inspect DIR lists them)".into()]
            }
            PullError::UnknownKind { .. } => vec![
                "render takes bundle images (label operators.operatorframework.io.bundle.package.v1) and catalog images (label operators.operatorframework.io.index.configs.v1)".into(),
            ],
            _ => Vec::new(),
        }
    }
}

/// One layer to read.
struct LayerRef {
    digest: Digest,
    size: u64,
    media_type: String,
}

/// What the unpacker keeps across layers.
struct Unpacker<'a> {
    image: String,
    root: PathBuf,
    wanted: Vec<PathBuf>,
    file_limit: SizeLimit,
    limits: &'a PullLimits,
    decompressed: u64,
    written: u64,
    files: BTreeSet<PathBuf>,
    /// Links (path, target as a path in the image, hard), materialized at the end.
    links: BTreeMap<PathBuf, (PathBuf, bool)>,
}

/// Counts what is read through it and fails past a budget.
struct Budget<'b, R> {
    inner: R,
    used: &'b mut u64,
    max: u64,
    what: &'static str,
}

impl<R: Read> Read for Budget<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        *self.used += n as u64;
        if *self.used > self.max {
            return Err(std::io::Error::other(format!(
                "{} exceeds {} bytes",
                self.what, self.max
            )));
        }
        Ok(n)
    }
}

/// Hashes what is read through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    read: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(b) = buf.get(..n) {
            self.hasher.update(b);
        }
        self.read += n as u64;
        Ok(n)
    }
}

/// An entry name as a relative path in the image, or why it is refused.
fn entry_path(raw: &Path) -> Result<PathBuf, String> {
    let mut out = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => return Err("a name with `..` is refused".into()),
            Component::Prefix(_) => return Err("not a Unix path".into()),
        }
    }
    Ok(out)
}

/// Resolves a link target (relative to the link's directory, or absolute from the image root)
/// lexically inside the image; `None` when it leaves the root.
fn resolve_in_image(link: &Path, target: &Path) -> Option<PathBuf> {
    let mut parts: Vec<std::ffi::OsString> = if target.is_absolute() {
        Vec::new()
    } else {
        link.parent()
            .map(|p| p.iter().map(|s| s.to_os_string()).collect())
            .unwrap_or_default()
    };
    for c in target.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_os_string()),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(parts.iter().collect())
}

impl Unpacker<'_> {
    fn wanted(&self, p: &Path) -> bool {
        self.wanted.iter().any(|w| p.starts_with(w))
    }

    fn entry_err(&self, layer: &LayerRef, entry: &Path, message: impl Into<String>) -> PullError {
        PullError::Entry {
            image: self.image.clone(),
            layer: layer.digest.to_string(),
            entry: entry.display().to_string(),
            message: message.into(),
        }
    }

    fn write_err(path: PathBuf) -> impl FnOnce(std::io::Error) -> PullError {
        move |source| PullError::Write { path, source }
    }

    /// Removes a path of the image (whiteouts, replaced entries).
    fn remove(&mut self, p: &Path) -> Result<(), PullError> {
        let full = self.root.join(p);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => {
                std::fs::remove_dir_all(&full).map_err(Self::write_err(full.clone()))?
            }
            Ok(_) => std::fs::remove_file(&full).map_err(Self::write_err(full.clone()))?,
            Err(_) => {}
        }
        self.files.retain(|f| !f.starts_with(p));
        self.links.retain(|l, _| !l.starts_with(p));
        Ok(())
    }

    /// Makes the directories of `p` (inside the root; the tree holds no links).
    fn mkdirs(&self, p: &Path) -> Result<(), PullError> {
        let full = self.root.join(p);
        std::fs::create_dir_all(&full).map_err(Self::write_err(full))
    }

    /// Reads one decompressed layer stream.
    fn unpack_layer<R: Read>(&mut self, layer: &LayerRef, reader: R) -> Result<(), PullError> {
        let mut used = self.decompressed;
        let max = self.limits.decompressed;
        {
            let budget = Budget {
                inner: reader,
                used: &mut used,
                max,
                what: "the decompressed image",
            };
            let mut archive = tar::Archive::new(budget);
            let entries = archive.entries().map_err(|e| PullError::Malformed {
                image: self.image.clone(),
                message: format!("layer {}: not a tar archive: {e}", layer.digest),
            })?;
            for entry in entries {
                let entry = entry.map_err(|e| PullError::Malformed {
                    image: self.image.clone(),
                    message: format!("layer {}: {e}", layer.digest),
                })?;
                self.unpack_entry(layer, entry)?;
            }
        }
        self.decompressed = used;
        Ok(())
    }

    /// Applies one entry of a layer: a whiteout, a directory, a file or a link (of the wanted
    /// paths).
    fn unpack_entry(
        &mut self,
        layer: &LayerRef,
        mut entry: tar::Entry<'_, impl Read>,
    ) -> Result<(), PullError> {
        let raw = entry
            .path()
            .map(|p| p.into_owned())
            .map_err(|e| PullError::Malformed {
                image: self.image.clone(),
                message: format!("layer {}: entry name: {e}", layer.digest),
            })?;
        let path = entry_path(&raw).map_err(|m| self.entry_err(layer, &raw, m))?;
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            return Ok(());
        };
        // Whiteouts (the OCI image spec's layer changesets).
        if name == ".wh..wh..opq" {
            if let Some(dir) = path.parent() {
                let full = self.root.join(dir);
                if let Ok(rd) = std::fs::read_dir(&full) {
                    for e in rd.flatten() {
                        self.remove(&dir.join(e.file_name()))?;
                    }
                }
            }
            return Ok(());
        }
        if let Some(gone) = name.strip_prefix(".wh.") {
            let p = path.with_file_name(gone);
            self.remove(&p)?;
            return Ok(());
        }
        if !self.wanted(&path) {
            return Ok(());
        }
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            self.mkdirs(&path)?;
        } else if kind.is_file() {
            self.unpack_file(layer, path, &mut entry)?;
        } else if kind.is_symlink() || kind.is_hard_link() {
            self.record_link(layer, path, &entry, kind.is_hard_link())?;
        }
        // Devices, FIFOs and the rest: not part of a bundle or catalog; skipped.
        Ok(())
    }

    /// Writes one regular file, within the per-file and whole-image limits.
    fn unpack_file(
        &mut self,
        layer: &LayerRef,
        path: PathBuf,
        entry: &mut tar::Entry<'_, impl Read>,
    ) -> Result<(), PullError> {
        let size = entry.header().size().unwrap_or(u64::MAX);
        if size > self.file_limit.bytes {
            return Err(self.entry_err(
                layer,
                &path,
                format!(
                    "{size} bytes, over the {} bytes allowed for {}",
                    self.file_limit.bytes, self.file_limit.what
                ),
            ));
        }
        if self.written + size > self.limits.written {
            return Err(self.entry_err(
                layer,
                &path,
                format!(
                    "the image's files exceed {} bytes in all",
                    self.limits.written
                ),
            ));
        }
        self.remove(&path)?;
        if let Some(parent) = path.parent() {
            self.mkdirs(parent)?;
        }
        let full = self.root.join(&path);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&full)
            .map_err(Self::write_err(full.clone()))?;
        let copied = std::io::copy(&mut entry.take(size), &mut out)
            .map_err(|e| self.entry_err(layer, &path, e.to_string()))?;
        if copied != size {
            return Err(self.entry_err(layer, &path, "truncated"));
        }
        out.flush().map_err(Self::write_err(full))?;
        self.written += size;
        self.files.insert(path);
        Ok(())
    }

    /// Records a link, resolved inside the image root, to be made a copy once every layer is
    /// unpacked.
    fn record_link(
        &mut self,
        layer: &LayerRef,
        path: PathBuf,
        entry: &tar::Entry<'_, impl Read>,
        hard: bool,
    ) -> Result<(), PullError> {
        let target = entry
            .link_name()
            .ok()
            .flatten()
            .map(|t| t.into_owned())
            .unwrap_or_default();
        // A hard link names a path from the image root; a symbolic one is
        // relative to its directory unless absolute.
        let resolved = if hard {
            entry_path(&target).ok()
        } else {
            resolve_in_image(&path, &target)
        };
        let Some(resolved) = resolved else {
            return Err(self.entry_err(
                layer,
                &path,
                format!("link to {} leads out of the image root", target.display()),
            ));
        };
        self.remove(&path)?;
        self.links.insert(path, (resolved, hard));
        Ok(())
    }

    /// Turns every recorded link into a copy of the file it names (following chains of links
    /// up to 40 hops, as Linux does); a link to nothing unpacked, or to a directory, is
    /// refused.
    fn materialize_links(&mut self) -> Result<(), PullError> {
        let links = std::mem::take(&mut self.links);
        for (path, (first, _)) in &links {
            let mut target = first.clone();
            let mut hops = 0;
            while let Some((next, _)) = links.get(&target) {
                hops += 1;
                if hops > 40 {
                    break;
                }
                target = next.clone();
            }
            if !self.files.contains(&target) {
                return Err(PullError::Entry {
                    image: self.image.clone(),
                    layer: "-".into(),
                    entry: path.display().to_string(),
                    message: format!(
                        "link to {}: not a file of the image's unpacked directories",
                        target.display()
                    ),
                });
            }
            let from = self.root.join(&target);
            let to = self.root.join(path);
            if let Some(parent) = path.parent() {
                self.mkdirs(parent)?;
            }
            std::fs::copy(&from, &to).map_err(Self::write_err(to.clone()))?;
            self.files.insert(path.clone());
        }
        Ok(())
    }
}

/// A layer's decompressed reader by media type (gzip also by its magic bytes).
fn decompressed<'r, R: Read + 'r>(
    media_type: &str,
    mut reader: std::io::BufReader<R>,
) -> Result<Box<dyn Read + 'r>, String> {
    use std::io::BufRead;
    if media_type.ends_with("+zstd") {
        return Err(format!("{media_type} layers are not supported"));
    }
    let head = reader.fill_buf().map_err(|e| e.to_string())?;
    if head.starts_with(&[0x1F, 0x8B]) {
        Ok(Box::new(flate2::read::GzDecoder::new(reader)))
    } else {
        Ok(Box::new(reader))
    }
}

/// Where a layout keeps a blob (the image-layout spec's `blobs/<alg>/<hex>`).
fn blob_rel(digest: &Digest) -> PathBuf {
    PathBuf::from("blobs/sha256").join(digest.hex())
}

fn labels_of(config: &Value) -> BTreeMap<String, String> {
    config
        .pointer("/config/Labels")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// What to unpack, by the labels (operator-registry `imageToDeclcfg`'s order: configs label
/// first, then the bundle package label).
fn kind_of(image: &str, labels: &BTreeMap<String, String>) -> Result<ImageKind, PullError> {
    if let Some(dir) = labels.get(CONFIGS_LABEL) {
        let rel = entry_path(Path::new(dir)).map_err(|m| PullError::Malformed {
            image: image.to_string(),
            message: format!("label {CONFIGS_LABEL}={dir}: {m}"),
        })?;
        return Ok(ImageKind::Catalog(rel));
    }
    if labels.contains_key(BUNDLE_PACKAGE_LABEL) {
        return Ok(ImageKind::Bundle);
    }
    let found = if labels.is_empty() {
        ": image has no labels".to_string()
    } else {
        format!(
            ", found labels\n{}",
            labels
                .iter()
                .map(|(k, v)| format!("  {k}={v}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
    Err(PullError::UnknownKind {
        image: image.to_string(),
        found,
    })
}

fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The manifest digest an index picks (linux on this machine's architecture, or its only
/// entry).
fn pick_from_index(image: &str, index: &Value) -> Result<Option<(String, u64)>, PullError> {
    let Some(list) = index.get("manifests").and_then(Value::as_array) else {
        return Ok(None);
    };
    let pick = list
        .iter()
        .find(|m| {
            m.pointer("/platform/os").and_then(Value::as_str) == Some("linux")
                && m.pointer("/platform/architecture").and_then(Value::as_str) == Some(host_arch())
        })
        .or_else(|| if list.len() == 1 { list.first() } else { None })
        .ok_or_else(|| PullError::Malformed {
            image: image.to_string(),
            message: format!("the image index has no linux/{} image", host_arch()),
        })?;
    let digest =
        pick.get("digest")
            .and_then(Value::as_str)
            .ok_or_else(|| PullError::Malformed {
                image: image.to_string(),
                message: "an index entry has no digest".into(),
            })?;
    Ok(Some((
        digest.to_string(),
        pick.get("size").and_then(Value::as_u64).unwrap_or(0),
    )))
}

fn parse_doc(image: &str, what: &str, bytes: &[u8], limit: u64) -> Result<Value, PullError> {
    if bytes.len() as u64 > limit {
        return Err(PullError::Malformed {
            image: image.to_string(),
            message: format!("{what}: {} bytes, over the {limit} allowed", bytes.len()),
        });
    }
    serde_json::from_slice(bytes).map_err(|e| PullError::Malformed {
        image: image.to_string(),
        message: format!("{what}: invalid JSON: {e}"),
    })
}

fn layers_of(
    image: &str,
    manifest: &Value,
    limits: &PullLimits,
) -> Result<Vec<LayerRef>, PullError> {
    let malformed = |m: String| PullError::Malformed {
        image: image.to_string(),
        message: m,
    };
    manifest
        .get("layers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let digest: Digest = l
                .get("digest")
                .and_then(Value::as_str)
                .and_then(|d| d.parse().ok())
                .ok_or_else(|| malformed(format!("layers[{i}].digest: missing or not sha256")))?;
            let size = l
                .get("size")
                .and_then(Value::as_u64)
                .ok_or_else(|| malformed(format!("layers[{i}].size: missing")))?;
            if size > limits.layer {
                return Err(malformed(format!(
                    "layer {digest}: {size} bytes, over the {} allowed for one layer",
                    limits.layer
                )));
            }
            Ok(LayerRef {
                digest,
                size,
                media_type: l
                    .get("mediaType")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            })
        })
        .collect()
}

fn config_digest(image: &str, manifest: &Value) -> Result<Digest, PullError> {
    manifest
        .pointer("/config/digest")
        .and_then(Value::as_str)
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| PullError::Malformed {
            image: image.to_string(),
            message: "manifest: field config.digest: missing (not an image manifest)".into(),
        })
}

fn unpacker<'a>(
    image: &str,
    dest: &Path,
    kind: &ImageKind,
    limits: &'a PullLimits,
) -> Unpacker<'a> {
    let (wanted, file_limit) = match kind {
        ImageKind::Bundle => (
            vec![PathBuf::from("manifests"), PathBuf::from("metadata")],
            limits.bundle_file,
        ),
        ImageKind::Catalog(dir) => (vec![dir.clone()], limits.catalog_file),
    };
    Unpacker {
        image: image.to_string(),
        root: dest.to_path_buf(),
        wanted,
        file_limit,
        limits,
        decompressed: 0,
        written: 0,
        files: BTreeSet::new(),
        links: BTreeMap::new(),
    }
}

fn finish(
    mut u: Unpacker<'_>,
    labels: BTreeMap<String, String>,
    digest: String,
    kind: ImageKind,
) -> Result<Pulled, PullError> {
    u.materialize_links()?;
    for w in &u.wanted {
        u.mkdirs(w)?;
    }
    Ok(Pulled {
        labels,
        digest,
        kind,
        files: u.files.len(),
    })
}

/// The layout's image named `name`, or its only image; why not otherwise.
fn layout_entry<'e>(
    entries: &'e [crate::layout::LayoutEntry],
    name: Option<&str>,
    dir: &Path,
) -> Result<&'e crate::layout::LayoutEntry, String> {
    let names: Vec<String> = entries.iter().filter_map(|e| e.ref_name.clone()).collect();
    match name {
        Some(n) => entries
            .iter()
            .find(|e| e.ref_name.as_deref() == Some(n))
            .ok_or_else(|| {
                format!(
                    "no image named {n} in the layout (it has: {})",
                    names.join(", ")
                )
            }),
        None => match entries {
            [only] => Ok(only),
            _ => Err(format!(
                "the layout has {} images: name one as oci:{}:REF ({})",
                entries.len(),
                dir.display(),
                names.join(", ")
            )),
        },
    }
}

/// Unpacks one layer blob of the layout of `image`, checking its size and digest.
fn unpack_layout_layer(
    image: &str,
    root: &InputRoot,
    l: &LayerRef,
    u: &mut Unpacker<'_>,
    layer_limit: SizeLimit,
) -> Result<(), PullError> {
    let layout_err = |m: String| PullError::Layout {
        image: image.to_string(),
        message: m,
    };
    let file = root
        .open(&blob_rel(&l.digest))
        .map_err(|e| layout_err(e.to_string()))?;
    file.check_size(layer_limit)
        .map_err(|e| layout_err(e.to_string()))?;
    if file.len() != l.size {
        return Err(layout_err(format!(
            "layer {}: {} bytes on disk, the manifest says {}",
            l.digest,
            file.len(),
            l.size
        )));
    }
    let mut hashing = Hashing {
        inner: file.file(),
        hasher: Sha256::new(),
        read: 0,
    };
    {
        let reader = decompressed(&l.media_type, std::io::BufReader::new(&mut hashing))
            .map_err(|m| layout_err(format!("layer {}: {m}", l.digest)))?;
        u.unpack_layer(l, reader)?;
    }
    // The rest of the blob (tar padding after the end marker) counts for the digest.
    std::io::copy(&mut hashing, &mut std::io::sink())
        .map_err(|e| layout_err(format!("layer {}: {e}", l.digest)))?;
    let got = format!("sha256:{}", hex::encode(hashing.hasher.finalize()));
    if got != l.digest.to_string() {
        return Err(layout_err(format!(
            "layer {}: content digest is {got}",
            l.digest
        )));
    }
    Ok(())
}

/// Unpacks image `name` (or the only one) of the OCI layout `dir` into `dest` (an empty
/// directory), reading every blob through the confined opener and checking its digest.
pub fn unpack_from_layout(
    dir: &Path,
    name: Option<&str>,
    dest: &Path,
    limits: &PullLimits,
) -> Result<Pulled, PullError> {
    let image = match name {
        Some(n) => format!("oci:{}:{n}", dir.display()),
        None => format!("oci:{}", dir.display()),
    };
    let layout_err = |m: String| PullError::Layout {
        image: image.clone(),
        message: m,
    };
    let entries = crate::layout::list_layout(dir).map_err(|e| layout_err(e.to_string()))?;
    let entry = layout_entry(&entries, name, dir).map_err(layout_err)?;
    let root = InputRoot::new(dir).map_err(|e| layout_err(e.to_string()))?;
    let doc_limit = SizeLimit {
        bytes: limits.document,
        what: "an image manifest or config",
    };
    let read_doc = |d: &Digest| -> Result<Vec<u8>, PullError> {
        let rel = blob_rel(d);
        let bytes = root
            .read(&rel, doc_limit)
            .map_err(|e| layout_err(e.to_string()))?;
        if &Digest::of(&bytes) != d {
            return Err(layout_err(format!(
                "blob {d}: content does not match its digest"
            )));
        }
        Ok(bytes)
    };
    let mut digest = entry.digest.clone();
    let mut manifest = parse_doc(&image, "manifest", &read_doc(&digest)?, limits.document)?;
    if let Some((d, _)) = pick_from_index(&image, &manifest)? {
        digest = d
            .parse()
            .map_err(|_| layout_err(format!("index entry digest {d}: not sha256")))?;
        manifest = parse_doc(&image, "manifest", &read_doc(&digest)?, limits.document)?;
    }
    let config = parse_doc(
        &image,
        "config",
        &read_doc(&config_digest(&image, &manifest)?)?,
        limits.document,
    )?;
    let labels = labels_of(&config);
    let kind = kind_of(&image, &labels)?;
    let layers = layers_of(&image, &manifest, limits)?;
    let mut u = unpacker(&image, dest, &kind, limits);
    let layer_limit = SizeLimit {
        bytes: limits.layer,
        what: "an image layer",
    };
    for l in &layers {
        unpack_layout_layer(&image, &root, l, &mut u, layer_limit)?;
    }
    finish(u, labels, digest.to_string(), kind)
}

/// An `AsyncWrite` into a file that refuses to grow past a bound.
struct CappedFile {
    file: tokio::fs::File,
    written: u64,
    max: u64,
}

impl tokio::io::AsyncWrite for CappedFile {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.written + buf.len() as u64 > self.max {
            return std::task::Poll::Ready(Err(std::io::Error::other(format!(
                "the registry sent more than the {} bytes the manifest declares",
                self.max
            ))));
        }
        let this = &mut *self;
        let r = std::pin::Pin::new(&mut this.file).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = &r {
            this.written += *n as u64;
        }
        r
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.file).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.file).poll_shutdown(cx)
    }
}

/// Downloads one layer into a temporary file in `spool_dir` (bounded by its declared size),
/// checks it against its digest while unpacking it, then removes the file.
async fn pull_layer(
    session: &Session,
    r: &Reference,
    image: &str,
    spool_dir: &Path,
    l: &LayerRef,
    u: &mut Unpacker<'_>,
) -> Result<(), PullError> {
    let spool = tempfile::NamedTempFile::new_in(spool_dir).map_err(|source| PullError::Write {
        path: spool_dir.to_path_buf(),
        source,
    })?;
    let digest_s = l.digest.to_string();
    session
        .call("fetch layer", r, || async {
            let file = tokio::fs::File::create(spool.path()).await?;
            let mut w = CappedFile {
                file,
                written: 0,
                max: l.size,
            };
            session
                .client
                .pull_blob(r, digest_s.as_str(), &mut w)
                .await?;
            tokio::io::AsyncWriteExt::flush(&mut w).await?;
            Ok(())
        })
        .await
        .map_err(|error| PullError::Registry {
            reference: image.to_string(),
            error,
        })?;
    let file = std::fs::File::open(spool.path()).map_err(|source| PullError::Write {
        path: spool.path().to_path_buf(),
        source,
    })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len != l.size {
        return Err(PullError::Malformed {
            image: image.to_string(),
            message: format!(
                "layer {}: received {len} bytes, the manifest says {}",
                l.digest, l.size
            ),
        });
    }
    let mut hashing = Hashing {
        inner: file,
        hasher: Sha256::new(),
        read: 0,
    };
    {
        let reader =
            decompressed(&l.media_type, std::io::BufReader::new(&mut hashing)).map_err(|m| {
                PullError::Malformed {
                    image: image.to_string(),
                    message: format!("layer {}: {m}", l.digest),
                }
            })?;
        u.unpack_layer(l, reader)?;
    }
    std::io::copy(&mut hashing, &mut std::io::sink()).map_err(|source| PullError::Write {
        path: spool.path().to_path_buf(),
        source,
    })?;
    let got = format!("sha256:{}", hex::encode(hashing.hasher.finalize()));
    if got != digest_s || hashing.read != l.size {
        return Err(PullError::Malformed {
            image: image.to_string(),
            message: format!("layer {}: content digest is {got}", l.digest),
        });
    }
    Ok(())
}

/// Pulls `reference` from its registry and unpacks it into `dest` (an empty directory); each
/// layer is downloaded into a temporary file beside `dest` (bounded by its declared size),
/// checked against its digest, then unpacked.
pub async fn pull_from_registry(
    reference: &str,
    opts: &RemoteOptions,
    dest: &Path,
    limits: &PullLimits,
) -> Result<Pulled, PullError> {
    let image = reference.to_string();
    let r: Reference = parse_reference(reference).map_err(|e| PullError::Reference {
        reference: image.clone(),
        message: e.to_string(),
    })?;
    let reg = |error: RegistryError| PullError::Registry {
        reference: image.clone(),
        error,
    };
    let session = Session::new(&r, opts).map_err(reg)?;
    session
        .authenticate(&r, RegistryOperation::Pull)
        .await
        .map_err(reg)?;
    let fetch = |r: Reference| {
        let session = &session;
        async move {
            session
                .call("fetch manifest", &r, || {
                    session
                        .client
                        .pull_manifest_raw(&r, &session.auth.auth, ACCEPTED)
                })
                .await
        }
    };
    let (body, mut digest) = fetch(r.clone()).await.map_err(reg)?;
    let mut manifest = parse_doc(&image, "manifest", &body, limits.document)?;
    if let Some((d, _)) = pick_from_index(&image, &manifest)? {
        let by_digest =
            Reference::with_digest(r.registry().to_string(), r.repository().to_string(), d);
        let (body, d2) = fetch(by_digest).await.map_err(reg)?;
        digest = d2;
        manifest = parse_doc(&image, "manifest", &body, limits.document)?;
    }
    let cd = config_digest(&image, &manifest)?.to_string();
    let config_bytes = session
        .call("fetch config", &r, || async {
            let mut out = Vec::new();
            let w = BoundedVec {
                buf: &mut out,
                max: limits.document,
            };
            session
                .client
                .pull_blob(&r, cd.as_str(), w)
                .await
                .map(|()| out)
        })
        .await
        .map_err(reg)?;
    let config = parse_doc(&image, "config", &config_bytes, limits.document)?;
    let labels = labels_of(&config);
    let kind = kind_of(&image, &labels)?;
    let layers = layers_of(&image, &manifest, limits)?;
    let spool_dir = dest.parent().unwrap_or(dest);
    let mut u = unpacker(&image, dest, &kind, limits);
    for l in &layers {
        pull_layer(&session, &r, &image, spool_dir, l, &mut u).await?;
    }
    finish(u, labels, digest, kind)
}

/// A `Vec` writer that refuses to grow past a bound.
struct BoundedVec<'v> {
    buf: &'v mut Vec<u8>,
    max: u64,
}

impl tokio::io::AsyncWrite for BoundedVec<'_> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if (self.buf.len() + buf.len()) as u64 > self.max {
            return std::task::Poll::Ready(Err(std::io::Error::other(format!(
                "the document exceeds {} bytes",
                self.max
            ))));
        }
        self.buf.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, data, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if let Some(l) = link {
                h.set_link_name(l).unwrap();
            }
            // set_path refuses `..`; write the raw name for the attack cases.
            let bytes = name.as_bytes();
            h.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn unpack(tar: &[u8], limits: &PullLimits) -> (tempfile::TempDir, Result<(), PullError>) {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("root");
        std::fs::create_dir(&dest).unwrap();
        let mut u = unpacker("img", &dest, &ImageKind::Bundle, limits);
        let layer = LayerRef {
            digest: Digest::of(tar),
            size: tar.len() as u64,
            media_type: String::new(),
        };
        let r = u
            .unpack_layer(&layer, std::io::Cursor::new(tar.to_vec()))
            .and_then(|()| u.materialize_links());
        (dir, r)
    }

    use tar::EntryType as E;

    #[test]
    fn only_bundle_directories_are_written_and_links_become_copies() {
        let t = tar_of(&[
            ("manifests/csv.yaml", E::Regular, b"kind: X\n", None),
            ("metadata/annotations.yaml", E::Regular, b"a: b\n", None),
            ("etc/passwd", E::Regular, b"root\n", None),
            ("manifests/link.yaml", E::Symlink, b"", Some("csv.yaml")),
            (
                "manifests/hard.yaml",
                E::Link,
                b"",
                Some("/manifests/csv.yaml"),
            ),
        ]);
        let (dir, r) = unpack(&t, &PullLimits::default());
        r.unwrap();
        let root = dir.path().join("root");
        assert!(!root.join("etc").exists());
        for f in ["link.yaml", "hard.yaml"] {
            let p = root.join("manifests").join(f);
            assert!(!p.symlink_metadata().unwrap().file_type().is_symlink());
            assert_eq!(std::fs::read(&p).unwrap(), b"kind: X\n");
        }
    }

    #[test]
    fn links_out_dot_dot_names_and_big_files_are_refused() {
        let out = tar_of(&[(
            "manifests/x.yaml",
            E::Symlink,
            b"",
            Some("../../../etc/passwd"),
        )]);
        let (_d, r) = unpack(&out, &PullLimits::default());
        let e = r.unwrap_err().to_string();
        assert!(e.contains("leads out of the image root"), "{e}");

        let dotdot = tar_of(&[("manifests/../../x", E::Regular, b"x", None)]);
        let (_d, r) = unpack(&dotdot, &PullLimits::default());
        assert!(r.unwrap_err().to_string().contains("`..`"));

        let limits = PullLimits {
            bundle_file: SizeLimit {
                bytes: 4,
                what: "a bundle or manifest file",
            },
            ..Default::default()
        };
        let big = tar_of(&[("manifests/big.yaml", E::Regular, b"12345", None)]);
        let (d, r) = unpack(&big, &limits);
        let e = r.unwrap_err().to_string();
        assert!(e.contains("over the 4 bytes"), "{e}");
        assert!(!d.path().join("root/manifests/big.yaml").exists());

        // A decompression budget stops a bomb even in files that are not unpacked.
        let limits = PullLimits {
            decompressed: 2048,
            ..Default::default()
        };
        let bomb = tar_of(&[("usr/big", E::Regular, &[0u8; 8192], None)]);
        let (_d, r) = unpack(&bomb, &limits);
        assert!(r.unwrap_err().to_string().contains("exceeds 2048"));
    }

    #[test]
    fn whiteouts_remove_files_of_lower_layers() {
        let dir = tempfile::tempdir().unwrap();
        let limits = PullLimits::default();
        let mut u = unpacker("img", dir.path(), &ImageKind::Bundle, &limits);
        for t in [
            tar_of(&[("manifests/old.yaml", E::Regular, b"x", None)]),
            tar_of(&[("manifests/.wh.old.yaml", E::Regular, b"", None)]),
        ] {
            let l = LayerRef {
                digest: Digest::of(&t),
                size: t.len() as u64,
                media_type: String::new(),
            };
            u.unpack_layer(&l, std::io::Cursor::new(t.clone())).unwrap();
        }
        assert!(!dir.path().join("manifests/old.yaml").exists());
        assert!(u.files.is_empty());
    }

    #[test]
    fn sources_parse_like_skopeo_names() {
        assert_eq!(
            ImageSource::parse("oci:images:quay.io/x/y:v1").unwrap(),
            ImageSource::Layout {
                dir: "images".into(),
                name: Some("quay.io/x/y:v1".into())
            }
        );
        assert_eq!(
            ImageSource::parse("oci:/tmp/l").unwrap(),
            ImageSource::Layout {
                dir: "/tmp/l".into(),
                name: None
            }
        );
        assert_eq!(
            ImageSource::parse("docker://quay.io/x/y:v1").unwrap(),
            ImageSource::Registry("quay.io/x/y:v1".into())
        );
        let s = ImageSource::parse("oci:images:quay.io/x/y:v1").unwrap();
        assert_eq!(
            s.catalog_image("oci:images:quay.io/x/y:v1"),
            "quay.io/x/y:v1"
        );
        let s = ImageSource::parse("oci:images:latest").unwrap();
        assert_eq!(s.catalog_image("oci:images:latest"), "oci:images:latest");
        assert!(ImageSource::parse("Not A Ref").is_err());
    }

    #[test]
    fn images_without_bundle_or_catalog_labels_are_refused_as_opm_does() {
        let e = kind_of("quay.io/x/op:v1", &BTreeMap::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "render \"quay.io/x/op:v1\": image type could not be determined: image has no labels"
        );
        let labels = BTreeMap::from([(CONFIGS_LABEL.to_string(), "/configs".to_string())]);
        assert_eq!(
            kind_of("x", &labels).unwrap(),
            ImageKind::Catalog("configs".into())
        );
    }
}
