//! The three images OLM needs, built from cargo output and files on disk, with no base image.
//!
//! - **Operator image** ([`build_operator_image`]): a statically linked binary at
//!   `/usr/local/bin/<name>`, run as a non-root numeric user (65532:65532 by default, so
//!   `runAsNonRoot` can verify it), minimal `/etc/passwd`, `/etc/group` and
//!   `/etc/nsswitch.conf`, a world-writable sticky `/tmp` (webhook serving certs are mounted
//!   under it), and `org.opencontainers.image.*` labels. No CA bundle by default: an operator
//!   talks to the API server with the service-account CA that Kubernetes mounts; pass
//!   `ca_certificates` when it calls other TLS endpoints, and `SSL_CERT_FILE` points at it.
//! - **Bundle image** ([`build_bundle_image`]): `manifests/`, `metadata/` and `tests/scorecard/`
//!   of a registry+v1 bundle, labels equal to `metadata/annotations.yaml`, no entrypoint — the
//!   same content and labels as `operator-sdk`'s `bundle.Dockerfile` (`FROM scratch`).
//! - **Catalog image** ([`build_catalog_image`]): the File-Based Catalog under `/configs`, the
//!   `operators.operatorframework.io.index.configs.v1=/configs` label and a static catalog server
//!   as entrypoint. OLM probes catalog pods with `grpc_health_probe -addr=:50051`, so the image
//!   can carry a probe binary (or a symlink to a server that answers to that name).
//!
//! Every image shares the same base layer when it runs as the same user, so registries store
//! it once; each concern (base, program, content) is its own layer, so changing the catalog only
//! changes the configs layer.

use crate::build::{
    BuildImageError, Image, ImageSpec, LayerSpec, Platform, RuntimeConfig, build_image,
    check_label_key,
};
use crate::elf::inspect_binary;
pub use crate::paths::{
    CATALOG_PORT, CATALOG_SERVER_PATH, CONFIGS_DIR, CONFIGS_LABEL, HEALTH_PROBE_PATH, INDEX_PATH,
    default_server_args,
};
use crate::tree::{EXEC_MODE, FILE_MODE, FileTree, Owner};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Label (and annotation) prefix of the OCI pre-defined keys.
pub const OCI_PREFIX: &str = "org.opencontainers.image.";
/// Where an operator binary goes.
pub const OPERATOR_BIN_DIR: &str = "/usr/local/bin";
/// Where an optional CA bundle goes.
pub const CA_BUNDLE_PATH: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The standard `org.opencontainers.image.*` labels; unset fields are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OciLabels {
    /// `title`.
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `version`.
    pub version: Option<String>,
    /// `source` (repository URL).
    pub source: Option<String>,
    /// `revision` (commit).
    pub revision: Option<String>,
    /// `licenses` (SPDX expression).
    pub licenses: Option<String>,
    /// `vendor`.
    pub vendor: Option<String>,
    /// `url`.
    pub url: Option<String>,
}

impl OciLabels {
    /// The labels as a map, with `created` set to the build time.
    pub fn to_map(&self, created: jiff::Timestamp) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let fields = [
            ("title", &self.title),
            ("description", &self.description),
            ("version", &self.version),
            ("source", &self.source),
            ("revision", &self.revision),
            ("licenses", &self.licenses),
            ("vendor", &self.vendor),
            ("url", &self.url),
        ];
        for (k, v) in fields {
            if let Some(v) = v {
                m.insert(format!("{OCI_PREFIX}{k}"), v.clone());
            }
        }
        m.insert(
            format!("{OCI_PREFIX}created"),
            olmkit_core::epoch::rfc3339(created),
        );
        m
    }
}

