//! The I/O of `run bundle` and `run bundle-upgrade`, in steps the command drives:
//! [`prepare_run`] / [`prepare_upgrade`] check everything and build the catalog revision without
//! writing anything; [`create_config_maps`] stores it; [`start_registry_pod`] serves it from the
//! cluster (or the caller serves it itself, at an address OLM can reach); [`complete_run`] /
//! [`complete_upgrade`] point the CatalogSource at it, create the OperatorGroup and
//! Subscription, approve the InstallPlan for the bundle's CSV and wait like `install`.

use super::bundle::BundleToRun;
use super::catalog::{self, RunCatalogError, UpgradedCatalog};
use super::manifests::{
    self, InjectedBundle, RegistryPodParams, RegistryServer, RunCatalogSourceParams, ServedBy,
};
use super::{
    CATALOG_FILE, CHANNEL, CONFIGMAPS_ANNOTATION, INDEX_IMAGE_ANNOTATION, REGISTRY_POD_ANNOTATION,
    REGISTRY_PORT, SERVING_ANNOTATION, catalog_source_name, config_map_resource, created_for,
    pod_resource, selector,
};
use crate::assess::{Baseline, Goal, Verdict};
use crate::client::{Cluster, ClusterError, OlmMissingError};
use crate::install::{Event, Outcome, WaitSettings, outcome_of};
use crate::install_mode::{
    ChooseOperatorGroupError, InstallModeType, OperatorGroupAction, OperatorGroupRequest,
    choose_operator_group,
};
use crate::manifests::{Approval, SubscriptionParams};
use crate::names::{InvalidValueError, check_dns1123_label};
use crate::olm::{
    CatalogSource, Csv, InstallPlan, OperatorGroup, Subscription, catalog_source_resource,
    csv_resource, install_plan_resource, operator_group_resource, subscription_resource,
};
use crate::wait::{WaitOutcome, wait};
use olmkit_catalog::declcfg::DeclarativeConfig;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use thiserror::Error;
use tokio::time::Instant;

/// Name of the OperatorGroup `run bundle` creates when the namespace has none.
pub const OPERATOR_GROUP_NAME: &str = "bundle-tool-run-bundle";
/// CatalogSource annotation: the revision of the catalog (1 for `run bundle`, then one more per
/// `run bundle-upgrade`), part of the names of its ConfigMaps and registry pod.
pub const GENERATION_ANNOTATION: &str = "bundle-tool.olmkit.io/catalog-generation";

/// `--install-mode`: `AllNamespaces`, `OwnNamespace`, `SingleNamespace=NS` or
/// `MultiNamespace=NS,NS...` (operator-sdk's syntax).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallModeRequest {
    /// The mode.
    pub mode: InstallModeType,
    /// Its target namespaces (Single and Multi only).
    pub targets: Vec<String>,
}

/// `--install-mode` does not parse.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("--install-mode {value:?}: {reason}")]
pub struct ParseInstallModeError {
    /// The value.
    pub value: String,
    /// Why.
    pub reason: String,
}

impl FromStr for InstallModeRequest {
    type Err = ParseInstallModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| ParseInstallModeError {
            value: s.into(),
            reason: reason.into(),
        };
        let (mode, targets) = match s.split_once('=') {
            Some((m, t)) => (m.trim(), Some(t)),
            None => (s.trim(), None),
        };
        let mode = InstallModeType::parse(mode).ok_or_else(|| {
            err("expected AllNamespaces, OwnNamespace, SingleNamespace=NS or MultiNamespace=NS,NS...")
        })?;
        let targets: Vec<String> = targets
            .map(|t| {
                t.split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        for t in &targets {
            check_dns1123_label("--install-mode", t).map_err(|e| err(&e.reason))?;
        }
        match (mode, targets.len()) {
            (InstallModeType::AllNamespaces | InstallModeType::OwnNamespace, 0) => {}
            (InstallModeType::AllNamespaces | InstallModeType::OwnNamespace, _) => {
                return Err(err(&format!("{mode} takes no target namespaces")));
            }
            (InstallModeType::SingleNamespace, 1) => {}
            (InstallModeType::SingleNamespace, _) => {
                return Err(err(
                    "SingleNamespace takes exactly one namespace: SingleNamespace=NS",
                ));
            }
            (InstallModeType::MultiNamespace, 0) => {
                return Err(err(
                    "MultiNamespace takes namespaces: MultiNamespace=NS,NS...",
                ));
            }
            (InstallModeType::MultiNamespace, _) => {}
        }
        Ok(InstallModeRequest { mode, targets })
    }
}

impl fmt::Display for InstallModeRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.targets.is_empty() {
            write!(f, "{}", self.mode)
        } else {
            write!(f, "{}={}", self.mode, self.targets.join(","))
        }
    }
}

impl InstallModeRequest {
    /// The OperatorGroup targets this mode means for an install into `namespace`.
    pub fn targets_in(&self, namespace: &str) -> Vec<String> {
        match self.mode {
            InstallModeType::AllNamespaces => Vec::new(),
            InstallModeType::OwnNamespace => vec![namespace.to_string()],
            _ => self.targets.clone(),
        }
    }
}

/// The registry pod's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodOptions {
    /// The index image (`--index-image`).
    pub index_image: String,
    /// Its catalog server (`--registry-server`, else [`RegistryServer::for_image`]).
    pub server: RegistryServer,
    /// `--service-account`.
    pub service_account: Option<String>,
    /// `--pull-secret-name`.
    pub pull_secret: Option<String>,
    /// `--image-pull-policy`.
    pub image_pull_policy: String,
}

/// What `run bundle` was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    /// Install namespace.
    pub namespace: String,
    /// `--install-mode`.
    pub install_mode: Option<InstallModeRequest>,
    /// `--security-context-config` (`restricted` or `legacy`).
    pub security_context_config: Option<String>,
    /// `--pull-secret-name` (also put into the CatalogSource's `spec.secrets`).
    pub pull_secret: Option<String>,
}

