//! `bundle-tool init` and `bundle-tool create api`: scaffold a kube-rs operator on the olmkit
//! runtime, like `kubebuilder init` / `create api` (with its deploy-image plugin's flags).
//!
//! Thin: the flags, the toolkit location, calling olmkit-scaffold (pure) and its writer (all or
//! nothing), and printing what was written (`--output json` for tools).

use std::path::{Path, PathBuf};

use olmkit_scaffold::write::{self, WriteError};
use olmkit_scaffold::{
    ChangeKind, CreateApiOptions, DeployImage, InitOptions, ScaffoldError, Toolkit,
};
use serde_json::json;

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};

/// Arguments of `bundle-tool init`.
#[derive(clap::Args, Debug)]
pub struct InitArgs {
    /// Domain of the API groups (`--group demo` is `demo.<domain>`).
    #[arg(long, default_value = olmkit_scaffold::DEFAULT_DOMAIN)]
    pub domain: String,
    /// Where the source lives, e.g. github.com/example/whalesay-operator (PROJECT's `repo`,
    /// the CSV's repository) [default: <domain>/<project-name>].
    #[arg(long)]
    pub repo: Option<String>,
    /// Project name: the operator's package and OLM package name, a DNS-1123 label
    /// [default: the project directory's name].
    #[arg(long)]
    pub project_name: Option<String>,
    /// Directory to create the project in (empty or missing).
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project_dir: PathBuf,
    /// Depend on the toolkit checkout in DIR (path dependencies on
    /// DIR/bundle-tool/crates/olmkit-runtime and DIR/tests/kube-standin). A relative DIR stays
    /// relative and, as Cargo reads path dependencies, is relative to the project directory
    /// [default: the source tree this bundle-tool was built from, absolute].
    #[arg(long, value_name = "DIR", conflicts_with = "toolkit_git")]
    pub toolkit_path: Option<PathBuf>,
    /// Depend on the toolkit in this git repository (git dependencies).
    #[arg(long, value_name = "URL")]
    pub toolkit_git: Option<String>,
    /// With --toolkit-git: the commit, tag or branch [default: the default branch].
    #[arg(long, value_name = "REV", requires = "toolkit_git")]
    pub toolkit_rev: Option<String>,
    /// Report format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// Subcommands of `bundle-tool create`.
#[derive(clap::Subcommand, Debug)]
pub enum CreateCommand {
    /// Add a kind (or a version of one, or a controller) to a project made by `init`, like
    /// `kubebuilder create api`; with --image, a controller that deploys that image.
    #[command(disable_version_flag = true)]
    Api(ApiArgs),
}

/// Arguments of `bundle-tool create api`: kubebuilder's flags, its deploy-image plugin's, and
/// `--storage`.
#[derive(clap::Args, Debug)]
pub struct ApiArgs {
    /// API group, without the domain (e.g. `demo` for demo.<domain>).
    #[arg(long)]
    pub group: String,
    /// API version (v1, v1alpha1, v2beta3).
    #[arg(long)]
    pub version: String,
    /// Kind, PascalCase (e.g. Whalesay).
    #[arg(long)]
    pub kind: String,
    /// Plural resource name [default: the kind's plural, lower case].
    #[arg(long)]
    pub plural: Option<String>,
    /// kubectl short names, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub short_names: Vec<String>,
    /// Namespaced kind (false: cluster-scoped) [default: true for a new kind, else the kind's].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub namespaced: Option<bool>,
    /// Generate the API types.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = true, action = clap::ArgAction::Set)]
    pub resource: bool,
    /// Generate the controller.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = true, action = clap::ArgAction::Set)]
    pub controller: bool,
    /// Make this new version of an existing kind its storage version and conversion hub
    /// [default: the kind's storage version stays].
    #[arg(long)]
    pub storage: bool,
    /// deploy-image: the image the controller runs as a Deployment of `spec.size` pods.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// deploy-image: the container's command and arguments, comma-separated.
    #[arg(long, value_name = "COMMAND", requires = "image")]
    pub image_container_command: Option<String>,
    /// deploy-image: the container's port (spec.containerPort).
    #[arg(long, value_name = "PORT", requires = "image")]
    pub image_container_port: Option<u16>,
    /// deploy-image: the user id the container runs as.
    #[arg(long, value_name = "UID", requires = "image")]
    pub run_as_user: Option<i64>,
    /// The project's root directory (where PROJECT is).
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project_dir: PathBuf,
    /// Report format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// The toolkit source tree this binary was built from.
fn built_from() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether `dir` holds the toolkit's crates a project depends on.
fn is_toolkit(dir: &Path) -> bool {
    [
        olmkit_scaffold::toolkit::RUNTIME_DIR,
        olmkit_scaffold::toolkit::STANDIN_DIR,
    ]
    .iter()
    .all(|d| dir.join(d).join("Cargo.toml").is_file())
}

/// `path` with `.` and `..` resolved lexically, as Cargo resolves a path dependency against the
/// directory of the manifest naming it (no symbolic links followed; the project directory may
/// not exist yet).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Where `--toolkit-path DIR` is, seen from the current directory: an absolute DIR as it is, a
/// relative one from the project directory (the project's `Cargo.toml` keeps it relative, and
/// Cargo reads a relative path dependency from the manifest's directory).
fn toolkit_seen_from_here(project_dir: &Path, dir: &Path) -> PathBuf {
    if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        let project = std::path::absolute(project_dir).unwrap_or_else(|_| project_dir.into());
        normalize(&project.join(dir))
    }
}

fn toolkit(args: &InitArgs) -> Result<Toolkit, CmdError> {
    if let Some(url) = &args.toolkit_git {
        return Ok(Toolkit::Git {
            url: url.clone(),
            rev: args.toolkit_rev.clone(),
        });
    }
    let (dir, flag) = match &args.toolkit_path {
        Some(d) => (toolkit_seen_from_here(&args.project_dir, d), true),
        None => (built_from(), false),
    };
    if !is_toolkit(&dir) {
        let err = if flag {
            let given = args.toolkit_path.as_deref().unwrap_or(&dir);
            let seen = if given.is_absolute() {
                String::new()
            } else {
                format!(" (relative to the project directory: {})", dir.display())
            };
            CmdError::msg(format!(
                "--toolkit-path {}{seen}: not a checkout of the olmkit toolkit (no {} and {})",
                given.display(),
                olmkit_scaffold::toolkit::RUNTIME_DIR,
                olmkit_scaffold::toolkit::STANDIN_DIR
            ))
        } else {
            CmdError::msg(format!(
                "the toolkit source tree this bundle-tool was built from ({}) is gone",
                dir.display()
            ))
        };
        return Err(err
            .hint("pass --toolkit-path DIR (a checkout of the toolkit; a relative DIR is read from the project directory, as Cargo reads path dependencies) for path dependencies")
            .hint("or --toolkit-git URL [--toolkit-rev REV] for git dependencies"));
    }
    // A relative path stays relative: the project can move with the toolkit (an example inside
    // the toolkit's own tree, a checkout with both side by side).
    if let Some(given) = args.toolkit_path.as_deref().filter(|d| d.is_relative()) {
        let text = given.to_str().ok_or_else(|| {
            CmdError::msg(format!(
                "--toolkit-path {}: not valid UTF-8",
                given.display()
            ))
        })?;
        let text = text.trim_end_matches('/');
        return Ok(Toolkit::Path(
            if text.is_empty() { "." } else { text }.to_string(),
        ));
    }
    let dir =
        std::fs::canonicalize(&dir).user_hint("pass --toolkit-path with a readable directory")?;
    Ok(Toolkit::Path(dir.to_string_lossy().into_owned()))
}

fn scaffold_err(e: ScaffoldError) -> CmdError {
    let hint = e.hint();
    let err = CmdError::user(e);
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

fn write_err(e: WriteError) -> CmdError {
    let hint = e.hint();
    let err = CmdError::user(e);
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// Formats the Rust files just written with the project's rustfmt (its toolchain file pins
/// it), as kubebuilder runs `go fmt` after scaffolding: the templates are laid out for typical
/// names, and a long kind name can push a line past rustfmt's widths. Returns a note when it
/// could not run.
fn rustfmt(dir: &Path, files: &[&str]) -> Option<String> {
    let rs: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| f.ends_with(".rs"))
        .collect();
    if rs.is_empty() {
        return None;
    }
    let out = std::process::Command::new("rustfmt")
        .arg("--edition")
        .arg("2024")
        .args(&rs)
        .current_dir(dir)
        .output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "rustfmt failed ({}); run `make fmt` once the code compiles: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or_default()
        )),
        Err(e) => Some(format!("cannot run rustfmt ({e}); run `make fmt`")),
    }
}