/// The base layer: users, groups, `/tmp`, the user's home and optionally a CA bundle.
pub fn base_layer(
    user: Owner,
    ca_certificates: Option<&[u8]>,
) -> Result<LayerSpec, BuildImageError> {
    let mut passwd = String::from("root:x:0:0:root:/root:/sbin/nologin\n");
    let mut group = String::from("root:x:0:\n");
    let home = match user {
        Owner { uid: 0, .. } => "/root".to_string(),
        Owner { uid: 65532, .. } => "/home/nonroot".to_string(),
        Owner { uid, .. } => format!("/home/u{uid}"),
    };
    if user.uid != 0 {
        let name = if user.uid == 65532 {
            "nonroot".to_string()
        } else {
            format!("u{}", user.uid)
        };
        passwd.push_str(&format!(
            "{name}:x:{}:{}:{name}:{home}:/sbin/nologin\n",
            user.uid, user.gid
        ));
    }
    if user.gid != 0 {
        let name = if user.gid == 65532 {
            "nonroot".to_string()
        } else {
            format!("g{}", user.gid)
        };
        group.push_str(&format!("{name}:x:{}:\n", user.gid));
    }
    let mut tree = FileTree::new();
    tree.add_file("/etc/passwd", passwd, FILE_MODE)?;
    tree.add_file("/etc/group", group, FILE_MODE)?;
    // Static glibc resolves host names through NSS; without this file it may skip /etc/hosts.
    tree.add_file("/etc/nsswitch.conf", "hosts: files dns\n", FILE_MODE)?;
    tree.add_dir("/tmp", 0o1777, Owner::ROOT)?;
    tree.add_dir(&home, 0o700, user)?;
    if let Some(ca) = ca_certificates {
        tree.add_file(CA_BUNDLE_PATH, ca.to_vec(), FILE_MODE)?;
    }
    Ok(LayerSpec {
        tree,
        created_by: format!(
            "bundle-tool: base (passwd, group, /tmp, user {}:{})",
            user.uid, user.gid
        ),
    })
}

fn read_input(path: &Path) -> Result<Vec<u8>, BuildImageError> {
    std::fs::read(path).map_err(|source| BuildImageError::ReadInput {
        path: path.to_path_buf(),
        source,
    })
}

fn merge_labels(
    into: &mut BTreeMap<String, String>,
    extra: &BTreeMap<String, String>,
) -> Result<(), BuildImageError> {
    for (k, v) in extra {
        check_label_key(k)?;
        into.insert(k.clone(), v.clone());
    }
    Ok(())
}

/// Reads a binary that must run in an image without libc; returns its bytes and platform.
fn load_binary(path: &Path, allow_dynamic: bool) -> Result<(Vec<u8>, Platform), BuildImageError> {
    let data = read_input(path)?;
    let info = inspect_binary(path, &data)?;
    if let Some(interp) = &info.interpreter
        && !allow_dynamic
    {
        return Err(BuildImageError::Binary {
            path: path.to_path_buf(),
            reason: format!(
                "dynamically linked (needs {interp}), but the image has no libc; build it \
                 statically (hack/build-static.sh) or allow it explicitly"
            ),
        });
    }
    Ok((
        data,
        Platform {
            os: "linux".into(),
            architecture: info.architecture,
            variant: None,
        },
    ))
}

fn file_name(path: &Path) -> Result<String, BuildImageError> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| BuildImageError::Invalid {
            what: path.display().to_string(),
            reason: "has no usable file name".into(),
        })
}

/// Inputs of the operator image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorImageInputs {
    /// The statically linked operator binary.
    pub binary: PathBuf,
    /// Name under `/usr/local/bin` (default: the binary's file name).
    pub binary_name: Option<String>,
    /// Default arguments (the image `Cmd`), e.g. `["run"]`.
    pub args: Vec<String>,
    /// User the container runs as.
    pub user: Owner,
    /// Standard labels (also set as manifest annotations).
    pub oci: OciLabels,
    /// More labels.
    pub labels: BTreeMap<String, String>,
    /// Extra `NAME=value` environment entries.
    pub env: Vec<String>,
    /// `port/proto` entries to declare, e.g. `9443/tcp`.
    pub exposed_ports: Vec<String>,
    /// A PEM CA bundle to install at [`CA_BUNDLE_PATH`].
    pub ca_certificates: Option<PathBuf>,
    /// Accept a dynamically linked binary (it will not start without a libc; for tests).
    pub allow_dynamic: bool,
    /// Build time.
    pub created: jiff::Timestamp,
}

