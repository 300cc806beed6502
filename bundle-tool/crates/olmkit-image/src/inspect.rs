//! What an image is: digests, layers, labels and runtime config, from a layout or a registry.
//!
//! [`ImageInfo`] is read from the manifest and config JSON only (OCI or Docker schema 2, which
//! have the same shape), so it works for images this tool did not build. From a registry, a
//! multi-platform index resolves to its linux entry for this machine's architecture; the index
//! digest is reported too.

use crate::build::Image;
use crate::digest::Digest;
use crate::layout::{ReadLayoutError, read_from_layout};
use crate::remote::{RegistryError, RemoteOptions, Session};
use oci_client::{Reference, RegistryOperation};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use thiserror::Error;

/// Media types accepted when fetching a manifest.
pub const ACCEPTED_MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// An image could not be inspected.
#[derive(Debug, Error)]
pub enum InspectImageError {
    /// Reading from a layout failed.
    #[error(transparent)]
    Layout(#[from] ReadLayoutError),
    /// Talking to the registry failed.
    #[error("cannot inspect {reference}: {error}")]
    Registry {
        /// The reference.
        reference: String,
        /// What failed.
        error: RegistryError,
    },
    /// A manifest or config is not what an image should be.
    #[error("{what}: {message}")]
    Malformed {
        /// Which document.
        what: String,
        /// What is wrong.
        message: String,
    },
}

impl InspectImageError {
    /// True for problems the user can fix: exit code 1.
    pub fn is_user_error(&self) -> bool {
        match self {
            InspectImageError::Layout(_) => true,
            InspectImageError::Registry { error, .. } => error.is_user_error(),
            InspectImageError::Malformed { .. } => true,
        }
    }
    /// What the user can do about it.
    pub fn hints(&self) -> Vec<String> {
        match self {
            InspectImageError::Registry { error, .. } => error.hints(),
            InspectImageError::Layout(ReadLayoutError::NoSuchImage { .. }) => {
                vec!["name an image of the layout as LAYOUT:NAME".into()]
            }
            _ => Vec::new(),
        }
    }
}

/// One layer of an image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LayerInfo {
    /// Digest of the (compressed) blob.
    pub digest: String,
    /// Size of the blob.
    pub size: u64,
    /// Media type.
    pub media_type: String,
    /// Digest of the uncompressed tar (from the config).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_id: Option<String>,
    /// History line (from the config, skipping empty layers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// Everything `image inspect` reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageInfo {
    /// What was inspected (`REF` or `LAYOUT:NAME`).
    pub name: String,
    /// `registry` or `layout`.
    pub source: String,
    /// Manifest digest.
    pub digest: String,
    /// Manifest media type.
    pub media_type: String,
    /// Digest of the multi-platform index the manifest was chosen from, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_digest: Option<String>,
    /// Config digest.
    pub config_digest: String,
    /// Config `created`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// `os/arch[/variant]`.
    pub platform: String,
    /// Config `User`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Config `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// Config `Cmd`.
    pub cmd: Vec<String>,
    /// Config `Env`.
    pub env: Vec<String>,
    /// Config `WorkingDir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Config `ExposedPorts`, sorted.
    pub exposed_ports: Vec<String>,
    /// Config `Labels`.
    pub labels: BTreeMap<String, String>,
    /// Manifest annotations.
    pub annotations: BTreeMap<String, String>,
    /// Layers, base first.
    pub layers: Vec<LayerInfo>,
    /// Config plus layer sizes.
    pub compressed_size: u64,
}

