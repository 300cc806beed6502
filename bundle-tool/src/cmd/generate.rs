//! `bundle-tool generate bundle|kustomize manifests`: registry+v1 bundles from any operator's
//! manifests, and the kustomize base CSV they start from. (CRDs come from an operator's own
//! `crd` subcommand, which every operator on `olmkit-runtime` has: `make manifests` runs
//! `<operator> crd --output-dir config/crd/bases`, as kubebuilder's runs controller-gen.)
//!
//! `generate bundle` is a drop-in for `operator-sdk generate bundle` (v1.38.0,
//! `internal/cmd/operator-sdk/generate/bundle`): the same flags and defaults, manifests piped
//! on stdin or read from `--input-dir`/`--deploy-dir` (or, when neither is given, `kubectl
//! kustomize <kustomize-dir>`), the package from `--package` or `PROJECT`'s `projectName`, the
//! base CSV from the stream or `<kustomize-dir>/bases/<package>.clusterserviceversion.yaml`, and
//! operator-sdk's file layout: `bundle/{manifests,metadata,tests}` plus `bundle.Dockerfile` at
//! the project root, files it does not generate left in place, metadata kept with
//! `--overwrite=false`. The bundle is generated in memory (olmkit-bundle, pure), validated with
//! the default suite as it will be on disk (kept files included), and only then written, all
//! or nothing: a failed generation or validation leaves every file untouched.

use crate::cmd::common::inputs::{kustomize, load_error, read_stdin, read_stdin_bytes};
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};
use olmkit_bundle::Manifest;
use olmkit_bundle::generate::kustomize::{kustomization_yaml, layout_support};
use olmkit_bundle::generate::project::{ProjectConfig, parse_project};
use olmkit_bundle::generate::{
    FileLayout, GenerateInputs, GenerateOptions, Improvement, Improvements, Settings,
    generate_bundle_with,
};
use olmkit_bundle::load::{load_manifest_dir, load_manifest_stream};
use olmkit_bundle::write;
use olmkit_core::csv::Csv;
use olmkit_core::docs::to_yaml;
use olmkit_core::{epoch, fsio};
use std::path::{Path, PathBuf};

/// Subcommands of `bundle-tool generate`.
// Parsed once per process; boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug)]
pub enum GenerateCommand {
    /// Generate a registry+v1 bundle from an operator's manifests, like
    /// `operator-sdk generate bundle`, and validate it before writing.
    #[command(disable_version_flag = true)]
    Bundle(BundleArgs),
    /// Kustomize files for operator-framework manifests: `kustomize manifests`, like
    /// `operator-sdk generate kustomize manifests`.
    #[command(subcommand)]
    Kustomize(KustomizeCommand),
}

/// Subcommands of `generate kustomize`.
#[derive(clap::Subcommand, Debug)]
pub enum KustomizeCommand {
    /// Write the base CSV (config/manifests/bases/<package>.clusterserviceversion.yaml, hand
    /// edits kept) and config/manifests/kustomization.yaml (when missing), like
    /// `operator-sdk generate kustomize manifests`.
    Manifests(KustomizeManifestsArgs),
}

/// Arguments of `generate kustomize manifests` (operator-sdk's flags, then bundle-tool's).
#[derive(clap::Args, Debug)]
pub struct KustomizeManifestsArgs {
    /// Package name [default: projectName of ./PROJECT, else the current directory's name].
    #[arg(long)]
    pub package: Option<String>,
    /// Directory containing existing kustomize files.
    #[arg(long, value_name = "DIR", default_value = "config/manifests")]
    pub input_dir: PathBuf,
    /// Directory to write kustomize files.
    #[arg(long, value_name = "DIR", default_value = "config/manifests")]
    pub output_dir: PathBuf,
    /// Root directory for API type definitions (operator-sdk reads Go doc comments there;
    /// bundle-tool reads the same descriptions from the CRDs in --crds-dir).
    #[arg(long, value_name = "DIR", default_value = "api")]
    pub apis_dir: PathBuf,
    /// operator-sdk prompts for UI metadata when no base exists; bundle-tool never prompts
    /// (--interactive=false is operator-sdk's way to say so): edit the base instead.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub interactive: bool,
    /// Run in quiet mode.
    #[arg(short, long)]
    pub quiet: bool,
    /// bundle-tool: the project's CRDs, for the owned APIs' names and descriptions.
    #[arg(long, value_name = "DIR", default_value = "config/crd/bases")]
    pub crds_dir: PathBuf,
}

/// File layout of `generate bundle`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutArg {
    /// operator-sdk's: the bundle in --output-dir (default `bundle`), `bundle.Dockerfile` in
    /// the current directory (the project root), files already there kept.
    Sdk,
    /// bundle-tool's release layout: everything in `bundle/<package>/<version>/`, Dockerfile
    /// included, the directory replaced as a whole.
    Versioned,
}