/// The directory's own name, for the default project name.
fn dir_name(dir: &Path) -> Option<String> {
    let abs = std::path::absolute(dir).ok()?;
    let abs = if abs.file_name().is_none() || abs.ends_with(".") {
        std::fs::canonicalize(&abs).ok()?
    } else {
        abs
    };
    abs.file_name().map(|n| n.to_string_lossy().into_owned())
}

fn report(
    output: OutputFormat,
    dir: &Path,
    files: &[(ChangeKind, String)],
    notes: &[String],
    next: &[String],
) -> Result<(), CmdError> {
    let action = |k: ChangeKind| match k {
        ChangeKind::Create => "create",
        ChangeKind::Update => "update",
    };
    let text = match output {
        OutputFormat::Json => {
            let v = json!({
                "projectDir": dir.display().to_string(),
                "files": files.iter().map(|(k, p)| json!({"path": p, "action": action(*k)})).collect::<Vec<_>>(),
                "notes": notes,
                "next": next,
            });
            serde_json::to_string_pretty(&v).unexpected_err()? + "\n"
        }
        OutputFormat::Text => {
            let mut s = String::from("Writing scaffold for you to edit...\n");
            for (k, p) in files {
                s.push_str(&format!("  {:<6} {p}\n", action(*k)));
            }
            for n in notes {
                s.push_str(&format!("note: {n}\n"));
            }
            if !next.is_empty() {
                s.push_str("Next:\n");
                for n in next {
                    s.push_str(&format!("  $ {n}\n"));
                }
            }
            s
        }
    };
    print_data(&text).unexpected_err()
}

