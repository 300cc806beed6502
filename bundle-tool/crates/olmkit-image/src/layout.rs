//! OCI image layout directories: the default output of every image build.
//!
//! A layout (`oci-layout`, `index.json`, `blobs/sha256/...`) holds any number of images, each
//! named by the `org.opencontainers.image.ref.name` annotation of its `index.json` entry; skopeo
//! (`oci:DIR:REF`), umoci and `oras` read it, and `bundle-tool image push` uploads from it.
//!
//! Writes are atomic and idempotent. A new layout is staged in a sibling temporary directory
//! and renamed into place. In an existing one, missing blobs are written first (each one
//! atomically, content-addressed, so a crash can only leave an unreferenced blob behind), then
//! `index.json` is replaced in one rename; an exclusive lock on `oci-layout` serializes
//! concurrent writers. Writing the same image under the same name again changes no byte.
//! Entries written by other tools are kept as they are.

use crate::build::{
    AssembleImageError, Image, MEDIA_TYPE_INDEX, MEDIA_TYPE_MANIFEST, canonical_json,
};
use crate::digest::{Digest, Hasher};
use crate::layer::Blob;
use olmkit_core::fsio::{WriteOutputError, crash_point, remove_stale_stages, write_file_atomic};
use serde_json::{Value, json};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Annotation naming an image in `index.json`.
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";
/// Contents of the `oci-layout` file.
pub const OCI_LAYOUT_FILE: &str = "{\"imageLayoutVersion\":\"1.0.0\"}";

/// Images could not be written to a layout; the layout is unchanged (at most unreferenced
/// blobs were added).
#[derive(Debug, Error)]
pub enum WriteLayoutError {
    /// The directory exists but is not an OCI layout (and is not empty).
    #[error("{path}: not an OCI image layout ({reason}); choose an empty or new directory")]
    NotALayout {
        /// The directory.
        path: PathBuf,
        /// What is missing or wrong.
        reason: String,
    },
    /// A name cannot be used as a ref name.
    #[error("invalid image name {name:?} for an OCI layout: {reason}")]
    InvalidRefName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Filesystem operation failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Writing a file failed.
    #[error(transparent)]
    Write(#[from] WriteOutputError),
    /// `index.json` could not be rendered (internal).
    #[error("cannot render index.json: {0}")]
    Render(String),
}

/// An image could not be read from a layout.
#[derive(Debug, Error)]
pub enum ReadLayoutError {
    /// The directory is not an OCI layout.
    #[error("{path}: not an OCI image layout ({reason})")]
    NotALayout {
        /// The directory.
        path: PathBuf,
        /// What is missing or wrong.
        reason: String,
    },
    /// No image has the requested name.
    #[error("{layout}: no image named {name:?} (the layout has: {})", if available.is_empty() { "no named images".to_string() } else { available.join(", ") })]
    NoSuchImage {
        /// The layout.
        layout: PathBuf,
        /// The requested name.
        name: String,
        /// Names present.
        available: Vec<String>,
    },
    /// No name was given and the layout does not hold exactly one image.
    #[error("{layout}: holds {count} images; name one ({})", available.join(", "))]
    Ambiguous {
        /// The layout.
        layout: PathBuf,
        /// Number of images.
        count: usize,
        /// Names present.
        available: Vec<String>,
    },
    /// A referenced blob is missing or does not match its digest.
    #[error("{path}: {reason}")]
    BadBlob {
        /// The blob file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A JSON document is malformed.
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The blobs do not form one image.
    #[error("{layout}: {source}")]
    Inconsistent {
        /// The layout.
        layout: PathBuf,
        /// Details.
        source: AssembleImageError,
    },
}

/// What [`write_to_layout`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteSummary {
    /// Blobs newly written.
    pub blobs_written: usize,
    /// Blobs already present.
    pub blobs_present: usize,
    /// Names that now point at a different digest than before (or are new).
    pub changed_refs: Vec<String>,
}

/// One image entry of `index.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutEntry {
    /// Its ref name, if annotated.
    pub ref_name: Option<String>,
    /// Manifest digest.
    pub digest: Digest,
    /// Media type of the manifest (or nested index).
    pub media_type: String,
    /// Manifest size.
    pub size: u64,
}

