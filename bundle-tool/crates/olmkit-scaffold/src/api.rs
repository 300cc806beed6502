//! `create api`: a new kind, a new version of a kind, or a controller for an existing kind.

use std::collections::BTreeMap;

use crate::conversion::{self, VersionFields};
use crate::init::project_vars;
use crate::markers;
use crate::project::{
    DeployImageOptions, DeployImageResource, Project, Resource, ResourceApi, Webhooks,
};
use crate::template::{Vars, render};
use crate::{
    ChangeKind, Changes, CreateApiOptions, FileChange, GeneratedFile, ScaffoldError, csv, names,
    rbac, rust,
};

const VERSION_RS: &str = include_str!("../templates/api/version.rs.tpl");
const KIND_MOD_RS: &str = include_str!("../templates/api/kind_mod.rs.tpl");
const CONTROLLER_DEPLOY_IMAGE: &str =
    include_str!("../templates/api/controller_deploy_image.rs.tpl");
const CONTROLLER_PLAIN: &str = include_str!("../templates/api/controller_plain.rs.tpl");
const E2E_DEPLOY_IMAGE: &str = include_str!("../templates/api/e2e_deploy_image.rs.tpl");
const E2E_PLAIN: &str = include_str!("../templates/api/e2e_plain.rs.tpl");
const SAMPLE: &str = include_str!("../templates/api/sample.yaml.tpl");
const ROLES: &[(&str, &str)] = &[
    (
        "admin",
        include_str!("../templates/api/admin_role.yaml.tpl"),
    ),
    (
        "editor",
        include_str!("../templates/api/editor_role.yaml.tpl"),
    ),
    (
        "viewer",
        include_str!("../templates/api/viewer_role.yaml.tpl"),
    ),
];
const WEBHOOK_FILES: &[(&str, &str, &str)] = &[
    (
        "config/webhook/kustomization.yaml",
        "webhook/kustomization.yaml",
        include_str!("../templates/webhook/kustomization.yaml.tpl"),
    ),
    (
        "config/webhook/service.yaml",
        "webhook/service.yaml",
        include_str!("../templates/webhook/service.yaml.tpl"),
    ),
    (
        "config/certmanager/certificate.yaml",
        "webhook/certificate.yaml",
        include_str!("../templates/webhook/certificate.yaml.tpl"),
    ),
    (
        "config/certmanager/kustomization.yaml",
        "webhook/certmanager_kustomization.yaml",
        include_str!("../templates/webhook/certmanager_kustomization.yaml.tpl"),
    ),
    (
        "config/certmanager/kustomizeconfig.yaml",
        "webhook/certmanager_kustomizeconfig.yaml",
        include_str!("../templates/webhook/certmanager_kustomizeconfig.yaml.tpl"),
    ),
];
const DEFAULT_REPLACEMENTS: &str =
    include_str!("../templates/webhook/default_replacements.yaml.tpl");
const MANIFESTS_PATCHES: &str = include_str!("../templates/webhook/manifests_patches.yaml.tpl");
const MANIFESTS_CRD_PATCH: &str = include_str!("../templates/webhook/manifests_crd_patch.yaml.tpl");
const CRD_WEBHOOK_PATCH: &str = include_str!("../templates/webhook/crd_webhook_patch.yaml.tpl");
const CRD_CAINJECTION_PATCH: &str =
    include_str!("../templates/webhook/crd_cainjection_patch.yaml.tpl");

const MANAGER_WEBHOOK_PORT: &str = "\
# The conversion webhook (the API server calls it through config/webhook/service.yaml).
- containerPort: 9443
  name: webhook-server
  protocol: TCP";
const MANAGER_CERT_MOUNT: &str = "\
volumeMounts:
# The conversion webhook's serving certificate (tls.crt, tls.key), issued by cert-manager
# (config/certmanager) or, under OLM, by OLM. The webhook waits for the files and reloads them on
# rotation.
- mountPath: /tmp/k8s-webhook-server/serving-certs
  name: cert
  readOnly: true";
const MANAGER_CERT_VOLUME: &str = "\
volumes:
- name: cert
  secret:
    defaultMode: 420
    secretName: webhook-server-cert
    # Start even before cert-manager issued the certificate: /readyz reports why the
    # webhook is not ready until the secret appears.
    optional: true";

/// Kubernetes' order of versions, oldest first: v1alpha1 < v1beta1 < v1 < v2alpha1 < v2.
pub fn version_key(version: &str) -> (u32, u8, u32) {
    let digits = |s: &str| -> (u32, usize) {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        (s[..end].parse().unwrap_or(0), end)
    };
    let rest = version.strip_prefix('v').unwrap_or(version);
    let (major, end) = digits(rest);
    let rest = &rest[end..];
    if let Some(minor) = rest.strip_prefix("alpha") {
        (major, 0, digits(minor).0)
    } else if let Some(minor) = rest.strip_prefix("beta") {
        (major, 1, digits(minor).0)
    } else {
        (major, 2, 0)
    }
}

/// Everything about the kind create api works on.
struct KindInfo {
    group: String,
    full_group: String,
    kind: String,
    snake: String,
    plural: String,
    namespaced: bool,
    short_names: Vec<String>,
    deploy_image: Option<DeployImageOptions>,
}

impl KindInfo {
    fn sample_file(&self, version: &str) -> String {
        let group = if self.group.is_empty() {
            &self.full_group
        } else {
            &self.group
        };
        format!("{group}_{version}_{}.yaml", self.kind.to_ascii_lowercase())
    }

    fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.full_group)
    }

    fn vars(&self, project: &Project) -> Result<Vars, ScaffoldError> {
        let mut v = project_vars(project);
        let lower = self.kind.to_ascii_lowercase();
        v.set("group", self.group.clone())
            .set("full_group", self.full_group.clone())
            .set("kind", self.kind.clone())
            .set("kind_lower", lower.clone())
            .set("kind_snake", self.snake.clone())
            .set("kind_env", self.kind.to_ascii_uppercase())
            .set("plural", self.plural.clone())
            .set("port_name", lower.chars().take(15).collect::<String>())
            .set(
                "namespaced_attr",
                if self.namespaced { "namespaced," } else { "" },
            )
            .set(
                "short_names",
                self.short_names
                    .iter()
                    .map(|s| format!("shortname = {},", rust::string(s)))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
            .flag("namespaced", self.namespaced)
            .flag("deploy_image", self.deploy_image.is_some());
        let di = self.deploy_image.as_ref();
        let command: Vec<String> = match di.and_then(|d| d.container_command.as_deref()) {
            Some(c) => names::parse_command(c)?,
            None => Vec::new(),
        };
        v.set("image", di.map(|d| d.image.clone()).unwrap_or_default())
            .set(
                "command",
                command
                    .iter()
                    .map(|c| rust::string(c))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
            .set(
                "container_port",
                di.and_then(|d| d.container_port.clone())
                    .unwrap_or_default(),
            )
            .set(
                "run_as_user",
                di.and_then(|d| d.run_as_user.clone()).unwrap_or_default(),
            )
            .flag("has_command", !command.is_empty())
            .flag("has_port", di.is_some_and(|d| d.container_port.is_some()))
            .flag(
                "has_run_as_user",
                di.is_some_and(|d| d.run_as_user.is_some()),
            )
            .set(
                "condition_types",
                if di.is_some() {
                    "`Available`, `Progressing` and `Degraded`"
                } else {
                    "`Available`"
                },
            );
        Ok(v)
    }
}

/// The project's files as create api sees and changes them.
struct Tree<'a> {
    original: &'a BTreeMap<String, String>,
    current: BTreeMap<String, String>,
}

impl<'a> Tree<'a> {
    fn new(original: &'a BTreeMap<String, String>) -> Self {
        Self {
            original,
            current: BTreeMap::new(),
        }
    }

    fn get(&self, path: &str) -> Option<&str> {
        self.current
            .get(path)
            .or_else(|| self.original.get(path))
            .map(String::as_str)
    }

    fn read(&self, path: &str) -> Result<&str, ScaffoldError> {
        self.get(path).ok_or_else(|| ScaffoldError::MissingFile {
            file: path.to_string(),
        })
    }

    fn exists(&self, path: &str) -> bool {
        self.get(path).is_some()
    }

    fn set(&mut self, path: &str, text: String) {
        self.current.insert(path.to_string(), text);
    }

    /// Writes a new file; refuses to replace one that exists.
    fn create(&mut self, path: &str, text: String) -> Result<(), ScaffoldError> {
        if self.original.contains_key(path) {
            return Err(ScaffoldError::Conflict {
                flag: "--kind",
                message: format!("{path} exists already"),
                hint: Some(
                    "create api does not overwrite files; move it away, or check PROJECT against the files"
                        .into(),
                ),
            });
        }
        self.set(path, text);
        Ok(())
    }

    fn insert(&mut self, path: &str, marker: &str, snippet: &str) -> Result<(), ScaffoldError> {
        let text = markers::insert(path, self.read(path)?, marker, snippet)?;
        self.set(path, text);
        Ok(())
    }

    /// Inserts one line into the run of lines like it right above the marker, keeping the run
    /// sorted (rustfmt sorts `mod` declarations).
    fn insert_sorted(&mut self, path: &str, marker: &str, line: &str) -> Result<(), ScaffoldError> {
        let text = self.read(path)?;
        if !markers::has_marker(text, marker) {
            return markers::insert(path, text, marker, line).map(|_| ());
        }
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let at = lines
            .iter()
            .position(|l| {
                let t = l.trim();
                t.ends_with(&markers::marker(marker)) && (t.starts_with("//") || t.starts_with('#'))
            })
            .unwrap_or(0);
        let indent = &lines[at][..lines[at].len() - lines[at].trim_start().len()];
        let mut start = at;
        // The run: lines of the same kind (`pub mod `, `mod `) at the marker's indentation.
        let kind = line.rsplit_once(' ').map_or(line, |(k, _)| k);
        while start > 0 && {
            let above = lines[start - 1];
            above.starts_with(indent) && above.trim_start().starts_with(&format!("{kind} "))
        } {
            start -= 1;
        }
        let mut run: Vec<String> = lines[start..at]
            .iter()
            .map(|l| l.trim().to_string())
            .collect();
        if !run.iter().any(|l| l == line) {
            run.push(line.to_string());
        }
        run.sort();
        let mut out: String = lines[..start].concat();
        for l in &run {
            out.push_str(&format!("{indent}{l}\n"));
        }
        out.push_str(&lines[at..].concat());
        self.set(path, out);
        Ok(())
    }

    fn changes(self) -> Vec<FileChange> {
        self.current
            .into_iter()
            .filter(|(path, text)| self.original.get(path) != Some(text))
            .map(|(path, contents)| FileChange {
                kind: if self.original.contains_key(&path) {
                    ChangeKind::Update
                } else {
                    ChangeKind::Create
                },
                file: GeneratedFile { path, contents },
            })
            .collect()
    }
}

