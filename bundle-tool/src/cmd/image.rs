//! `bundle-tool image ...`: build, push and inspect OCI images without a container engine.
//!
//! `image build operator|bundle|catalog` writes into an OCI image layout directory (the default
//! output, so releases work with no registry) and, with `--push`, uploads to any registry;
//! `image push` uploads an image from a layout; `image inspect` shows an image from a registry
//! or a layout; `image dockerfile catalog` writes an equivalent `catalog.Dockerfile` for teams
//! with Docker or podman. All the work is in `olmkit-image`; this module maps options to its
//! inputs and its errors to exit codes (1: bad input, credentials, names, unreachable registry;
//! 2: everything else).

use crate::cmd::common::registry::{
    RegistryArgs, build_err, build_time, human_size, publish_err, registry_publisher,
    remote_options,
};
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data, spinner};
use olmkit_image::build::{BuildImageError, Image, Platform};
use olmkit_image::dockerfile::{CatalogBase, CatalogDockerfile, catalog_dockerfile};
use olmkit_image::images::{
    CatalogImageInputs, CatalogServer, HealthProbe, ManagerCommand, OciLabels,
    OperatorImageCheckError, OperatorImageInputs, build_bundle_image, build_catalog_image,
    build_operator_image, check_operator_image,
};
use olmkit_image::inspect::{ImageInfo, InspectImageError, inspect_layout, inspect_remote};
use olmkit_image::layout::read_from_layout;
use olmkit_image::publish::{LayoutPublisher, Named, Publisher};
use olmkit_image::push::PushReport;
use olmkit_image::remote::parse_reference;
use olmkit_image::tree::Owner;
use olmkit_release::images::{BUNDLE_LOAD_HINT, bundle_image_inputs};
use olmkit_release::manager::manager_command_of_csv;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Subcommands of `bundle-tool image`.
// Parsed once per process; boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug)]
pub enum ImageCommand {
    /// Build an image into an OCI image layout (and optionally push it).
    #[command(subcommand)]
    Build(BuildCommand),
    /// Push an image from an OCI image layout to a registry.
    Push(PushArgs),
    /// Show an image's digests, layers, labels and config, from a registry or a layout.
    Inspect(InspectArgs),
    /// Write a Dockerfile equivalent to an image bundle-tool builds.
    #[command(subcommand)]
    Dockerfile(DockerfileCommand),
}

/// What to build.
#[derive(clap::Subcommand, Debug)]
pub enum BuildCommand {
    /// The operator image: a statically linked binary (the entrypoint, where --path, --name or
    /// --bundle-dir's CSV command says), non-root, no base image.
    Operator(OperatorArgs),
    /// A bundle image: manifests/, metadata/ and tests/scorecard/, labels from annotations.yaml.
    Bundle(BundleArgs),
    /// A catalog image: the File-Based Catalog at /configs, served by a static catalog server.
    Catalog(CatalogArgs),
}

/// Where a built image goes.
#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// OCI image layout directory to write into (created if missing; other images are kept).
    #[arg(long, default_value = "images")]
    pub layout: PathBuf,
    /// Name of the image in the layout and, with --push, where it is pushed
    /// (e.g. quay.io/example/memcached-operator:v0.1.0).
    #[arg(long)]
    pub tag: String,
    /// Also push the image to the registry (to --tag, or to --to).
    #[arg(long)]
    pub push: bool,
    /// Push to this reference instead of --tag.
    #[arg(long, requires = "push")]
    pub to: Option<String>,
    /// Overwrite the tag in the registry even when it names other content (by default a push
    /// refuses to move a published tag).
    #[arg(long, requires = "push")]
    pub force: bool,
    /// Build time: `now`, seconds since 1970, or RFC 3339. Default: SOURCE_DATE_EPOCH, else
    /// 1970-01-01T00:00:00Z, so the same inputs always give the same digest.
    #[arg(long)]
    pub created: Option<String>,
    /// Report format on stdout.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Registry options (with --push).
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `org.opencontainers.image.*` labels.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OciArgs {
    /// org.opencontainers.image.title.
    #[arg(long)]
    pub title: Option<String>,
    /// org.opencontainers.image.description.
    #[arg(long)]
    pub description: Option<String>,
    /// org.opencontainers.image.version.
    #[arg(long)]
    pub image_version: Option<String>,
    /// org.opencontainers.image.source (repository URL).
    #[arg(long)]
    pub source: Option<String>,
    /// org.opencontainers.image.revision (commit).
    #[arg(long)]
    pub revision: Option<String>,
    /// org.opencontainers.image.licenses (SPDX expression).
    #[arg(long)]
    pub licenses: Option<String>,
    /// org.opencontainers.image.vendor.
    #[arg(long)]
    pub vendor: Option<String>,
    /// org.opencontainers.image.url.
    #[arg(long)]
    pub url: Option<String>,
    /// More labels, KEY=VALUE (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
}

