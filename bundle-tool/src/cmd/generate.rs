//! `bundle-tool generate crds|bundle`: the Memcached CRD, and registry+v1 bundles from any
//! operator's manifests.
//!
//! `generate bundle` reads the manifests (a directory, stdin, or `kubectl kustomize DIR` run
//! here), generates the bundle in memory (olmkit-bundle, pure), validates it with the default
//! suite and only then writes it, all or nothing: a failed generation or validation leaves the
//! output directory untouched.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};
use olmkit_bundle::generate::{GenerateInputs, GenerateOptions, generate_bundle};
use olmkit_bundle::load::{
    InputDocument, LoadManifestsError, load_manifest_dir, load_manifest_stream,
};
use olmkit_core::docs::to_yaml;
use olmkit_core::{epoch, fsio};
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Subcommands of `bundle-tool generate`.
// Parsed once per process; boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug)]
pub enum GenerateCommand {
    /// Write the Memcached CRD with all its versions, as controller-gen names it
    /// (<group>_<plural>.yaml).
    Crds(CrdsArgs),
    /// Generate a registry+v1 bundle from an operator's manifests, like
    /// `operator-sdk generate bundle`, and validate it before writing.
    #[command(disable_version_flag = true)]
    Bundle(BundleArgs),
}

/// Arguments of `generate crds`.
#[derive(clap::Args, Debug)]
pub struct CrdsArgs {
    /// Directory to write the CRD into.
    #[arg(long, default_value = "config/crd/bases", value_name = "DIR")]
    pub output_dir: PathBuf,
}

/// Where a bundle's inputs come from (shared by `generate bundle` and `release`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InputArgs {
    /// The operator's manifests: a directory of YAML/JSON, a file, or `-` for stdin (e.g.
    /// `kubectl kustomize config/manifests | bundle-tool generate bundle --manifests -`).
    #[arg(long, value_name = "DIR|FILE|-", conflicts_with = "kustomize")]
    pub manifests: Option<String>,
    /// Run `kubectl kustomize DIR` and use its output [default: config/manifests when it
    /// exists and --manifests is not given].
    #[arg(long, value_name = "DIR")]
    pub kustomize: Option<PathBuf>,
    /// Base CSV with the hand-written content, when it is not in the manifests.
    #[arg(long, value_name = "FILE")]
    pub base_csv: Option<PathBuf>,
    /// Directory of sample custom resources for alm-examples (in addition to those in the
    /// manifests).
    #[arg(long, value_name = "DIR")]
    pub samples: Option<PathBuf>,
}

/// Arguments of `generate bundle`.
#[derive(clap::Args, Debug)]
pub struct BundleArgs {
    /// Bundle version (semver, e.g. 0.1.0).
    #[arg(long)]
    pub version: String,
    /// Package name [default: the base CSV's name without .vX.Y.Z].
    #[arg(long)]
    pub package: Option<String>,
    /// Channels, comma-separated [default: alpha].
    #[arg(long, value_delimiter = ',')]
    pub channels: Vec<String>,
    /// Default channel [default: the only channel, when there is one].
    #[arg(long)]
    pub default_channel: Option<String>,
    /// Where the operator's manifests come from.
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Output directory [default: bundle/<package>/<version>].
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// spec.replaces: the CSV this version upgrades from.
    #[arg(long, value_name = "CSV")]
    pub replaces: Option<String>,
    /// spec.skips: CSVs this version skips, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "CSV")]
    pub skips: Vec<String>,
    /// olm.skipRange annotation, e.g. '>=0.1.0 <0.2.0'.
    #[arg(long, value_name = "RANGE")]
    pub skip_range: Option<String>,
    /// Write the bundle even if validation reports errors.
    #[arg(long)]
    pub no_validate: bool,
    /// Summary format on stdout.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// Runs the command.
pub async fn run(command: GenerateCommand, g: &GlobalArgs) -> Result<(), CmdError> {
    match command {
        GenerateCommand::Crds(a) => crds(&a),
        GenerateCommand::Bundle(a) => tokio::task::block_in_place(|| bundle(&a, g)),
    }
}

/// The Memcached CRD as bytes: exactly what `operator crd` prints.
pub fn crd_yaml() -> Result<String, CmdError> {
    to_yaml("the Memcached CRD", &memcached_api::crd()).unexpected_err()
}

fn crds(a: &CrdsArgs) -> Result<(), CmdError> {
    let file = olmkit_bundle::naming::crd_file_name(memcached_api::GROUP, memcached_api::PLURAL);
    let path = a.output_dir.join(file);
    let yaml = crd_yaml()?;
    fsio::write_file_atomic(&path, yaml.as_bytes())
        .user_hint("check that the output directory is writable")?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn load_error(e: LoadManifestsError) -> CmdError {
    let hint = match &e {
        LoadManifestsError::Read { .. } => "check the path",
        LoadManifestsError::Empty(_) => "point --manifests at the directory holding the YAML",
        _ => "fix the document, or regenerate it with `kubectl kustomize config/manifests`",
    };
    CmdError::user(e).hint(hint)
}

fn kustomize(dir: &Path, g: &GlobalArgs) -> Result<Vec<InputDocument>, CmdError> {
    let bar = crate::output::spinner(g, &format!("kubectl kustomize {}", dir.display()));
    let out = Command::new("kubectl").arg("kustomize").arg(dir).output();
    bar.finish_and_clear();
    let out = match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CmdError::msg("cannot run `kubectl kustomize`: kubectl is not installed")
                .hint("install kubectl, or pipe the manifests: `kustomize build DIR | bundle-tool generate bundle --manifests -`"));
        }
        Err(e) => {
            return Err(CmdError::unexpected(anyhow::anyhow!(
                "cannot run kubectl: {e}"
            )));
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(CmdError::msg(format!(
            "`kubectl kustomize {}` failed: {}",
            dir.display(),
            stderr.trim()
        ))
        .hint("fix the kustomization; `kubectl kustomize DIR` shows the same error"));
    }
    let source = format!("kustomize {}", dir.display());
    load_manifest_stream(&source, &out.stdout).map_err(load_error)
}