impl OperatorImageInputs {
    /// Defaults for `binary`: non-root user, no arguments, no extra labels.
    pub fn new(binary: impl Into<PathBuf>, created: jiff::Timestamp) -> Self {
        Self {
            binary: binary.into(),
            binary_name: None,
            args: Vec::new(),
            user: Owner::NONROOT,
            oci: OciLabels::default(),
            labels: BTreeMap::new(),
            env: Vec::new(),
            exposed_ports: Vec::new(),
            ca_certificates: None,
            allow_dynamic: false,
            created,
        }
    }
}

fn check_env(env: &[String]) -> Result<(), BuildImageError> {
    for e in env {
        match e.split_once('=') {
            Some((k, _)) if !k.is_empty() && !k.contains(char::is_whitespace) => {}
            _ => {
                return Err(BuildImageError::Invalid {
                    what: format!("environment entry {e:?}"),
                    reason: "expected NAME=value".into(),
                });
            }
        }
    }
    Ok(())
}

fn check_ports(ports: &[String]) -> Result<(), BuildImageError> {
    for p in ports {
        let (num, proto) = p.split_once('/').unwrap_or((p.as_str(), "tcp"));
        let ok = num.parse::<u16>().is_ok_and(|n| n > 0) && matches!(proto, "tcp" | "udp" | "sctp");
        if !ok {
            return Err(BuildImageError::Invalid {
                what: format!("exposed port {p:?}"),
                reason: "expected PORT or PORT/tcp|udp|sctp".into(),
            });
        }
    }
    Ok(())
}

fn normalize_ports(ports: &[String]) -> Vec<String> {
    let mut out: Vec<String> = ports
        .iter()
        .map(|p| {
            if p.contains('/') {
                p.clone()
            } else {
                format!("{p}/tcp")
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Builds the operator image.
pub fn build_operator_image(inputs: &OperatorImageInputs) -> Result<Image, BuildImageError> {
    let (binary, platform) = load_binary(&inputs.binary, inputs.allow_dynamic)?;
    let name = match &inputs.binary_name {
        Some(n) => n.clone(),
        None => file_name(&inputs.binary)?,
    };
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(BuildImageError::Invalid {
            what: format!("binary name {name:?}"),
            reason: "must be a plain file name".into(),
        });
    }
    check_env(&inputs.env)?;
    check_ports(&inputs.exposed_ports)?;
    let ca = match &inputs.ca_certificates {
        Some(p) => Some(read_input(p)?),
        None => None,
    };
    let exe = format!("{OPERATOR_BIN_DIR}/{name}");
    let mut bin_tree = FileTree::new();
    bin_tree.add_file(&exe, binary, EXEC_MODE)?;

    let oci = inputs.oci.to_map(inputs.created);
    let mut labels = oci.clone();
    merge_labels(&mut labels, &inputs.labels)?;
    let mut env = vec!["PATH=/usr/local/bin:/usr/bin:/bin".to_string()];
    if ca.is_some() {
        env.push(format!("SSL_CERT_FILE={CA_BUNDLE_PATH}"));
    }
    env.extend(inputs.env.iter().cloned());
    let spec = ImageSpec {
        layers: vec![
            base_layer(inputs.user, ca.as_deref())?,
            LayerSpec {
                tree: bin_tree,
                created_by: format!("bundle-tool: operator binary {exe}"),
            },
        ],
        config: RuntimeConfig {
            user: Some(format!("{}:{}", inputs.user.uid, inputs.user.gid)),
            entrypoint: vec![exe],
            cmd: inputs.args.clone(),
            env,
            working_dir: None,
            exposed_ports: normalize_ports(&inputs.exposed_ports),
            labels,
            stop_signal: None,
        },
        annotations: oci,
        created: inputs.created,
        platform,
        author: None,
    };
    build_image(&spec)
}

/// How the catalog image answers OLM's `grpc_health_probe -addr=:50051` exec probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthProbe {
    /// No probe in the image (the CatalogSource must not rely on OLM's default probes).
    None,
    /// Install this static binary at [`HEALTH_PROBE_PATH`].
    Binary(PathBuf),
    /// Symlink [`HEALTH_PROBE_PATH`] to the server, which answers when invoked under that name.
    ServerSymlink,
}

/// The catalog server part of a catalog image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogServer {
    /// The statically linked server binary, installed at [`CATALOG_SERVER_PATH`].
    pub binary: PathBuf,
    /// Default arguments (the image `Cmd`).
    pub args: Vec<String>,
    /// Health probe for OLM.
    pub health_probe: HealthProbe,
    /// Accept dynamically linked binaries (tests only: they will not start in the image).
    pub allow_dynamic: bool,
}

impl CatalogServer {
    /// `/configs --port 50051` with the given binary and no probe.
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            args: default_server_args(),
            health_probe: HealthProbe::None,
            allow_dynamic: false,
        }
    }
}

