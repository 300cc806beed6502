//! The three images OLM needs, built from cargo output and files on disk, with no base image.
//!
//! - **Operator image** ([`build_operator_image`]): a statically linked binary, which is the
//!   entrypoint, run as a non-root numeric user (65532:65532 by default, so `runAsNonRoot` can
//!   verify it), minimal `/etc/passwd`, `/etc/group` and `/etc/nsswitch.conf`, a
//!   world-writable sticky `/tmp` (webhook serving certs are mounted under it), `PATH` set to
//!   [`OPERATOR_PATH`], and `org.opencontainers.image.*` labels. No CA bundle by default: an
//!   operator talks to the API server with the service-account CA that Kubernetes mounts; pass
//!   `ca_certificates` when it calls other TLS endpoints, and `SSL_CERT_FILE` points at it.
//!
//! ## Where the operator binary goes
//!
//! A pod runs the manager container's `command` when the CSV gives one (kubebuilder's scaffold
//! has `command: [/manager]`), else the image's entrypoint. So the binary goes, first match:
//!
//! 1. to an explicit path ([`OperatorImageInputs::binary_path`], `--path /manager`: absolute,
//!    normalized, no `.` or `..`), or `/usr/local/bin/<binary_name>` (`--name`);
//! 2. where the CSV's manager container command points ([`ManagerCommand`], which the caller
//!    fills from the container olmkit-core's `csv::manager_container` rule picks): an absolute `command[0]` is the path
//!    itself; a bare name (`manager`) is looked up through the image's `PATH`, so the binary
//!    goes to `/usr/local/bin/<name>`; a relative path with a `/` is taken from the container's
//!    `workingDir` (default `/`). A shell (`/bin/sh -c ...`) is refused: the image has none;
//! 3. to `/usr/local/bin/<file name of the binary>`.
//!
//! The entrypoint is that path (the CSV's `args` stay the CSV's; the image's `Cmd` is the given
//! `args`). A path whose directories the base layer owns with other permissions (`/tmp/x`,
//! `/home/nonroot/x`) or that the base layer holds (`/etc/passwd`) is refused: the binary's
//! layer would change them.
//!
//! After building, [`check_operator_image`] reads the image's layers back (whiteouts and
//! symbolic links resolved as a container runtime would) and refuses an image whose entrypoint
//! is not a regular file the image's user may execute, or whose CSV manager command names no
//! such file, naming the image path and the CSV field
//! (`spec.install.spec.deployments[0].spec.template.spec.containers[j].command[0]`).
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
use crate::tree::{DIR_MODE, EXEC_MODE, EntryKind, FILE_MODE, FileTree, Owner};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Label (and annotation) prefix of the OCI pre-defined keys.
pub const OCI_PREFIX: &str = "org.opencontainers.image.";
/// Where an operator binary goes by default (the first directory of [`OPERATOR_PATH`]).
pub const OPERATOR_BIN_DIR: &str = "/usr/local/bin";
/// The operator image's `PATH`.
pub const OPERATOR_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
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
                "dynamically linked (needs {interp}), but the image has no libc, so it would \
                 not start; build it statically"
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
    /// Name under `/usr/local/bin` (default: see the module docs, "Where the operator binary
    /// goes"). Not with `binary_path`.
    pub binary_name: Option<String>,
    /// Absolute path of the binary in the image, e.g. `/manager` (default: see the module
    /// docs). Not with `binary_name`.
    pub binary_path: Option<String>,
    /// The command the CSV's manager container runs: where the binary goes when neither
    /// `binary_name` nor `binary_path` is given.
    pub manager_command: Option<ManagerCommand>,
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
            binary_path: None,
            manager_command: None,
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

    /// Where the binary goes in the image (the module docs, "Where the operator binary goes").
    pub fn exe_path(&self) -> Result<String, BuildImageError> {
        match (&self.binary_path, &self.binary_name) {
            (Some(_), Some(_)) => Err(BuildImageError::Invalid {
                what: "binary name and binary path".into(),
                reason:
                    "give one: a name goes under /usr/local/bin, a path is where the binary goes"
                        .into(),
            }),
            (Some(p), None) => check_binary_path(p),
            (None, Some(n)) => bin_dir_path(n),
            (None, None) => match &self.manager_command {
                Some(c) => c.placement(),
                None => bin_dir_path(&file_name(&self.binary)?),
            },
        }
    }
}

/// `/usr/local/bin/<name>` for a plain file name.
fn bin_dir_path(name: &str) -> Result<String, BuildImageError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." || name.contains('\0') {
        return Err(BuildImageError::Invalid {
            what: format!("binary name {name:?}"),
            reason: "must be a plain file name (it goes under /usr/local/bin); a path in the image is the binary path".into(),
        });
    }
    Ok(format!("{OPERATOR_BIN_DIR}/{name}"))
}