/// Runs `bundle-tool init`.
pub async fn init(args: InitArgs, _g: &GlobalArgs) -> Result<(), CmdError> {
    let project_name = match &args.project_name {
        Some(n) => n.clone(),
        None => dir_name(&args.project_dir).ok_or_else(|| {
            CmdError::msg(format!(
                "cannot tell the project name from {}",
                args.project_dir.display()
            ))
            .hint("pass --project-name")
        })?,
    };
    let toolkit = toolkit(&args)?;
    let options = InitOptions {
        domain: args.domain.clone(),
        project_name,
        repo: args.repo.clone(),
        toolkit,
    };
    let files = olmkit_scaffold::init(&options).map_err(|e| {
        let from_dir = args.project_name.is_none()
            && matches!(
                &e,
                ScaffoldError::InvalidFlag {
                    flag: "--project-name",
                    ..
                }
            );
        let err = scaffold_err(e);
        if from_dir {
            err.hint("the project name defaults to the directory's name; pass --project-name")
        } else {
            err
        }
    })?;
    tokio::task::block_in_place(|| write::write_init(&args.project_dir, &files))
        .map_err(write_err)?;
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let notes: Vec<String> = rustfmt(&args.project_dir, &paths).into_iter().collect();
    let listed: Vec<(ChangeKind, String)> = files
        .iter()
        .map(|f| (ChangeKind::Create, f.path.clone()))
        .collect();
    report(
        args.output,
        &args.project_dir,
        &listed,
        &notes,
        &["bundle-tool create api --group <group> --version <version> --kind <Kind>".into()],
    )
}