/// Checks `name` against the OCI image-layout ref name grammar:
/// components of alphanumerics joined by `-._:@+` or `--`, separated by `/`.
pub fn check_ref_name(name: &str) -> Result<(), WriteLayoutError> {
    let bad = |reason: &str| WriteLayoutError::InvalidRefName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(bad("it is empty"));
    }
    for comp in name.split('/') {
        let b = comp.as_bytes();
        let alnum = |c: u8| c.is_ascii_alphanumeric();
        if b.is_empty() {
            return Err(bad("it has an empty path component"));
        }
        if !alnum(b[0]) || !alnum(b[b.len() - 1]) {
            return Err(bad(
                "each /-separated component must start and end with a letter or digit",
            ));
        }
        let mut prev_sep = false;
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if alnum(c) {
                prev_sep = false;
            } else if b"-._:@+".contains(&c) {
                let double_dash = c == b'-' && i + 1 < b.len() && b[i + 1] == b'-';
                if prev_sep {
                    return Err(bad("separators (-._:@+) cannot repeat, except `--`"));
                }
                if double_dash {
                    i += 1;
                }
                prev_sep = true;
            } else {
                return Err(bad(
                    "only letters, digits, `/` and the separators -._:@+ are allowed",
                ));
            }
            i += 1;
        }
    }
    Ok(())
}

fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> WriteLayoutError + 'a {
    move |source| WriteLayoutError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn blob_rel(digest: &Digest) -> PathBuf {
    PathBuf::from("blobs/sha256").join(digest.hex())
}

fn descriptor(image: &Image, name: &str) -> Value {
    let mut platform = json!({
        "architecture": image.platform.architecture,
        "os": image.platform.os,
    });
    if let Some(v) = &image.platform.variant {
        platform["variant"] = json!(v);
    }
    json!({
        "mediaType": image.manifest.media_type,
        "digest": image.digest().to_string(),
        "size": image.manifest.size(),
        "annotations": { REF_NAME_ANNOTATION: name },
        "platform": platform,
    })
}

fn ref_name_of(entry: &Value) -> Option<&str> {
    entry
        .pointer("/annotations/org.opencontainers.image.ref.name")
        .and_then(Value::as_str)
}

/// Updates the `manifests` of an index document: same-named entries are replaced in place,
/// new names appended. Returns the names whose digest changed.
fn merge_index(index: &mut Value, images: &[(&Image, &str)]) -> Vec<String> {
    let mut changed = Vec::new();
    if !index.get("manifests").is_some_and(Value::is_array) {
        index["manifests"] = json!([]);
    }
    let Some(manifests) = index.get_mut("manifests").and_then(Value::as_array_mut) else {
        return changed;
    };
    for (image, name) in images {
        let new = descriptor(image, name);
        let mut replaced = false;
        let mut i = 0;
        while i < manifests.len() {
            if ref_name_of(&manifests[i]) == Some(name) {
                if replaced {
                    // A second entry with the same name: duplicates make the name ambiguous.
                    manifests.remove(i);
                    continue;
                }
                if manifests[i] != new {
                    changed.push(name.to_string());
                }
                manifests[i] = new.clone();
                replaced = true;
            }
            i += 1;
        }
        if !replaced {
            changed.push(name.to_string());
            manifests.push(new);
        }
    }
    changed
}

fn empty_index() -> Value {
    json!({"schemaVersion": 2, "mediaType": MEDIA_TYPE_INDEX, "manifests": []})
}

fn render_index(index: &Value) -> Result<Vec<u8>, WriteLayoutError> {
    canonical_json("index", index).map_err(|e| WriteLayoutError::Render(e.to_string()))
}

fn all_blobs<'a>(images: &'a [(&'a Image, &'a str)]) -> Vec<&'a Blob> {
    let mut out: Vec<&Blob> = Vec::new();
    for (img, _) in images {
        for b in std::iter::once(&img.manifest).chain(img.blobs()) {
            if !out.iter().any(|o| o.digest == b.digest) {
                out.push(b);
            }
        }
    }
    out
}