/// Checks an explicit in-image path for the operator binary: absolute and normalized (no
/// empty, `.` or `..` components, no trailing `/`), not the root. Returns it.
pub fn check_binary_path(path: &str) -> Result<String, BuildImageError> {
    let refuse = |reason: &str| BuildImageError::Invalid {
        what: format!("binary path {path:?}"),
        reason: format!("{reason}; give an absolute path in the image, e.g. /manager"),
    };
    let Some(rest) = path.strip_prefix('/') else {
        return Err(refuse("is relative"));
    };
    if rest.is_empty() {
        return Err(refuse("is the image root"));
    }
    if path.contains('\0') {
        return Err(refuse("contains a NUL byte"));
    }
    for part in rest.split('/') {
        match part {
            ".." => return Err(refuse("contains `..`")),
            "." => return Err(refuse("contains `.`")),
            "" => return Err(refuse("has an empty component (`//` or a trailing `/`)")),
            _ => {}
        }
    }
    Ok(path.to_string())
}

/// Refuses a binary path that the base layer holds, or whose directories the base layer has
/// with other permissions or owners than the binary's layer would give them (the upper layer's
/// directory entry would replace them: `/tmp/x` would make `/tmp` 0755).
fn check_against_base(base: &FileTree, exe: &str) -> Result<(), BuildImageError> {
    let rel = exe.trim_start_matches('/');
    let conflict = |reason: String| BuildImageError::PathConflict {
        path: exe.to_string(),
        reason,
    };
    if base.get(rel).is_some() {
        return Err(conflict(
            "the image's base layer holds this path (users, groups, /tmp, the home directory); choose another path for the binary".into(),
        ));
    }
    let mut end = 0;
    while let Some(i) = rel[end..].find('/') {
        let dir = &rel[..end + i];
        if let Some(e) = base.get(dir)
            && (e.kind != EntryKind::Dir || e.mode != DIR_MODE || e.owner != Owner::ROOT)
        {
            return Err(conflict(format!(
                "/{dir} belongs to the image's base layer (mode {:o}, owner {}:{}), which the binary's layer would change; choose another path for the binary",
                e.mode, e.owner.uid, e.owner.gid
            )));
        }
        end += i + 1;
    }
    Ok(())
}

/// The command the CSV's manager container runs (its `command[0]`), which the operator image
/// must hold as an executable file (see the module docs). The caller finds the manager
/// container (olmkit-release's `manager` module applies olmkit-bundle's rule) and passes it
/// as plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagerCommand {
    /// `command[0]` as written.
    pub program: String,
    /// The container's `workingDir`.
    pub working_dir: Option<String>,
    /// Where the command is written, e.g. `spec.install.spec.deployments[0].spec.template.spec.containers[0].command[0]`.
    pub field: String,
    /// The file (or object) holding it, e.g. the CSV's path.
    pub file: String,
}

/// What a command's program is, for the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// An absolute path in the image.
    Path(String),
    /// A bare name, looked up through `PATH`.
    Search(String),
}

impl ManagerCommand {
    /// `<file>: field <field>`.
    pub fn what(&self) -> String {
        format!("{}: field {}", self.file, self.field)
    }

    /// The program: an absolute path (a relative one taken from `workingDir`, `.` and empty
    /// components dropped) or a bare name. Refuses an empty one, `..`, and shells.
    pub fn program(&self) -> Result<Program, BuildImageError> {
        let p = &self.program;
        let refuse = |reason: String| BuildImageError::Invalid {
            what: self.what(),
            reason: format!("is {p:?}: {reason}"),
        };
        let base = p.rsplit('/').next().unwrap_or_default();
        if SHELLS.contains(&base) {
            return Err(refuse(
                "a shell, which the operator image does not have (no base image: it holds only the operator binary); make the command run the operator binary itself, e.g. command: [/manager]".into(),
            ));
        }
        if p.is_empty() || p.contains('\0') {
            return Err(refuse("not a program".into()));
        }
        if !p.contains('/') {
            return Ok(Program::Search(p.clone()));
        }
        let joined = if p.starts_with('/') {
            p.clone()
        } else {
            format!("{}/{p}", self.working_dir.as_deref().unwrap_or("/"))
        };
        let mut parts = Vec::new();
        for part in joined.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    return Err(refuse(
                        "contains `..`; write the binary's path without it".into(),
                    ));
                }
                x => parts.push(x),
            }
        }
        if parts.is_empty() || p.ends_with('/') {
            return Err(refuse("names a directory, not a program".into()));
        }
        Ok(Program::Path(format!("/{}", parts.join("/"))))
    }

    /// Where the binary goes so that the command runs it: the program's path, or
    /// `/usr/local/bin/<name>` for a bare name (the first directory of [`OPERATOR_PATH`]).
    pub fn placement(&self) -> Result<String, BuildImageError> {
        match self.program()? {
            Program::Path(p) => Ok(p),
            Program::Search(n) => Ok(format!("{OPERATOR_BIN_DIR}/{n}")),
        }
    }
}

/// Programs that are shells (or a multi-call binary holding one): a command running one needs
/// a base image.
const SHELLS: &[&str] = &["sh", "bash", "ash", "dash", "zsh", "ksh", "busybox"];

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

