//! Where a bundle's inputs come from, shared by `generate bundle` and `release`: the operator's
//! manifests (a directory, a file, stdin, or `kubectl kustomize`), the base CSV and samples.

use crate::exit::CmdError;
use crate::output::GlobalArgs;
use olmkit_bundle::Manifest;
use olmkit_bundle::generate::GenerateInputs;
use olmkit_bundle::load::{LoadManifestsError, load_manifest_dir, load_manifest_stream};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a bundle's inputs come from .
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

pub(crate) fn load_error(e: LoadManifestsError) -> CmdError {
    use olmkit_core::confine::ReadConfinedError;
    let hint = match &e {
        LoadManifestsError::Read { .. } => "check the path",
        LoadManifestsError::Empty(_) => "point --manifests at the directory holding the YAML",
        LoadManifestsError::Input(ReadConfinedError::NotRegular { .. }) => {
            "--manifests takes a directory or a regular file; to read a pipe, pass --manifests - and pipe it into bundle-tool"
        }
        LoadManifestsError::Input(ReadConfinedError::HardLinked { .. }) => {
            "copy the file into the directory (a copy has one link), or set BUNDLE_TOOL_ALLOW_HARD_LINKS=1 if the link is intended"
        }
        LoadManifestsError::Input(ReadConfinedError::TooLarge { .. }) => {
            "no API server stores an object this large; split the file, or shrink what it holds"
        }
        _ => "fix the document, or regenerate it with `kubectl kustomize config/manifests`",
    };
    CmdError::user(e).hint(hint)
}

pub(crate) fn kustomize(dir: &Path, g: &GlobalArgs) -> Result<Vec<Manifest>, CmdError> {
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

fn read_manifests(a: &InputArgs, g: &GlobalArgs) -> Result<Vec<Manifest>, CmdError> {
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

pub(crate) fn read_stdin() -> Result<Vec<Manifest>, CmdError> {
    let buf = read_stdin_bytes()?;
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Err(CmdError::msg("<stdin>: no manifests (empty input)")
            .hint("pipe the operator's manifests, e.g. `kubectl kustomize config/manifests | bundle-tool generate bundle --version X --manifests -`"));
    }
    load_manifest_stream("<stdin>", &buf).map_err(load_error)
}

/// All of stdin, at most [`olmkit_core::confine::MANIFEST_FILE`] bytes.
pub(crate) fn read_stdin_bytes() -> Result<Vec<u8>, CmdError> {
    olmkit_core::confine::read_stream(
        "<stdin>",
        std::io::stdin().lock(),
        olmkit_core::confine::MANIFEST_FILE,
    )
    .map_err(|e| CmdError::user(e).hint("pipe the operator's manifests, not more"))
}