fn conflict(flag: &'static str, message: String, hint: Option<&str>) -> ScaffoldError {
    ScaffoldError::Conflict {
        flag,
        message,
        hint: hint.map(String::from),
    }
}

/// The files `create api` may read: those it edits, and the kind's version files.
pub fn create_api_reads(project: &Project, options: &CreateApiOptions) -> Vec<String> {
    let api = names::api_package(&project.project_name);
    let snake = names::snake(&options.kind);
    let mut paths = vec![
        "src/lib.rs".to_string(),
        "src/rbac.rs".into(),
        "src/controller/mod.rs".into(),
        "tests/e2e.rs".into(),
        format!("{api}/src/lib.rs"),
        format!("{api}/src/{snake}/mod.rs"),
        format!("{api}/src/{snake}/conversion.rs"),
        format!("src/controller/{snake}.rs"),
        format!("tests/e2e/{snake}.rs"),
        "config/crd/kustomization.yaml".into(),
        "config/rbac/kustomization.yaml".into(),
        "config/rbac/role.yaml".into(),
        "config/samples/kustomization.yaml".into(),
        "config/manager/manager.yaml".into(),
        "config/default/kustomization.yaml".into(),
        "config/manifests/kustomization.yaml".into(),
        csv::path(&project.project_name),
    ];
    for r in &project.resources {
        if r.kind == options.kind {
            paths.push(format!("{api}/src/{snake}/{}.rs", r.version));
        }
    }
    paths.push(format!("{api}/src/{snake}/{}.rs", options.version));
    paths.sort();
    paths.dedup();
    paths
}

fn validate(options: &CreateApiOptions) -> Result<(), ScaffoldError> {
    names::validate_subdomain("--group", &options.group)?;
    names::validate_version(&options.version)?;
    names::validate_kind(&options.kind)?;
    if let Some(p) = &options.plural {
        names::validate_plural(p)?;
    }
    for s in &options.short_names {
        names::validate_short_name(s)?;
    }
    if !options.resource && !options.controller {
        return Err(conflict(
            "--resource",
            "--resource=false and --controller=false leave nothing to create".into(),
            Some("drop one of them"),
        ));
    }
    if let Some(di) = &options.deploy_image {
        names::validate_image(&di.image)?;
        if let Some(c) = &di.command {
            names::parse_command(c)?;
        }
        if di.port == Some(0) {
            return Err(ScaffoldError::InvalidFlag {
                flag: "--image-container-port",
                value: "0".into(),
                reason: "must be a port between 1 and 65535".into(),
            });
        }
        if di.run_as_user.is_some_and(|u| u < 0) {
            return Err(ScaffoldError::InvalidFlag {
                flag: "--run-as-user",
                value: di.run_as_user.unwrap_or_default().to_string(),
                reason: "must be a user id (0 or more)".into(),
            });
        }
        if !options.resource || !options.controller {
            return Err(conflict(
                "--image",
                "a deploy-image kind needs its API types and its controller".into(),
                Some("drop --resource=false/--controller=false, or --image"),
            ));
        }
        if options.namespaced == Some(false) {
            return Err(conflict(
                "--namespaced",
                "a deploy-image kind is namespaced: its Deployment lives in the object's namespace"
                    .into(),
                Some("drop --namespaced=false, or --image"),
            ));
        }
    }
    Ok(())
}

/// The API crate's path of a kind's file.
fn api_path(project: &Project, snake: &str, file: &str) -> String {
    format!(
        "{}/src/{snake}/{file}",
        names::api_package(&project.project_name)
    )
}

/// What the project holds of the kind before `create api` runs.
struct Existing {
    /// Every version of the kind in the project.
    resources: Vec<Resource>,
    /// The version `create api` names, if the project has it.
    exact: Option<Resource>,
    /// No version of the kind exists yet.
    new_kind: bool,
    /// One of its versions has a controller.
    has_controller: bool,
    /// The deploy-image options the kind was created with.
    deploy_image: Option<DeployImageOptions>,
}

impl Existing {
    fn of(project: &Project, options: &CreateApiOptions) -> Result<Self, ScaffoldError> {
        let domain = &project.domain;
        let resources: Vec<Resource> = project
            .versions_of(&options.group, domain, &options.kind)
            .cloned()
            .collect();
        let exact = resources
            .iter()
            .find(|r| r.version == options.version)
            .cloned();
        Ok(Self {
            new_kind: resources.is_empty(),
            has_controller: resources.iter().any(|r| r.controller),
            deploy_image: project.deploy_image_of(&options.group, domain, &options.kind)?,
            resources,
            exact,
        })
    }
}