/// Builds the operator image, its binary where [`OperatorImageInputs::exe_path`] says.
pub fn build_operator_image(inputs: &OperatorImageInputs) -> Result<Image, BuildImageError> {
    let exe = inputs.exe_path()?;
    let (binary, platform) = load_binary(&inputs.binary, inputs.allow_dynamic)?;
    check_env(&inputs.env)?;
    check_ports(&inputs.exposed_ports)?;
    let ca = match &inputs.ca_certificates {
        Some(p) => Some(read_input(p)?),
        None => None,
    };
    let base = base_layer(inputs.user, ca.as_deref())?;
    check_against_base(&base.tree, &exe)?;
    let mut bin_tree = FileTree::new();
    bin_tree.add_file(&exe, binary, EXEC_MODE)?;

    let oci = inputs.oci.to_map(inputs.created);
    let mut labels = oci.clone();
    merge_labels(&mut labels, &inputs.labels)?;
    let mut env = vec![format!("PATH={OPERATOR_PATH}")];
    if ca.is_some() {
        env.push(format!("SSL_CERT_FILE={CA_BUNDLE_PATH}"));
    }
    env.extend(inputs.env.iter().cloned());
    let spec = ImageSpec {
        layers: vec![
            base,
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

/// An operator image that would not start as its CSV runs it.
#[derive(Debug, Error)]
pub enum OperatorImageCheckError {
    /// The entrypoint is no regular file the image's user may execute.
    #[error(
        "the operator image's entrypoint {entrypoint} is not a regular executable file in its layers: {found}"
    )]
    Entrypoint {
        /// The entrypoint's program (`(none)` when it has none).
        entrypoint: String,
        /// What is there instead.
        found: String,
    },
    /// The CSV's manager command names no executable file of the image.
    #[error(
        "{what} is {program:?}, but the operator image has no executable file {looked} ({found}); the image's binary is at {binary}"
    )]
    Command {
        /// `<CSV file>: field spec.install.spec.deployments[i]...command[0]`.
        what: String,
        /// `command[0]`.
        program: String,
        /// `at /bin/manager`, or `named manager on the image's PATH (...)`.
        looked: String,
        /// What is there instead.
        found: String,
        /// The image's entrypoint, where its binary is.
        binary: String,
    },
    /// The CSV's command cannot name a program in the image (a shell, `..`).
    #[error(transparent)]
    Program(Box<BuildImageError>),
    /// The image's config or layers cannot be read back (they were just built: a bug).
    #[error("cannot read the operator image back: {0}")]
    Unreadable(String),
}

impl OperatorImageCheckError {
    /// `hint:` lines; `path_flag` is the option that chooses the binary's path, when the
    /// command has one (`--path` for `image build operator`).
    pub fn hints(&self, path_flag: Option<&str>) -> Vec<String> {
        match self {
            OperatorImageCheckError::Command {
                program, binary, ..
            } => {
                let mut out = Vec::new();
                if let Some(flag) = path_flag {
                    out.push(format!(
                        "leave out {flag} (and --name): the binary then goes where the command points{}",
                        if program.starts_with('/') {
                            format!(", or pass {flag} {program}")
                        } else {
                            String::new()
                        }
                    ));
                }
                out.push(format!(
                    "{}make the manager container's command run {binary} (config/manager/manager.yaml in a kubebuilder project), and generate the bundle again",
                    if out.is_empty() { "" } else { "or " }
                ));
                out
            }
            OperatorImageCheckError::Entrypoint { .. } => vec![
                "the binary must be a regular file with execute permission for the image's user"
                    .into(),
            ],
            OperatorImageCheckError::Program(_) | OperatorImageCheckError::Unreadable(_) => {
                Vec::new()
            }
        }
    }

    /// True when the image or the CSV is at fault; false when the image cannot be read back.
    pub fn is_user_error(&self) -> bool {
        !matches!(self, OperatorImageCheckError::Unreadable(_))
    }
}