/// Inputs of the catalog image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogImageInputs {
    /// Root of the File-Based Catalog.
    pub configs_dir: PathBuf,
    /// A precomputed serving index (`bundle-tool catalog index`), installed at [`INDEX_PATH`],
    /// where the catalog server looks for it (`<configs>/../index`) to start without scanning.
    pub index: Option<PathBuf>,
    /// The server; `None` builds an image with only the FBC and its label (to be served by
    /// another image, or while no static server is available).
    pub server: Option<CatalogServer>,
    /// User the server runs as.
    pub user: Owner,
    /// Standard labels.
    pub oci: OciLabels,
    /// More labels.
    pub labels: BTreeMap<String, String>,
    /// Platform of a server-less image (a server's own architecture wins).
    pub platform: Platform,
    /// Build time.
    pub created: jiff::Timestamp,
}

impl CatalogImageInputs {
    /// Defaults for `configs_dir`: no server, linux/amd64, non-root user.
    pub fn new(configs_dir: impl Into<PathBuf>, created: jiff::Timestamp) -> Self {
        Self {
            configs_dir: configs_dir.into(),
            index: None,
            server: None,
            user: Owner::NONROOT,
            oci: OciLabels::default(),
            labels: BTreeMap::new(),
            platform: Platform::linux_amd64(),
            created,
        }
    }
}

/// The layer holding the FBC at `/configs` (and its index at `/index`, derived from it).
pub fn configs_layer(
    configs_dir: &Path,
    index: Option<&Path>,
) -> Result<LayerSpec, BuildImageError> {
    let mut tree = FileTree::new();
    tree.add_host_dir(CONFIGS_DIR, configs_dir)?;
    if tree.len() <= 1 {
        return Err(BuildImageError::Invalid {
            what: configs_dir.display().to_string(),
            reason: "the catalog directory is empty".into(),
        });
    }
    let mut created_by = format!("bundle-tool: File-Based Catalog at {CONFIGS_DIR}");
    if let Some(i) = index {
        tree.add_file(INDEX_PATH, read_input(i)?, FILE_MODE)?;
        created_by.push_str(&format!(", index at {INDEX_PATH}"));
    }
    Ok(LayerSpec { tree, created_by })
}

/// Builds the catalog image.
pub fn build_catalog_image(inputs: &CatalogImageInputs) -> Result<Image, BuildImageError> {
    let configs = configs_layer(&inputs.configs_dir, inputs.index.as_deref())?;
    let oci = inputs.oci.to_map(inputs.created);
    let mut labels = oci.clone();
    merge_labels(&mut labels, &inputs.labels)?;
    labels.insert(CONFIGS_LABEL.into(), CONFIGS_DIR.into());
    let mut layers = Vec::new();
    let mut config = RuntimeConfig {
        labels,
        ..Default::default()
    };
    let mut platform = inputs.platform.clone();
    if let Some(server) = &inputs.server {
        let (binary, server_platform) = load_binary(&server.binary, server.allow_dynamic)?;
        let mut tree = FileTree::new();
        tree.add_file(CATALOG_SERVER_PATH, binary, EXEC_MODE)?;
        match &server.health_probe {
            HealthProbe::None => {}
            HealthProbe::Binary(p) => {
                let (probe, probe_platform) = load_binary(p, server.allow_dynamic)?;
                if probe_platform != server_platform {
                    return Err(BuildImageError::Binary {
                        path: p.clone(),
                        reason: format!(
                            "built for {probe_platform}, but the server is built for {server_platform}"
                        ),
                    });
                }
                tree.add_file(HEALTH_PROBE_PATH, probe, EXEC_MODE)?;
            }
            HealthProbe::ServerSymlink => {
                tree.add_symlink(HEALTH_PROBE_PATH, "catalog-server")?;
            }
        }
        layers.push(base_layer(inputs.user, None)?);
        layers.push(LayerSpec {
            tree,
            created_by: format!("bundle-tool: catalog server {CATALOG_SERVER_PATH}"),
        });
        config.user = Some(format!("{}:{}", inputs.user.uid, inputs.user.gid));
        config.entrypoint = vec![CATALOG_SERVER_PATH.into()];
        config.cmd = server.args.clone();
        config.env = vec!["PATH=/bin".into()];
        config.exposed_ports = vec![format!("{CATALOG_PORT}/tcp")];
        platform = server_platform;
    }
    layers.push(configs);
    let spec = ImageSpec {
        layers,
        config,
        annotations: oci,
        created: inputs.created,
        platform,
        author: None,
    };
    build_image(&spec)
}