/// Arguments of `generate bundle`: operator-sdk's flags, then bundle-tool's own.
#[derive(clap::Args, Debug)]
pub struct BundleArgs {
    /// Semantic version of the bundle [default: the base CSV's spec.version].
    #[arg(long)]
    pub version: Option<String>,
    /// Channels, comma-separated [default: alpha].
    #[arg(long, value_delimiter = ',')]
    pub channels: Vec<String>,
    /// Default channel.
    #[arg(long)]
    pub default_channel: Option<String>,
    /// Package name [default: projectName of ./PROJECT, else the base CSV's name without
    /// .vX.Y.Z].
    #[arg(long)]
    pub package: Option<String>,
    /// Directory of cluster-ready manifests to read (instead of stdin or kustomize).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["deploy_dir", "crds_dir", "manifests", "kustomize"])]
    pub input_dir: Option<PathBuf>,
    /// Directory of cluster-ready manifests (CRDs from --crds-dir when set).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["manifests", "kustomize"])]
    pub deploy_dir: Option<PathBuf>,
    /// Directory of CRDs, with --deploy-dir.
    #[arg(long, value_name = "DIR", requires = "deploy_dir")]
    pub crds_dir: Option<PathBuf>,
    /// Kustomize directory holding bases/<package>.clusterserviceversion.yaml; when nothing is
    /// piped and no directory is given, `kubectl kustomize DIR` provides the manifests.
    #[arg(long, value_name = "DIR", default_value = "config/manifests")]
    pub kustomize_dir: PathBuf,
    /// Bundle directory [default: bundle; with --layout versioned bundle/<package>/<version>].
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Service accounts besides the Deployments' whose bound roles go into the CSV.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub extra_service_accounts: Vec<String>,
    /// Pin images in the CSV by digest, resolved from their registries.
    #[arg(long)]
    pub use_image_digests: bool,
    /// bundle-tool: with --use-image-digests, talk plain HTTP to every registry (localhost,
    /// loopback and private-network registries always are, as in operator-sdk's resolver).
    #[arg(long, requires = "use_image_digests")]
    pub insecure_registry: bool,
    /// Rewrite metadata/annotations.yaml and bundle.Dockerfile when bundle metadata already
    /// exists (--overwrite=false keeps them).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, value_name = "BOOL")]
    pub overwrite: bool,
    /// Print the bundle manifests on stdout instead of writing files.
    #[arg(long, conflicts_with = "output_dir")]
    pub stdout: bool,
    /// Print no notes or progress.
    #[arg(short, long)]
    pub quiet: bool,
    /// bundle-tool: the manifests from a directory, a file, or `-` for stdin.
    #[arg(long, value_name = "DIR|FILE|-", conflicts_with = "kustomize")]
    pub manifests: Option<String>,
    /// bundle-tool: run `kubectl kustomize DIR` for the manifests.
    #[arg(long, value_name = "DIR")]
    pub kustomize: Option<PathBuf>,
    /// bundle-tool: the base CSV, when it is neither in the manifests nor in
    /// <kustomize-dir>/bases.
    #[arg(long, value_name = "FILE")]
    pub base_csv: Option<PathBuf>,
    /// bundle-tool: sample custom resources for alm-examples, besides those in the manifests.
    #[arg(long, value_name = "DIR")]
    pub samples: Option<PathBuf>,
    /// bundle-tool: file layout.
    #[arg(long, value_enum, default_value_t = LayoutArg::Sdk)]
    pub layout: LayoutArg,
    /// bundle-tool: operator-sdk's output: every improvement off, and objects serialized as
    /// operator-sdk's typed objects are (creationTimestamp: null, status: {...}).
    #[arg(long)]
    pub upstream_compat: bool,
    /// The operator image: sets the manager container's image and the CSV's containerImage,
    /// as `make bundle`'s `kustomize edit set image controller=$(IMG)` would (repeatable;
    /// NAME=IMAGE rewrites every container image named NAME, as kustomize's images do).
    #[arg(long, value_name = "[NAME=]IMAGE")]
    pub image: Vec<String>,
    /// bundle-tool: turn off one improvement over operator-sdk (repeatable, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "IMPROVEMENT", value_parser = improvement_names())]
    pub without: Vec<String>,
    /// bundle-tool: spec.replaces, the CSV this version upgrades from.
    #[arg(long, value_name = "CSV")]
    pub replaces: Option<String>,
    /// bundle-tool: spec.skips, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "CSV")]
    pub skips: Vec<String>,
    /// bundle-tool: olm.skipRange annotation, e.g. '>=0.1.0 <0.2.0'.
    #[arg(long, value_name = "RANGE")]
    pub skip_range: Option<String>,
    /// bundle-tool: write the bundle even if validation reports errors.
    #[arg(long)]
    pub no_validate: bool,
    /// Summary format on stdout.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

fn improvement_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(Improvement::ALL.map(Improvement::name))
}