/// Writes `images` (each with its ref name) into the layout at `dir`, creating it if needed.
pub fn write_to_layout(
    dir: &Path,
    images: &[(&Image, &str)],
) -> Result<WriteSummary, WriteLayoutError> {
    for (_, name) in images {
        check_ref_name(name)?;
    }
    let state = layout_state(dir)?;
    match state {
        LayoutState::Missing | LayoutState::Empty => match create_layout(dir, images) {
            Ok(summary) => Ok(summary),
            // Someone created it meanwhile: fall through to the merge path.
            Err(_) if is_layout(dir) => update_layout(dir, images),
            Err(e) => Err(e),
        },
        LayoutState::Layout => update_layout(dir, images),
    }
}

enum LayoutState {
    Missing,
    Empty,
    Layout,
}

/// True when `dir` has an `oci-layout` file.
pub fn is_layout(dir: &Path) -> bool {
    dir.join("oci-layout").is_file()
}

fn layout_state(dir: &Path) -> Result<LayoutState, WriteLayoutError> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LayoutState::Missing),
        Err(e) => Err(WriteLayoutError::Io {
            action: "inspect",
            path: dir.to_path_buf(),
            source: e,
        }),
        Ok(m) if !m.is_dir() => Err(WriteLayoutError::NotALayout {
            path: dir.to_path_buf(),
            reason: "it is a file".into(),
        }),
        Ok(_) => {
            if is_layout(dir) {
                Ok(LayoutState::Layout)
            } else {
                let mut rd = fs::read_dir(dir).map_err(io_err("read", dir))?;
                if rd.next().is_none() {
                    Ok(LayoutState::Empty)
                } else {
                    Err(WriteLayoutError::NotALayout {
                        path: dir.to_path_buf(),
                        reason: "no oci-layout file, and the directory is not empty".into(),
                    })
                }
            }
        }
    }
}

/// Prefix of a new layout's staging directory (then the owning pid), next to the layout.
const LAYOUT_STAGE_PREFIX: &str = ".oci-layout-";

/// fsyncs the files and directories of a staged layout (three levels: root, blobs, sha256).
fn sync_tree(root: &Path) -> Result<(), WriteLayoutError> {
    let sync = |p: &Path| {
        crash_point();
        fs::File::open(p)
            .and_then(|f| f.sync_all())
            .map_err(io_err("sync", p))
    };
    let blobs = root.join("blobs/sha256");
    for e in fs::read_dir(&blobs).map_err(io_err("read", &blobs))? {
        sync(&e.map_err(io_err("read", &blobs))?.path())?;
    }
    for p in [
        blobs.clone(),
        root.join("blobs"),
        root.join("index.json"),
        root.join("oci-layout"),
        root.to_path_buf(),
    ] {
        sync(&p)?;
    }
    Ok(())
}

fn create_layout(dir: &Path, images: &[(&Image, &str)]) -> Result<WriteSummary, WriteLayoutError> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(io_err("create directory", &parent))?;
    // Staging of runs that were killed before their rename is garbage: nobody will finish it.
    remove_stale_stages(&parent, LAYOUT_STAGE_PREFIX)?;
    let stage = tempfile::Builder::new()
        .prefix(&format!("{LAYOUT_STAGE_PREFIX}{}-", std::process::id()))
        .tempdir_in(&parent)
        .map_err(io_err("create a temporary directory in", &parent))?;
    let root = stage.path();
    let blobs_dir = root.join("blobs/sha256");
    fs::create_dir_all(&blobs_dir).map_err(io_err("create directory", &blobs_dir))?;
    let blobs = all_blobs(images);
    for b in &blobs {
        let p = root.join(blob_rel(&b.digest));
        crash_point();
        fs::write(&p, &b.data).map_err(io_err("write", &p))?;
    }
    let mut index = empty_index();
    let changed = merge_index(&mut index, images);
    let index_path = root.join("index.json");
    fs::write(&index_path, render_index(&index)?).map_err(io_err("write", &index_path))?;
    let layout_path = root.join("oci-layout");
    fs::write(&layout_path, OCI_LAYOUT_FILE).map_err(io_err("write", &layout_path))?;
    // Readable like any directory mkdir would make (tempdir creates 0700).
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root, fs::Permissions::from_mode(0o755))
            .map_err(io_err("set permissions of", root))?;
    }
    // Durable before it becomes visible: a crash after the rename must not leave empty blobs.
    sync_tree(root)?;
    // rename(2) replaces an empty directory and fails on a non-empty one, so a layout created
    // concurrently is never clobbered.
    let staged = stage.keep();
    crash_point();
    if let Err(e) = fs::rename(&staged, dir).and_then(|()| fs::File::open(&parent)?.sync_all()) {
        let _ = fs::remove_dir_all(&staged);
        return Err(WriteLayoutError::Io {
            action: "move the new layout into",
            path: dir.to_path_buf(),
            source: e,
        });
    }
    Ok(WriteSummary {
        blobs_written: blobs.len(),
        blobs_present: 0,
        changed_refs: changed,
    })
}