/// `run bundle` or `run bundle-upgrade` cannot go ahead.
#[derive(Debug, Error)]
pub enum RunBundleError {
    /// A name is invalid.
    #[error(transparent)]
    Invalid(#[from] InvalidValueError),
    /// OLM is missing.
    #[error(transparent)]
    OlmMissing(#[from] OlmMissingError),
    /// An API call failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The catalog is invalid, too large or unreadable.
    #[error(transparent)]
    Catalog(#[from] RunCatalogError),
    /// The namespace does not exist.
    #[error("namespace {0} does not exist")]
    NoNamespace(String),
    /// `run bundle` already ran for this package here.
    #[error(
        "package {package} already runs in namespace {namespace} from run bundle (Subscription {subscription}, installed: {installed})"
    )]
    AlreadyRunning {
        /// Package.
        package: String,
        /// Namespace.
        namespace: String,
        /// Our Subscription.
        subscription: String,
        /// Its installed CSV.
        installed: String,
    },
    /// The package is installed by something else than `run bundle`.
    #[error(
        "package {package} is already installed in namespace {namespace} by other means: {what}"
    )]
    InstalledOtherwise {
        /// Package.
        package: String,
        /// Namespace.
        namespace: String,
        /// The Subscription or CSV found.
        what: String,
    },
    /// A CSV of the namespace already provides the bundle's CRDs.
    #[error(
        "ClusterServiceVersion {namespace}/{csv} already provides {crds}, which {bundle} provides too; OLM would refuse to install both"
    )]
    ApiConflict {
        /// Namespace.
        namespace: String,
        /// The other CSV.
        csv: String,
        /// The CRDs both provide.
        crds: String,
        /// Our CSV.
        bundle: String,
    },
    /// Objects of an earlier `run bundle` are left without a Subscription.
    #[error(
        "{what} is left from an earlier run bundle of package {package} in namespace {namespace}"
    )]
    Leftover {
        /// Package.
        package: String,
        /// Namespace.
        namespace: String,
        /// The object.
        what: String,
    },
    /// Something else already has the CatalogSource's name.
    #[error("CatalogSource {namespace}/{name} already exists and was not created by run bundle")]
    NameTaken {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// No OperatorGroup fits.
    #[error(transparent)]
    OperatorGroup(Box<ChooseOperatorGroupError>),
    /// `SingleNamespace` naming the install namespace itself.
    #[error("--install-mode SingleNamespace={0} names the install namespace itself")]
    SingleIsOwn(String),
    /// The install mode's targets need another mode than asked.
    #[error("{csv} does not support the {mode} install mode (it supports: {supported})")]
    ModeNotSupported {
        /// CSV.
        csv: String,
        /// The mode asked for.
        mode: InstallModeType,
        /// What it supports.
        supported: String,
    },
    /// `run bundle-upgrade` found nothing `run bundle` installed.
    #[error("no run bundle of package {package} in namespace {namespace}")]
    NotRun {
        /// Package.
        package: String,
        /// Namespace.
        namespace: String,
    },
    /// `run bundle-upgrade` of a package whose Subscription has installed nothing yet.
    #[error(
        "Subscription {namespace}/{subscription} has installed nothing yet (run bundle did not finish)"
    )]
    NothingInstalled {
        /// Namespace.
        namespace: String,
        /// Subscription.
        subscription: String,
    },
    /// `run bundle-upgrade` of the CSV that is installed.
    #[error("{csv} is already installed in namespace {namespace}")]
    AlreadyInstalled {
        /// CSV.
        csv: String,
        /// Namespace.
        namespace: String,
    },
    /// The registry pod did not come up.
    #[error("registry pod {namespace}/{pod} {problem}")]
    RegistryPod {
        /// Namespace.
        namespace: String,
        /// Pod.
        pod: String,
        /// What went wrong.
        problem: String,
        /// Kind of problem (for the hint).
        kind: PodProblem,
    },
}

/// Why a registry pod did not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodProblem {
    /// The image cannot be pulled.
    Image,
    /// The server exits or crashes.
    Crash,
    /// It is not running in time.
    Timeout,
}

impl From<ChooseOperatorGroupError> for RunBundleError {
    fn from(e: ChooseOperatorGroupError) -> Self {
        RunBundleError::OperatorGroup(Box::new(e))
    }
}

impl RunBundleError {
    /// True when the user can fix it (exit 1).
    pub fn is_user_error(&self) -> bool {
        match self {
            RunBundleError::Cluster(c) => c.is_user_error(),
            RunBundleError::OlmMissing(OlmMissingError::Cluster(c)) => c.is_user_error(),
            _ => true,
        }
    }

    /// `hint:` lines, naming only flags `run bundle`, `run bundle-upgrade` and `cleanup` have.
    pub fn hints(&self) -> Vec<String> {
        match self {
            RunBundleError::OlmMissing(m) => vec![match m {
                OlmMissingError::V0(_) => {
                    "install OLM first (operator-sdk olm install, or the install.sh of an OLM release)".to_string()
                }
                other => other.hint(),
            }],
            RunBundleError::Cluster(c) => c.hint().into_iter().collect(),
            RunBundleError::Catalog(RunCatalogError::AlreadyThere { .. }) => vec![
                "give a bundle with another CSV name (a new version), or start over with bundle-tool cleanup and run bundle".into(),
            ],
            RunBundleError::Catalog(RunCatalogError::TooLarge { .. }) => {
                vec!["a bundle must fit into a ConfigMap: shrink its manifests".into()]
            }
            RunBundleError::Catalog(_) => Vec::new(),
            RunBundleError::NoNamespace(ns) => vec![format!(
                "create it first (kubectl create namespace {ns}), or pass another --namespace"
            )],
            RunBundleError::AlreadyRunning {
                package, namespace, ..
            } => vec![format!(
                "upgrade it with bundle-tool run bundle-upgrade BUNDLE --namespace {namespace}, or remove it with bundle-tool cleanup {package} --namespace {namespace}"
            )],
            RunBundleError::InstalledOtherwise { namespace, .. } => vec![format!(
                "run bundle installs only where the package is not installed: remove that install first, or pass another --namespace (not {namespace})"
            )],
            RunBundleError::ApiConflict { .. } => vec![
                "uninstall that operator first, or pass another --namespace".into(),
            ],
            RunBundleError::Leftover {
                package, namespace, ..
            } => vec![format!(
                "remove what is left with bundle-tool cleanup {package} --namespace {namespace}, then run bundle again"
            )],
            RunBundleError::NameTaken { .. } => {
                vec!["delete that CatalogSource, or pass another --namespace".into()]
            }
            RunBundleError::OperatorGroup(e) => vec![operator_group_hint(e)],
            RunBundleError::SingleIsOwn(ns) => vec![format!(
                "pass --install-mode OwnNamespace to watch {ns} itself"
            )],
            RunBundleError::ModeNotSupported { .. } => vec![
                "pass one of the supported modes with --install-mode, or omit it to let bundle-tool choose".into(),
            ],
            RunBundleError::NotRun { .. } => vec![
                "install the first version with bundle-tool run bundle BUNDLE (run bundle-upgrade upgrades only what run bundle installed)".into(),
            ],
            RunBundleError::NothingInstalled {
                namespace,
                subscription,
            } => vec![format!(
                "see why with bundle-tool status --namespace {namespace} (kubectl -n {namespace} get subscription {subscription} -o yaml)"
            )],
            RunBundleError::AlreadyInstalled { .. } => {
                vec!["give the bundle of a newer version".into()]
            }
            RunBundleError::Invalid(_) => Vec::new(),
            RunBundleError::RegistryPod {
                namespace,
                pod,
                kind,
                ..
            } => match kind {
                PodProblem::Image => vec![
                    "check the image (--index-image) and that the cluster can pull it; a private registry needs --pull-secret-name".into(),
                ],
                PodProblem::Crash => vec![
                    format!("see its logs: kubectl -n {namespace} logs {pod}"),
                    "--registry-server opm runs `opm serve` (opm images), catalog-server runs /bin/catalog-server (bundle-tool catalog images)".into(),
                ],
                PodProblem::Timeout => vec![
                    format!("see why: kubectl -n {namespace} describe pod {pod}"),
                    "rerun with a longer --timeout if the cluster is just slow to pull the image".into(),
                ],
            },
        }
    }
}