/// Checks a built operator image against the pod that will run it: its entrypoint must be a
/// regular file in its layers that its user may execute, and, with `manager`, the CSV's
/// manager `command[0]` must name such a file (an absolute path, a relative one from
/// `workingDir`, or a bare name found on the image's `PATH`). Reads the layers back, as a
/// container runtime would unpack them.
pub fn check_operator_image(
    image: &Image,
    manager: Option<&ManagerCommand>,
) -> Result<(), OperatorImageCheckError> {
    let config: serde_json::Value = serde_json::from_slice(&image.config.data)
        .map_err(|e| OperatorImageCheckError::Unreadable(format!("config: {e}")))?;
    let runtime = &config["config"];
    let user = runtime
        .get("User")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let path_var = runtime
        .get("Env")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .filter_map(|e| e.strip_prefix("PATH="))
        .next_back()
        .unwrap_or("")
        .to_string();
    let fs = MergedFs::of(image).map_err(OperatorImageCheckError::Unreadable)?;
    let runner = Runner::parse(user);
    let entrypoint = runtime
        .get("Entrypoint")
        .and_then(serde_json::Value::as_array)
        .and_then(|a| a.first())
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let entry_found = match entrypoint {
        "" => Err("the image has no entrypoint".to_string()),
        p if p.starts_with('/') => fs.executable(p, runner),
        name => fs.search(name, &path_var, runner).map(|_| ()),
    };
    if let Err(found) = entry_found {
        return Err(OperatorImageCheckError::Entrypoint {
            entrypoint: if entrypoint.is_empty() {
                "(none)".into()
            } else {
                entrypoint.to_string()
            },
            found,
        });
    }
    let Some(m) = manager else {
        return Ok(());
    };
    let program = m
        .program()
        .map_err(|e| OperatorImageCheckError::Program(Box::new(e)))?;
    let (looked, found) = match &program {
        Program::Path(p) => (format!("at {p}"), fs.executable(p, runner)),
        Program::Search(n) => (
            format!("named {n} on the image's PATH ({path_var})"),
            fs.search(n, &path_var, runner).map(|_| ()),
        ),
    };
    match found {
        Ok(()) => Ok(()),
        Err(found) => Err(OperatorImageCheckError::Command {
            what: m.what(),
            program: m.program.clone(),
            looked,
            found,
            binary: entrypoint.to_string(),
        }),
    }
}

/// Who runs the image's processes, for execute permission.
#[derive(Clone, Copy, Debug)]
enum Runner {
    /// Numeric `uid[:gid]`.
    Ids(u64, Option<u64>),
    /// A user name: any execute bit counts.
    Named,
}

impl Runner {
    fn parse(user: &str) -> Runner {
        let (u, g) = match user.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (user, None),
        };
        if u.is_empty() {
            return Runner::Ids(0, Some(0));
        }
        match (u.parse::<u64>(), g.map(str::parse::<u64>)) {
            (Ok(uid), None) => Runner::Ids(uid, None),
            (Ok(uid), Some(Ok(gid))) => Runner::Ids(uid, Some(gid)),
            _ => Runner::Named,
        }
    }

    fn may_execute(self, mode: u32, uid: u64, gid: u64) -> bool {
        match self {
            Runner::Ids(0, _) | Runner::Named => mode & 0o111 != 0,
            Runner::Ids(u, _) if u == uid => mode & 0o100 != 0,
            Runner::Ids(_, Some(g)) if g == gid => mode & 0o010 != 0,
            Runner::Ids(..) => mode & 0o001 != 0,
        }
    }
}

/// One path of the merged file system of an image's layers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Dir,
    File { mode: u32, uid: u64, gid: u64 },
    Symlink(String),
    HardLink(String),
    Other,
}

/// The file system an image's layers unpack to (metadata only), whiteouts applied.
struct MergedFs {
    nodes: BTreeMap<String, Node>,
}

/// How many symbolic links one lookup follows (Linux's limit).
const MAX_LINKS: usize = 40;