fn blob_is_intact(path: &Path, blob: &Blob) -> Result<bool, WriteLayoutError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_err("inspect", path)(e)),
    };
    if !meta.is_file() || meta.len() != blob.size() {
        return Ok(false);
    }
    Ok(hash_file(path).map_err(io_err("read", path))? == blob.digest)
}

fn hash_file(path: &Path) -> std::io::Result<Digest> {
    let mut f = fs::File::open(path)?;
    let mut h = Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finish())
}

fn update_layout(dir: &Path, images: &[(&Image, &str)]) -> Result<WriteSummary, WriteLayoutError> {
    let layout_file = dir.join("oci-layout");
    let lock = fs::File::open(&layout_file).map_err(io_err("open", &layout_file))?;
    lock.lock().map_err(io_err("lock", &layout_file))?;
    check_layout_version(dir).map_err(|e| match e {
        ReadLayoutError::NotALayout { path, reason } => {
            WriteLayoutError::NotALayout { path, reason }
        }
        other => WriteLayoutError::NotALayout {
            path: dir.to_path_buf(),
            reason: other.to_string(),
        },
    })?;
    let index_path = dir.join("index.json");
    let mut index = match fs::read(&index_path) {
        Ok(bytes) => {
            serde_json::from_slice::<Value>(&bytes).map_err(|e| WriteLayoutError::NotALayout {
                path: dir.to_path_buf(),
                reason: format!("index.json is not valid JSON: {e}"),
            })?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => empty_index(),
        Err(e) => return Err(io_err("read", &index_path)(e)),
    };
    if !index.is_object() {
        return Err(WriteLayoutError::NotALayout {
            path: dir.to_path_buf(),
            reason: "index.json is not a JSON object".into(),
        });
    }
    let mut summary = WriteSummary::default();
    for b in all_blobs(images) {
        let p = dir.join(blob_rel(&b.digest));
        if blob_is_intact(&p, b)? {
            summary.blobs_present += 1;
        } else {
            write_file_atomic(&p, &b.data)?;
            summary.blobs_written += 1;
        }
    }
    let before = render_index(&index)?;
    summary.changed_refs = merge_index(&mut index, images);
    let after = render_index(&index)?;
    if after != before || !index_path.is_file() {
        write_file_atomic(&index_path, &after)?;
    }
    drop(lock);
    Ok(summary)
}

fn parse_json(path: &Path) -> Result<Value, ReadLayoutError> {
    let bytes = fs::read(path).map_err(|e| ReadLayoutError::Parse {
        path: path.to_path_buf(),
        reason: format!("cannot read: {e}"),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| ReadLayoutError::Parse {
        path: path.to_path_buf(),
        reason: format!("invalid JSON: {e}"),
    })
}

fn check_layout_version(dir: &Path) -> Result<(), ReadLayoutError> {
    let p = dir.join("oci-layout");
    if !p.is_file() {
        return Err(ReadLayoutError::NotALayout {
            path: dir.to_path_buf(),
            reason: "no oci-layout file".into(),
        });
    }
    let v = parse_json(&p)?;
    match v.get("imageLayoutVersion").and_then(Value::as_str) {
        Some(ver) if ver.starts_with("1.") => Ok(()),
        other => Err(ReadLayoutError::NotALayout {
            path: dir.to_path_buf(),
            reason: format!("unsupported imageLayoutVersion {other:?}"),
        }),
    }
}

/// Lists the entries of the layout's `index.json`.
pub fn list_layout(dir: &Path) -> Result<Vec<LayoutEntry>, ReadLayoutError> {
    check_layout_version(dir)?;
    let index_path = dir.join("index.json");
    let index = parse_json(&index_path)?;
    let manifests = index
        .get("manifests")
        .and_then(Value::as_array)
        .ok_or_else(|| ReadLayoutError::Parse {
            path: index_path.clone(),
            reason: "field manifests: missing or not a list".into(),
        })?;
    manifests
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let bad = |field: &str| ReadLayoutError::Parse {
                path: index_path.clone(),
                reason: format!("field manifests[{i}].{field}: missing or invalid"),
            };
            Ok(LayoutEntry {
                ref_name: ref_name_of(m).map(str::to_string),
                digest: m
                    .get("digest")
                    .and_then(Value::as_str)
                    .and_then(|d| d.parse().ok())
                    .ok_or_else(|| bad("digest"))?,
                media_type: m
                    .get("mediaType")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("mediaType"))?
                    .to_string(),
                size: m
                    .get("size")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| bad("size"))?,
            })
        })
        .collect()
}