/// Runs the command.
pub async fn run(command: GenerateCommand, g: &GlobalArgs) -> Result<(), CmdError> {
    match command {
        GenerateCommand::Bundle(a) => tokio::task::block_in_place(|| bundle(&a, g)),
        GenerateCommand::Kustomize(KustomizeCommand::Manifests(a)) => kustomize_manifests(&a),
    }
}

/// `generate kustomize manifests`: operator-sdk's `manifestsCmd.run`
/// (`internal/cmd/operator-sdk/generate/kustomize/manifests.go`) through
/// `olmkit_bundle::generate::kustomize`: the base CSV read back from `--input-dir` (hand edits
/// kept) or operator-sdk's default, the project's APIs described from `PROJECT` and the CRDs,
/// written to `--output-dir/bases`, and `kustomization.yaml` written when missing.
fn kustomize_manifests(a: &KustomizeManifestsArgs) -> Result<(), CmdError> {
    use olmkit_bundle::generate::kustomize::{BaseInputs, base_csv, project_apis, render_base};
    let say = |line: String| {
        if !a.quiet {
            print_data(&format!("{line}\n")).unexpected_err()
        } else {
            Ok(())
        }
    };
    say(format!(
        "Generating kustomize files in {}",
        a.output_dir.display()
    ))?;
    if a.interactive {
        eprintln!(
            "note: bundle-tool does not prompt for UI metadata: edit displayName, description, icon, maintainers and the rest in the base it writes"
        );
    }
    let project = read_project()?;
    let project_doc = match olmkit_core::confine::read_named(
        Path::new("PROJECT"),
        olmkit_core::confine::MANIFEST_FILE,
    ) {
        Ok(b) => Some(
            olmkit_core::docs::parse_document("PROJECT", &b)
                .map_err(|e| CmdError::user(e).hint("fix the PROJECT file"))?,
        ),
        Err(_) => None,
    };
    let package = kustomize_package(a, project.as_ref())?;
    let rel_base = PathBuf::from("bases").join(format!("{package}.clusterserviceversion.yaml"));
    let existing = existing_base(&a.input_dir.join(&rel_base))?;
    let crds = if a.crds_dir.is_dir() {
        load_manifest_dir(&a.crds_dir)
            .map_err(load_error)?
            .into_iter()
            .filter(|d| d.kind() == olmkit_bundle::kinds::CRD)
            .map(|d| d.object)
            .collect()
    } else {
        Vec::new()
    };
    if !a.quiet && a.apis_dir.is_dir() {
        eprintln!(
            "note: API descriptions come from the CRDs in {} (controller-gen's, from the types in {}); Go +operator-sdk:csv markers are not read",
            a.crds_dir.display(),
            a.apis_dir.display()
        );
    }
    let (csv, notes) = base_csv(&BaseInputs {
        package: package.clone(),
        existing,
        apis: project_doc.as_ref().map(project_apis).unwrap_or_default(),
        crds,
    });
    if !a.quiet {
        for n in &notes {
            eprintln!("note: {n}");
        }
    }
    write_kustomize_files(
        a,
        &rel_base,
        &render_base(&csv).user_err()?,
        &package,
        project.as_ref(),
    )?;
    say("Kustomize files generated successfully".to_string())
}

/// The package of `generate kustomize manifests`: `--package`, the PROJECT's name, else (as
/// operator-sdk) the current directory's name, lowercased, which must be a DNS-1123 label.
fn kustomize_package(
    a: &KustomizeManifestsArgs,
    project: Option<&ProjectConfig>,
) -> Result<String, CmdError> {
    if let Some(p) = a
        .package
        .clone()
        .or_else(|| project.and_then(|p| p.project_name.clone()))
    {
        return Ok(p);
    }
    let cwd = std::env::current_dir().unexpected_err()?;
    let name = cwd
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let errors = olmkit_core::k8s_name::dns1123_label_errors(&name);
    if !errors.is_empty() {
        return Err(CmdError::msg(format!(
            "project name ({name}) is invalid: {}",
            errors.join("; ")
        ))
        .hint("pass --package NAME"));
    }
    Ok(name)
}