impl MergedFs {
    fn of(image: &Image) -> Result<Self, String> {
        let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
        for blob in &image.layers {
            let reader: Box<dyn std::io::Read + '_> = if blob.media_type.ends_with("gzip") {
                Box::new(flate2::read::GzDecoder::new(&blob.data[..]))
            } else if blob.media_type.ends_with(".tar") {
                Box::new(&blob.data[..])
            } else {
                return Err(format!(
                    "layer {} has media type {}",
                    blob.digest, blob.media_type
                ));
            };
            let mut archive = tar::Archive::new(reader);
            let mut layer: Vec<(String, Node)> = Vec::new();
            let mut whiteouts: Vec<String> = Vec::new();
            let entries = archive
                .entries()
                .map_err(|e| format!("layer {}: {e}", blob.digest))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("layer {}: {e}", blob.digest))?;
                let raw = entry
                    .path()
                    .map_err(|e| format!("layer {}: {e}", blob.digest))?
                    .to_string_lossy()
                    .into_owned();
                let Some(path) = clean(&raw) else { continue };
                let (parent, name) = match path.rsplit_once('/') {
                    Some((p, n)) => (p.to_string(), n),
                    None => (String::new(), path.as_str()),
                };
                if name == ".wh..wh..opq" {
                    whiteouts.push(format!("{parent}/"));
                    continue;
                }
                if let Some(gone) = name.strip_prefix(".wh.") {
                    whiteouts.push(join(&parent, gone));
                    continue;
                }
                let h = entry.header();
                let link = || {
                    h.link_name()
                        .ok()
                        .flatten()
                        .map(|l| l.to_string_lossy().into_owned())
                        .unwrap_or_default()
                };
                let node = match h.entry_type() {
                    tar::EntryType::Directory => Node::Dir,
                    tar::EntryType::Regular | tar::EntryType::Continuous => Node::File {
                        mode: h.mode().unwrap_or(0),
                        uid: h.uid().unwrap_or(0),
                        gid: h.gid().unwrap_or(0),
                    },
                    tar::EntryType::Symlink => Node::Symlink(link()),
                    tar::EntryType::Link => Node::HardLink(link()),
                    _ => Node::Other,
                };
                layer.push((path, node));
            }
            // Whiteouts hide what the layers below hold; then this layer's entries go on top.
            for w in whiteouts {
                match w.strip_suffix('/') {
                    Some(dir) => remove_under(&mut nodes, dir),
                    None => {
                        nodes.remove(&w);
                        remove_under(&mut nodes, &w);
                    }
                }
            }
            for (path, node) in layer {
                if node != Node::Dir {
                    remove_under(&mut nodes, &path);
                }
                nodes.insert(path, node);
            }
        }
        Ok(Self { nodes })
    }

    /// The node at `path` after following symbolic links (in every component) and hard links.
    fn resolve(&self, path: &str) -> Result<(&Node, String), String> {
        let mut pending: Vec<String> = path.split('/').rev().map(str::to_string).collect();
        let mut cur: Vec<String> = Vec::new();
        let mut links = 0;
        let mut last: Option<&Node> = None;
        while let Some(part) = pending.pop() {
            match part.as_str() {
                "" | "." => continue,
                ".." => {
                    cur.pop();
                    last = Some(&Node::Dir);
                    continue;
                }
                _ => {}
            }
            if matches!(last, Some(Node::File { .. } | Node::Other)) {
                return Err(format!("/{} is not a directory", cur.join("/")));
            }
            cur.push(part);
            let key = cur.join("/");
            let node = match self.nodes.get(&key) {
                Some(n) => n,
                // A directory the layers imply without an entry of its own.
                None if self.has_under(&key) => &Node::Dir,
                None => return Err(format!("nothing is at /{key}")),
            };
            match node {
                Node::Symlink(target) | Node::HardLink(target) => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(format!("too many symbolic links under /{key}"));
                    }
                    cur.pop();
                    // A hard link's target is a path in the archive, from the root.
                    if target.starts_with('/') || matches!(node, Node::HardLink(_)) {
                        cur.clear();
                    }
                    pending.extend(target.split('/').rev().map(str::to_string));
                    last = Some(&Node::Dir);
                }
                n => last = Some(n),
            }
        }
        match last {
            Some(n) => Ok((n, format!("/{}", cur.join("/")))),
            None => Err("that is the image root".into()),
        }
    }

    /// Ok when `path` is a regular file `runner` may execute; else what is there instead.
    fn executable(&self, path: &str, runner: Runner) -> Result<(), String> {
        let (node, at) = self.resolve(path)?;
        let via = if at == path {
            String::new()
        } else {
            format!(" (through links, {at})")
        };
        match node {
            Node::File { mode, uid, gid } if runner.may_execute(*mode, *uid, *gid) => Ok(()),
            Node::File { mode, uid, gid } => Err(format!(
                "the file{via} has mode {mode:o}, owner {uid}:{gid}: not executable by the image's user"
            )),
            Node::Dir => Err(format!("it is a directory{via}")),
            _ => Err(format!("it is not a regular file{via}")),
        }
    }

    /// The first directory of `path_var` holding an executable `name`, as execvp finds it.
    fn search(&self, name: &str, path_var: &str, runner: Runner) -> Result<String, String> {
        for dir in path_var.split(':').filter(|d| d.starts_with('/')) {
            let candidate = format!("{}/{name}", dir.trim_end_matches('/'));
            if self.executable(&candidate, runner).is_ok() {
                return Ok(candidate);
            }
        }
        Err(if path_var.is_empty() {
            "the image sets no PATH".into()
        } else {
            format!("no directory of {path_var} holds an executable {name}")
        })
    }

    fn has_under(&self, dir: &str) -> bool {
        let prefix = format!("{dir}/");
        self.nodes
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
    }
}

/// A tar member's path relative to the root, without `./`, leading or trailing `/`.
fn clean(raw: &str) -> Option<String> {
    let parts: Vec<&str> = raw
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

/// Removes every node strictly below `dir` (the whole tree for "").
fn remove_under(nodes: &mut BTreeMap<String, Node>, dir: &str) {
    if dir.is_empty() {
        nodes.clear();
        return;
    }
    let prefix = format!("{dir}/");
    let below: Vec<String> = nodes
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(k, _)| k.clone())
        .collect();
    for k in below {
        nodes.remove(&k);
    }
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
        // Named by the user: a FIFO is refused without blocking, the size bounded.
        let index = olmkit_core::confine::read_named(i, olmkit_core::confine::CATALOG_INDEX)?;
        tree.add_file(INDEX_PATH, index, FILE_MODE)?;
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

/// Inputs of the bundle image: the bundle directory, whose folders the image packs, and what
/// the caller's bundle loader read from it (the annotations, which become the labels, and
/// `bundle.Dockerfile`, compared with the image).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleImageInputs {
    /// The registry+v1 bundle directory (`manifests/`, `metadata/`, optional `tests/scorecard/`).
    pub bundle_dir: PathBuf,
    /// The annotations file, relative to the bundle directory (`metadata/annotations.yaml`);
    /// `None` when the bundle has none, which is refused.
    pub annotations_file: Option<String>,
    /// Its annotations: the image's labels.
    pub annotations: BTreeMap<String, String>,
    /// The bundle's `bundle.Dockerfile`, if it has one.
    pub dockerfile: Option<String>,
    /// Platform recorded in the config (bundle content runs nowhere; OLM ignores it).
    pub platform: Platform,
    /// Build time.
    pub created: jiff::Timestamp,
}