impl OciArgs {
    fn oci(&self) -> OciLabels {
        OciLabels {
            title: self.title.clone(),
            description: self.description.clone(),
            version: self.image_version.clone(),
            source: self.source.clone(),
            revision: self.revision.clone(),
            licenses: self.licenses.clone(),
            vendor: self.vendor.clone(),
            url: self.url.clone(),
        }
    }
    fn extra(&self) -> Result<BTreeMap<String, String>, CmdError> {
        self.labels
            .iter()
            .map(|l| match l.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
                _ => Err(CmdError::msg(format!("--label {l:?}: expected KEY=VALUE"))),
            })
            .collect()
    }
}

/// `image build operator`.
#[derive(clap::Args, Debug)]
pub struct OperatorArgs {
    /// The statically linked operator binary (hack/build-static.sh builds one).
    #[arg(long)]
    pub binary: PathBuf,
    /// File name under /usr/local/bin [default: where --bundle-dir's CSV command points, else
    /// the binary's file name].
    #[arg(long, conflicts_with = "path")]
    pub name: Option<String>,
    /// Absolute path of the binary in the image, which is the entrypoint: e.g. /manager, which
    /// kubebuilder's manager container runs (`command: [/manager]`) [default: see --name].
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// A bundle whose CSV runs this image: the binary goes where its manager container's
    /// `command` points (without --name or --path), and the image is checked against it.
    #[arg(long, value_name = "DIR")]
    pub bundle_dir: Option<PathBuf>,
    /// Default argument (the image CMD), repeatable: --arg run.
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// User the container runs as, UID:GID.
    #[arg(long, default_value = "65532:65532", value_parser = parse_owner)]
    pub user: Owner,
    /// Environment entry NAME=value (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Port to declare, PORT[/tcp|udp] (repeatable).
    #[arg(long = "expose", value_name = "PORT")]
    pub expose: Vec<String>,
    /// A PEM CA bundle to install (only for operators calling TLS services other than the API
    /// server, whose CA Kubernetes mounts).
    #[arg(long)]
    pub ca_certificates: Option<PathBuf>,
    /// Accept a dynamically linked binary (it will not start in the image: no libc).
    #[arg(long)]
    pub allow_dynamic: bool,
    /// Standard labels.
    #[command(flatten)]
    pub oci: OciArgs,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `image build bundle`.
#[derive(clap::Args, Debug)]
pub struct BundleArgs {
    /// The bundle directory (with manifests/ and metadata/annotations.yaml).
    pub bundle_dir: PathBuf,
    /// Platform recorded in the image config.
    #[arg(long, default_value = "linux/amd64")]
    pub platform: String,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `image build catalog`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("serving").required(true).args(["server", "configs_only"])))]
pub struct CatalogArgs {
    /// Root directory of the File-Based Catalog.
    pub configs_dir: PathBuf,
    /// Static catalog server binary, installed at /bin/catalog-server as the entrypoint.
    #[arg(long)]
    pub server: Option<PathBuf>,
    /// Build an image with the catalog and its label only (no server, no entrypoint).
    #[arg(long)]
    pub configs_only: bool,
    /// Precomputed serving index (`bundle-tool catalog index`), installed at /index so the
    /// server starts without scanning the catalog.
    #[arg(long)]
    pub index: Option<PathBuf>,
    /// Static grpc_health_probe binary for OLM's exec probes (installed at /bin/grpc_health_probe).
    #[arg(long, requires = "server", conflicts_with = "health_probe_symlink")]
    pub health_probe: Option<PathBuf>,
    /// Link /bin/grpc_health_probe to the server (for a server that answers to that name).
    #[arg(long, requires = "server")]
    pub health_probe_symlink: bool,
    /// Server argument (the image CMD), repeatable; default: /configs --port 50051.
    #[arg(
        long = "server-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "server"
    )]
    pub server_args: Vec<String>,
    /// User the server runs as, UID:GID.
    #[arg(long, default_value = "65532:65532", value_parser = parse_owner)]
    pub user: Owner,
    /// Platform of a --configs-only image (a server's own architecture wins).
    #[arg(long, default_value = "linux/amd64")]
    pub platform: String,
    /// Accept dynamically linked binaries (they will not start in the image).
    #[arg(long)]
    pub allow_dynamic: bool,
    /// Standard labels.
    #[command(flatten)]
    pub oci: OciArgs,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `image push`.