/// Runs `bundle-tool create ...`.
pub async fn create(command: CreateCommand, _g: &GlobalArgs) -> Result<(), CmdError> {
    let CreateCommand::Api(args) = command;
    let options = CreateApiOptions {
        group: args.group.clone(),
        version: args.version.clone(),
        kind: args.kind.clone(),
        plural: args.plural.clone(),
        short_names: args.short_names.clone(),
        namespaced: args.namespaced,
        resource: args.resource,
        controller: args.controller,
        storage: args.storage,
        deploy_image: args.image.as_ref().map(|image| DeployImage {
            image: image.clone(),
            command: args.image_container_command.clone(),
            port: args.image_container_port,
            run_as_user: args.run_as_user,
        }),
    };
    let dir = &args.project_dir;
    let changes = tokio::task::block_in_place(|| {
        let (project, files) = write::read_project(dir, &options)?;
        let changes = olmkit_scaffold::create_api(&project, &files, &options)?;
        write::write_changes(dir, &changes)?;
        Ok::<_, WriteError>(changes)
    })
    .map_err(|e| match e {
        WriteError::Scaffold(e) => scaffold_err(e),
        e => write_err(e),
    })?;
    let paths: Vec<&str> = changes.files.iter().map(|f| f.file.path.as_str()).collect();
    let mut notes = changes.notes.clone();
    notes.extend(rustfmt(dir, &paths));
    let listed: Vec<(ChangeKind, String)> = changes
        .files
        .iter()
        .map(|f| (f.kind, f.file.path.clone()))
        .collect();
    report(
        args.output,
        dir,
        &listed,
        &notes,
        &["make manifests".into(), "make test".into()],
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn init_args(project_dir: &Path, toolkit_path: Option<&str>) -> InitArgs {
        InitArgs {
            domain: "example.com".into(),
            repo: None,
            project_name: None,
            project_dir: project_dir.to_path_buf(),
            toolkit_path: toolkit_path.map(PathBuf::from),
            toolkit_git: None,
            toolkit_rev: None,
            output: OutputFormat::Text,
        }
    }

    #[test]
    fn paths_normalize_lexically() {
        assert_eq!(normalize(Path::new("/a/b/c/../../d")), Path::new("/a/d"));
        assert_eq!(normalize(Path::new("/a/./b/")), Path::new("/a/b"));
        assert_eq!(normalize(Path::new("a/../../b")), Path::new("../b"));
    }

    /// A fake toolkit checkout: the two crate directories with a manifest each.
    fn fake_toolkit(root: &Path) {
        for d in [
            olmkit_scaffold::toolkit::RUNTIME_DIR,
            olmkit_scaffold::toolkit::STANDIN_DIR,
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
            std::fs::write(root.join(d).join("Cargo.toml"), "").unwrap();
        }
    }

    #[test]
    fn a_relative_toolkit_path_stays_relative_to_the_project_directory() {
        let tmp = tempfile::tempdir().unwrap();
        fake_toolkit(tmp.path());
        // The project directory does not exist yet (init creates it): still resolved, lexically.
        let project = tmp.path().join("examples/new-operator");
        let t = toolkit(&init_args(&project, Some("../.."))).unwrap();
        assert_eq!(t, Toolkit::Path("../..".into()));
        let t = toolkit(&init_args(&project, Some("../../"))).unwrap();
        assert_eq!(t, Toolkit::Path("../..".into()));
        // Relative to the project directory, not to the current one.
        let err = toolkit(&init_args(&project, Some("."))).unwrap_err();
        let text = format!("{err:?}");
        assert!(text.contains("relative to the project directory"), "{text}");
        // Absolute stays absolute (canonical).
        let abs = tmp.path().to_str().unwrap().to_string();
        let t = toolkit(&init_args(&project, Some(&abs))).unwrap();
        let canonical = std::fs::canonicalize(tmp.path()).unwrap();
        assert_eq!(t, Toolkit::Path(canonical.to_string_lossy().into_owned()));
    }
}