fn str_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn str_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The manifest's layers, with the config's diff IDs and (for the layers that are not empty)
/// the history line that made each.
fn layer_infos(m: &Value, c: &Value) -> Vec<LayerInfo> {
    let diff_ids = str_list(c.pointer("/rootfs/diff_ids"));
    let history: Vec<String> = c
        .get("history")
        .and_then(Value::as_array)
        .map(|h| {
            h.iter()
                .filter(|e| e.get("empty_layer").and_then(Value::as_bool) != Some(true))
                .map(|e| {
                    e.get("created_by")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default();
    m.get("layers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, l)| LayerInfo {
            digest: l
                .get("digest")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            size: l.get("size").and_then(Value::as_u64).unwrap_or_default(),
            media_type: l
                .get("mediaType")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            diff_id: diff_ids.get(i).cloned(),
            created_by: history.get(i).filter(|h| !h.is_empty()).cloned(),
        })
        .collect()
}

/// Builds the report from manifest and config documents.
pub fn describe(
    name: &str,
    source: &str,
    manifest: &[u8],
    config: &[u8],
    index_digest: Option<String>,
) -> Result<ImageInfo, InspectImageError> {
    let malformed = |what: &str, message: String| InspectImageError::Malformed {
        what: format!("{name}: {what}"),
        message,
    };
    let m: Value = serde_json::from_slice(manifest)
        .map_err(|e| malformed("manifest", format!("invalid JSON: {e}")))?;
    let c: Value = serde_json::from_slice(config)
        .map_err(|e| malformed("config", format!("invalid JSON: {e}")))?;
    let config_digest = m
        .pointer("/config/digest")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("manifest", "field config.digest: missing".into()))?
        .to_string();
    let layers = layer_infos(&m, &c);
    let rc = c.get("config");
    let field = |k: &str| rc.and_then(|r| r.get(k));
    let mut exposed_ports: Vec<String> = field("ExposedPorts")
        .and_then(Value::as_object)
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    exposed_ports.sort();
    let os = c.get("os").and_then(Value::as_str).unwrap_or("?");
    let arch = c.get("architecture").and_then(Value::as_str).unwrap_or("?");
    let platform = match c.get("variant").and_then(Value::as_str) {
        Some(v) => format!("{os}/{arch}/{v}"),
        None => format!("{os}/{arch}"),
    };
    let compressed_size = m
        .pointer("/config/size")
        .and_then(Value::as_u64)
        .unwrap_or_default()
        + layers.iter().map(|l| l.size).sum::<u64>();
    Ok(ImageInfo {
        name: name.to_string(),
        source: source.to_string(),
        digest: Digest::of(manifest).to_string(),
        media_type: m
            .get("mediaType")
            .and_then(Value::as_str)
            .unwrap_or("application/vnd.oci.image.manifest.v1+json")
            .to_string(),
        index_digest,
        config_digest,
        created: c.get("created").and_then(Value::as_str).map(str::to_string),
        platform,
        user: field("User")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        entrypoint: str_list(field("Entrypoint")),
        cmd: str_list(field("Cmd")),
        env: str_list(field("Env")),
        working_dir: field("WorkingDir")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        exposed_ports,
        labels: str_map(field("Labels")),
        annotations: str_map(m.get("annotations")),
        layers,
        compressed_size,
    })
}

/// Describes an in-memory image.
pub fn describe_image(
    name: &str,
    source: &str,
    image: &Image,
) -> Result<ImageInfo, InspectImageError> {
    describe(name, source, &image.manifest.data, &image.config.data, None)
}

/// Inspects image `name` (or the only image) of the layout at `dir`.
pub fn inspect_layout(dir: &Path, name: Option<&str>) -> Result<ImageInfo, InspectImageError> {
    let image = read_from_layout(dir, name)?;
    let label = match name {
        Some(n) => format!("{}:{n}", dir.display()),
        None => dir.display().to_string(),
    };
    describe_image(&label, "layout", &image)
}

fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Inspects `reference` in its registry (manifest and config only; layers are not pulled).
pub async fn inspect_remote(
    reference: &Reference,
    opts: &RemoteOptions,
) -> Result<ImageInfo, InspectImageError> {
    let whole = reference.whole();
    let reg = |error: RegistryError| InspectImageError::Registry {
        reference: whole.clone(),
        error,
    };
    let session = Session::new(reference, opts).map_err(reg)?;
    session
        .authenticate(reference, RegistryOperation::Pull)
        .await
        .map_err(reg)?;
    let fetch = |r: Reference| {
        let session = &session;
        async move {
            session
                .call("fetch manifest", &r, || {
                    session.client.pull_manifest_raw(
                        &r,
                        &session.auth.auth,
                        ACCEPTED_MANIFEST_TYPES,
                    )
                })
                .await
        }
    };
    let (mut body, mut digest) = fetch(reference.clone()).await.map_err(reg)?;
    let mut index_digest = None;
    let first: Value = serde_json::from_slice(&body).map_err(|e| InspectImageError::Malformed {
        what: format!("{whole}: manifest"),
        message: format!("invalid JSON: {e}"),
    })?;
    if let Some(list) = first.get("manifests").and_then(Value::as_array) {
        let pick = list
            .iter()
            .find(|m| {
                m.pointer("/platform/os").and_then(Value::as_str) == Some("linux")
                    && m.pointer("/platform/architecture").and_then(Value::as_str)
                        == Some(host_arch())
            })
            .or_else(|| if list.len() == 1 { list.first() } else { None })
            .and_then(|m| m.get("digest").and_then(Value::as_str))
            .ok_or_else(|| InspectImageError::Malformed {
                what: format!("{whole}: index"),
                message: format!("no linux/{} image in the index", host_arch()),
            })?;
        let by_digest = Reference::with_digest(
            reference.registry().to_string(),
            reference.repository().to_string(),
            pick.to_string(),
        );
        index_digest = Some(digest);
        (body, digest) = fetch(by_digest).await.map_err(reg)?;
    }
    let m: Value = serde_json::from_slice(&body).map_err(|e| InspectImageError::Malformed {
        what: format!("{whole}: manifest"),
        message: format!("invalid JSON: {e}"),
    })?;
    let config_digest = m
        .pointer("/config/digest")
        .and_then(Value::as_str)
        .ok_or_else(|| InspectImageError::Malformed {
            what: format!("{whole}: manifest {digest}"),
            message: "field config.digest: missing (not an image manifest)".into(),
        })?
        .to_string();
    let config = session
        .call("fetch config", reference, || async {
            let mut out = Vec::new();
            session
                .client
                .pull_blob(reference, config_digest.as_str(), &mut out)
                .await
                .map(|()| out)
        })
        .await
        .map_err(reg)?;
    let mut info = describe(&whole, "registry", &body, &config, index_digest)?;
    info.digest = digest;
    Ok(info)
}

fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_default()
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

impl ImageInfo {
    /// Human-readable report.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let mut line = |k: &str, v: &str| out.push_str(&format!("{k:<13}{v}\n"));
        line("Name:", &self.name);
        line("Digest:", &self.digest);
        if let Some(i) = &self.index_digest {
            line("Index:", i);
        }
        line("MediaType:", &self.media_type);
        line("Config:", &self.config_digest);
        if let Some(c) = &self.created {
            line("Created:", c);
        }
        line("Platform:", &self.platform);
        if let Some(u) = &self.user {
            line("User:", u);
        }
        if !self.entrypoint.is_empty() {
            line("Entrypoint:", &json_list(&self.entrypoint));
        }
        if !self.cmd.is_empty() {
            line("Cmd:", &json_list(&self.cmd));
        }
        if let Some(w) = &self.working_dir {
            line("WorkingDir:", w);
        }
        for (i, e) in self.env.iter().enumerate() {
            line(if i == 0 { "Env:" } else { "" }, e);
        }
        if !self.exposed_ports.is_empty() {
            line("Ports:", &self.exposed_ports.join(" "));
        }
        if !self.labels.is_empty() {
            out.push_str("Labels:\n");
            for (k, v) in &self.labels {
                out.push_str(&format!("  {k}={v}\n"));
            }
        }
        if !self.annotations.is_empty() {
            out.push_str("Annotations:\n");
            for (k, v) in &self.annotations {
                out.push_str(&format!("  {k}={v}\n"));
            }
        }
        out.push_str(&format!(
            "Layers:      {} ({} compressed)\n",
            self.layers.len(),
            human_size(self.compressed_size)
        ));
        for l in &self.layers {
            out.push_str(&format!(
                "  {}  {:>10}  {}",
                l.digest,
                human_size(l.size),
                l.media_type
            ));
            if let Some(c) = &l.created_by {
                out.push_str(&format!("  {c}"));
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_a_docker_schema2_manifest_too() {
        let manifest = br#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
            "config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":10,"digest":"sha256:aa"},
            "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":5,"digest":"sha256:bb"}]}"#;
        let config = br#"{"architecture":"arm64","os":"linux","variant":"v8","config":{"User":"1001","Labels":{"a":"b"},"ExposedPorts":{"50051/tcp":{}}},
            "rootfs":{"type":"layers","diff_ids":["sha256:cc"]},
            "history":[{"created_by":"ENV x","empty_layer":true},{"created_by":"COPY . /"}]}"#;
        let info = describe("x", "registry", manifest, config, None).unwrap();
        assert_eq!(info.platform, "linux/arm64/v8");
        assert_eq!(info.layers[0].created_by.as_deref(), Some("COPY . /"));
        assert_eq!(info.layers[0].diff_id.as_deref(), Some("sha256:cc"));
        assert_eq!(info.exposed_ports, ["50051/tcp"]);
        assert_eq!(info.compressed_size, 15);
        let text = info.render_text();
        assert!(text.contains("User:        1001"), "{text}");
        assert!(text.contains("  a=b\n"), "{text}");
        assert!(describe("x", "r", b"{", config, None).is_err());
    }
}