#[derive(clap::Args, Debug)]
pub struct PushArgs {
    /// The OCI image layout to read from.
    #[arg(long, default_value = "images")]
    pub layout: PathBuf,
    /// Name of the image in the layout.
    #[arg(long)]
    pub tag: String,
    /// Where to push (default: --tag).
    #[arg(long)]
    pub to: Option<String>,
    /// Overwrite the tag in the registry even when it names other content (by default a push
    /// refuses to move a published tag).
    #[arg(long)]
    pub force: bool,
    /// Report format on stdout.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Registry options.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `image inspect`.
#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// `REF` or `docker://REF` (a registry), or `LAYOUT[:NAME]` / `oci:LAYOUT[:NAME]`
    /// (an OCI layout directory).
    pub target: String,
    /// Report format on stdout.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Registry options.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `image dockerfile ...`.
#[derive(clap::Subcommand, Debug)]
pub enum DockerfileCommand {
    /// catalog.Dockerfile equivalent to `image build catalog`.
    Catalog(CatalogDockerfileArgs),
}

/// `image dockerfile catalog`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("base").args(["server", "opm", "configs_only"])))]
pub struct CatalogDockerfileArgs {
    /// Path of the FBC directory in the build context.
    #[arg(long, default_value = "catalog")]
    pub configs_dir: String,
    /// Path of the static catalog server in the build context (the default base).
    #[arg(long, default_value = "catalog-server")]
    pub server: String,
    /// Serve with opm from opm's image instead (like `opm generate dockerfile`).
    #[arg(long)]
    pub opm: bool,
    /// FROM scratch with the catalog and its label only.
    #[arg(long)]
    pub configs_only: bool,
    /// Base image for the server variant (`scratch` works: the user is numeric).
    #[arg(long, default_value = olmkit_image::dockerfile::DISTROLESS_NONROOT)]
    pub from: String,
    /// Path of a static grpc_health_probe in the build context.
    #[arg(long)]
    pub health_probe: Option<String>,
    /// Path of a precomputed serving index in the build context (copied to /index).
    #[arg(long)]
    pub index: Option<String>,
    /// Server argument (CMD), repeatable; default: /configs --port 50051.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Extra LABEL, KEY=VALUE (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Output file (`-` for stdout).
    #[arg(short, long, default_value = "catalog.Dockerfile")]
    pub output: PathBuf,
}

fn parse_owner(s: &str) -> Result<Owner, String> {
    let (u, g) = s.split_once(':').unwrap_or((s, s));
    match (u.parse::<u64>(), g.parse::<u64>()) {
        (Ok(uid), Ok(gid)) if uid < (1 << 31) && gid < (1 << 31) => Ok(Owner { uid, gid }),
        _ => Err(format!("{s:?} is not UID:GID (numbers, e.g. 65532:65532)")),
    }
}

/// The manager container's command in the CSV of the bundle `dir` (after completing an
/// interrupted commit touching it); `None` when it has no command.
fn manager_command_of(dir: &Path) -> Result<Option<ManagerCommand>, CmdError> {
    crate::cmd::common::pending::recover_before_reading([dir])?;
    let bundle = olmkit_bundle::load_bundle_dir(dir).map_err(bundle_load_err)?;
    let Some(csv) = bundle.csv() else {
        return Err(CmdError::msg(format!(
            "--bundle-dir {}: the bundle has no ClusterServiceVersion",
            dir.display()
        ))
        .hint("give the directory holding manifests/ with the CSV (bundle-tool generate bundle writes one)"));
    };
    Ok(manager_command_of_csv(
        &csv.object,
        dir.join(&csv.file).display().to_string(),
    ))
}

/// A bundle directory that does not load: exit 1, with how to make one.
fn bundle_load_err(e: olmkit_bundle::LoadBundleError) -> CmdError {
    CmdError::user(e).hint(BUNDLE_LOAD_HINT)
}

/// A refused operator image build; a dynamically linked binary also gets the flag that
/// accepts one.
fn operator_build_err(e: BuildImageError) -> CmdError {
    let dynamic = matches!(&e, BuildImageError::Binary { reason, .. } if reason.contains("dynamically linked"));
    let err = build_err(e);
    if dynamic {
        err.hint(
            "--allow-dynamic builds the image anyway (for tests: the binary will not start in it)",
        )
    } else {
        err
    }
}

/// An operator image that would not start as its CSV runs it: exit 1, nothing written.
fn operator_check_err(e: OperatorImageCheckError) -> CmdError {
    let hints = e.hints(Some("--path"));
    let err = if e.is_user_error() {
        CmdError::user(e)
    } else {
        CmdError::unexpected(e)
    };
    hints.into_iter().fold(err, CmdError::hint)
}

fn platform(s: &str) -> Result<Platform, CmdError> {
    Platform::parse(s).map_err(build_err)
}

fn inspect_err(e: InspectImageError) -> CmdError {
    let user = e.is_user_error();
    let hints = e.hints();
    let mut err = if user {
        CmdError::user(e)
    } else {
        CmdError::unexpected(e)
    };
    if let CmdError::User { hints: h, .. } = &mut err {
        h.extend(hints);
    }
    err
}

async fn finish_build(
    kind: &str,
    image: Image,
    warnings: Vec<String>,
    out: &OutputArgs,
    g: &GlobalArgs,
) -> Result<(), CmdError> {
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let named = [Named {
        image: &image,
        reference: out.tag.as_str(),
    }];
    let layout = LayoutPublisher {
        dir: out.layout.clone(),
    };
    let summary = layout.publish(&named).await.map_err(publish_err)?;
    tracing::debug!(?summary, "layout written");
    let pushed = if out.push {
        let target = out.to.as_deref().unwrap_or(&out.tag);
        Some(push(&image, target, &out.registry, out.force, g).await?)
    } else {
        None
    };
    let text = match out.output {
        OutputFormat::Json => {
            let layers: Vec<_> = image
                .layers
                .iter()
                .map(|l| json!({"digest": l.digest, "size": l.size(), "mediaType": l.media_type}))
                .collect();
            let mut s = serde_json::to_string_pretty(&json!({
                "kind": kind,
                "name": out.tag,
                "layout": out.layout,
                "digest": image.digest(),
                "configDigest": image.config.digest,
                "platform": image.platform.to_string(),
                "layers": layers,
                "compressedSize": image.compressed_size(),
                "pushed": pushed,
                "warnings": warnings,
            }))
            .unexpected_err()?;
            s.push('\n');
            s
        }
        OutputFormat::Text => {
            let mut s = format!(
                "built {kind} image {} {} ({} layer(s), {} compressed) in {}\n",
                out.tag,
                image.digest(),
                image.layers.len(),
                human_size(image.compressed_size()),
                out.layout.display()
            );
            if let Some(p) = &pushed {
                s.push_str(&format!(
                    "pushed {}@{} ({} blob(s) uploaded, {} already present)\n",
                    p.reference, p.digest, p.blobs_uploaded, p.blobs_existing
                ));
            }
            s
        }
    };
    print_data(&text).unexpected_err()
}

async fn build(cmd: BuildCommand, g: &GlobalArgs) -> Result<(), CmdError> {
    match cmd {
        BuildCommand::Operator(a) => {
            if let Some(name) = a.name.as_deref().filter(|n| n.contains('/')) {
                return Err(CmdError::msg(format!(
                    "--name {name:?}: a name is a file name under /usr/local/bin, not a path"
                ))
                .hint(format!(
                    "pass --path /{} to put the binary at that path",
                    name.trim_start_matches('/')
                )));
            }
            let manager = match &a.bundle_dir {
                Some(dir) => manager_command_of(dir)?,
                None => None,
            };
            let mut inputs =
                OperatorImageInputs::new(&a.binary, build_time(a.out.created.as_deref())?);
            inputs.binary_name = a.name.clone();
            inputs.binary_path = a.path.clone();
            inputs.manager_command = manager.clone();
            inputs.args = a.args.clone();
            inputs.user = a.user;
            inputs.oci = a.oci.oci();
            inputs.labels = a.oci.extra()?;
            inputs.env = a.env.clone();
            inputs.exposed_ports = a.expose.clone();
            inputs.ca_certificates = a.ca_certificates.clone();
            inputs.allow_dynamic = a.allow_dynamic;
            let sp = spinner(g, "building operator image");
            let built = tokio::task::spawn_blocking(move || {
                let image = build_operator_image(&inputs)?;
                Ok::<_, BuildImageError>(
                    check_operator_image(&image, manager.as_ref()).map(|()| image),
                )
            })
            .await
            .unexpected_err()?;
            sp.finish_and_clear();
            let image = built
                .map_err(operator_build_err)?
                .map_err(operator_check_err)?;
            finish_build("operator", image, Vec::new(), &a.out, g).await
        }
        BuildCommand::Bundle(a) => {
            let created = build_time(a.out.created.as_deref())?;
            let mut inputs =
                bundle_image_inputs(&a.bundle_dir, created).map_err(bundle_load_err)?;
            inputs.platform = platform(&a.platform)?;
            let sp = spinner(g, "building bundle image");
            let built = tokio::task::spawn_blocking(move || build_bundle_image(&inputs))
                .await
                .unexpected_err()?
                .map_err(build_err)?;
            sp.finish_and_clear();
            finish_build("bundle", built.image, built.dockerfile_drift, &a.out, g).await
        }
        BuildCommand::Catalog(a) => {
            let mut inputs =
                CatalogImageInputs::new(&a.configs_dir, build_time(a.out.created.as_deref())?);
            inputs.user = a.user;
            inputs.oci = a.oci.oci();
            inputs.labels = a.oci.extra()?;
            inputs.platform = platform(&a.platform)?;
            inputs.index = a.index.clone();
            if let Some(server) = &a.server {
                let mut s = CatalogServer::new(server);
                if !a.server_args.is_empty() {
                    s.args = a.server_args.clone();
                }
                s.allow_dynamic = a.allow_dynamic;
                s.health_probe = match (&a.health_probe, a.health_probe_symlink) {
                    (Some(p), _) => HealthProbe::Binary(p.clone()),
                    (None, true) => HealthProbe::ServerSymlink,
                    (None, false) => HealthProbe::None,
                };
                inputs.server = Some(s);
            }
            let mut warnings = Vec::new();
            if let Some(s) = &inputs.server
                && s.health_probe == HealthProbe::None
            {
                warnings.push(
                    "the image has no /bin/grpc_health_probe; OLM's default catalog pod probes exec it \
                     (add --health-probe PATH or --health-probe-symlink)"
                        .to_string(),
                );
            }
            let sp = spinner(g, "building catalog image");
            let image = tokio::task::spawn_blocking(move || build_catalog_image(&inputs))
                .await
                .unexpected_err()?
                .map_err(build_err)?;
            sp.finish_and_clear();
            finish_build("catalog", image, warnings, &a.out, g).await
        }
    }
}

/// Pushes one image to `target` (its tag checked as it is pushed), one progress bar long.
async fn push(
    image: &Image,
    target: &str,
    registry: &RegistryArgs,
    force: bool,
    g: &GlobalArgs,
) -> Result<PushReport, CmdError> {
    let (publisher, bars) = registry_publisher(registry, force, g)?;
    let result = publisher.push_one(image, target).await;
    bars.clear();
    result.map_err(publish_err)
}

async fn push_cmd(a: PushArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    let layout = a.layout.clone();
    let tag = a.tag.clone();
    let image = tokio::task::spawn_blocking(move || read_from_layout(&layout, Some(&tag)))
        .await
        .unexpected_err()?
        .user_hint("`bundle-tool image inspect LAYOUT` lists nothing? build the image first")?;
    let target = a.to.as_deref().unwrap_or(&a.tag);
    let report = push(&image, target, &a.registry, a.force, g).await?;
    let text = match a.output {
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(&report).unexpected_err()?;
            s.push('\n');
            s
        }
        OutputFormat::Text => format!(
            "pushed {}@{} ({} blob(s) uploaded, {} already present, {})\n",
            report.reference,
            report.digest,
            report.blobs_uploaded,
            report.blobs_existing,
            human_size(report.bytes_uploaded)
        ),
    };
    print_data(&text).unexpected_err()
}