fn read_blob(dir: &Path, digest: &Digest, size: Option<u64>) -> Result<Vec<u8>, ReadLayoutError> {
    let path = dir.join(blob_rel(digest));
    let data = fs::read(&path).map_err(|e| ReadLayoutError::BadBlob {
        path: path.clone(),
        reason: format!("cannot read blob: {e}"),
    })?;
    if let Some(s) = size
        && data.len() as u64 != s
    {
        return Err(ReadLayoutError::BadBlob {
            path,
            reason: format!("size {} does not match the expected {s}", data.len()),
        });
    }
    let actual = Digest::of(&data);
    if &actual != digest {
        return Err(ReadLayoutError::BadBlob {
            path,
            reason: format!("content digest is {actual}, not {digest}"),
        });
    }
    Ok(data)
}

fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The layout's image named `name`, or its only image.
fn layout_entry<'e>(
    dir: &Path,
    entries: &'e [LayoutEntry],
    name: Option<&str>,
) -> Result<&'e LayoutEntry, ReadLayoutError> {
    let available: Vec<String> = entries.iter().filter_map(|e| e.ref_name.clone()).collect();
    Ok(match name {
        Some(n) => entries
            .iter()
            .find(|e| e.ref_name.as_deref() == Some(n))
            .ok_or_else(|| ReadLayoutError::NoSuchImage {
                layout: dir.to_path_buf(),
                name: n.to_string(),
                available: available.clone(),
            })?,
        None => match entries {
            [only] => only,
            _ => {
                return Err(ReadLayoutError::Ambiguous {
                    layout: dir.to_path_buf(),
                    count: entries.len(),
                    available,
                });
            }
        },
    })
}

/// The manifest of an image index (multi-platform image) for linux on this machine's
/// architecture (or its only one): its digest and size.
fn platform_manifest(
    dir: &Path,
    value: &Value,
    index: &Digest,
) -> Result<(Digest, Option<u64>), ReadLayoutError> {
    let pick = value
        .get("manifests")
        .and_then(Value::as_array)
        .and_then(|ms| {
            ms.iter()
                .find(|m| {
                    m.pointer("/platform/os").and_then(Value::as_str) == Some("linux")
                        && m.pointer("/platform/architecture").and_then(Value::as_str)
                            == Some(host_arch())
                })
                .or_else(|| if ms.len() == 1 { ms.first() } else { None })
        })
        .ok_or_else(|| ReadLayoutError::Parse {
            path: dir.join(blob_rel(index)),
            reason: format!("image index has no linux/{} image", host_arch()),
        })?;
    let digest = pick
        .get("digest")
        .and_then(Value::as_str)
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| ReadLayoutError::Parse {
            path: dir.join(blob_rel(index)),
            reason: "nested manifest has no valid digest".into(),
        })?;
    let size = pick.get("size").and_then(Value::as_u64);
    Ok((digest, size))
}