impl BundleImageInputs {
    /// Defaults for `bundle_dir`: linux/amd64, no annotations (the caller sets them).
    pub fn new(bundle_dir: impl Into<PathBuf>, created: jiff::Timestamp) -> Self {
        Self {
            bundle_dir: bundle_dir.into(),
            annotations_file: None,
            annotations: BTreeMap::new(),
            dockerfile: None,
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
    check_bundle_annotations(inputs)?;
    let dir = &inputs.bundle_dir;
    // The folders' files are read through the bundle directory as the root, as the caller's
    // loader read them: a link out of the bundle, a FIFO, a hard link or a file over a bundle
    // file's limit is refused, naming it.
    let root = olmkit_core::confine::InputRoot::new(dir)
        .map_err(olmkit_core::confine::ReadConfinedError::from)?;
    let mut tree = FileTree::new();
    for (src, dest) in crate::dockerfile::BUNDLE_PATHS {
        let p = dir.join(src);
        if p.is_dir() {
            tree.add_input_dir(dest, &root, &p, olmkit_core::confine::MANIFEST_FILE)?;
        } else if src != "tests/scorecard" {
            return Err(BuildImageError::Invalid {
                what: p.display().to_string(),
                reason: "missing; a bundle needs manifests/ and metadata/".into(),
            });
        }
    }
    let dockerfile_drift = match &inputs.dockerfile {
        Some(text) => crate::dockerfile::bundle_dockerfile_drift(text, &inputs.annotations),
        None => Vec::new(),
    };
    let spec = ImageSpec {
        layers: vec![LayerSpec {
            tree,
            created_by: "bundle-tool: bundle manifests/ metadata/ tests/scorecard/".into(),
        }],
        config: RuntimeConfig {
            labels: inputs.annotations.clone(),
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

/// The bundle annotations' keys (operator-framework/api `bundle.ManifestsLabel`, `MetadataLabel`)
/// that name the folders the image stores at `/manifests/` and `/metadata/`.
const FOLDER_KEYS: [(&str, &str); 2] = [
    (
        "operators.operatorframework.io.bundle.manifests.v1",
        "manifests/",
    ),
    (
        "operators.operatorframework.io.bundle.metadata.v1",
        "metadata/",
    ),
];

/// Refuses annotations the image cannot carry: none at all, folder keys naming other folders
/// than where the image stores them, keys that are no label keys.
fn check_bundle_annotations(inputs: &BundleImageInputs) -> Result<(), BuildImageError> {
    let dir = &inputs.bundle_dir;
    let Some(file) = &inputs.annotations_file else {
        return Err(BuildImageError::Invalid {
            what: dir.join("metadata/annotations.yaml").display().to_string(),
            reason: "missing; a bundle image's labels are its annotations (run `bundle-tool generate bundle`)".into(),
        });
    };
    if inputs.annotations.is_empty() {
        return Err(BuildImageError::Invalid {
            what: format!("{}: field annotations", dir.join(file).display()),
            reason:
                "is empty; OLM needs at least the mediatype, manifests, metadata and package keys"
                    .into(),
        });
    }
    for (key, expected) in FOLDER_KEYS {
        if let Some(v) = inputs.annotations.get(key)
            && v.trim_end_matches('/') != expected.trim_end_matches('/')
        {
            return Err(BuildImageError::Invalid {
                what: format!("{}: field annotations.{key}", dir.join(file).display()),
                reason: format!(
                    "is {v:?}, but the image stores the folder at /{expected}; use {expected:?}"
                ),
            });
        }
    }
    for k in inputs.annotations.keys() {
        check_label_key(k)?;
    }
    Ok(())
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

    /// The command of container `index` of a CSV's first deployment, written in `file`.
    fn manager_cmd(program: &str, index: usize, file: &str) -> ManagerCommand {
        ManagerCommand {
            program: program.into(),
            working_dir: None,
            field: format!(
                "spec.install.spec.deployments[0].spec.template.spec.containers[{index}].command[0]"
            ),
            file: file.into(),
        }
    }

    fn entrypoint(img: &Image) -> String {
        let c: serde_json::Value = serde_json::from_slice(&img.config.data).unwrap();
        c["config"]["Entrypoint"][0].as_str().unwrap().to_string()
    }

    #[test]
    fn the_binary_goes_where_the_csv_command_points_else_usr_local_bin() {
        let d = tempfile::tempdir().unwrap();
        let exe = fake_binary(d.path(), "manager-bin", None);
        let cmd = manager_cmd("/manager", 1, "bundle/x.csv.yaml");
        let mut inputs = OperatorImageInputs::new(&exe, t0());
        inputs.manager_command = Some(cmd.clone());
        let img = build_operator_image(&inputs).unwrap();
        assert_eq!(entrypoint(&img), "/manager");
        check_operator_image(&img, Some(&cmd)).unwrap();

        // A bare name is looked up through PATH: /usr/local/bin/<name>.
        let mut bare = cmd.clone();
        bare.program = "manager".into();
        inputs.manager_command = Some(bare.clone());
        let img = build_operator_image(&inputs).unwrap();
        assert_eq!(entrypoint(&img), "/usr/local/bin/manager");
        check_operator_image(&img, Some(&bare)).unwrap();
        // Relative with a slash: from workingDir (default /).
        let mut rel = cmd.clone();
        rel.program = "./bin//manager".into();
        assert_eq!(rel.placement().unwrap(), "/bin/manager");
        rel.working_dir = Some("/opt".into());
        assert_eq!(rel.placement().unwrap(), "/opt/bin/manager");

        // No command: /usr/local/bin/<file name>, as before.
        inputs.manager_command = None;
        let img = build_operator_image(&inputs).unwrap();
        assert_eq!(entrypoint(&img), "/usr/local/bin/manager-bin");
        check_operator_image(&img, None).unwrap();
    }

    #[test]
    fn an_explicit_path_wins_and_a_csv_command_it_misses_is_an_error_naming_both() {
        let d = tempfile::tempdir().unwrap();
        let exe = fake_binary(d.path(), "manager", None);
        let cmd = manager_cmd("/bin/manager", 0, "b/m.clusterserviceversion.yaml");
        let mut inputs = OperatorImageInputs::new(&exe, t0());
        inputs.binary_path = Some("/manager".into());
        inputs.manager_command = Some(cmd.clone());
        let img = build_operator_image(&inputs).unwrap();
        assert_eq!(entrypoint(&img), "/manager");
        let err = check_operator_image(&img, Some(&cmd)).unwrap_err();
        let text = err.to_string();
        for needle in [
            "b/m.clusterserviceversion.yaml: field spec.install.spec.deployments[0].spec.template.spec.containers[0].command[0]",
            "\"/bin/manager\"",
            "no executable file at /bin/manager",
            "nothing is at /bin",
            "binary is at /manager",
        ] {
            assert!(text.contains(needle), "{needle:?} in {text}");
        }
        assert!(err.is_user_error());
        let hints = err.hints(Some("--path"));
        assert!(hints[0].contains("pass --path /bin/manager"), "{hints:?}");
        // A name and a path together are refused.
        inputs.binary_name = Some("op".into());
        let err = build_operator_image(&inputs).unwrap_err();
        assert!(err.to_string().contains("give one"), "{err}");
    }

    #[test]
    fn binary_paths_must_be_absolute_normalized_and_clear_of_the_base_layer() {
        for ok in ["/manager", "/usr/bin/op", "/etc/op", "/opt/x/y"] {
            assert_eq!(check_binary_path(ok).unwrap(), ok);
        }
        for (bad, why) in [
            ("manager", "is relative"),
            ("./manager", "is relative"),
            ("/", "image root"),
            ("/a/../manager", "`..`"),
            ("/./manager", "`.`"),
            ("//manager", "empty component"),
            ("/manager/", "empty component"),
        ] {
            let e = check_binary_path(bad).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("e.g. /manager"), "{bad}: {e}");
        }
        let d = tempfile::tempdir().unwrap();
        let exe = fake_binary(d.path(), "op", None);
        for (path, why) in [
            (
                "/tmp/op",
                "/tmp belongs to the image's base layer (mode 1777",
            ),
            ("/home/nonroot/op", "/home/nonroot belongs"),
            ("/etc/passwd", "base layer holds this path"),
        ] {
            let mut inputs = OperatorImageInputs::new(&exe, t0());
            inputs.binary_path = Some(path.into());
            let e = build_operator_image(&inputs).unwrap_err().to_string();
            assert!(e.contains(why), "{path}: {e}");
        }
    }

    #[test]
    fn shells_and_dotdot_in_the_csv_command_are_refused() {
        let cmd = manager_cmd("/bin/sh", 0, "c.yaml");
        let e = cmd.placement().unwrap_err().to_string();
        assert!(
            e.contains("c.yaml: field spec.install") && e.contains("a shell"),
            "{e}"
        );
        let mut up = cmd.clone();
        up.program = "/x/../manager".into();
        assert!(up.placement().unwrap_err().to_string().contains("`..`"));
    }

    /// A layer from (path, kind) entries, for the reader's own tests.
    fn layer_of(entries: &[(&str, EntryKind, u32)]) -> crate::layer::Blob {
        let mut tree = FileTree::new();
        for (p, k, mode) in entries {
            match k {
                EntryKind::Dir => tree.add_dir(p, *mode, Owner::ROOT).unwrap(),
                EntryKind::File(b) => tree.add_file(p, b.clone(), *mode).unwrap(),
                EntryKind::Symlink(t) => tree.add_symlink(p, t).unwrap(),
            }
        }
        crate::layer::build_layer(&tree, 1_700_000_000)
            .unwrap()
            .blob
    }

    #[test]
    fn the_reader_follows_links_and_whiteouts_and_permissions() {
        let d = tempfile::tempdir().unwrap();
        let exe = fake_binary(d.path(), "op", None);
        let mut inputs = OperatorImageInputs::new(&exe, t0());
        inputs.binary_path = Some("/manager".into());
        let mut img = build_operator_image(&inputs).unwrap();
        let file = |b: &str| EntryKind::File(b.as_bytes().to_vec());
        img.layers.push(layer_of(&[
            (
                "/bin/manager",
                EntryKind::Symlink("../manager".into()),
                0o777,
            ),
            ("/usr/bin/ro", file("x"), 0o644),
            ("/usr/bin/.wh.gone", file(""), 0o644),
            (
                "/usr/local/bin/named",
                EntryKind::Symlink("/manager".into()),
                0o777,
            ),
        ]));
        let fs = MergedFs::of(&img).unwrap();
        let me = Runner::parse("65532:65532");
        fs.executable("/bin/manager", me).unwrap();
        assert!(
            fs.executable("/usr/bin/ro", me)
                .unwrap_err()
                .contains("mode 644")
        );
        assert!(fs.executable("/usr", me).unwrap_err().contains("directory"));
        assert_eq!(
            fs.search("named", OPERATOR_PATH, me).unwrap(),
            "/usr/local/bin/named"
        );
        img.layers
            .push(layer_of(&[("/.wh.manager", file(""), 0o644)]));
        let fs = MergedFs::of(&img).unwrap();
        assert!(
            fs.executable("/bin/manager", me)
                .unwrap_err()
                .contains("nothing is at /manager")
        );
        // The entrypoint is checked on the image as it is.
        let err = check_operator_image(&img, None).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "the operator image's entrypoint /manager is not a regular executable file"
            ),
            "{err}"
        );
    }

    fn real_bundle() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../tests/fixtures/real-bundles/authorino-operator/0.13.0")
    }

    /// The inputs of the real bundle, with the annotations its `metadata/annotations.yaml` has.
    fn real_bundle_inputs() -> BundleImageInputs {
        let mut inputs = BundleImageInputs::new(real_bundle(), t0());
        inputs.annotations_file = Some("metadata/annotations.yaml".into());
        inputs.annotations = [
            (
                "operators.operatorframework.io.bundle.mediatype.v1",
                "registry+v1",
            ),
            (
                "operators.operatorframework.io.bundle.manifests.v1",
                "manifests/",
            ),
            (
                "operators.operatorframework.io.bundle.metadata.v1",
                "metadata/",
            ),
            (
                "operators.operatorframework.io.bundle.package.v1",
                "authorino-operator",
            ),
            (
                "operators.operatorframework.io.bundle.channels.v1",
                "stable",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        inputs
    }

    #[test]
    fn bundle_image_from_a_real_bundle() {
        let inputs = real_bundle_inputs();
        let built = build_bundle_image(&inputs).unwrap();
        let c: serde_json::Value = serde_json::from_slice(&built.image.config.data).unwrap();
        let labels: BTreeMap<String, String> =
            serde_json::from_value(c["config"]["Labels"].clone()).unwrap();
        assert_eq!(labels, inputs.annotations);
        assert!(c["config"].get("Entrypoint").is_none());
        assert_eq!(built.image.layers.len(), 1);
        assert!(built.dockerfile_drift.is_empty());
    }

    #[test]
    fn a_bundle_dockerfile_that_disagrees_with_the_annotations_is_drift() {
        let mut inputs = real_bundle_inputs();
        inputs.dockerfile = Some(
            "FROM scratch\nLABEL operators.operatorframework.io.bundle.package.v1=other\n".into(),
        );
        let drift = build_bundle_image(&inputs).unwrap().dockerfile_drift;
        assert!(
            drift
                .iter()
                .any(|d| d.contains("package.v1=\"other\" differs")),
            "{drift:?}"
        );
    }

    #[test]
    fn bundle_image_input_errors_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("manifests")).unwrap();
        std::fs::write(d.path().join("manifests/a.yaml"), "kind: ConfigMap\n").unwrap();
        let mut inputs = BundleImageInputs::new(d.path(), t0());
        let err = build_bundle_image(&inputs).unwrap_err();
        assert!(
            err.to_string().contains("metadata/annotations.yaml"),
            "{err}"
        );
        inputs.annotations_file = Some("metadata/annotations.yaml".into());
        let err = build_bundle_image(&inputs).unwrap_err();
        assert!(err.to_string().contains("is empty"), "{err}");
        inputs.annotations.insert(
            "operators.operatorframework.io.bundle.manifests.v1".into(),
            "other/".into(),
        );
        let err = build_bundle_image(&inputs).unwrap_err();
        assert!(err.to_string().contains("bundle.manifests.v1"), "{err}");
        assert!(err.is_user_error());
        inputs.annotations.clear();
        inputs.annotations.insert("bad key".into(), "v".into());
        assert!(build_bundle_image(&inputs).is_err());
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