/// What `create api` adds or rewrites, given the project and the text of the files
/// [`create_api_reads`] lists (those that exist).
pub fn create_api(
    project: &Project,
    files: &BTreeMap<String, String>,
    options: &CreateApiOptions,
) -> Result<Changes, ScaffoldError> {
    validate(options)?;
    let existing = Existing::of(project, options)?;
    check_conflicts(project, options, &existing)?;
    let mut tree = Tree::new(files);
    let mut notes = Vec::new();
    let storage_before = project.storage_version(&options.group, &project.domain, &options.kind);
    let info = kind_info(
        project,
        &tree,
        options,
        &existing,
        storage_before.as_deref(),
    )?;
    let add_controller = options.controller && !existing.has_controller;
    if options.controller && existing.has_controller && options.resource {
        notes.push(format!(
            "{} has a controller already (src/controller/{}.rs); it reconciles the storage version, so none was added for {}",
            options.kind, info.snake, options.version
        ));
    }
    let mut after = project_after(project, options, &existing, &info, add_controller)?;
    let hub = Hub::of(&after, options, storage_before);
    if hub.multi() {
        set_conversion_webhooks(&mut after, options, &hub);
    }
    let mut vars = info.vars(&after)?;
    vars.set("version", options.version.clone())
        .set("sample_file", info.sample_file(&hub.storage));
    if options.resource {
        api_files(&mut tree, &after, &info, &vars, options, existing.new_kind)?;
        add_owned_crd(&mut tree, project, &info, options)?;
        if hub.multi() {
            conversion_files(&mut tree, project, &after, &info, &vars, &hub, options)?;
        }
    }
    if add_controller {
        controller_files(&mut tree, &after, &info, &vars)?;
    }
    tree.set(crate::project::FILE, after.render()?);
    let mut files = tree.changes();
    files.sort_by(|a, b| a.file.path.cmp(&b.file.path));
    Ok(Changes { files, notes })
}

/// The flags that contradict the project: `create api` refuses them before changing anything.
fn check_conflicts(
    project: &Project,
    options: &CreateApiOptions,
    existing: &Existing,
) -> Result<(), ScaffoldError> {
    let domain = &project.domain;
    let exact = &existing.exact;
    if project
        .resources
        .iter()
        .any(|r| r.kind == options.kind && !r.same_kind(&options.group, domain, &options.kind))
    {
        return Err(conflict(
            "--kind",
            format!(
                "{} exists in another group of this project; kinds are Rust modules of one API crate here, so each name is used once",
                options.kind
            ),
            Some("pick another --kind"),
        ));
    }
    if options.deploy_image.is_some() && !existing.new_kind {
        return Err(conflict(
            "--image",
            format!(
                "{} exists already; its versions share how it was created",
                options.kind
            ),
            Some("add versions without the deploy-image flags"),
        ));
    }
    if options.storage && (existing.new_kind || !options.resource || exact.is_some()) {
        return Err(conflict(
            "--storage",
            "makes a new version of an existing kind its storage version".into(),
            Some("use it with create api --version NEW for a kind that has API types"),
        ));
    }
    if options.resource
        && let Some(e) = exact
        && e.api.is_some()
    {
        return Err(conflict(
            "--version",
            format!("{} {} exists already", options.kind, options.version),
            Some("pick another --version, or --resource=false to add only a controller"),
        ));
    }
    if !options.resource && exact.as_ref().is_none_or(|e| e.api.is_none()) {
        return Err(conflict(
            "--resource",
            format!(
                "--resource=false: {} {} has no API types in this project to control",
                options.kind, options.version
            ),
            Some("create its API types first (create api without --resource=false)"),
        ));
    }
    if !options.resource && existing.has_controller {
        return Err(conflict(
            "--controller",
            format!(
                "{} has a controller already (src/controller/{}.rs)",
                options.kind,
                names::snake(&options.kind)
            ),
            None,
        ));
    }
    Ok(())
}

/// The kind's settings: from the flags for a new kind, from the project otherwise (its versions
/// share them, so a flag that disagrees is refused).
fn kind_info(
    project: &Project,
    tree: &Tree<'_>,
    options: &CreateApiOptions,
    existing: &Existing,
    storage_before: Option<&str>,
) -> Result<KindInfo, ScaffoldError> {
    let domain = &project.domain;
    let namespaced = match existing.resources.iter().find(|r| r.api.is_some()) {
        None => options.namespaced.unwrap_or(true),
        Some(r) => {
            let scoped = r.api.as_ref().is_some_and(|a| a.namespaced);
            if options.namespaced.is_some_and(|n| n != scoped) {
                return Err(conflict(
                    "--namespaced",
                    format!(
                        "{} is {}; its versions share the scope",
                        options.kind,
                        if scoped {
                            "namespaced"
                        } else {
                            "cluster-scoped"
                        }
                    ),
                    Some("drop --namespaced"),
                ));
            }
            scoped
        }
    };
    let plural = match existing.resources.first() {
        None => options
            .plural
            .clone()
            .unwrap_or_else(|| names::plural(&options.kind)),
        Some(r) => {
            let p = r.plural();
            if options.plural.as_ref().is_some_and(|o| *o != p) {
                return Err(conflict(
                    "--plural",
                    format!(
                        "{} is {p} already; its versions share the plural",
                        options.kind
                    ),
                    Some("drop --plural"),
                ));
            }
            p
        }
    };
    let snake = names::snake(&options.kind);
    let short_names = match storage_before {
        None => options.short_names.clone(),
        Some(v) => {
            let path = api_path(project, &snake, &format!("{v}.rs"));
            let found = conversion::short_names(tree.read(&path)?);
            if !options.short_names.is_empty() && options.short_names != found {
                return Err(conflict(
                    "--short-names",
                    format!(
                        "{} has the short names {found:?}; its versions share them",
                        options.kind
                    ),
                    Some("drop --short-names"),
                ));
            }
            found
        }
    };
    let deploy_image = match &options.deploy_image {
        Some(d) => Some(DeployImageOptions {
            container_command: d.command.clone(),
            container_port: d.port.map(|p| p.to_string()),
            image: d.image.clone(),
            run_as_user: d.run_as_user.map(|u| u.to_string()),
        }),
        None => existing.deploy_image.clone(),
    };
    let info = KindInfo {
        group: options.group.clone(),
        full_group: names::qualified_group(&options.group, domain),
        kind: options.kind.clone(),
        snake,
        plural,
        namespaced,
        short_names,
        deploy_image,
    };
    names::validate_subdomain("--group", &info.full_group)?;
    Ok(info)
}