/// The digest, size and media type of a descriptor (`field` of the manifest at
/// `manifest_path`).
fn read_descriptor(
    v: &Value,
    field: &str,
    manifest_path: &Path,
) -> Result<(Digest, Option<u64>, String), ReadLayoutError> {
    let d = v
        .get("digest")
        .and_then(Value::as_str)
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| ReadLayoutError::Parse {
            path: manifest_path.to_path_buf(),
            reason: format!("field {field}.digest: missing or not a sha256 digest"),
        })?;
    let media = v
        .get("mediaType")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Ok((d, v.get("size").and_then(Value::as_u64), media))
}

/// Reads the image named `name` (or the only image, when `name` is `None`), verifying every
/// blob against its digest. A nested index (multi-platform image) resolves to its linux entry
/// for this machine's architecture.
pub fn read_from_layout(dir: &Path, name: Option<&str>) -> Result<Image, ReadLayoutError> {
    let entries = list_layout(dir)?;
    let entry = layout_entry(dir, &entries, name)?;
    let mut digest = entry.digest.clone();
    let mut size = Some(entry.size);
    let mut manifest = read_blob(dir, &digest, size)?;
    let mut value: Value =
        serde_json::from_slice(&manifest).map_err(|e| ReadLayoutError::Parse {
            path: dir.join(blob_rel(&digest)),
            reason: format!("invalid manifest JSON: {e}"),
        })?;
    if value.get("manifests").is_some() {
        (digest, size) = platform_manifest(dir, &value, &entry.digest)?;
        manifest = read_blob(dir, &digest, size)?;
        value = serde_json::from_slice(&manifest).map_err(|e| ReadLayoutError::Parse {
            path: dir.join(blob_rel(&digest)),
            reason: format!("invalid manifest JSON: {e}"),
        })?;
    }
    let manifest_path = dir.join(blob_rel(&digest));
    let config_desc = value.get("config").ok_or_else(|| ReadLayoutError::Parse {
        path: manifest_path.clone(),
        reason: "field config: missing (not an image manifest)".into(),
    })?;
    let (cd, cs, _) = read_descriptor(config_desc, "config", &manifest_path)?;
    let config = read_blob(dir, &cd, cs)?;
    let mut layers = Vec::new();
    for (i, l) in value
        .get("layers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let (ld, ls, media) = read_descriptor(l, &format!("layers[{i}]"), &manifest_path)?;
        let data = read_blob(dir, &ld, ls)?;
        layers.push(Blob {
            media_type: media,
            digest: ld,
            data,
        });
    }
    let mut image = Image::from_parts(manifest, config, layers).map_err(|source| {
        ReadLayoutError::Inconsistent {
            layout: dir.to_path_buf(),
            source,
        }
    })?;
    if image.manifest.media_type.is_empty() {
        image.manifest.media_type = MEDIA_TYPE_MANIFEST.into();
    }
    Ok(image)
}