/// The existing base CSV at `base_path`, read back so hand edits are kept; `None` when there
/// is no such file.
fn existing_base(base_path: &Path) -> Result<Option<serde_json::Value>, CmdError> {
    if !base_path.is_file() {
        return Ok(None);
    }
    let docs = load_manifest_dir(base_path).map_err(load_error)?;
    let csv = docs
        .into_iter()
        .find(|d| d.kind() == olmkit_bundle::kinds::CSV)
        .ok_or_else(|| {
            CmdError::msg(format!(
                "error reading existing ClusterServiceVersion base {}: no ClusterServiceVersion manifest in {}",
                base_path.display(),
                base_path.display()
            ))
            .hint("the base must have kind: ClusterServiceVersion, or remove it to start from the default")
        })?;
    Ok(Some(csv.object))
}

/// Writes the base CSV `yaml` to `--output-dir/<rel_base>`, and `kustomization.yaml` when it
/// is missing.
fn write_kustomize_files(
    a: &KustomizeManifestsArgs,
    rel_base: &Path,
    yaml: &str,
    package: &str,
    project: Option<&ProjectConfig>,
) -> Result<(), CmdError> {
    let out_base = a.output_dir.join(rel_base);
    if let Some(parent) = out_base.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| CmdError::msg(format!("cannot create {}: {e}", parent.display())))?;
    }
    crate::cmd::common::pending::write_output(&out_base, yaml.as_bytes())?;
    let kustomization = a.output_dir.join("kustomization.yaml");
    if !kustomization.exists() {
        let (go, v4) = layout_support(project.map_or("", |p| p.layout.as_str()));
        crate::cmd::common::pending::write_output(
            &kustomization,
            kustomization_yaml(package, go, v4).as_bytes(),
        )?;
    }
    Ok(())
}

/// Whether stdin is a pipe (operator-sdk's `genutil.IsPipeReader`: a FIFO, not a terminal,
/// file or /dev/null).
fn stdin_is_pipe() -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata("/dev/stdin").is_ok_and(|m| m.file_type().is_fifo())
}

fn has_kustomization(dir: &Path) -> bool {
    ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .any(|f| dir.join(f).is_file())
}

/// The manifests, from the sources operator-sdk's `runManifests` reads: --input-dir, or
/// --deploy-dir (CRDs from --crds-dir when set), or stdin when it is a pipe. Two differences:
/// a directory given with a piped stdin wins (operator-sdk refuses the combination, which
/// fails under CI runners and test harnesses that always pipe stdin), and when nothing is
/// given or the pipe is empty, `kubectl kustomize <kustomize-dir>` provides the manifests
/// (operator-sdk fails).
fn sdk_manifests(a: &BundleArgs, g: &GlobalArgs) -> Result<Vec<Manifest>, CmdError> {
    if let Some(dir) = &a.kustomize {
        return kustomize(dir, g);
    }
    match a.manifests.as_deref() {
        Some("-") => return read_stdin(),
        Some(path) => return load_manifest_dir(Path::new(path)).map_err(load_error),
        None => {}
    }
    if let Some(dir) = &a.input_dir {
        return load_manifest_dir(dir).map_err(load_error);
    }
    if let Some(dir) = &a.deploy_dir {
        let mut docs = load_manifest_dir(dir).map_err(load_error)?;
        if let Some(crds) = &a.crds_dir {
            // operator-sdk's `UpdateFromDirs`: the CRDs of --crds-dir replace any in --deploy-dir.
            docs.retain(|d| d.kind() != olmkit_bundle::kinds::CRD);
            let from = load_manifest_dir(crds).map_err(load_error)?;
            docs.extend(
                from.into_iter()
                    .filter(|d| d.kind() == olmkit_bundle::kinds::CRD),
            );
        }
        return Ok(docs);
    }
    if stdin_is_pipe() {
        let buf = read_stdin_bytes()?;
        if !buf.iter().all(u8::is_ascii_whitespace) {
            return load_manifest_stream("<stdin>", &buf).map_err(load_error);
        }
    }
    if has_kustomization(&a.kustomize_dir) {
        return kustomize(&a.kustomize_dir, g);
    }
    Err(CmdError::msg(
        "one of stdin, --input-dir, or --deploy-dir (and optionally --crds-dir) must be set",
    )
    .hint(format!(
        "pipe them (`kubectl kustomize config/manifests | bundle-tool generate bundle ...`), or run where {} has a kustomization.yaml",
        a.kustomize_dir.display()
    )))
}

