//! `init`: the files of a new project.

use crate::project::Project;
use crate::template::{Vars, render};
use crate::{GeneratedFile, InitOptions, ScaffoldError, csv, names, rbac, toolkit};

/// kubebuilder's default `--domain`.
pub const DEFAULT_DOMAIN: &str = "my.domain";

/// The templates of `init`: (path in the project, template name, text). `{api}` in a path is
/// the API crate's directory.
const TEMPLATES: &[(&str, &str, &str)] = &[
    (
        "Cargo.toml",
        "Cargo.toml",
        include_str!("../templates/init/Cargo.toml.tpl"),
    ),
    (
        "Makefile",
        "Makefile",
        include_str!("../templates/init/Makefile.tpl"),
    ),
    (
        "README.md",
        "README.md",
        include_str!("../templates/init/README.md.tpl"),
    ),
    (
        ".gitignore",
        "gitignore",
        include_str!("../templates/init/gitignore.tpl"),
    ),
    (
        "src/main.rs",
        "src/main.rs",
        include_str!("../templates/init/src/main.rs.tpl"),
    ),
    (
        "src/lib.rs",
        "src/lib.rs",
        include_str!("../templates/init/src/lib.rs.tpl"),
    ),
    (
        "src/rbac.rs",
        "src/rbac.rs",
        include_str!("../templates/init/src/rbac.rs.tpl"),
    ),
    (
        "src/controller/mod.rs",
        "src/controller/mod.rs",
        include_str!("../templates/init/src/controller/mod.rs.tpl"),
    ),
    (
        "tests/e2e.rs",
        "tests/e2e.rs",
        include_str!("../templates/init/tests/e2e.rs.tpl"),
    ),
    (
        "{api}/Cargo.toml",
        "api/Cargo.toml",
        include_str!("../templates/init/api/Cargo.toml.tpl"),
    ),
    (
        "{api}/src/lib.rs",
        "api/src/lib.rs",
        include_str!("../templates/init/api/src/lib.rs.tpl"),
    ),
    (
        "config/crd/kustomization.yaml",
        "config/crd/kustomization.yaml",
        include_str!("../templates/init/config/crd/kustomization.yaml.tpl"),
    ),
    (
        "config/crd/kustomizeconfig.yaml",
        "config/crd/kustomizeconfig.yaml",
        include_str!("../templates/init/config/crd/kustomizeconfig.yaml.tpl"),
    ),
    (
        "config/default/kustomization.yaml",
        "config/default/kustomization.yaml",
        include_str!("../templates/init/config/default/kustomization.yaml.tpl"),
    ),
    (
        "config/default/metrics_service.yaml",
        "config/default/metrics_service.yaml",
        include_str!("../templates/init/config/default/metrics_service.yaml.tpl"),
    ),
    (
        "config/manager/kustomization.yaml",
        "config/manager/kustomization.yaml",
        include_str!("../templates/init/config/manager/kustomization.yaml.tpl"),
    ),
    (
        "config/manager/manager.yaml",
        "config/manager/manager.yaml",
        include_str!("../templates/init/config/manager/manager.yaml.tpl"),
    ),
    (
        "config/manifests/kustomization.yaml",
        "config/manifests/kustomization.yaml",
        include_str!("../templates/init/config/manifests/kustomization.yaml.tpl"),
    ),
    (
        "config/rbac/kustomization.yaml",
        "config/rbac/kustomization.yaml",
        include_str!("../templates/init/config/rbac/kustomization.yaml.tpl"),
    ),
    (
        "config/rbac/leader_election_role_binding.yaml",
        "config/rbac/leader_election_role_binding.yaml",
        include_str!("../templates/init/config/rbac/leader_election_role_binding.yaml.tpl"),
    ),
    (
        "config/rbac/metrics_auth_role_binding.yaml",
        "config/rbac/metrics_auth_role_binding.yaml",
        include_str!("../templates/init/config/rbac/metrics_auth_role_binding.yaml.tpl"),
    ),
    (
        "config/rbac/metrics_reader_role.yaml",
        "config/rbac/metrics_reader_role.yaml",
        include_str!("../templates/init/config/rbac/metrics_reader_role.yaml.tpl"),
    ),
    (
        "config/rbac/role_binding.yaml",
        "config/rbac/role_binding.yaml",
        include_str!("../templates/init/config/rbac/role_binding.yaml.tpl"),
    ),
    (
        "config/rbac/service_account.yaml",
        "config/rbac/service_account.yaml",
        include_str!("../templates/init/config/rbac/service_account.yaml.tpl"),
    ),
    (
        "config/samples/kustomization.yaml",
        "config/samples/kustomization.yaml",
        include_str!("../templates/init/config/samples/kustomization.yaml.tpl"),
    ),
    (
        "config/scorecard/kustomization.yaml",
        "config/scorecard/kustomization.yaml",
        include_str!("../templates/init/config/scorecard/kustomization.yaml.tpl"),
    ),
    (
        "config/scorecard/bases/config.yaml",
        "config/scorecard/bases/config.yaml",
        include_str!("../templates/init/config/scorecard/bases/config.yaml.tpl"),
    ),
    (
        "config/scorecard/patches/basic.config.yaml",
        "config/scorecard/patches/basic.config.yaml",
        include_str!("../templates/init/config/scorecard/patches/basic.config.yaml.tpl"),
    ),
    (
        "config/scorecard/patches/olm.config.yaml",
        "config/scorecard/patches/olm.config.yaml",
        include_str!("../templates/init/config/scorecard/patches/olm.config.yaml.tpl"),
    ),
];