/// A hint for an OperatorGroup refusal in `run bundle`'s terms (`--install-mode`).
fn operator_group_hint(e: &ChooseOperatorGroupError) -> String {
    match e {
        ChooseOperatorGroupError::NoSupportedMode { .. } => {
            "fix spec.installModes in the CSV (at least one mode must be supported: true)".into()
        }
        ChooseOperatorGroupError::UnsupportedTargets { supported, .. } => format!(
            "pass --install-mode with a mode the CSV supports ({supported}), or omit it to let bundle-tool choose"
        ),
        ChooseOperatorGroupError::TargetsNeeded { .. } => {
            "pass --install-mode SingleNamespace=NS or MultiNamespace=NS,NS... with the namespaces the operator should watch".into()
        }
        ChooseOperatorGroupError::ExistingGroupIncompatible { namespace, .. }
        | ChooseOperatorGroupError::ExistingGroupDiffers { namespace, .. } => format!(
            "pass another --namespace, or an --install-mode matching the OperatorGroup of {namespace}"
        ),
        ChooseOperatorGroupError::TooManyGroups { .. } => e.hint(),
    }
}

/// One catalog revision: its blobs, its files and the ConfigMaps that hold them.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogRevision {
    /// 1 for `run bundle`, one more per `run bundle-upgrade`.
    pub generation: u32,
    /// The catalog.
    pub config: DeclarativeConfig,
    /// `(ConfigMap name, catalog JSON)`, one per ConfigMap.
    pub files: Vec<(String, String)>,
    /// The bundles in it, oldest first.
    pub bundles: Vec<InjectedBundle>,
}

impl CatalogRevision {
    fn new(
        cs_name: &str,
        generation: u32,
        config: DeclarativeConfig,
        bundles: Vec<InjectedBundle>,
    ) -> Result<Self, RunCatalogError> {
        catalog::check_catalog(&config)?;
        let files = catalog::partitions(&config)?
            .into_iter()
            .enumerate()
            .map(|(i, text)| (format!("{cs_name}-{generation}-{i}"), text))
            .collect();
        Ok(Self {
            generation,
            config,
            files,
            bundles,
        })
    }
    /// The ConfigMap names.
    pub fn config_maps(&self) -> Vec<String> {
        self.files.iter().map(|(n, _)| n.clone()).collect()
    }
    /// The registry pod's name for this revision.
    pub fn pod_name(&self, cs_name: &str) -> String {
        format!("{cs_name}-{}", self.generation)
    }
    /// One line about it.
    pub fn describe(&self) -> String {
        let names = catalog::bundle_names(&self.config);
        format!(
            "catalog revision {}: channel {CHANNEL} with {} ({} ConfigMap{})",
            self.generation,
            names.join(" -> "),
            self.files.len(),
            if self.files.len() == 1 { "" } else { "s" }
        )
    }
}

/// A checked `run bundle`: nothing is written yet.
#[derive(Clone, Debug)]
pub struct PreparedRun {
    /// The bundle.
    pub bundle: BundleToRun,
    /// Namespace.
    pub namespace: String,
    /// CatalogSource name.
    pub catalog_source: String,
    /// Subscription name (the package).
    pub subscription: String,
    /// The OperatorGroup to create, if the namespace has none.
    pub operator_group: Option<Value>,
    /// The catalog.
    pub revision: CatalogRevision,
    /// What was decided, for stderr.
    pub notes: Vec<String>,
    /// From the request.
    pub request: RunRequest,
}

async fn check_namespace(cluster: &Cluster, namespace: &str) -> Result<(), RunBundleError> {
    check_dns1123_label("--namespace", namespace)?;
    if !cluster.namespace_exists(namespace).await? {
        return Err(RunBundleError::NoNamespace(namespace.into()));
    }
    Ok(())
}

fn supported_list(b: &BundleToRun) -> String {
    let s: Vec<&str> = crate::install_mode::supported_modes(&b.install_modes)
        .into_iter()
        .map(InstallModeType::as_str)
        .collect();
    if s.is_empty() {
        "none".into()
    } else {
        s.join(", ")
    }
}

/// The OperatorGroup part of a run: none to create when the namespace has one that fits.
fn plan_operator_group(
    req: &RunRequest,
    b: &BundleToRun,
    existing: &[OperatorGroup],
) -> Result<(Option<Value>, String), RunBundleError> {
    let requested = match &req.install_mode {
        Some(m) => {
            if m.mode == InstallModeType::SingleNamespace && m.targets == [req.namespace.clone()] {
                return Err(RunBundleError::SingleIsOwn(req.namespace.clone()));
            }
            let supported = crate::install_mode::supported_modes(&b.install_modes);
            if !supported.contains(&m.mode) {
                return Err(RunBundleError::ModeNotSupported {
                    csv: b.csv_name.clone(),
                    mode: m.mode,
                    supported: supported_list(b),
                });
            }
            Some(m.targets_in(&req.namespace))
        }
        None => None,
    };
    // An existing group is used as it is, never rewritten (it may be the user's, or serve
    // another package): the name only matters when one is created.
    let group_name = if existing.is_empty() {
        OPERATOR_GROUP_NAME
    } else {
        ""
    };
    let choice = choose_operator_group(&OperatorGroupRequest {
        csv: &b.csv_name,
        modes: Some(&b.install_modes),
        namespace: &req.namespace,
        requested: requested.as_deref(),
        group_name,
        existing: Some(existing),
    })?;
    let object = match &choice.action {
        OperatorGroupAction::Create { name, targets } => {
            let mut og = crate::manifests::operator_group(name, &req.namespace, targets)?;
            manifests::mark(&mut og, &b.package);
            Some(og)
        }
        OperatorGroupAction::Reuse { .. } => None,
    };
    Ok((object, format!("OperatorGroup: {}", choice.explanation)))
}

impl From<crate::manifests::SelectorTargetsError> for RunBundleError {
    fn from(e: crate::manifests::SelectorTargetsError) -> Self {
        RunBundleError::Invalid(InvalidValueError {
            what: "--install-mode".into(),
            value: String::new(),
            reason: e.to_string(),
        })
    }
}