/// The project after the change: the new version (or the controller of an existing one) and,
/// for a new deploy-image kind, its plugin entry.
fn project_after(
    project: &Project,
    options: &CreateApiOptions,
    existing: &Existing,
    info: &KindInfo,
    add_controller: bool,
) -> Result<Project, ScaffoldError> {
    let domain = &project.domain;
    let mut after = project.clone();
    let api_crate = names::crate_name(&names::api_package(&project.project_name));
    if options.resource {
        after.resources.push(Resource {
            api: Some(ResourceApi {
                crd_version: "v1".into(),
                namespaced: info.namespaced,
            }),
            controller: add_controller,
            domain: domain.clone(),
            group: options.group.clone(),
            kind: options.kind.clone(),
            path: Some(format!("{api_crate}::{}::{}", info.snake, options.version)),
            plural: options
                .plural
                .clone()
                .filter(|p| *p != names::plural(&options.kind))
                .or_else(|| existing.resources.first().and_then(|r| r.plural.clone())),
            version: options.version.clone(),
            webhooks: None,
        });
    } else if let Some(r) = after.resources.iter_mut().find(|r| {
        r.same_kind(&options.group, domain, &options.kind) && r.version == options.version
    }) {
        r.controller = true;
    }
    if let (Some(d), true) = (&info.deploy_image, existing.new_kind) {
        let mut config = after.deploy_image()?;
        config.resources.push(DeployImageResource {
            domain: domain.clone(),
            group: options.group.clone(),
            kind: options.kind.clone(),
            options: d.clone(),
            version: options.version.clone(),
        });
        after.set_deploy_image(&config)?;
    }
    Ok(after)
}

/// The kind's versions after the change and its hub, the storage version.
struct Hub {
    /// The versions with API types, oldest first.
    versions: Vec<String>,
    /// The storage version after the change.
    storage: String,
    /// The storage version before it (`None` for a new kind).
    storage_before: Option<String>,
}

impl Hub {
    fn of(after: &Project, options: &CreateApiOptions, storage_before: Option<String>) -> Self {
        let mut versions: Vec<String> = after
            .versions_of(&options.group, &after.domain, &options.kind)
            .filter(|r| r.api.is_some())
            .map(|r| r.version.clone())
            .collect();
        versions.sort_by_key(|v| version_key(v));
        let storage = if options.storage {
            options.version.clone()
        } else {
            storage_before
                .clone()
                .unwrap_or_else(|| options.version.clone())
        };
        Self {
            versions,
            storage,
            storage_before,
        }
    }

    /// The kind has more than one version, so objects are converted between them.
    fn multi(&self) -> bool {
        self.versions.len() > 1
    }
}

/// Marks the hub's entry in the PROJECT file as serving the conversion to its spokes.
fn set_conversion_webhooks(after: &mut Project, options: &CreateApiOptions, hub: &Hub) {
    let domain = after.domain.clone();
    for r in after.resources.iter_mut() {
        if r.same_kind(&options.group, &domain, &options.kind) && r.api.is_some() {
            r.webhooks = (r.version == hub.storage).then(|| Webhooks {
                conversion: true,
                spoke: hub
                    .versions
                    .iter()
                    .filter(|v| **v != hub.storage)
                    .cloned()
                    .collect(),
                webhook_version: "v1".into(),
            });
        }
    }
}

/// Adds the new version to the base CSV's owned CRDs, with the spec descriptors of a
/// deploy-image kind.
fn add_owned_crd(
    tree: &mut Tree<'_>,
    project: &Project,
    info: &KindInfo,
    options: &CreateApiOptions,
) -> Result<(), ScaffoldError> {
    let role = if info.deploy_image.is_some() {
        vec!["Deployment"]
    } else {
        vec![]
    };
    let spec: Vec<(&str, &str, &str, &[&str])> = match &info.deploy_image {
        Some(d) => {
            let mut s: Vec<(&str, &str, &str, &[&str])> = vec![(
                "size",
                "Size",
                "Number of pods running the image.",
                &["urn:alm:descriptor:com.tectonic.ui:podCount"],
            )];
            if d.container_port.is_some() {
                s.push((
                    "containerPort",
                    "Container Port",
                    "Port the container listens on.",
                    &["urn:alm:descriptor:com.tectonic.ui:number"],
                ));
            }
            s
        }
        None => vec![],
    };
    let csv_path = csv::path(&project.project_name);
    let text = csv::add_owned(
        &csv_path,
        tree.read(&csv_path)?,
        &csv::Owned {
            name: &info.crd_name(),
            kind: &info.kind,
            version: &options.version,
            display_name: &names::title(&info.kind),
            description: format!("A {} ({}/{}).", info.kind, info.full_group, options.version),
            resources: &role,
            spec,
        },
    )?;
    tree.set(&csv_path, text);
    Ok(())
}