/// `./PROJECT`, when there is one.
fn read_project() -> Result<Option<ProjectConfig>, CmdError> {
    let path = Path::new("PROJECT");
    let bytes = match olmkit_core::confine::read_named(path, olmkit_core::confine::MANIFEST_FILE) {
        Ok(b) => b,
        Err(olmkit_core::confine::ReadConfinedError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(e) => return Err(CmdError::user(e)),
    };
    parse_project("PROJECT", &bytes)
        .map(Some)
        .map_err(|e| CmdError::user(e).hint("fix the PROJECT file, or pass --package"))
}

/// The base CSV at `<kustomize-dir>/bases/<package>.clusterserviceversion.yaml`, read only when
/// the manifests hold no CSV (operator-sdk's `runManifests`). Without a package name, the only
/// `*.clusterserviceversion.yaml` there.
fn kustomize_base(dir: &Path, package: Option<&str>) -> Result<Option<Manifest>, CmdError> {
    let bases = dir.join("bases");
    let path = match package {
        Some(p) => bases.join(format!("{p}.clusterserviceversion.yaml")),
        None => {
            let mut found: Vec<PathBuf> = std::fs::read_dir(&bases)
                .map(|rd| {
                    rd.filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.to_string_lossy().ends_with(".clusterserviceversion.yaml"))
                        .collect()
                })
                .unwrap_or_default();
            if found.len() != 1 {
                return Ok(None);
            }
            found.remove(0)
        }
    };
    if !path.is_file() {
        return Ok(None);
    }
    let docs = load_manifest_dir(&path).map_err(load_error)?;
    match docs
        .into_iter()
        .find(|d| d.kind() == olmkit_bundle::kinds::CSV)
    {
        Some(d) => Ok(Some(d)),
        None => Err(CmdError::msg(format!(
            "{}: no ClusterServiceVersion manifest in the file",
            path.display()
        ))
        .hint("the base CSV must have kind: ClusterServiceVersion")),
    }
}

/// `path` as the Dockerfile at the project root must name it: relative to the current
/// directory when it is inside it.
fn copy_dir(out: &Path) -> String {
    let rel = match (out.is_absolute(), std::env::current_dir()) {
        (true, Ok(cwd)) => out.strip_prefix(&cwd).unwrap_or(out).to_path_buf(),
        _ => out.to_path_buf(),
    };
    let s = rel.to_string_lossy().replace('\\', "/");
    s.trim_start_matches("./").trim_end_matches('/').to_string()
}

fn gen_err(e: olmkit_bundle::GenerateBundleError) -> CmdError {
    let hint = e.hint();
    let mut err = CmdError::user(e);
    if let Some(h) = hint {
        err = err.hint(h);
    }
    err
}

/// Everything a run of `generate bundle` decided before generating.
struct Plan {
    inputs: GenerateInputs,
    options: GenerateOptions,
    settings: Settings,
    /// Output directory, when known before generation (not for the versioned default).
    out_dir: Option<PathBuf>,
    /// operator-sdk layout with an output directory outside the current directory, where the
    /// Dockerfile written here cannot reach.
    dockerfile_outside: bool,
    /// What `--image` changed.
    image_notes: Vec<String>,
}

fn plan(a: &BundleArgs, g: &GlobalArgs) -> Result<Plan, CmdError> {
    let project = read_project()?;
    let package = a
        .package
        .clone()
        .or_else(|| project.as_ref().and_then(|p| p.project_name.clone()));
    let (inputs, image_notes) = plan_inputs(a, g, package.as_deref())?;
    let options = generate_options(a, package)?;
    let out_dir = match (a.layout, &a.output_dir) {
        (_, Some(d)) => Some(d.clone()),
        (LayoutArg::Sdk, None) => Some(PathBuf::from("bundle")),
        (LayoutArg::Versioned, None) => None,
    };
    // operator-sdk writes bundle.Dockerfile into the current directory whatever the output
    // directory; COPY sources are relative to the build context, so with an output directory
    // outside the current one the file cannot build (and lands where it was not asked for:
    // how a stray `COPY /tmp/...` bundle.Dockerfile once got committed at this repository's
    // root). Kept as operator-sdk does, with a warning.
    let dockerfile_outside = a.layout == LayoutArg::Sdk
        && !a.stdout
        && out_dir.as_deref().is_some_and(|d| !inside_current_dir(d));
    let settings = settings(a, project.as_ref(), out_dir.as_deref());
    Ok(Plan {
        inputs,
        options,
        settings,
        out_dir,
        dockerfile_outside,
        image_notes,
    })
}