/// Where `image inspect` reads from.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Layout(PathBuf, Option<String>),
    Registry(String),
}

fn parse_target(s: &str) -> Target {
    if let Some(r) = s.strip_prefix("docker://") {
        return Target::Registry(r.to_string());
    }
    let explicit = s.strip_prefix("oci:");
    let rest = explicit.unwrap_or(s);
    // The layout is the longest prefix (up to a `:`) that is a layout directory; names may
    // contain `:` themselves (registry ports, tags).
    let mut cut = None;
    for (i, c) in rest.char_indices() {
        if c == ':' && olmkit_image::layout::is_layout(Path::new(&rest[..i])) {
            cut = Some(i);
            break;
        }
    }
    if let Some(i) = cut {
        return Target::Layout(PathBuf::from(&rest[..i]), Some(rest[i + 1..].to_string()));
    }
    if explicit.is_some() || olmkit_image::layout::is_layout(Path::new(rest)) {
        return Target::Layout(PathBuf::from(rest), None);
    }
    Target::Registry(s.to_string())
}

async fn inspect_cmd(a: InspectArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    let info: ImageInfo = match parse_target(&a.target) {
        Target::Layout(dir, name) => {
            tokio::task::spawn_blocking(move || inspect_layout(&dir, name.as_deref()))
                .await
                .unexpected_err()?
                .map_err(inspect_err)?
        }
        Target::Registry(r) => {
            let reference = parse_reference(&r).user_hint(
                "give a registry reference (registry/repo:tag) or an OCI layout directory (DIR[:NAME])",
            )?;
            let (remote, _) = remote_options(&a.registry, g)?;
            let sp = spinner(g, &format!("inspecting {}", reference.whole()));
            let r = inspect_remote(&reference, &remote).await;
            sp.finish_and_clear();
            r.map_err(inspect_err)?
        }
    };
    let text = match a.output {
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(&info).unexpected_err()?;
            s.push('\n');
            s
        }
        OutputFormat::Text => info.render_text(),
    };
    print_data(&text).unexpected_err()
}