/// The API types of a new version: the version file, the kind module, the sample, and for a
/// new kind its CRD entry, roles and API-crate wiring.
fn api_files(
    tree: &mut Tree<'_>,
    after: &Project,
    info: &KindInfo,
    vars: &Vars,
    options: &CreateApiOptions,
    new_kind: bool,
) -> Result<(), ScaffoldError> {
    let snake = &info.snake;
    tree.create(
        &api_path(after, snake, &format!("{}.rs", options.version)),
        render("version.rs", VERSION_RS, vars)?,
    )?;
    let kind_mod = kind_module(after, info)?;
    tree.set(&api_path(after, snake, "mod.rs"), kind_mod);
    let sample_file = info.sample_file(&options.version);
    tree.create(
        &format!("config/samples/{sample_file}"),
        render("sample.yaml", SAMPLE, vars)?,
    )?;
    tree.insert(
        "config/samples/kustomization.yaml",
        "manifestskustomizesamples",
        &format!("- {sample_file}"),
    )?;
    if new_kind {
        let lib = format!("{}/src/lib.rs", names::api_package(&after.project_name));
        tree.insert_sorted(&lib, "kinds", &format!("pub mod {snake};"))?;
        tree.insert(&lib, "crds", &format!("{snake}::crd(),"))?;
        tree.insert(
            "config/crd/kustomization.yaml",
            "crdkustomizeresource",
            &format!("- bases/{}_{}.yaml", info.full_group, info.plural),
        )?;
        let lower = info.kind.to_ascii_lowercase();
        let mut lines = Vec::new();
        for (role, text) in ROLES {
            let file = format!("{lower}_{role}_role.yaml");
            tree.create(
                &format!("config/rbac/{file}"),
                render(&format!("{role}_role.yaml"), text, vars)?,
            )?;
            lines.push(format!("- {file}"));
        }
        tree.insert(
            "config/rbac/kustomization.yaml",
            "rbac-resources",
            &lines.join("\n"),
        )?;
    }
    Ok(())
}

/// The kind's `mod.rs`, from the project: its versions, the storage version and the conversion.
fn kind_module(project: &Project, info: &KindInfo) -> Result<String, ScaffoldError> {
    let mut versions: Vec<String> = project
        .versions_of(&info.group, &project.domain, &info.kind)
        .filter(|r| r.api.is_some())
        .map(|r| r.version.clone())
        .collect();
    versions.sort_by_key(|v| version_key(v));
    let storage = project
        .storage_version(&info.group, &project.domain, &info.kind)
        .unwrap_or_default();
    let multi = versions.len() > 1;
    let mut modules: Vec<String> = versions.iter().map(|v| format!("pub mod {v};")).collect();
    if multi {
        modules.push("pub mod conversion;".into());
    }
    modules.sort();
    let kind = &info.kind;
    let mut v = project_vars(project);
    let quoted: Vec<String> = versions.iter().map(|v| rust::string(v)).collect();
    let parts: Vec<String> = versions
        .iter()
        .map(|v| format!("{v}::{kind}::crd()"))
        .collect();
    let spokes: Vec<String> = versions
        .iter()
        .filter(|v| **v != storage)
        .map(|v| format!(".spoke::<{v}::{kind}>()"))
        .collect();
    v.set("kind", kind.clone())
        .set("full_group", info.full_group.clone())
        .set("plural", info.plural.clone())
        .set("storage", storage.clone())
        .set("modules", modules.join("\n"))
        .set(
            "reexport",
            format!("pub use {storage}::{{{kind}, {kind}Spec, {kind}Status}};"),
        )
        .set("versions", quoted.join(", "))
        .set(
            "crd_parts",
            format!("let parts = {};", rust::list("", "vec!", &parts)),
        )
        .set("spokes", rust::chain("", "HubAndSpoke::new()", &spokes))
        .set(
            "conversion_summary",
            if multi {
                "\n//! Objects are converted between versions through the hub, the storage version."
            } else {
                ""
            },
        )
        .set(
            "conversion_file",
            if multi { " and `conversion.rs`" } else { "" },
        )
        .set("hub_note", if multi { ", the conversion hub" } else { "" })
        .flag("multi", multi);
    render("kind_mod.rs", KIND_MOD_RS, &v)
}

/// The conversion code a new version adds: the `impl`s, their tests, and the spokes whose tests
/// need an object strategy.
struct NewConversions {
    body: String,
    tests: String,
    strategies_needed: Vec<String>,
}

/// The conversion between the kind's versions, and the webhook that serves it.
fn conversion_files(
    tree: &mut Tree<'_>,
    before: &Project,
    after: &Project,
    info: &KindInfo,
    vars: &Vars,
    hub: &Hub,
    options: &CreateApiOptions,
) -> Result<(), ScaffoldError> {
    let new = new_conversions(tree, after, info, hub, options)?;
    let path = api_path(after, &info.snake, "conversion.rs");
    if tree.exists(&path) {
        let text = extend_conversion_file(tree, after, info, hub, &path, &new)?;
        tree.set(&path, text);
    } else {
        let mut modules = hub.versions.to_vec();
        modules.sort();
        tree.set(
            &path,
            conversion::file(&info.kind, &hub.storage, &modules, &new.body, &new.tests),
        );
    }
    let was_multi = before
        .versions_of(&info.group, &before.domain, &info.kind)
        .filter(|r| r.api.is_some())
        .count()
        > 1;
    if !was_multi {
        first_conversion_of_kind(tree, before, after, info, vars)?;
    }
    Ok(())
}