/// The generator's inputs: the manifests, the base CSV (`--base-csv`, else the kustomize
/// base when the manifests have no CSV), `--image` applied to both (with what it changed),
/// and the samples.
fn plan_inputs(
    a: &BundleArgs,
    g: &GlobalArgs,
    package: Option<&str>,
) -> Result<(GenerateInputs, Vec<String>), CmdError> {
    let manifests = sdk_manifests(a, g)?;
    let base_csv = match &a.base_csv {
        Some(p) => {
            let mut docs = load_manifest_dir(p).map_err(load_error)?;
            if docs.len() != 1 {
                return Err(CmdError::msg(format!(
                    "{}: expected exactly one ClusterServiceVersion document, found {}",
                    p.display(),
                    docs.len()
                )));
            }
            docs.pop()
        }
        None if !manifests
            .iter()
            .any(|d| d.kind() == olmkit_bundle::kinds::CSV) =>
        {
            kustomize_base(&a.kustomize_dir, package)?
        }
        None => None,
    };
    let mut inputs = GenerateInputs {
        manifests,
        base_csv,
        samples: Vec::new(),
    };
    let mut image_notes = Vec::new();
    if !a.image.is_empty() {
        use olmkit_bundle::generate::set_image::{ImageEdit, apply};
        let edits = a
            .image
            .iter()
            .map(|s| ImageEdit::parse(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(gen_err)?;
        image_notes = apply(&mut inputs, &edits).map_err(gen_err)?;
    }
    if let Some(d) = &a.samples {
        inputs.samples = load_manifest_dir(d).map_err(load_error)?;
    }
    Ok((inputs, image_notes))
}

/// The generator's options from the flags, `createdAt` from `SOURCE_DATE_EPOCH` or the clock.
fn generate_options(a: &BundleArgs, package: Option<String>) -> Result<GenerateOptions, CmdError> {
    let created_at = epoch::build_time()
        .map(epoch::rfc3339)
        .user_hint("unset SOURCE_DATE_EPOCH or set it to seconds since 1970")?;
    Ok(GenerateOptions {
        // An empty `--version` is no version, as in operator-sdk (`--version "$VERSION"` with
        // VERSION unset).
        version: a
            .version
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(olmkit_bundle::generate::parse_version_flag)
            .transpose()
            .map_err(gen_err)?,
        package,
        channels: a.channels.clone(),
        default_channel: a.default_channel.clone(),
        replaces: a.replaces.clone(),
        skips: a.skips.clone(),
        skip_range: a.skip_range.clone(),
        created_at,
        builder: format!("bundle-tool-v{}", env!("CARGO_PKG_VERSION")),
    })
}

/// The generator's settings: improvements (`--upstream-compat`, `--without`), the file
/// layout, the project layout annotation, and whether a scorecard config is already in the
/// output directory.
fn settings(a: &BundleArgs, project: Option<&ProjectConfig>, out_dir: Option<&Path>) -> Settings {
    let mut improvements = if a.upstream_compat {
        Improvements::none()
    } else {
        Improvements::default()
    };
    for name in &a.without {
        if let Some(i) = Improvement::from_name(name) {
            improvements.remove(i);
        }
    }
    let layout = match a.layout {
        LayoutArg::Sdk => FileLayout::Sdk {
            copy_dir: copy_dir(out_dir.unwrap_or(Path::new("bundle"))),
        },
        LayoutArg::Versioned => FileLayout::Versioned,
    };
    let project_layout = match project {
        Some(p) => Some(p.layout.clone()),
        None if a.upstream_compat => Some("unknown".to_string()),
        None => None,
    };
    let scorecard_in_output = a.layout == LayoutArg::Sdk
        && !a.stdout
        && out_dir.is_some_and(|d| d.join(write::SCORECARD_CONFIG).is_file());
    Settings {
        extra_service_accounts: a.extra_service_accounts.clone(),
        improvements,
        upstream_compat: a.upstream_compat,
        project_layout,
        layout,
        scorecard_in_output,
    }
}

/// Whether `dir` is the current directory or below it (lexically, `..` resolved).
fn inside_current_dir(dir: &Path) -> bool {
    let Ok(cwd) = std::env::current_dir() else {
        return true;
    };
    let full = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        cwd.join(dir)
    };
    let mut norm = PathBuf::new();
    for c in full.components() {
        match c {
            std::path::Component::ParentDir => {
                norm.pop();
            }
            std::path::Component::CurDir => {}
            other => norm.push(other),
        }
    }
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    let norm = match norm.parent().and_then(|p| p.canonicalize().ok()) {
        Some(parent) => parent.join(norm.file_name().unwrap_or_default()),
        None => norm,
    };
    norm.starts_with(&cwd)
}

/// Every image reference of the CSV operator-sdk pins: containers and init containers of the
/// install Deployments, their `RELATED_IMAGE_*` values, `relatedImages` and `containerImage`.
fn csv_image_refs(csv: &serde_json::Value) -> Vec<String> {
    let mut refs: Vec<String> = Vec::new();
    let mut add = |s: Option<&str>| {
        if let Some(s) = s.filter(|s| !s.is_empty() && !s.contains('@'))
            && !refs.iter().any(|r| r == s)
        {
            refs.push(s.to_string());
        }
    };
    let csv = Csv::new(csv);
    for d in csv.deployments() {
        for c in d.spec().pod_spec().all_containers() {
            add(c.image());
            for (name, value) in c.env() {
                if name.is_some_and(|n| n.starts_with("RELATED_IMAGE_")) {
                    add(value);
                }
            }
        }
    }
    for r in csv.related_images() {
        add(r.image());
    }
    add(csv.annotation("containerImage"));
    refs
}

/// Whether go-containerregistry (operator-sdk's crane resolver) talks plain HTTP to `host`
/// (`name.Registry.Scheme`): `localhost:*`, loopback and RFC 1918 private addresses.
fn plain_http_registry(host: &str) -> bool {
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(host, |(h, _)| h);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    if name == "localhost" {
        return host.starts_with("localhost:");
    }
    match name.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(v4)) => v4.is_loopback() || v4.is_private(),
        Ok(std::net::IpAddr::V6(v6)) => v6.is_loopback(),
        Err(_) => false,
    }
}