fn dockerfile_cmd(cmd: DockerfileCommand) -> Result<(), CmdError> {
    let DockerfileCommand::Catalog(a) = cmd;
    let labels = a
        .labels
        .iter()
        .map(|l| match l.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CmdError::msg(format!("--label {l:?}: expected KEY=VALUE"))),
        })
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    let base = if a.opm {
        CatalogBase::opm()
    } else if a.configs_only {
        CatalogBase::ConfigsOnly
    } else {
        CatalogBase::Server {
            from: a.from.clone(),
            server: a.server.clone(),
            health_probe: a.health_probe.clone(),
            args: if a.server_args.is_empty() {
                olmkit_image::images::default_server_args()
            } else {
                a.server_args.clone()
            },
            user: Owner::NONROOT,
        }
    };
    let text = catalog_dockerfile(&CatalogDockerfile {
        configs_dir: a.configs_dir.clone(),
        index: a.index.clone(),
        base,
        labels,
    });
    let to = crate::cmd::common::pending::write_output(&a.output, text.as_bytes())?;
    if to != olmkit_core::fsio::OutputTarget::Stdout {
        eprintln!("wrote {}", a.output.display());
    }
    Ok(())
}

/// Runs the command.
pub async fn run(command: ImageCommand, g: &GlobalArgs) -> Result<(), CmdError> {
    match command {
        ImageCommand::Build(b) => build(b, g).await,
        ImageCommand::Push(a) => push_cmd(a, g).await,
        ImageCommand::Inspect(a) => inspect_cmd(a, g).await,
        ImageCommand::Dockerfile(d) => dockerfile_cmd(d),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn owners() {
        assert_eq!(
            parse_owner("1001").unwrap(),
            Owner {
                uid: 1001,
                gid: 1001
            }
        );
        assert!(parse_owner("root:root").is_err());
    }

    #[test]
    fn targets() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("oci-layout"), "{}").unwrap();
        let p = d.path().display().to_string();
        assert_eq!(parse_target(&p), Target::Layout(d.path().into(), None));
        assert_eq!(
            parse_target(&format!("{p}:quay.io/x/y:v1")),
            Target::Layout(d.path().into(), Some("quay.io/x/y:v1".into()))
        );
        assert_eq!(
            parse_target("127.0.0.1:5000/x:v1"),
            Target::Registry("127.0.0.1:5000/x:v1".into())
        );
        assert_eq!(
            parse_target("docker://quay.io/x"),
            Target::Registry("quay.io/x".into())
        );
    }
}