/// The fields of one version's API types, read from its file in the tree.
fn version_fields(
    tree: &Tree<'_>,
    after: &Project,
    info: &KindInfo,
    version: &str,
) -> Result<VersionFields, ScaffoldError> {
    let path = api_path(after, &info.snake, &format!("{version}.rs"));
    conversion::parse_version(&path, tree.read(&path)?, &info.kind, version)
}

/// The conversions the new version needs: to the hub, or, when it becomes the hub, from the old
/// hub and through it from the other spokes.
fn new_conversions(
    tree: &Tree<'_>,
    after: &Project,
    info: &KindInfo,
    hub: &Hub,
    options: &CreateApiOptions,
) -> Result<NewConversions, ScaffoldError> {
    let kind = &info.kind;
    let storage = hub.storage.as_str();
    let fields = |version: &str| version_fields(tree, after, info, version);
    let k = conversion::Kind {
        kind,
        group: &info.full_group,
    };
    let new = &options.version;
    let old_hub = hub.storage_before.as_deref().unwrap_or(storage);
    let mut out = NewConversions {
        body: String::new(),
        tests: String::new(),
        strategies_needed: Vec::new(),
    };
    if storage == new {
        // The new version is the hub: the old hub becomes its spoke, the other spokes reach
        // it through the old hub.
        let (code, t) = conversion::spoke_impl(&k, new, &fields(new)?, old_hub, &fields(old_hub)?);
        out.body.push_str(&code);
        out.tests.push_str(&t);
        for spoke in hub
            .versions
            .iter()
            .filter(|v| **v != *new && **v != old_hub)
        {
            out.body
                .push_str(&conversion::chained_impl(kind, new, old_hub, spoke));
            out.tests
                .push_str(&conversion::chained_tests(kind, new, spoke));
            out.strategies_needed.push(spoke.clone());
        }
    } else {
        let (code, t) = conversion::spoke_impl(&k, storage, &fields(storage)?, new, &fields(new)?);
        out.body.push_str(&code);
        out.tests.push_str(&t);
    }
    Ok(out)
}

/// `conversion.rs` of a kind that had conversions already, with the new ones added at its
/// markers.
fn extend_conversion_file(
    tree: &Tree<'_>,
    after: &Project,
    info: &KindInfo,
    hub: &Hub,
    path: &str,
    new: &NewConversions,
) -> Result<String, ScaffoldError> {
    let kind = &info.kind;
    let storage = hub.storage.as_str();
    let old_hub = hub.storage_before.as_deref().unwrap_or(storage);
    // Later conversions: a strategy for each version the tests use that has none yet.
    let text = tree.read(path)?.to_string();
    let mut tests_text = new.tests.clone();
    for v in &new.strategies_needed {
        if !text.contains(&format!("fn {v}_object()"))
            && !tests_text.contains(&format!("fn {v}_object()"))
        {
            let f = version_fields(tree, after, info, v)?;
            tests_text = format!("{}{tests_text}", conversion::object_strategy(kind, v, &f));
        }
    }
    let mut text = markers::insert(
        path,
        &text,
        "conversions",
        &format!("{}\n", new.body.trim_end()),
    )?;
    // The tests of a new spoke may define strategies already there (the hub's).
    let mut deduped = String::new();
    for block in split_items(&tests_text) {
        let name = block
            .lines()
            .find(|l| l.starts_with("fn "))
            .map(|l| l.split('(').next().unwrap_or(l).to_string());
        match name {
            Some(n) if text.contains(&format!("    {n}(")) => {}
            _ => deduped.push_str(&block),
        }
    }
    text = markers::insert(path, &text, "conversion-tests", deduped.trim_end())?;
    // The module list of the `use super::{...}` line.
    let old_use = text
        .lines()
        .find(|l| l.starts_with("use super::{") || l.starts_with("use super::"))
        .map(String::from);
    if let Some(old) = old_use {
        let mut modules = hub.versions.to_vec();
        modules.sort();
        let new_use = format!("use super::{{{}}};", modules.join(", "));
        text = text.replacen(&old, &new_use, 1);
    }
    // The doc line naming the hub.
    Ok(text.replacen(
        &format!("through the hub `{old_hub}` (the storage version)"),
        &format!("through the hub `{storage}` (the storage version)"),
        1,
    ))
}

/// The wiring of a kind's first conversion: the manager serves it, the CRD names the webhook,
/// and (for the project's first conversion) the webhook's Service, certificate and mounts.
fn first_conversion_of_kind(
    tree: &mut Tree<'_>,
    before: &Project,
    after: &Project,
    info: &KindInfo,
    vars: &Vars,
) -> Result<(), ScaffoldError> {
    tree.insert(
        "src/lib.rs",
        "conversions",
        &format!(
            ".conversion({}::{}::converter())",
            names::crate_name(&names::api_package(&after.project_name)),
            info.snake
        ),
    )?;
    // The CRD's conversion stanza and its certificate for kustomize installs.
    let plural = &info.plural;
    tree.create(
        &format!("config/crd/patches/webhook_in_{plural}.yaml"),
        render("crd_webhook_patch.yaml", CRD_WEBHOOK_PATCH, vars)?,
    )?;
    tree.create(
        &format!("config/crd/patches/cainjection_in_{plural}.yaml"),
        render("crd_cainjection_patch.yaml", CRD_CAINJECTION_PATCH, vars)?,
    )?;
    tree.insert(
        "config/crd/kustomization.yaml",
        "crdkustomizewebhookpatch",
        &format!(
            "- path: patches/webhook_in_{plural}.yaml\n- path: patches/cainjection_in_{plural}.yaml"
        ),
    )?;
    let any_conversion_before = before
        .resources
        .iter()
        .any(|r| r.webhooks.as_ref().is_some_and(|w| w.conversion));
    if !any_conversion_before {
        webhook_files(tree, after, vars)?;
    }
    tree.insert(
        "config/manifests/kustomization.yaml",
        "manifests-crd-patches",
        render("manifests_crd_patch.yaml", MANIFESTS_CRD_PATCH, vars)?.trim_end(),
    )?;
    Ok(())
}