/// `--use-image-digests`: resolves every image of the CSV in its registry and rewrites the
/// references by digest (operator-sdk's `pinImages`, through olmkit-image).
fn pin_digests(
    generated: &mut olmkit_bundle::GeneratedBundle,
    quiet: bool,
    insecure: bool,
) -> Result<(), CmdError> {
    let csv_path =
        PathBuf::from("manifests").join(olmkit_bundle::naming::csv_file_name(&generated.package));
    let Some(bytes) = generated.files.get(&csv_path) else {
        return Ok(());
    };
    let mut csv = olmkit_core::docs::parse_document("the generated CSV", bytes).unexpected_err()?;
    let opts = olmkit_image::remote::RemoteOptions {
        auth: olmkit_image::auth::AuthSources::from_env()
            .user_hint("set both registry credential variables, or neither")?,
        ..Default::default()
    };
    let handle = tokio::runtime::Handle::current();
    let mut digests = std::collections::BTreeMap::new();
    for r in csv_image_refs(&csv) {
        let reference = olmkit_image::remote::parse_reference(&r)
            .map_err(|e| CmdError::user(e).hint("fix the image reference in the manifests"))?;
        let opts = olmkit_image::remote::RemoteOptions {
            insecure: insecure || plain_http_registry(reference.registry()),
            ..opts.clone()
        };
        let info = handle
            .block_on(olmkit_image::inspect::inspect_remote(&reference, &opts))
            .map_err(|e| {
                CmdError::user(e).hint(format!(
                    "--use-image-digests resolves {r} in its registry; check the name, the network and credentials"
                ))
            })?;
        let digest: olmkit_image::digest::Digest = info.digest.parse().unexpected_err()?;
        if !quiet {
            eprintln!("pinned {r} to {}", info.digest);
        }
        digests.insert(r, digest);
    }
    olmkit_image::pin::pin_csv_images(&mut csv, &digests).unexpected_err()?;
    let text = to_yaml("the generated CSV", &csv).unexpected_err()?;
    generated.files.insert(csv_path, text.into_bytes());
    Ok(())
}

/// `--stdout`: the manifests as operator-sdk's multi-manifest writer prints them (each
/// preceded by `\n---\n`), the CSV first.
fn print_manifests(generated: &olmkit_bundle::GeneratedBundle) -> Result<(), CmdError> {
    let csv =
        PathBuf::from("manifests").join(olmkit_bundle::naming::csv_file_name(&generated.package));
    let mut out = String::new();
    let others = generated
        .files
        .iter()
        .filter(|(p, _)| p.starts_with("manifests") && **p != csv);
    for (_, bytes) in generated
        .files
        .get_key_value(&csv)
        .into_iter()
        .chain(others)
    {
        out.push_str("\n---\n");
        out.push_str(String::from_utf8_lossy(bytes).trim());
    }
    out.push('\n');
    print_data(&out).unexpected_err()
}

fn validate_tree(
    files: &std::collections::BTreeMap<PathBuf, Vec<u8>>,
    out_dir: &Path,
    no_validate: bool,
    csv_name: &str,
) -> Result<olmkit_core::Report, CmdError> {
    let text: std::collections::BTreeMap<String, Vec<u8>> = files
        .iter()
        .map(|(p, b)| (p.to_string_lossy().replace('\\', "/"), b.clone()))
        .collect();
    let loaded = olmkit_bundle::load::bundle_from_files(out_dir, &text)
        .map_err(|e| CmdError::user(e).hint("fix or remove the file in the bundle directory"))?;
    let mut report = if no_validate {
        olmkit_core::Report::new()
    } else {
        olmkit_bundle::validate_bundle(&loaded, None, &olmkit_bundle::ValidateOptions::default())
    };
    for f in &mut report.findings {
        f.file = f
            .file
            .as_ref()
            .map(|p| out_dir.join(p).display().to_string());
    }
    if !report.findings.is_empty() {
        eprint!("{}", report.render_text());
    }
    if report.has_errors() {
        eprintln!(
            "error: the generated bundle for {csv_name} does not validate; nothing was written to {}",
            out_dir.display()
        );
        eprintln!("hint: fix the inputs above, or pass --no-validate to write it anyway");
        return Err(CmdError::Reported);
    }
    Ok(report)
}