/// Inputs of the bundle image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleImageInputs {
    /// The registry+v1 bundle directory (`manifests/`, `metadata/`, optional `tests/scorecard/`).
    pub bundle_dir: PathBuf,
    /// Platform recorded in the config (bundle content runs nowhere; OLM ignores it).
    pub platform: Platform,
    /// Build time.
    pub created: jiff::Timestamp,
}

impl BundleImageInputs {
    /// Defaults for `bundle_dir`: linux/amd64.
    pub fn new(bundle_dir: impl Into<PathBuf>, created: jiff::Timestamp) -> Self {
        Self {
            bundle_dir: bundle_dir.into(),
            platform: Platform::linux_amd64(),
            created,
        }
    }
}

/// A built bundle image and the differences found between the bundle's own
/// `bundle.Dockerfile` (if any) and what was built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltBundleImage {
    /// The image.
    pub image: Image,
    /// Dockerfile drift (warnings: the image follows `metadata/annotations.yaml`).
    pub dockerfile_drift: Vec<String>,
}

/// Builds the bundle image: one layer with the bundle's folders, labels = annotations.
pub fn build_bundle_image(inputs: &BundleImageInputs) -> Result<BuiltBundleImage, BuildImageError> {
    use olmkit_bundle::model::keys;
    let dir = &inputs.bundle_dir;
    let bundle = olmkit_bundle::load_bundle_dir(dir)?;
    let file = bundle
        .annotations_file
        .clone()
        .unwrap_or_else(|| "metadata/annotations.yaml".into());
    if bundle.annotations_file.is_none() {
        return Err(BuildImageError::Invalid {
            what: dir.join(&file).display().to_string(),
            reason: "missing; a bundle image's labels are its annotations (run `bundle-tool generate bundle`)".into(),
        });
    }
    if bundle.annotations.is_empty() {
        return Err(BuildImageError::Invalid {
            what: format!("{}: field annotations", dir.join(&file).display()),
            reason:
                "is empty; OLM needs at least the mediatype, manifests, metadata and package keys"
                    .into(),
        });
    }
    for (key, expected) in [
        (keys::MANIFESTS, "manifests/"),
        (keys::METADATA, "metadata/"),
    ] {
        if let Some(v) = bundle.annotations.get(key)
            && v.trim_end_matches('/') != expected.trim_end_matches('/')
        {
            return Err(BuildImageError::Invalid {
                what: format!("{}: field annotations.{key}", dir.join(&file).display()),
                reason: format!(
                    "is {v:?}, but the image stores the folder at /{expected}; use {expected:?}"
                ),
            });
        }
    }
    for k in bundle.annotations.keys() {
        check_label_key(k)?;
    }
    let mut tree = FileTree::new();
    for (src, dest) in crate::dockerfile::BUNDLE_PATHS {
        let p = dir.join(src);
        if p.is_dir() {
            tree.add_host_dir(dest, &p)?;
        } else if src != "tests/scorecard" {
            return Err(BuildImageError::Invalid {
                what: p.display().to_string(),
                reason: "missing; a bundle needs manifests/ and metadata/".into(),
            });
        }
    }
    let dockerfile_drift = match std::fs::read_to_string(dir.join("bundle.Dockerfile")) {
        Ok(text) => crate::dockerfile::bundle_dockerfile_drift(&text, &bundle.annotations),
        Err(_) => Vec::new(),
    };
    let spec = ImageSpec {
        layers: vec![LayerSpec {
            tree,
            created_by: "bundle-tool: bundle manifests/ metadata/ tests/scorecard/".into(),
        }],
        config: RuntimeConfig {
            labels: bundle.annotations.clone(),
            ..Default::default()
        },
        annotations: BTreeMap::new(),
        created: inputs.created,
        platform: inputs.platform.clone(),
        author: None,
    };
    Ok(BuiltBundleImage {
        image: build_image(&spec)?,
        dockerfile_drift,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000).unwrap()
    }

    /// Writes a small fake executable (static, or dynamic when `interp` is set).
    fn fake_binary(dir: &Path, name: &str, interp: Option<&str>) -> PathBuf {
        let p = dir.join(name);
        let data = crate::elf::tiny_elf(object::elf::EM_X86_64, interp, 200_000);
        std::fs::write(&p, data).unwrap();
        p
    }

    #[test]
    fn operator_image_manifest_and_config_snapshot() {
        let d = tempfile::tempdir().unwrap();
        let exe = fake_binary(d.path(), "operator", None);
        let mut inputs = OperatorImageInputs::new(&exe, t0());
        inputs.args = vec!["run".into()];
        inputs.exposed_ports = vec!["9443/tcp".into(), "8080".into()];
        inputs.oci.title = Some("memcached-operator".into());
        inputs.oci.version = Some("0.1.0".into());
        let img = build_operator_image(&inputs).unwrap();
        let pretty = |b: &[u8]| {
            serde_json::to_string_pretty(&serde_json::from_slice::<serde_json::Value>(b).unwrap())
                .unwrap()
        };
        insta::assert_snapshot!("operator_manifest", pretty(&img.manifest.data));
        insta::assert_snapshot!("operator_config", pretty(&img.config.data));
        insta::assert_snapshot!("operator_digest", img.digest().to_string());
    }

    #[test]
    fn base_layer_users() {
        let l = base_layer(Owner::NONROOT, None).unwrap();
        let passwd = match &l.tree.get("/etc/passwd").unwrap().kind {
            crate::tree::EntryKind::File(b) => String::from_utf8(b.clone()).unwrap(),
            _ => unreachable!(),
        };
        assert!(passwd.contains("nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"));
        assert_eq!(l.tree.get("/home/nonroot").unwrap().owner, Owner::NONROOT);
        assert_eq!(l.tree.get("/tmp").unwrap().mode, 0o1777);
        let root = base_layer(Owner::ROOT, None).unwrap();
        assert!(root.tree.get("/home/nonroot").is_none());
    }

    #[test]
    fn dynamic_binary_is_refused_unless_allowed() {
        let d = tempfile::tempdir().unwrap();
        let exe = fake_binary(d.path(), "op-dyn", Some("/lib64/ld-linux-x86-64.so.2"));
        let mut inputs = OperatorImageInputs::new(&exe, t0());
        let err = build_operator_image(&inputs).unwrap_err();
        assert!(err.to_string().contains("dynamically linked"), "{err}");
        assert!(err.is_user_error());
        inputs.allow_dynamic = true;
        inputs.binary_name = Some("operator".into());
        inputs.args = vec!["run".into()];
        inputs.exposed_ports = vec!["9443".into()];
        let img = build_operator_image(&inputs).unwrap();
        let c: serde_json::Value = serde_json::from_slice(&img.config.data).unwrap();
        assert_eq!(c["config"]["Entrypoint"][0], "/usr/local/bin/operator");
        assert_eq!(c["config"]["Cmd"][0], "run");
        assert_eq!(c["config"]["User"], "65532:65532");
        assert!(c["config"]["ExposedPorts"]["9443/tcp"].is_object());
        assert_eq!(
            c["config"]["Labels"]["org.opencontainers.image.created"],
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(img.layers.len(), 2);
    }

    #[test]
    fn bad_options_are_user_errors() {
        let d = tempfile::tempdir().unwrap();
        let exe = fake_binary(d.path(), "op", None);
        let mut inputs = OperatorImageInputs::new(&exe, t0());
        inputs.allow_dynamic = true;
        inputs.env = vec!["NOEQUALS".into()];
        assert!(
            build_operator_image(&inputs)
                .unwrap_err()
                .to_string()
                .contains("NAME=value")
        );
        inputs.env.clear();
        inputs.exposed_ports = vec!["99999/tcp".into()];
        assert!(build_operator_image(&inputs).is_err());
        let missing = OperatorImageInputs::new("/nonexistent/op", t0());
        let err = build_operator_image(&missing).unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read /nonexistent/op"),
            "{err}"
        );
    }

    fn real_bundle() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../tests/fixtures/real-bundles/authorino-operator/0.13.0")
    }

    #[test]
    fn bundle_image_from_a_real_bundle() {
        let built = build_bundle_image(&BundleImageInputs::new(real_bundle(), t0())).unwrap();
        let c: serde_json::Value = serde_json::from_slice(&built.image.config.data).unwrap();
        let ann = olmkit_bundle::load_bundle_dir(&real_bundle())
            .unwrap()
            .annotations;
        let labels: BTreeMap<String, String> =
            serde_json::from_value(c["config"]["Labels"].clone()).unwrap();
        assert_eq!(labels, ann);
        assert!(c["config"].get("Entrypoint").is_none());
        assert_eq!(built.image.layers.len(), 1);
    }

    #[test]
    fn bundle_image_input_errors_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("manifests")).unwrap();
        std::fs::write(d.path().join("manifests/a.yaml"), "kind: ConfigMap\n").unwrap();
        let err = build_bundle_image(&BundleImageInputs::new(d.path(), t0())).unwrap_err();
        assert!(
            err.to_string().contains("metadata/annotations.yaml"),
            "{err}"
        );
        std::fs::create_dir_all(d.path().join("metadata")).unwrap();
        std::fs::write(
            d.path().join("metadata/annotations.yaml"),
            "annotations:\n  operators.operatorframework.io.bundle.manifests.v1: other/\n",
        )
        .unwrap();
        let err = build_bundle_image(&BundleImageInputs::new(d.path(), t0())).unwrap_err();
        assert!(err.to_string().contains("bundle.manifests.v1"), "{err}");
        assert!(err.is_user_error());
    }

    #[test]
    fn catalog_configs_only_and_layer_reuse() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("pkg")).unwrap();
        std::fs::write(
            d.path().join("pkg/catalog.yaml"),
            "schema: olm.package\nname: pkg\n",
        )
        .unwrap();
        let inputs = CatalogImageInputs::new(d.path(), t0());
        let img = build_catalog_image(&inputs).unwrap();
        assert_eq!(img.layers.len(), 1);
        let c: serde_json::Value = serde_json::from_slice(&img.config.data).unwrap();
        assert_eq!(c["config"]["Labels"][CONFIGS_LABEL], "/configs");
        assert!(c["config"].get("Entrypoint").is_none());

        let bin = tempfile::tempdir().unwrap();
        let exe = fake_binary(bin.path(), "catalog-server", None);
        let mut with_server = inputs.clone();
        let mut server = CatalogServer::new(&exe);
        server.health_probe = HealthProbe::ServerSymlink;
        with_server.server = Some(server);
        let a = build_catalog_image(&with_server).unwrap();
        assert_eq!(a.layers.len(), 3);
        assert_eq!(a.layers[2], img.layers[0], "same FBC, same configs layer");
        std::fs::write(
            d.path().join("pkg/catalog.yaml"),
            "schema: olm.package\nname: pkg2\n",
        )
        .unwrap();
        let b = build_catalog_image(&with_server).unwrap();
        assert_eq!(a.layers[..2], b.layers[..2]);
        assert_ne!(a.layers[2], b.layers[2]);

        let empty = tempfile::tempdir().unwrap();
        let err = build_catalog_image(&CatalogImageInputs::new(empty.path(), t0())).unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
    }
}