/// Platform-independent name of an image for messages: `name@digest`.
pub fn describe(name: &str, image: &Image) -> String {
    format!("{name}@{}", image.digest())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{ImageSpec, LayerSpec, Platform, RuntimeConfig, build_image};
    use crate::tree::{FILE_MODE, FileTree};
    use olmkit_core::fsio::read_tree;
    use std::collections::BTreeMap;

    fn image(content: &str) -> Image {
        let mut t = FileTree::new();
        t.add_file("/f", content.as_bytes().to_vec(), FILE_MODE)
            .unwrap();
        build_image(&ImageSpec {
            layers: vec![LayerSpec {
                tree: t,
                created_by: "t".into(),
            }],
            config: RuntimeConfig::default(),
            annotations: BTreeMap::new(),
            created: jiff::Timestamp::UNIX_EPOCH,
            platform: Platform::linux_amd64(),
            author: None,
        })
        .unwrap()
    }

    #[test]
    fn ref_names() {
        for ok in [
            "v1",
            "latest",
            "quay.io/example/op:v1.2.3",
            "a--b",
            "x@sha256:ab",
            "A_b.c+d",
        ] {
            check_ref_name(ok).unwrap();
        }
        for bad in ["", "-a", "a-", "a//b", "a..b", "a b", "a/", "é"] {
            assert!(check_ref_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn create_update_idempotent_and_read_back() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("layout");
        let a = image("a");
        let b = image("b");
        let s = write_to_layout(&dir, &[(&a, "example.com/a:v1"), (&b, "b")]).unwrap();
        assert_eq!(s.blobs_written, 6);
        assert_eq!(s.changed_refs, ["example.com/a:v1", "b"]);
        let snapshot = read_tree(&dir).unwrap();

        // Same content again: nothing changes, not even index.json.
        let s = write_to_layout(&dir, &[(&a, "example.com/a:v1")]).unwrap();
        assert_eq!((s.blobs_written, s.blobs_present), (0, 3));
        assert!(s.changed_refs.is_empty());
        assert_eq!(read_tree(&dir).unwrap(), snapshot);

        assert_eq!(read_from_layout(&dir, Some("example.com/a:v1")).unwrap(), a);
        assert_eq!(read_from_layout(&dir, Some("b")).unwrap(), b);

        // Retagging replaces the entry in place.
        let c = image("c");
        write_to_layout(&dir, &[(&c, "b")]).unwrap();
        let entries = list_layout(&dir).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].digest, *c.digest());
        assert_eq!(read_from_layout(&dir, Some("b")).unwrap(), c);

        let err = read_from_layout(&dir, Some("nope")).unwrap_err();
        assert!(err.to_string().contains("example.com/a:v1, b"), "{err}");
        assert!(matches!(
            read_from_layout(&dir, None),
            Err(ReadLayoutError::Ambiguous { count: 2, .. })
        ));
    }

    #[test]
    fn refuses_foreign_directories_and_detects_corruption() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("README"), "hi").unwrap();
        let a = image("a");
        let err = write_to_layout(root.path(), &[(&a, "a")]).unwrap_err();
        assert!(matches!(err, WriteLayoutError::NotALayout { .. }), "{err}");
        assert_eq!(read_tree(root.path()).unwrap().len(), 1);

        let dir = root.path().join("l");
        write_to_layout(&dir, &[(&a, "a")]).unwrap();
        let layer = dir.join(blob_rel(&a.layers[0].digest));
        std::fs::write(&layer, b"garbage").unwrap();
        let err = read_from_layout(&dir, Some("a")).unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");
        // Writing again repairs the damaged blob.
        let s = write_to_layout(&dir, &[(&a, "a")]).unwrap();
        assert_eq!(s.blobs_written, 1);
        assert_eq!(read_from_layout(&dir, Some("a")).unwrap(), a);

        assert!(write_to_layout(&dir, &[(&a, "bad name")]).is_err());
    }

    #[test]
    fn concurrent_writers_lose_no_entry() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("l");
        let images: Vec<Image> = (0..8).map(|i| image(&format!("img{i}"))).collect();
        std::thread::scope(|s| {
            for (i, img) in images.iter().enumerate() {
                let dir = dir.clone();
                s.spawn(move || {
                    write_to_layout(&dir, &[(img, &format!("name{i}"))]).unwrap();
                });
            }
        });
        let entries = list_layout(&dir).unwrap();
        assert_eq!(entries.len(), 8);
        for (i, img) in images.iter().enumerate() {
            assert_eq!(
                &read_from_layout(&dir, Some(&format!("name{i}"))).unwrap(),
                img
            );
        }
        // No staging leftovers next to the layout or inside it.
        let siblings: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
        assert_eq!(siblings.len(), 1);
        let stray = std::fs::read_dir(dir.join("blobs/sha256"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count();
        assert_eq!(stray, 0);
    }

    #[test]
    fn empty_directory_becomes_a_layout() {
        let root = tempfile::tempdir().unwrap();
        let a = image("a");
        write_to_layout(root.path(), &[(&a, "a")]).unwrap();
        assert!(is_layout(root.path()));
        assert_eq!(read_from_layout(root.path(), None).unwrap(), a);
    }
}