fn bundle(a: &BundleArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    if !a.no_validate {
        olmkit_bundle::schemas::prewarm();
    }
    let plan = plan(a, g)?;
    let mut generated =
        generate_bundle_with(&plan.inputs, &plan.options, &plan.settings).map_err(gen_err)?;
    if a.use_image_digests {
        pin_digests(&mut generated, a.quiet, a.insecure_registry)?;
    }
    if !a.quiet {
        for n in plan.image_notes.iter().chain(&generated.notes) {
            eprintln!("note: {n}");
        }
    }
    let version = generated
        .csv_name
        .rsplit_once(".v")
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    let out_dir = plan.out_dir.clone().unwrap_or_else(|| {
        PathBuf::from("bundle")
            .join(&generated.package)
            .join(&version)
    });
    if a.stdout {
        validate_tree(
            &generated.files,
            &out_dir,
            a.no_validate,
            &generated.csv_name,
        )?;
        return print_manifests(&generated);
    }
    let (report, written) = match a.layout {
        LayoutArg::Versioned => {
            let report = validate_tree(
                &generated.files,
                &out_dir,
                a.no_validate,
                &generated.csv_name,
            )?;
            fsio::write_tree_atomic(&out_dir, &generated.files, true)
                .user_hint("check that the output directory's parent is writable")?;
            (report, generated.files.keys().cloned().collect::<Vec<_>>())
        }
        LayoutArg::Sdk => {
            // operator-sdk's `runMetadata`: existing metadata (in --input-dir when given, else
            // the output directory) is kept unless --overwrite.
            let metadata_root = a.input_dir.clone().unwrap_or_else(|| out_dir.clone());
            let keep = !a.overwrite
                && write::metadata_exists(&metadata_root).map_err(|e| {
                    CmdError::user(e).hint("fix or remove the file, or pass --overwrite")
                })?;
            if keep && !a.quiet {
                eprintln!(
                    "note: kept the existing bundle metadata and bundle.Dockerfile (--overwrite=false)"
                );
            }
            let w = write::SdkWrite::new(&generated, !keep);
            let merged = w
                .merged_tree(&out_dir)
                .user_hint("check the output directory")?;
            let report = validate_tree(&merged, &out_dir, a.no_validate, &generated.csv_name)?;
            w.commit(Path::new("."), &out_dir).user_hint(
                "check that the output directory and the current directory are writable",
            )?;
            if plan.dockerfile_outside && !w.root_files.is_empty() {
                eprintln!(
                    "warning: wrote ./bundle.Dockerfile (as operator-sdk does) with COPY lines naming {}, outside the current directory: no `docker build .` here can reach them",
                    out_dir.display()
                );
                eprintln!(
                    "hint: run generate bundle from the directory that holds the output directory (the project root), or delete ./bundle.Dockerfile if it is not wanted here"
                );
            }
            let mut files: Vec<PathBuf> = w.bundle_files.keys().cloned().collect();
            files.extend(w.root_files.keys().cloned());
            (report, files)
        }
    };
    summary(a, &generated, &out_dir, &report, &written)
}

fn summary(
    a: &BundleArgs,
    generated: &olmkit_bundle::GeneratedBundle,
    out_dir: &Path,
    report: &olmkit_core::Report,
    written: &[PathBuf],
) -> Result<(), CmdError> {
    match a.output {
        OutputFormat::Text => {
            if !a.quiet {
                eprintln!(
                    "wrote {} ({} files) to {}",
                    generated.csv_name,
                    written.len(),
                    out_dir.display()
                );
            }
        }
        OutputFormat::Json => {
            let validation: serde_json::Value =
                serde_json::from_str(&report.render_json()).unexpected_err()?;
            let v = serde_json::json!({
                "package": generated.package,
                "csvName": generated.csv_name,
                "outputDir": out_dir.display().to_string(),
                "files": written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "notes": generated.notes,
                "validation": validation,
            });
            let mut s = serde_json::to_string_pretty(&v).unexpected_err()?;
            s.push('\n');
            print_data(&s).unexpected_err()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::plain_http_registry;

    #[test]
    fn local_registries_use_plain_http_like_go_containerregistry() {
        for h in [
            "localhost:5000",
            "127.0.0.1:5000",
            "10.1.2.3",
            "192.168.1.1:80",
            "[::1]:5000",
        ] {
            assert!(plain_http_registry(h), "{h}");
        }
        for h in [
            "quay.io",
            "localhost",
            "docker.io",
            "8.8.8.8:443",
            "registry.local:5000",
        ] {
            assert!(!plain_http_registry(h), "{h}");
        }
    }
}