/// Checks everything `run bundle` needs and builds the catalog; writes nothing.
pub async fn prepare_run(
    cluster: &Cluster,
    req: &RunRequest,
    bundle: BundleToRun,
) -> Result<PreparedRun, RunBundleError> {
    cluster.check_olm_v0().await?;
    check_namespace(cluster, &req.namespace).await?;
    let ns = req.namespace.as_str();
    let package = bundle.package.clone();
    let subs: Vec<Subscription> = cluster.list(&subscription_resource(), Some(ns)).await?;
    if let Some(s) = subs.iter().find(|s| s.spec.name == package) {
        if created_for(&s.metadata, &package) {
            return Err(RunBundleError::AlreadyRunning {
                package,
                namespace: ns.into(),
                subscription: s.metadata.name.clone(),
                installed: if s.status.installed_csv.is_empty() {
                    "nothing yet".into()
                } else {
                    s.status.installed_csv.clone()
                },
            });
        }
        return Err(RunBundleError::InstalledOtherwise {
            package,
            namespace: ns.into(),
            what: format!(
                "Subscription {} (catalog {}/{}, installed: {})",
                s.metadata.name,
                s.spec.source_namespace,
                s.spec.source,
                if s.status.installed_csv.is_empty() {
                    "nothing yet"
                } else {
                    &s.status.installed_csv
                }
            ),
        });
    }
    let cs_name = catalog_source_name(&package);
    if let Some(cs) = cluster
        .get::<CatalogSource>(&catalog_source_resource(), Some(ns), &cs_name)
        .await?
    {
        if created_for(&cs.metadata, &package) {
            return Err(RunBundleError::Leftover {
                package,
                namespace: ns.into(),
                what: format!("CatalogSource {ns}/{cs_name}"),
            });
        }
        return Err(RunBundleError::NameTaken {
            namespace: ns.into(),
            name: cs_name,
        });
    }
    let csvs: Vec<Csv> = cluster.list(&csv_resource(), Some(ns)).await?;
    check_csvs(&csvs, ns, &bundle)?;
    let groups: Vec<OperatorGroup> = cluster.list(&operator_group_resource(), Some(ns)).await?;
    let (operator_group, og_note) = plan_operator_group(req, &bundle, &groups)?;
    let config = catalog::initial_catalog(&bundle);
    let injected = vec![InjectedBundle {
        source: bundle.source.clone(),
        csv: bundle.csv_name.clone(),
    }];
    let revision = CatalogRevision::new(&cs_name, 1, config, injected)?;
    let notes = vec![
        format!(
            "bundle {} (version {}) of package {package}, from {}",
            bundle.csv_name, bundle.version, bundle.source
        ),
        og_note,
        revision.describe(),
    ];
    Ok(PreparedRun {
        subscription: package.clone(),
        bundle,
        namespace: ns.into(),
        catalog_source: cs_name,
        operator_group,
        revision,
        notes,
        request: req.clone(),
    })
}

/// Refuses a namespace whose CSVs install the bundle already or own one of its CRDs.
fn check_csvs(csvs: &[Csv], ns: &str, bundle: &BundleToRun) -> Result<(), RunBundleError> {
    for c in csvs {
        if c.metadata.name == bundle.csv_name {
            return Err(RunBundleError::InstalledOtherwise {
                package: bundle.package.clone(),
                namespace: ns.into(),
                what: format!(
                    "ClusterServiceVersion {} ({}) exists{}",
                    c.metadata.name,
                    if c.status.phase.is_empty() {
                        "no phase"
                    } else {
                        &c.status.phase
                    },
                    if c.is_copy() {
                        ", copied by OLM from an install for all namespaces"
                    } else {
                        ""
                    }
                ),
            });
        }
        let shared: Vec<&str> = c
            .view()
            .owned_crds()
            .filter_map(|d| d.name())
            .filter(|n| bundle.crds.iter().any(|x| x == n))
            .collect();
        if !shared.is_empty() {
            return Err(RunBundleError::ApiConflict {
                namespace: ns.into(),
                csv: c.metadata.name.clone(),
                crds: shared.join(", "),
                bundle: bundle.csv_name.clone(),
            });
        }
    }
    Ok(())
}

/// Stores a catalog revision in its ConfigMaps. Returns the manifests applied.
pub async fn create_config_maps(
    cluster: &Cluster,
    namespace: &str,
    package: &str,
    revision: &CatalogRevision,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Vec<Value>, RunBundleError> {
    let mut out = Vec::new();
    for (name, text) in &revision.files {
        let cm = manifests::catalog_config_map(name, namespace, package, text);
        cluster.apply(&cm, true).await?;
        on_event(Event::Applied(&format!(
            "ConfigMap {namespace}/{name} ({} bytes of catalog)",
            text.len()
        )));
        out.push(cm);
    }
    Ok(out)
}

/// What a pod's status says about starting.
fn pod_state(pod: &Value) -> (String, Option<(PodProblem, String)>, Option<String>) {
    let status = &pod["status"];
    let phase = status["phase"].as_str().unwrap_or("Pending").to_string();
    let ip = status["podIP"].as_str().filter(|s| !s.is_empty());
    let ready = status["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    });
    let waiting = status["containerStatuses"][0]["state"]["waiting"].clone();
    let reason = waiting["reason"].as_str().unwrap_or("");
    let message = waiting["message"].as_str().unwrap_or("");
    let detail = |r: &str, m: &str| {
        if m.is_empty() {
            r.to_string()
        } else {
            format!("{r}: {m}")
        }
    };
    let problem = match reason {
        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
            Some((PodProblem::Image, detail(reason, message)))
        }
        "CrashLoopBackOff"
        | "CreateContainerError"
        | "CreateContainerConfigError"
        | "RunContainerError" => Some((PodProblem::Crash, detail(reason, message))),
        _ if phase == "Failed" || phase == "Succeeded" => Some((
            PodProblem::Crash,
            format!("ended (phase {phase}): its catalog server exited"),
        )),
        _ => None,
    };
    let line = match (phase.as_str(), ip, ready) {
        ("Running", Some(ip), true) => format!("Running, ready ({ip})"),
        ("Running", _, false) => "Running, not ready yet".to_string(),
        (p, _, _) if !reason.is_empty() => format!("{p} ({reason})"),
        (p, _, _) => p.to_string(),
    };
    let address = match (phase.as_str(), ip, ready) {
        ("Running", Some(ip), true) => Some(ip.to_string()),
        _ => None,
    };
    (line, problem, address)
}

/// `host:port` for a pod IP (IPv6 in brackets).
fn host_port(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{REGISTRY_PORT}")
    } else {
        format!("{ip}:{REGISTRY_PORT}")
    }
}