/// The project's first conversion webhook: its Service and certificate, the manager's port and
/// certificate mount, and the CSV's install modes (a webhook serves every namespace).
fn webhook_files(tree: &mut Tree<'_>, after: &Project, vars: &Vars) -> Result<(), ScaffoldError> {
    for (path, name, text) in WEBHOOK_FILES {
        tree.create(path, render(name, text, vars)?)?;
    }
    tree.insert(
        "config/default/kustomization.yaml",
        "default-resources",
        "- ../webhook\n- ../certmanager",
    )?;
    tree.insert(
        "config/default/kustomization.yaml",
        "default-replacements",
        DEFAULT_REPLACEMENTS.trim_end(),
    )?;
    tree.insert(
        "config/manager/manager.yaml",
        "manager-ports",
        MANAGER_WEBHOOK_PORT,
    )?;
    tree.insert(
        "config/manager/manager.yaml",
        "manager-container",
        MANAGER_CERT_MOUNT,
    )?;
    tree.insert(
        "config/manager/manager.yaml",
        "manager-pod",
        MANAGER_CERT_VOLUME,
    )?;
    tree.insert(
        "config/manifests/kustomization.yaml",
        "manifests-patches",
        render("manifests_patches.yaml", MANIFESTS_PATCHES, vars)?.trim_end(),
    )?;
    let csv_path = csv::path(&after.project_name);
    let text = csv::all_namespaces_only(&csv_path, tree.read(&csv_path)?)?;
    tree.set(&csv_path, text);
    Ok(())
}

/// Splits generated test code into its top-level items (a `fn` or a `proptest!` block).
fn split_items(text: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    for line in text.split_inclusive('\n') {
        current.push_str(line);
        if line.starts_with('}') {
            items.push(std::mem::take(&mut current));
        }
    }
    if !current.trim().is_empty() {
        items.push(current);
    }
    items
}

/// The controller of a kind: its file, its registration, its permissions and its tests.
fn controller_files(
    tree: &mut Tree<'_>,
    after: &Project,
    info: &KindInfo,
    vars: &Vars,
) -> Result<(), ScaffoldError> {
    let snake = &info.snake;
    let di = info.deploy_image.is_some();
    tree.create(
        &format!("src/controller/{snake}.rs"),
        if di {
            render("controller_deploy_image.rs", CONTROLLER_DEPLOY_IMAGE, vars)?
        } else {
            render("controller_plain.rs", CONTROLLER_PLAIN, vars)?
        },
    )?;
    tree.insert_sorted(
        "src/controller/mod.rs",
        "controller-modules",
        &format!("pub mod {snake};"),
    )?;
    let spawn = if info.namespaced {
        format!(
            "// One {kind} controller per watched namespace.\nfor namespace in ctx.scope.watches() {{\n    controllers.spawn({snake}::run(ctx.clone(), namespace, stop.clone()));\n}}",
            kind = info.kind
        )
    } else {
        format!(
            "// {kind} is cluster-scoped: one controller watches every {kind}.\ncontrollers.spawn({snake}::run(ctx.clone(), None, stop.clone()));",
            kind = info.kind
        )
    };
    tree.insert("src/controller/mod.rs", "controllers", &spawn)?;
    let rows = rbac::controller_rows(&info.full_group, &info.plural, &info.kind, di);
    let mut snippet = String::new();
    let table = tree.read("src/rbac.rs")?.to_string();
    for row in &rows {
        if !row.listed_in(&table) {
            snippet.push_str(&row.to_rust());
        }
    }
    if !snippet.is_empty() {
        tree.insert("src/rbac.rs", "permissions", snippet.trim_end())?;
    }
    for (file, text) in rbac::generated_roles(&rbac::project_rows(after)?)? {
        if file == "role.yaml" {
            tree.set(&format!("config/rbac/{file}"), text);
        }
    }
    tree.create(
        &format!("tests/e2e/{snake}.rs"),
        if di {
            render("e2e_deploy_image.rs", E2E_DEPLOY_IMAGE, vars)?
        } else {
            render("e2e_plain.rs", E2E_PLAIN, vars)?
        },
    )?;
    tree.insert_sorted("tests/e2e.rs", "e2e-modules", &format!("mod {snake};"))?;
    if let Some(d) = &info.deploy_image {
        tree.insert(
            "config/manager/manager.yaml",
            "manager-env",
            &format!(
                "# The image the {} controller runs (its default is in src/controller/{snake}.rs).\n- name: {}_IMAGE\n  value: {}",
                info.kind,
                info.kind.to_ascii_uppercase(),
                d.image
            ),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_oldest_first() {
        let mut v = vec!["v2", "v1", "v1beta1", "v1alpha1", "v2alpha1", "v1beta2"];
        v.sort_by_key(|v| version_key(v));
        assert_eq!(
            v,
            ["v1alpha1", "v1beta1", "v1beta2", "v1", "v2alpha1", "v2"]
        );
    }
}