/// The dependencies of the generated code whose requirements come from the toolkit.
const DEPENDENCIES: &[&str] = &[
    "kube",
    "k8s-openapi",
    "schemars",
    "serde",
    "serde_json",
    "serde-saphyr",
    "thiserror",
    "tokio",
    "tempfile",
    "rcgen",
    "rustls",
    "proptest",
];

/// The values every template of a project can use.
pub(crate) fn project_vars(project: &Project) -> Vars {
    let name = &project.project_name;
    let api_package = names::api_package(name);
    let mut v = Vars::default();
    v.set("project", name.clone())
        .set("project_crate", names::crate_name(name))
        .set("project_title", names::title(name))
        .set("api_crate", names::crate_name(&api_package))
        .set("api_package", api_package)
        .set("domain", project.domain.clone())
        .set("repo", project.repo.clone())
        .set("image_tag_base", image_tag_base(project));
    v
}

/// operator-sdk's `IMAGE_TAG_BASE` default: `<domain>/<project>`.
pub(crate) fn image_tag_base(project: &Project) -> String {
    format!("{}/{}", project.domain, project.project_name)
}

/// The files of a new project.
pub fn init(options: &InitOptions) -> Result<Vec<GeneratedFile>, ScaffoldError> {
    names::validate_subdomain("--domain", &options.domain)?;
    names::validate_project_name(&options.project_name)?;
    let repo = match &options.repo {
        Some(r) if r.trim().is_empty() || r.chars().any(char::is_whitespace) => {
            return Err(ScaffoldError::InvalidFlag {
                flag: "--repo",
                value: r.clone(),
                reason: "must be a repository location without spaces, e.g. github.com/example/whalesay-operator".into(),
            });
        }
        Some(r) => r.trim_start_matches("https://").to_string(),
        None => format!("{}/{}", options.domain, options.project_name),
    };
    if let crate::Toolkit::Git { url, .. } = &options.toolkit
        && url.trim().is_empty()
    {
        return Err(ScaffoldError::InvalidFlag {
            flag: "--toolkit-git",
            value: url.clone(),
            reason: "is empty".into(),
        });
    }
    let project = Project::new(&options.domain, &options.project_name, &repo);
    let mut vars = project_vars(&project);
    let roots: Vec<&str> = DEPENDENCIES
        .iter()
        .copied()
        .chain(["olmkit-runtime", "kube-standin"])
        .collect();
    let dependencies = DEPENDENCIES
        .iter()
        .map(|d| toolkit::dependency(d).map(|spec| format!("{d} = {spec}")))
        .collect::<Result<Vec<_>, _>>()?
        .join("\n");
    vars.set("toolkit", options.toolkit.describe())
        .set("toolkit_runtime", options.toolkit.runtime_line())
        .set("toolkit_standin", options.toolkit.standin_line())
        .set("toolkit_readme", toolkit_readme(&options.toolkit))
        .set("dependencies", dependencies)
        .set("profiles", toolkit::profiles(&roots));
    let api_dir = names::api_package(&options.project_name);
    let mut files = Vec::new();
    for (path, name, text) in TEMPLATES {
        files.push(GeneratedFile {
            path: path.replace("{api}", &api_dir),
            contents: render(name, text, &vars)?,
        });
    }
    files.push(GeneratedFile {
        path: crate::project::FILE.into(),
        contents: project.render()?,
    });
    files.push(GeneratedFile {
        path: "Cargo.lock".into(),
        contents: toolkit::LOCK.to_string(),
    });
    files.push(GeneratedFile {
        path: "rust-toolchain.toml".into(),
        contents: toolkit::RUST_TOOLCHAIN.to_string(),
    });
    let title = names::title(&options.project_name);
    let base = csv::base(
        &options.project_name,
        &title,
        &options.domain,
        &repo,
        &image_tag_base(&project),
    );
    files.push(GeneratedFile {
        path: csv::path(&options.project_name),
        contents: csv::render(&base)?,
    });
    for (file, contents) in rbac::generated_roles(&rbac::project_rows(&project)?)? {
        files.push(GeneratedFile {
            path: format!("config/rbac/{file}"),
            contents,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The generated README's paragraph on where the toolkit comes from.
fn toolkit_readme(toolkit: &crate::Toolkit) -> String {
    match toolkit {
        crate::Toolkit::Path(root) if crate::toolkit::is_relative(root) => format!(
            "This project takes them by path from the toolkit checkout at `{root}`, relative to this\ndirectory (`bundle-tool init --toolkit-path`; Cargo reads a relative path dependency from the\ndirectory of the `Cargo.toml` naming it): keep the project where it is in that checkout, or\npoint the two lines at another one."
        ),
        crate::Toolkit::Path(root) => format!(
            "This project takes them by path from the toolkit checkout at `{root}` (`bundle-tool init\n--toolkit-path`, the default being the source tree bundle-tool was built from): keep that\ncheckout, or point the two lines at another one."
        ),
        crate::Toolkit::Git { url, rev } => format!(
            "This project takes them from git, `{url}`{} (`bundle-tool init --toolkit-git URL\n--toolkit-rev REV`): cargo fetches the repository on the first build.",
            rev.as_deref()
                .map(|r| format!(" at `{r}`"))
                .unwrap_or_default()
        ),
    }
}