/// Creates the registry pod of a revision and waits until it is running and ready; returns
/// the pod's name and the address OLM connects to (`podIP:50051`).
#[allow(clippy::too_many_arguments)]
pub async fn start_registry_pod(
    cluster: &Cluster,
    namespace: &str,
    package: &str,
    cs_name: &str,
    revision: &CatalogRevision,
    opts: &PodOptions,
    restricted: bool,
    deadline: Instant,
    poll: Duration,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(String, String), RunBundleError> {
    let name = revision.pod_name(cs_name);
    let pod = manifests::registry_pod(&RegistryPodParams {
        name: name.clone(),
        namespace: namespace.into(),
        package: package.into(),
        image: opts.index_image.clone(),
        server: opts.server,
        config_maps: revision.config_maps(),
        service_account: opts.service_account.clone(),
        pull_secret: opts.pull_secret.clone(),
        image_pull_policy: opts.image_pull_policy.clone(),
        restricted,
    });
    remove_earlier_pod(cluster, namespace, &name, deadline, poll, on_event).await?;
    cluster.apply(&pod, true).await?;
    on_event(Event::Applied(&format!(
        "Pod {namespace}/{name} ({}, {})",
        opts.index_image, opts.server
    )));
    let address =
        wait_for_registry_pod(cluster, namespace, &name, deadline, poll, on_event).await?;
    Ok((name, address))
}

/// Waits until a pod of that name left by an earlier attempt is gone, deleting it first if
/// nobody did.
async fn remove_earlier_pod(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    deadline: Instant,
    poll: Duration,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(), RunBundleError> {
    // A pod of that name left by an earlier attempt (being deleted, or not) must be gone first:
    // a pod's spec cannot change, and its old status would be read as the new pod's.
    let mut waited = false;
    loop {
        let old: Option<Value> = cluster.get(&pod_resource(), Some(namespace), name).await?;
        let Some(old) = old else { break };
        if old["metadata"]["deletionTimestamp"].is_null() {
            cluster
                .delete(&pod_resource(), Some(namespace), name)
                .await?;
            on_event(Event::Note(&format!(
                "deleted Pod {namespace}/{name} (left by an earlier attempt)"
            )));
        } else if !waited {
            on_event(Event::Note(&format!(
                "waiting for Pod {namespace}/{name} of an earlier attempt to go"
            )));
        }
        waited = true;
        let now = Instant::now();
        if now >= deadline {
            return Err(RunBundleError::RegistryPod {
                namespace: namespace.into(),
                pod: name.into(),
                problem: "of an earlier attempt is still being deleted".into(),
                kind: PodProblem::Timeout,
            });
        }
        tokio::time::sleep(poll.min(deadline - now)).await;
    }
    Ok(())
}

/// Waits until the registry pod runs and is ready; returns the address OLM connects to.
async fn wait_for_registry_pod(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    deadline: Instant,
    poll: Duration,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<String, RunBundleError> {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let current: Option<Value> = cluster.get(&pod_resource(), Some(namespace), name).await?;
        let Some(current) = current else {
            return Err(RunBundleError::RegistryPod {
                namespace: namespace.into(),
                pod: name.into(),
                problem: "was deleted while starting".into(),
                kind: PodProblem::Crash,
            });
        };
        let (line, problem, address) = pod_state(&current);
        if line != last {
            on_event(Event::Progress(&format!(
                "[{:6.1}s] Pod {namespace}/{name}: {line}",
                start.elapsed().as_secs_f64()
            )));
            last = line.clone();
        }
        if let Some(ip) = address {
            return Ok(host_port(&ip));
        }
        if let Some((kind, problem)) = problem {
            return Err(RunBundleError::RegistryPod {
                namespace: namespace.into(),
                pod: name.into(),
                problem: format!("does not start: {problem}"),
                kind,
            });
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(RunBundleError::RegistryPod {
                namespace: namespace.into(),
                pod: name.into(),
                problem: format!(
                    "is not serving after {:.0}s (last seen: {line})",
                    start.elapsed().as_secs_f64()
                ),
                kind: PodProblem::Timeout,
            });
        }
        tokio::time::sleep(poll.min(deadline - now)).await;
    }
}

/// Where the catalog of a revision is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hosted {
    /// `host:port` OLM connects to.
    pub address: String,
    /// By whom.
    pub served_by: ServedBy,
}

/// Makes the CatalogSource the owner of a revision's ConfigMaps and pod, so that deleting it
/// by hand removes them too (a merge patch of `metadata.ownerReferences` only).
async fn adopt(
    cluster: &Cluster,
    namespace: &str,
    cs_name: &str,
    cs_uid: &str,
    revision: &CatalogRevision,
    hosted: &Hosted,
) -> Result<(), RunBundleError> {
    if cs_uid.is_empty() {
        return Ok(());
    }
    let mut patch = json!({"metadata": {}});
    manifests::owned_by_catalog_source(&mut patch, cs_name, cs_uid);
    for (name, _) in &revision.files {
        cluster
            .merge_patch(&config_map_resource(), Some(namespace), name, &patch)
            .await?;
    }
    if let ServedBy::RegistryPod { pod, .. } = &hosted.served_by {
        cluster
            .merge_patch(&pod_resource(), Some(namespace), pod, &patch)
            .await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn catalog_source_manifest(
    namespace: &str,
    package: &str,
    cs_name: &str,
    display_name: &str,
    req_security: Option<&str>,
    secrets: Vec<String>,
    revision: &CatalogRevision,
    hosted: &Hosted,
) -> Value {
    let mut cs = manifests::catalog_source(&RunCatalogSourceParams {
        name: cs_name.into(),
        namespace: namespace.into(),
        package: package.into(),
        address: hosted.address.clone(),
        display_name: display_name.into(),
        security_context_config: req_security.map(String::from),
        secrets,
        served_by: hosted.served_by.clone(),
        config_maps: revision.config_maps(),
        bundles: revision.bundles.clone(),
    });
    cs["metadata"]["annotations"][GENERATION_ANNOTATION] = json!(revision.generation.to_string());
    cs
}

/// Approves the InstallPlans OLM makes for `target` and waits until the Subscription has it
/// installed and Succeeded (with `install`'s wait and its settle period).
#[allow(clippy::too_many_arguments)]
async fn wait_and_approve(
    cluster: &Cluster,
    namespace: &str,
    subscription: &str,
    target: &str,
    from: Option<String>,
    mut baseline: Baseline,
    settings: WaitSettings,
    deadline: Instant,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Outcome, ClusterError> {
    let mut approved: BTreeSet<String> = BTreeSet::new();
    // One log across the waits before and after each approval: each state change once, timed
    // from the first wait.
    let start = Instant::now();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut relay = |line: &str| {
        let body = line.split_once("] ").map_or(line, |(_, b)| b);
        let key = body.split_once(": ").map_or(body, |(k, _)| k).to_string();
        if seen.get(&key).map(String::as_str) == Some(body) {
            return;
        }
        seen.insert(key, body.to_string());
        on_event(Event::Progress(&format!(
            "[{:6.1}s] {body}",
            start.elapsed().as_secs_f64()
        )));
    };
    loop {
        let mut s = settings;
        s.timeout = deadline.saturating_duration_since(Instant::now());
        let spec = s.spec(
            namespace,
            subscription,
            Goal::Reach {
                from: from.clone(),
                target: Some(target.into()),
                settle: true,
            },
            baseline.clone(),
            true,
        );
        let w = wait(cluster, &spec, &mut relay).await?;
        let WaitOutcome::Done(Verdict::NeedsApproval { install_plan, csvs }, _) = &w else {
            return Ok(outcome_of(w, settings.timeout));
        };
        if approved.contains(install_plan) {
            return Ok(outcome_of(w, settings.timeout));
        }
        if !csvs.iter().any(|c| c == target) {
            return Ok(Outcome::Failed(crate::assess::Failure {
                summary: format!(
                    "InstallPlan {namespace}/{install_plan} would install {}, not {target}",
                    csvs.join(", ")
                ),
                details: vec![
                    "run bundle approves only the InstallPlan of the bundle it runs".into(),
                ],
                hints: vec![format!(
                    "see what OLM resolved: kubectl -n {namespace} get installplan {install_plan} -o yaml"
                )],
            }));
        }
        cluster
            .merge_patch(
                &install_plan_resource(),
                Some(namespace),
                install_plan,
                &json!({ "spec": { "approved": true } }),
            )
            .await?;
        relay(&format!(
            "[] InstallPlan {namespace}/{install_plan}: approved by bundle-tool ({})",
            csvs.join(", ")
        ));
        approved.insert(install_plan.clone());
        // The approved plan failing is news.
        baseline.install_plan = None;
    }
}

/// The end of `run bundle`: CatalogSource, OperatorGroup, Subscription, approval, wait.
pub async fn complete_run(
    cluster: &Cluster,
    p: &PreparedRun,
    hosted: &Hosted,
    settings: WaitSettings,
    deadline: Instant,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Outcome, RunBundleError> {
    let ns = p.namespace.as_str();
    let package = p.bundle.package.as_str();
    let display = if p.bundle.display_name.is_empty() {
        package.to_string()
    } else {
        p.bundle.display_name.clone()
    };
    let cs = catalog_source_manifest(
        ns,
        package,
        &p.catalog_source,
        &display,
        p.request.security_context_config.as_deref(),
        p.request.pull_secret.iter().cloned().collect(),
        &p.revision,
        hosted,
    );
    let stored = cluster.apply_object(&cs, true).await?;
    on_event(Event::Applied(&format!(
        "CatalogSource {ns}/{} (address {})",
        p.catalog_source, hosted.address
    )));
    let uid = stored["metadata"]["uid"].as_str().unwrap_or("").to_string();
    adopt(cluster, ns, &p.catalog_source, &uid, &p.revision, hosted).await?;
    if let Some(og) = &p.operator_group {
        cluster.apply(og, false).await?;
        on_event(Event::Applied(&crate::manifests::describe(og)));
    }
    let mut sub = crate::manifests::subscription(&SubscriptionParams {
        name: p.subscription.clone(),
        namespace: ns.into(),
        package: package.into(),
        channel: CHANNEL.into(),
        approval: Approval::Manual,
        starting_csv: Some(p.bundle.csv_name.clone()),
        source: p.catalog_source.clone(),
        source_namespace: ns.into(),
    });
    manifests::mark(&mut sub, package);
    cluster.apply(&sub, false).await?;
    on_event(Event::Applied(&format!(
        "Subscription {ns}/{} (channel {CHANNEL}, startingCSV {}, Manual approval: run bundle approves it)",
        p.subscription, p.bundle.csv_name
    )));
    Ok(wait_and_approve(
        cluster,
        ns,
        &p.subscription,
        &p.bundle.csv_name,
        None,
        Baseline::default(),
        settings,
        deadline,
        on_event,
    )
    .await?)
}

/// How the catalog of an earlier run is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreviousServing {
    /// By a registry pod; its options (read back from the pod when it is still there).
    RegistryPod {
        /// The pod (may be gone).
        pod: String,
        /// Its settings.
        options: PodOptions,
        /// Whether it ran with the restricted security context.
        restricted: bool,
    },
    /// By bundle-tool at the CatalogSource's address.
    Local {
        /// `host:port`.
        address: String,
    },
}

/// A checked `run bundle-upgrade`: nothing is written yet.
#[derive(Clone, Debug)]
pub struct PreparedUpgrade {
    /// The new bundle.
    pub bundle: BundleToRun,
    /// Namespace.
    pub namespace: String,
    /// The Subscription as it is.
    pub subscription: Subscription,
    /// The CatalogSource as it is.
    pub catalog_source: CatalogSource,
    /// The installed CSV.
    pub installed: String,
    /// The new catalog (None: it already has the bundle as its head, from an upgrade that did
    /// not finish; only the approval and the wait are left).
    pub revision: Option<CatalogRevision>,
    /// The revision served now.
    pub current_config_maps: Vec<String>,
    /// How it is served.
    pub serving: PreviousServing,
    /// What was decided, for stderr.
    pub notes: Vec<String>,
    /// Where the run-bundle catalog differs from the CSV's own edges.
    pub warnings: Vec<String>,
}

fn pod_options_from(pod: Option<&Value>, image: &str) -> (PodOptions, bool) {
    let c = pod.map(|p| &p["spec"]["containers"][0]);
    let server = match c.and_then(|c| c["command"][0].as_str()) {
        Some(cmd) if cmd == "opm" || cmd.ends_with("/opm") => RegistryServer::Opm,
        Some(_) => RegistryServer::CatalogServer,
        None => RegistryServer::for_image(image),
    };
    let spec = pod.map(|p| &p["spec"]);
    let restricted = spec.is_some_and(|s| s["securityContext"]["seccompProfile"].is_object());
    (
        PodOptions {
            index_image: image.into(),
            server,
            service_account: spec
                .and_then(|s| s["serviceAccountName"].as_str())
                .filter(|s| !s.is_empty() && *s != "default")
                .map(String::from),
            pull_secret: spec
                .and_then(|s| s["imagePullSecrets"][0]["name"].as_str())
                .map(String::from),
            image_pull_policy: c
                .and_then(|c| c["imagePullPolicy"].as_str())
                .unwrap_or("Always")
                .into(),
        },
        restricted,
    )
}

/// Checks everything `run bundle-upgrade` needs and builds the new catalog; writes nothing.
pub async fn prepare_upgrade(
    cluster: &Cluster,
    namespace: &str,
    bundle: BundleToRun,
) -> Result<PreparedUpgrade, RunBundleError> {
    cluster.check_olm_v0().await?;
    check_namespace(cluster, namespace).await?;
    let package = bundle.package.clone();
    let sub = run_subscription(cluster, namespace, &package).await?;
    let installed = sub.status.installed_csv.clone();
    if installed.is_empty() {
        return Err(RunBundleError::NothingInstalled {
            namespace: namespace.into(),
            subscription: sub.metadata.name.clone(),
        });
    }
    if installed == bundle.csv_name {
        return Err(RunBundleError::AlreadyInstalled {
            csv: installed,
            namespace: namespace.into(),
        });
    }
    let cs_ns = if sub.spec.source_namespace.is_empty() {
        namespace
    } else {
        &sub.spec.source_namespace
    };
    let cs: CatalogSource = cluster
        .get(&catalog_source_resource(), Some(cs_ns), &sub.spec.source)
        .await?
        .filter(|c: &CatalogSource| created_for(&c.metadata, &package))
        .ok_or_else(|| RunBundleError::Leftover {
            package: package.clone(),
            namespace: namespace.into(),
            what: format!(
                "Subscription {namespace}/{} without its run-bundle CatalogSource {cs_ns}/{}",
                sub.metadata.name, sub.spec.source
            ),
        })?;
    let ann = &cs.metadata.annotations;
    let current_config_maps: Vec<String> = ann
        .get(CONFIGMAPS_ANNOTATION)
        .map(|s| {
            s.split(',')
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let current = current_catalog(
        cluster,
        namespace,
        cs_ns,
        &cs,
        &package,
        &current_config_maps,
    )
    .await?;
    let serving = previous_serving(cluster, cs_ns, &cs).await?;
    let mut notes = vec![format!(
        "bundle {} (version {}) of package {package}, from {}; installed now: {installed}",
        bundle.csv_name, bundle.version, bundle.source
    )];
    let mut warnings = Vec::new();
    let revision = upgraded_revision(&current, &bundle, &cs, &mut notes, &mut warnings)?;
    Ok(PreparedUpgrade {
        bundle,
        namespace: namespace.into(),
        subscription: sub,
        catalog_source: cs,
        installed,
        revision,
        current_config_maps,
        serving,
        notes,
        warnings,
    })
}

/// The package's Subscription `run bundle` created: the one an upgrade upgrades.
async fn run_subscription(
    cluster: &Cluster,
    namespace: &str,
    package: &str,
) -> Result<Subscription, RunBundleError> {
    let subs: Vec<Subscription> = cluster
        .list(&subscription_resource(), Some(namespace))
        .await?;
    if let Some(sub) = subs
        .iter()
        .find(|s| s.spec.name == package && created_for(&s.metadata, package))
    {
        return Ok(sub.clone());
    }
    if let Some(other) = subs.iter().find(|s| s.spec.name == package) {
        return Err(RunBundleError::InstalledOtherwise {
            package: package.into(),
            namespace: namespace.into(),
            what: format!(
                "Subscription {} (not created by run bundle; catalog {}/{})",
                other.metadata.name, other.spec.source_namespace, other.spec.source
            ),
        });
    }
    Err(RunBundleError::NotRun {
        package: package.into(),
        namespace: namespace.into(),
    })
}

/// The catalog the run-bundle CatalogSource serves now, read back from its ConfigMaps.
async fn current_catalog(
    cluster: &Cluster,
    namespace: &str,
    cs_ns: &str,
    cs: &CatalogSource,
    package: &str,
    config_maps: &[String],
) -> Result<DeclarativeConfig, RunBundleError> {
    let mut parts = Vec::new();
    for name in config_maps {
        let cm: Option<Value> = cluster
            .get(&config_map_resource(), Some(cs_ns), name)
            .await?;
        let text = cm
            .as_ref()
            .and_then(|c| c["data"][CATALOG_FILE].as_str())
            .ok_or_else(|| RunBundleError::Leftover {
                package: package.into(),
                namespace: namespace.into(),
                what: format!(
                    "CatalogSource {cs_ns}/{} without its catalog ConfigMap {name}",
                    cs.metadata.name
                ),
            })?;
        parts.push((name.clone(), text.to_string()));
    }
    Ok(catalog::from_partitions(&parts)?)
}

/// How the CatalogSource serves its catalog now: a local address, or a registry pod (whose
/// options the next pod keeps).
async fn previous_serving(
    cluster: &Cluster,
    cs_ns: &str,
    cs: &CatalogSource,
) -> Result<PreviousServing, RunBundleError> {
    let ann = &cs.metadata.annotations;
    if let Some("local") = ann.get(SERVING_ANNOTATION).map(String::as_str) {
        return Ok(PreviousServing::Local {
            address: cs.spec.address.clone(),
        });
    }
    let pod_name = ann
        .get(REGISTRY_POD_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    let image = ann
        .get(INDEX_IMAGE_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| super::DEFAULT_INDEX_IMAGE.into());
    let pod: Option<Value> = if pod_name.is_empty() {
        None
    } else {
        cluster.get(&pod_resource(), Some(cs_ns), &pod_name).await?
    };
    let (options, restricted) = pod_options_from(pod.as_ref(), &image);
    Ok(PreviousServing::RegistryPod {
        pod: pod_name,
        options,
        restricted,
    })
}

/// The catalog's next revision, with the bundle as the channel's new head; `None` when it is
/// the head already (an earlier upgrade stopped after writing it).
fn upgraded_revision(
    current: &DeclarativeConfig,
    bundle: &BundleToRun,
    cs: &CatalogSource,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<Option<CatalogRevision>, RunBundleError> {
    let ann = &cs.metadata.annotations;
    let generation: u32 = ann
        .get(GENERATION_ANNOTATION)
        .and_then(|g| g.parse().ok())
        .unwrap_or(1);
    let names = catalog::bundle_names(current);
    let heads = current
        .channels
        .iter()
        .find(|c| c.name == CHANNEL)
        .map(olmkit_catalog::model::channel_heads)
        .unwrap_or_default();
    if names.contains(&bundle.csv_name) && heads == [bundle.csv_name.as_str()] {
        notes.push(format!(
            "{} is already the head of the run-bundle catalog (an earlier run bundle-upgrade did not finish): waiting for OLM to upgrade to it",
            bundle.csv_name
        ));
        return Ok(None);
    }
    let UpgradedCatalog {
        config,
        entry,
        from,
        notes: more,
        warnings: w,
    } = catalog::add_upgrade(current, bundle)?;
    notes.extend(more);
    warnings.extend(w);
    let mut edge = format!("{} replaces {}", entry.name, entry.replaces);
    if !entry.skips.is_empty() {
        edge.push_str(&format!(", skips {}", entry.skips.join(", ")));
    }
    if !entry.skip_range.is_empty() {
        edge.push_str(&format!(", skipRange {:?}", entry.skip_range));
    }
    notes.push(format!("upgrade edge: {edge} (from {from})"));
    let mut injected = super::manifests::injected_bundles(ann);
    injected.push(InjectedBundle {
        source: bundle.source.clone(),
        csv: bundle.csv_name.clone(),
    });
    let rev = CatalogRevision::new(&cs.metadata.name, generation + 1, config, injected)?;
    notes.push(rev.describe());
    Ok(Some(rev))
}

/// Any object, by its metadata.
#[derive(Clone, Debug, Default, serde::Deserialize)]
struct Named {
    #[serde(default)]
    metadata: crate::olm::Meta,
}

/// Deletes what earlier attempts left of `package`'s catalog: pods and ConfigMaps of the
/// package not in `keep`. Returns what was deleted (`Kind ns/name`).
pub async fn remove_stale(
    cluster: &Cluster,
    namespace: &str,
    package: &str,
    keep: &[String],
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Vec<String>, RunBundleError> {
    let mut deleted = Vec::new();
    for ar in [pod_resource(), config_map_resource()] {
        let objs: Vec<Named> = cluster
            .list_selected(&ar, Some(namespace), &selector(package))
            .await?;
        for o in objs {
            if !created_for(&o.metadata, package) || keep.contains(&o.metadata.name) {
                continue;
            }
            if cluster
                .delete(&ar, Some(namespace), &o.metadata.name)
                .await?
            {
                let what = format!("{} {namespace}/{}", ar.kind, o.metadata.name);
                on_event(Event::Note(&format!("deleted {what}")));
                deleted.push(what);
            }
        }
    }
    Ok(deleted)
}

/// The end of `run bundle-upgrade`: the CatalogSource moves to the new revision, the old one
/// is deleted, and the InstallPlan for the new CSV is approved and waited for.
pub async fn complete_upgrade(
    cluster: &Cluster,
    p: &PreparedUpgrade,
    hosted: Option<&Hosted>,
    settings: WaitSettings,
    deadline: Instant,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Outcome, RunBundleError> {
    let ns = p.namespace.as_str();
    let package = p.bundle.package.as_str();
    let cs_name = p.catalog_source.metadata.name.clone();
    let cs_ns = if p.catalog_source.metadata.namespace.is_empty() {
        ns.to_string()
    } else {
        p.catalog_source.metadata.namespace.clone()
    };
    if let (Some(rev), Some(hosted)) = (&p.revision, hosted) {
        let display = if p.catalog_source.spec.display_name.is_empty() {
            package.to_string()
        } else {
            p.catalog_source.spec.display_name.clone()
        };
        let stored_cs: Option<Value> = cluster
            .get(&catalog_source_resource(), Some(&cs_ns), &cs_name)
            .await?;
        let security = stored_cs
            .as_ref()
            .and_then(|c| c["spec"]["grpcPodConfig"]["securityContextConfig"].as_str())
            .map(String::from);
        let secrets: Vec<String> = stored_cs
            .as_ref()
            .and_then(|c| c["spec"]["secrets"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s.as_str().map(String::from))
            .collect();
        let cs = catalog_source_manifest(
            &cs_ns,
            package,
            &cs_name,
            &display,
            security.as_deref(),
            secrets,
            rev,
            hosted,
        );
        let stored = cluster.apply_object(&cs, true).await?;
        on_event(Event::Applied(&format!(
            "CatalogSource {cs_ns}/{cs_name} (address {}, catalog revision {})",
            hosted.address, rev.generation
        )));
        let uid = stored["metadata"]["uid"].as_str().unwrap_or("").to_string();
        adopt(cluster, &cs_ns, &cs_name, &uid, rev, hosted).await?;
        let mut keep = rev.config_maps();
        if let ServedBy::RegistryPod { pod, .. } = &hosted.served_by {
            keep.push(pod.clone());
        }
        remove_stale(cluster, &cs_ns, package, &keep, on_event).await?;
    }
    let from = Some(p.installed.clone());
    Ok(wait_and_approve(
        cluster,
        ns,
        &p.subscription.metadata.name,
        &p.bundle.csv_name,
        from,
        Baseline::of(Some(&p.subscription)),
        settings,
        deadline,
        on_event,
    )
    .await?)
}

/// The InstallPlans OLM made for a Subscription (owned by it).
pub async fn install_plans_of(
    cluster: &Cluster,
    sub: &Subscription,
) -> Result<Vec<InstallPlan>, ClusterError> {
    let ips: Vec<InstallPlan> = cluster
        .list(&install_plan_resource(), Some(&sub.metadata.namespace))
        .await?;
    Ok(ips
        .into_iter()
        .filter(|ip| {
            ip.metadata.owner_references.iter().any(|o| {
                o.kind == "Subscription"
                    && (o.uid == sub.metadata.uid || o.name == sub.metadata.name)
            })
        })
        .collect())
}

/// A summary of what a run created, for `--output json`.
pub fn created_objects(p: &PreparedRun, hosted: &Hosted) -> Vec<BTreeMap<&'static str, String>> {
    let ns = &p.namespace;
    let mut out = Vec::new();
    let mut add = |kind: &str, name: &str| {
        let mut m = BTreeMap::new();
        m.insert("kind", kind.to_string());
        m.insert("namespace", ns.clone());
        m.insert("name", name.to_string());
        out.push(m);
    };
    for cm in p.revision.config_maps() {
        add("ConfigMap", &cm);
    }
    if let ServedBy::RegistryPod { pod, .. } = &hosted.served_by {
        add("Pod", pod);
    }
    add("CatalogSource", &p.catalog_source);
    if let Some(og) = &p.operator_group {
        add(
            "OperatorGroup",
            og["metadata"]["name"].as_str().unwrap_or(""),
        );
    }
    add("Subscription", &p.subscription);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_modes_parse_like_operator_sdk() {
        let m: InstallModeRequest = "SingleNamespace=watched".parse().unwrap();
        assert_eq!(m.mode, InstallModeType::SingleNamespace);
        assert_eq!(m.targets_in("ops"), vec!["watched"]);
        let m: InstallModeRequest = "OwnNamespace".parse().unwrap();
        assert_eq!(m.targets_in("ops"), vec!["ops"]);
        let m: InstallModeRequest = "AllNamespaces".parse().unwrap();
        assert!(m.targets_in("ops").is_empty());
        let m: InstallModeRequest = "MultiNamespace=a,b".parse().unwrap();
        assert_eq!(m.to_string(), "MultiNamespace=a,b");
        for bad in [
            "Everything",
            "SingleNamespace",
            "SingleNamespace=a,b",
            "OwnNamespace=x",
            "MultiNamespace=",
            "SingleNamespace=Not_A_Name",
        ] {
            assert!(bad.parse::<InstallModeRequest>().is_err(), "{bad}");
        }
    }

    #[test]
    fn pod_states_tell_running_from_failing() {
        let running = json!({"status": {"phase": "Running", "podIP": "10.0.0.7",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        let (line, problem, address) = pod_state(&running);
        assert_eq!(line, "Running, ready (10.0.0.7)");
        assert!(problem.is_none());
        assert_eq!(address.as_deref(), Some("10.0.0.7"));
        let pulling = json!({"status": {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {
            "reason": "ImagePullBackOff", "message": "Back-off pulling image \"x\""}}}]}});
        let (line, problem, _) = pod_state(&pulling);
        assert_eq!(line, "Pending (ImagePullBackOff)");
        assert_eq!(problem.unwrap().0, PodProblem::Image);
        assert_eq!(host_port("fd00::7"), "[fd00::7]:50051");
    }

    #[test]
    fn upgrades_keep_the_registry_pod_settings() {
        let pod = json!({"spec": {"serviceAccountName": "reg", "imagePullSecrets": [{"name": "pull"}],
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"command": ["opm", "serve"], "imagePullPolicy": "IfNotPresent"}]}});
        let (o, restricted) = pod_options_from(Some(&pod), "example.com/custom:v1");
        assert_eq!(o.server, RegistryServer::Opm);
        assert_eq!(o.service_account.as_deref(), Some("reg"));
        assert_eq!(o.pull_secret.as_deref(), Some("pull"));
        assert_eq!(o.image_pull_policy, "IfNotPresent");
        assert!(restricted);
        let (o, restricted) = pod_options_from(None, "example.com/custom:v1");
        assert_eq!(o.server, RegistryServer::CatalogServer);
        assert!(!restricted);
    }
}