fn read_manifests(a: &InputArgs, g: &GlobalArgs) -> Result<Vec<InputDocument>, CmdError> {
    if let Some(dir) = &a.kustomize {
        return kustomize(dir, g);
    }
    match a.manifests.as_deref() {
        Some("-") => read_stdin(),
        Some(path) => load_manifest_dir(Path::new(path)).map_err(load_error),
        None if Path::new("config/manifests").is_dir() => {
            kustomize(Path::new("config/manifests"), g)
        }
        None if !std::io::stdin().is_terminal() => read_stdin(),
        None => Err(CmdError::msg("no manifests given").hint(
            "pass --kustomize config/manifests, --manifests DIR, or pipe them with --manifests -",
        )),
    }
}

/// Reads the manifests, base CSV and samples named by `a`.
pub(crate) fn load_inputs(a: &InputArgs, g: &GlobalArgs) -> Result<GenerateInputs, CmdError> {
    let manifests = read_manifests(a, g)?;
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
        None => None,
    };
    let samples = match &a.samples {
        Some(d) => load_manifest_dir(d).map_err(load_error)?,
        None => Vec::new(),
    };
    Ok(GenerateInputs {
        manifests,
        base_csv,
        samples,
    })
}

fn read_stdin() -> Result<Vec<InputDocument>, CmdError> {
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| CmdError::user(anyhow::anyhow!("cannot read stdin: {e}")))?;
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Err(CmdError::msg("<stdin>: no manifests (empty input)")
            .hint("pipe the operator's manifests, e.g. `kubectl kustomize config/manifests | bundle-tool generate bundle --version X --manifests -`"));
    }
    load_manifest_stream("<stdin>", &buf).map_err(load_error)
}

fn bundle(a: &BundleArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    if !a.no_validate {
        olmkit_bundle::schemas::prewarm();
    }
    let inputs = load_inputs(&a.inputs, g)?;
    let created_at = epoch::build_time()
        .map(epoch::rfc3339)
        .user_hint("unset SOURCE_DATE_EPOCH or set it to seconds since 1970")?;
    let options = GenerateOptions {
        version: a.version.trim_start_matches('v').to_string(),
        package: a.package.clone(),
        channels: a.channels.clone(),
        default_channel: a.default_channel.clone(),
        replaces: a.replaces.clone(),
        skips: a.skips.clone(),
        skip_range: a.skip_range.clone(),
        created_at,
        builder: format!("bundle-tool-v{}", env!("CARGO_PKG_VERSION")),
    };
    let generated = generate_bundle(&inputs, &options).map_err(|e| {
        let hint = e.hint();
        let mut err = CmdError::user(e);
        if let Some(h) = hint {
            err = err.hint(h);
        }
        err
    })?;
    for n in &generated.notes {
        eprintln!("note: {n}");
    }
    let out_dir = a.output_dir.clone().unwrap_or_else(|| {
        PathBuf::from("bundle")
            .join(&generated.package)
            .join(&options.version)
    });
    let loaded = generated.to_bundle(&out_dir).unexpected_err()?;
    let mut report = if a.no_validate {
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
    let failed = report.has_errors();
    if !report.findings.is_empty() {
        eprint!("{}", report.render_text());
    }
    if failed {
        eprintln!(
            "error: the generated bundle for {} does not validate; nothing was written to {}",
            generated.csv_name,
            out_dir.display()
        );
        eprintln!("hint: fix the inputs above, or pass --no-validate to write it anyway");
        return Err(CmdError::Reported);
    }
    fsio::write_tree_atomic(&out_dir, &generated.files, true)
        .user_hint("check that the output directory's parent is writable")?;
    match a.output {
        OutputFormat::Text => {
            eprintln!(
                "wrote {} ({} files) to {}",
                generated.csv_name,
                generated.files.len(),
                out_dir.display()
            );
        }
        OutputFormat::Json => {
            let validation: serde_json::Value =
                serde_json::from_str(&report.render_json()).unexpected_err()?;
            let v = serde_json::json!({
                "package": generated.package,
                "csvName": generated.csv_name,
                "outputDir": out_dir.display().to_string(),
                "files": generated.files.keys().map(|p| p.display().to_string()).collect::<Vec<_>>(),
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
