//! `install` for OLM v0: plan the CatalogSource, OperatorGroup and Subscription from the user's
//! flags and the local catalog (pure, [`plan_install`]), then apply them and wait for the CSV
//! ([`install`]).
//!
//! Planning settles everything that can be known before touching the cluster: names are valid,
//! the channel exists, the starting CSV is in it, which CSV OLM will install (the channel head or
//! the starting CSV, then the automatic hops to the head), and which OperatorGroup the CSV's
//! install modes allow, so a mistake is reported with nothing applied.

use crate::assess::{Baseline, Failure, Goal, Verdict, timeout_hints};
use crate::catalog_view::{CsvFacts, PackageView, UnknownChannelError};
use crate::client::{Cluster, ClusterError, OlmMissingError};
use crate::install_mode::{
    ChooseOperatorGroupError, OperatorGroupAction, OperatorGroupMode, OperatorGroupRequest,
    choose_operator_group, well_known_operator_group,
};
use crate::manifests::{
    self, Approval, CatalogSourceParams, SelectorTargetsError, SubscriptionParams,
};
use crate::names::{
    InvalidValueError, check_dns1123_label, check_dns1123_subdomain, check_image_ref,
    parse_go_duration,
};
use crate::olm::{OperatorGroup, Subscription, operator_group_resource, subscription_resource};
use crate::wait::{WaitOutcome, WaitSpec, wait};

impl PlannedInstall {
    /// The CSVs an Automatic install only passes through on its way to the channel head (the
    /// starting CSV and the hops before the last), from the local catalog: an install is not
    /// done at one of them. Empty for Manual approval (each hop is its own approval) and
    /// without a catalog.
    pub fn passes(&self) -> Vec<String> {
        match (&self.expected, self.approval) {
            (Some(e), Approval::Automatic) if !e.then.is_empty() => {
                let mut v = vec![e.first_csv.clone()];
                v.extend(e.then[..e.then.len() - 1].iter().cloned());
                v
            }
            _ => Vec::new(),
        }
    }
}
use serde_json::Value;
use std::time::Duration;
use thiserror::Error;

/// What the user asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallRequest {
    /// Catalog image.
    pub catalog_image: String,
    /// Package.
    pub package: String,
    /// Channel (None: the package's default channel from the local catalog).
    pub channel: Option<String>,
    /// Install namespace.
    pub namespace: String,
    /// InstallPlan approval.
    pub approval: Approval,
    /// `spec.startingCSV`.
    pub starting_csv: Option<String>,
    /// `--target-namespaces`.
    pub target_namespaces: Option<Vec<String>>,
    /// CatalogSource name (default `<package>-catalog`).
    pub catalog_source_name: Option<String>,
    /// Subscription name (default: the package).
    pub subscription_name: Option<String>,
    /// OperatorGroup name for one we create (default `<package>`).
    pub operator_group_name: Option<String>,
    /// CatalogSource display name.
    pub display_name: Option<String>,
    /// CatalogSource publisher.
    pub publisher: Option<String>,
    /// Catalog poll interval (Go duration).
    pub poll_interval: String,
    /// `grpcPodConfig.securityContextConfig`.
    pub security_context_config: Option<String>,
    /// Whether to create an OperatorGroup.
    pub operator_group_mode: OperatorGroupMode,
}

/// What OLM is expected to install, from the local catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedInstall {
    /// The first CSV (starting CSV or channel head).
    pub first_csv: String,
    /// Where automatic upgrades then take it (empty when the first CSV is the head).
    pub then: Vec<String>,
}

/// A planned install.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedInstall {
    /// Namespace.
    pub namespace: String,
    /// Subscription name.
    pub subscription: String,
    /// Channel followed.
    pub channel: String,
    /// Approval.
    pub approval: Approval,
    /// Objects to apply, in order. The Namespace comes first; live installs skip it when the
    /// namespace exists.
    pub objects: Vec<Value>,
    /// Explanations for stderr (OperatorGroup choice, what OLM will install).
    pub notes: Vec<String>,
    /// From the local catalog, when given.
    pub expected: Option<ExpectedInstall>,
}

/// An install cannot be planned.
#[derive(Debug, Error)]
pub enum PlanInstallError {
    /// A flag has a bad value.
    #[error(transparent)]
    Invalid(#[from] InvalidValueError),
    /// The channel is not in the package.
    #[error(transparent)]
    UnknownChannel(#[from] UnknownChannelError),
    /// No channel given and none to default to.
    #[error("no --channel given and {0}")]
    NoChannel(String),
    /// The starting CSV is not in the channel.
    #[error(
        "--starting-csv {csv} is not in channel {channel} of package {package} (entries: {entries})"
    )]
    StartingCsvNotInChannel {
        /// CSV.
        csv: String,
        /// Channel.
        channel: String,
        /// Package.
        package: String,
        /// Entries of the channel.
        entries: String,
    },
    /// The channel has no single head, so OLM cannot pick what to install.
    #[error(
        "channel {channel} of package {package} has {heads} heads; OLM cannot choose what to install (run bundle-tool catalog validate)"
    )]
    NoSingleHead {
        /// Channel.
        channel: String,
        /// Package.
        package: String,
        /// How many heads.
        heads: usize,
    },
    /// No OperatorGroup fits.
    #[error(transparent)]
    OperatorGroup(Box<ChooseOperatorGroupError>),
    /// The existing OperatorGroup cannot be reproduced.
    #[error(transparent)]
    Selector(#[from] SelectorTargetsError),
    /// `--operator-group-mode skip` but the namespace has no OperatorGroup.
    #[error(
        "namespace {namespace} has no OperatorGroup and --operator-group-mode skip forbids creating one; OLM installs nothing without one"
    )]
    NoOperatorGroup {
        /// Namespace.
        namespace: String,
    },
    /// The Subscription exists with another package or channel: re-applying would switch
    /// channels without the checks of `upgrade`.
    #[error(
        "Subscription {namespace}/{name} already exists for package {package}, channel {channel}"
    )]
    SubscriptionDiffers {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Its package.
        package: String,
        /// Its channel.
        channel: String,
        /// True when only the channel differs.
        same_package: bool,
    },
}

impl From<ChooseOperatorGroupError> for PlanInstallError {
    fn from(e: ChooseOperatorGroupError) -> Self {
        PlanInstallError::OperatorGroup(Box::new(e))
    }
}

impl PlanInstallError {
    /// A `hint:` line.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Invalid(_) => None,
            Self::UnknownChannel(e) => Some(format!("use one of: {}", e.available)),
            Self::NoChannel(_) => Some("pass --channel, or --catalog-dir with the catalog that defines the package's default channel".into()),
            Self::StartingCsvNotInChannel { .. } => Some("pick a bundle of that channel, or omit --starting-csv to install the channel head".into()),
            Self::NoSingleHead { .. } => Some("fix the channel so exactly one bundle is not replaced or skipped by another".into()),
            Self::OperatorGroup(e) => Some(e.hint()),
            Self::NoOperatorGroup { .. } => {
                Some("drop --operator-group-mode skip to let bundle-tool create one".into())
            }
            Self::Selector(_) => None,
            Self::SubscriptionDiffers {
                namespace,
                same_package: true,
                name,
                ..
            } => Some(format!(
                "switch channels with bundle-tool upgrade --channel <channel> --subscription {name} --namespace {namespace}, which checks the upgrade path first"
            )),
            Self::SubscriptionDiffers { .. } => {
                Some("choose another --subscription name or --namespace".into())
            }
        }
    }
}

/// The names an install creates (Subscription, CatalogSource, OperatorGroup), after checking
/// every name and value of the request the API server would refuse.
fn checked_names(req: &InstallRequest) -> Result<(String, String, String), PlanInstallError> {
    check_dns1123_label("--namespace", &req.namespace)?;
    check_dns1123_subdomain("--package", &req.package)?;
    check_image_ref("--catalog-image", &req.catalog_image)?;
    parse_go_duration("--poll-interval", &req.poll_interval)?;
    let sub_name = req
        .subscription_name
        .clone()
        .unwrap_or_else(|| req.package.clone());
    check_dns1123_subdomain("--subscription", &sub_name)?;
    let cs_name = req
        .catalog_source_name
        .clone()
        .unwrap_or_else(|| format!("{}-catalog", req.package));
    check_dns1123_subdomain("--catalog-source", &cs_name)?;
    let og_name = req
        .operator_group_name
        .clone()
        .unwrap_or_else(|| req.package.clone());
    check_dns1123_subdomain("--operator-group", &og_name)?;
    if let Some(csv) = &req.starting_csv {
        check_dns1123_subdomain("--starting-csv", csv)?;
    }
    if let Some(ts) = &req.target_namespaces {
        for t in ts.iter().filter(|t| !t.trim().is_empty()) {
            check_dns1123_label("--target-namespaces", t.trim())?;
        }
    }
    Ok((sub_name, cs_name, og_name))
}

/// The channel to subscribe to: `--channel` (checked against the catalog), else the
/// package's default channel in the catalog.
fn choose_channel(
    req: &InstallRequest,
    catalog: Option<&PackageView>,
    notes: &mut Vec<String>,
) -> Result<String, PlanInstallError> {
    let channel = match (&req.channel, catalog) {
        (Some(c), Some(cat)) => {
            cat.channel(c)?;
            c.clone()
        }
        (Some(c), None) => c.clone(),
        (None, Some(cat)) if !cat.default_channel.is_empty() => {
            notes.push(format!(
                "channel: {} (the default channel of package {})",
                cat.default_channel, cat.name
            ));
            cat.default_channel.clone()
        }
        (None, Some(cat)) => {
            return Err(PlanInstallError::NoChannel(format!(
                "package {} has no default channel in {}",
                cat.name,
                cat.root.display()
            )));
        }
        (None, None) => {
            return Err(PlanInstallError::NoChannel(
                "there is no --catalog-dir to read the default channel from".into(),
            ));
        }
    };
    check_dns1123_subdomain("--channel", &channel)?;
    Ok(channel)
}

/// What OLM will install from `channel` of the catalog (the starting CSV or the channel head,
/// then the upgrades that follow), said in a note; and the first CSV's facts.
fn expected_install(
    req: &InstallRequest,
    cat: &PackageView,
    channel: &str,
    notes: &mut Vec<String>,
) -> Result<(ExpectedInstall, Option<CsvFacts>), PlanInstallError> {
    let channel = channel.to_string();
    let ch = cat.channel(&channel)?;
    let first = match &req.starting_csv {
        Some(csv) => {
            if !ch.entries.iter().any(|e| &e.name == csv) {
                return Err(PlanInstallError::StartingCsvNotInChannel {
                    csv: csv.clone(),
                    channel: channel.clone(),
                    package: cat.name.clone(),
                    entries: ch
                        .entries
                        .iter()
                        .map(|e| e.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            csv.clone()
        }
        None => match cat.head(&channel) {
            Some(h) => h,
            None => {
                let heads = cat
                    .graph
                    .as_ref()
                    .and_then(|g| g.channel(&channel))
                    .map(|c| c.heads.len())
                    .unwrap_or(0);
                return Err(PlanInstallError::NoSingleHead {
                    channel: channel.clone(),
                    package: cat.name.clone(),
                    heads,
                });
            }
        },
    };
    let then: Vec<String> = match cat.upgrade_path(&channel, &first) {
        Ok(p) => p.steps.iter().map(|s| s.to.clone()).collect(),
        Err(_) => Vec::new(),
    };
    let version = cat
        .version(&first)
        .map(|v| format!(" (version {v})"))
        .unwrap_or_default();
    notes.push(if then.is_empty() {
        format!("OLM will install {first}{version}, the head of channel {channel}")
    } else if req.approval == Approval::Automatic {
        format!(
            "OLM will install {first}{version}, then upgrade automatically: {}",
            then.join(" -> ")
        )
    } else {
        format!(
            "OLM will install {first}{version}; each later upgrade ({}) waits for an approval",
            then.join(" -> ")
        )
    });
    let csv_facts = cat.csv_facts(&first);
    Ok((
        ExpectedInstall {
            first_csv: first,
            then,
        },
        csv_facts,
    ))
}

/// Plans an install. `existing_groups` are the OperatorGroups of the namespace (None offline).
pub fn plan_install(
    req: &InstallRequest,
    catalog: Option<&PackageView>,
    existing_groups: Option<&[OperatorGroup]>,
) -> Result<PlannedInstall, PlanInstallError> {
    let (sub_name, cs_name, og_name) = checked_names(req)?;
    let mut notes = Vec::new();
    let channel = choose_channel(req, catalog, &mut notes)?;
    let (expected, csv_facts) = match catalog {
        Some(cat) => {
            let (e, facts) = expected_install(req, cat, &channel, &mut notes)?;
            (Some(e), facts)
        }
        None => (None, None),
    };

    let csv_label = expected
        .as_ref()
        .map(|e| e.first_csv.clone())
        .unwrap_or_else(|| format!("the CSV of {}", req.package));
    let modes = csv_facts.as_ref().and_then(|f| f.install_modes.clone());
    let (og_object, og_notes) =
        operator_group_part(req, &csv_label, modes.as_deref(), &og_name, existing_groups)?;
    for (i, n) in og_notes.into_iter().enumerate() {
        notes.insert(i, n);
    }

    let display_name = req.display_name.clone().unwrap_or_else(|| {
        match csv_facts.as_ref().map(|f| f.display_name.as_str()) {
            Some(d) if !d.is_empty() => format!("{d} catalog"),
            _ => format!("{} catalog", req.package),
        }
    });
    let publisher = req.publisher.clone().unwrap_or_else(|| {
        match csv_facts.as_ref().map(|f| f.provider.as_str()) {
            Some(p) if !p.is_empty() => p.to_string(),
            _ => "bundle-tool".to_string(),
        }
    });
    if crate::names::is_digest_ref(&req.catalog_image) {
        notes.push(
            "the catalog image is pinned by digest, so the CatalogSource does not poll for updates"
                .into(),
        );
    }

    let mut objects = vec![manifests::namespace(&req.namespace)];
    objects.push(manifests::catalog_source(&CatalogSourceParams {
        name: cs_name.clone(),
        namespace: req.namespace.clone(),
        image: req.catalog_image.clone(),
        display_name,
        publisher,
        poll_interval: Some(req.poll_interval.clone()),
        security_context_config: req.security_context_config.clone(),
    }));
    objects.extend(og_object);
    objects.push(manifests::subscription(&SubscriptionParams {
        name: sub_name.clone(),
        namespace: req.namespace.clone(),
        package: req.package.clone(),
        channel: channel.clone(),
        approval: req.approval,
        starting_csv: req.starting_csv.clone(),
        source: cs_name,
        source_namespace: req.namespace.clone(),
    }));
    Ok(PlannedInstall {
        namespace: req.namespace.clone(),
        subscription: sub_name,
        channel,
        approval: req.approval,
        objects,
        notes,
        expected,
    })
}

/// The OperatorGroup of a planned install (None when an existing one governs it) and the notes
/// that explain the decision. Printing knows nothing of the cluster: a well-known namespace is
/// assumed to have its standard OperatorGroup ([`well_known_operator_group`]), which the choice
/// then reuses or refuses like a live one, unless `--operator-group-mode` says otherwise.
fn operator_group_part(
    req: &InstallRequest,
    csv_label: &str,
    modes: Option<&[crate::olm::InstallMode]>,
    og_name: &str,
    existing_groups: Option<&[OperatorGroup]>,
) -> Result<(Option<Value>, Vec<String>), PlanInstallError> {
    let well_known = match (existing_groups, req.operator_group_mode) {
        (None, OperatorGroupMode::Auto) => well_known_operator_group(&req.namespace),
        _ => None,
    };
    let assumed = well_known.as_ref().map(|(g, _)| std::slice::from_ref(g));
    let choice = choose_operator_group(&OperatorGroupRequest {
        csv: csv_label,
        modes,
        namespace: &req.namespace,
        requested: req.target_namespaces.as_deref(),
        group_name: og_name,
        existing: existing_groups.or(assumed),
    })?;
    let skip = req.operator_group_mode == OperatorGroupMode::Skip;
    if skip && existing_groups.is_some_and(<[OperatorGroup]>::is_empty) {
        return Err(PlanInstallError::NoOperatorGroup {
            namespace: req.namespace.clone(),
        });
    }
    let ns = &req.namespace;
    let notes = if let Some((g, origin)) = &well_known {
        // The choice reused the assumed group (or refused above); say it is an assumption.
        let mode = choice
            .mode
            .map(|m| format!(" ({m} install mode)"))
            .unwrap_or_default();
        let g = &g.metadata.name;
        vec![
            format!(
                "OperatorGroup: none in the manifests: in {origin}, namespace {ns} already has OperatorGroup {g} (all namespaces), which {csv_label} runs under{mode}; OLM installs nothing in a namespace with two"
            ),
            format!(
                "note: pass --operator-group-mode create to include one anyway (a cluster whose namespace {ns} has no {g})"
            ),
        ]
    } else if skip && existing_groups.is_none() {
        vec![
            format!("OperatorGroup: {}", choice.explanation),
            format!(
                "note: no OperatorGroup in the manifests (--operator-group-mode skip): namespace {ns} must have exactly one that fits"
            ),
        ]
    } else {
        vec![format!("OperatorGroup: {}", choice.explanation)]
    };
    let object = match &choice.action {
        OperatorGroupAction::Create { name, targets } if !(skip && existing_groups.is_none()) => {
            Some(manifests::operator_group(name, ns, targets)?)
        }
        _ => None,
    };
    Ok((object, notes))
}

/// How long to wait and how often to look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitSettings {
    /// Deadline.
    pub timeout: Duration,
    /// Poll interval.
    pub poll_interval: Duration,
    /// How long a success must hold (OLM may move a Succeeded CSV back to Pending).
    pub settle: Duration,
    /// How long a resolution blocked by an error (an unreachable catalog) is waited on.
    pub resolution_grace: Duration,
}

impl WaitSettings {
    /// The wait of one command.
    pub fn spec(
        &self,
        namespace: &str,
        subscription: &str,
        goal: Goal,
        baseline: Baseline,
        stop_at_approval: bool,
    ) -> WaitSpec {
        WaitSpec {
            namespace: namespace.into(),
            subscription: subscription.into(),
            goal,
            baseline,
            stop_at_approval,
            timeout: self.timeout,
            poll_interval: self.poll_interval,
            settle: self.settle,
            resolution_grace: self.resolution_grace,
        }
    }
}

/// Something to tell the user while a command runs (all of it goes to stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// An explanation of a decision.
    Note(&'a str),
    /// An object was applied.
    Applied(&'a str),
    /// A state change seen while waiting.
    Progress(&'a str),
}

/// How a live command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The CSV is installed and Succeeded.
    Installed {
        /// CSV.
        csv: String,
    },
    /// Nothing to do: the Subscription stays where it was.
    Unchanged {
        /// CSV.
        csv: String,
    },
    /// An InstallPlan waits for approval.
    AwaitingApproval {
        /// The InstallPlan.
        install_plan: String,
        /// CSVs it installs.
        csvs: Vec<String>,
    },
    /// OLM failed.
    Failed(Failure),
    /// The deadline passed.
    TimedOut {
        /// How long we waited.
        after: Duration,
        /// What was last seen, one line per object.
        last_seen: Vec<String>,
        /// What to look at.
        hints: Vec<String>,
    },
}

/// A live command could not run to a verdict.
#[derive(Debug, Error)]
pub enum InstallError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanInstallError),
    /// OLM is missing.
    #[error(transparent)]
    OlmMissing(#[from] OlmMissingError),
    /// An API call failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

/// Turns a wait result into an outcome.
pub fn outcome_of(w: WaitOutcome, timeout: Duration) -> Outcome {
    match w {
        WaitOutcome::Done(Verdict::Succeeded { csv }, _) => Outcome::Installed { csv },
        WaitOutcome::Done(Verdict::NoChange { csv }, _) => Outcome::Unchanged { csv },
        WaitOutcome::Done(Verdict::NeedsApproval { install_plan, csvs }, _) => {
            Outcome::AwaitingApproval { install_plan, csvs }
        }
        WaitOutcome::Done(Verdict::Failed(f) | Verdict::Blocked(f), _) => Outcome::Failed(f),
        WaitOutcome::Done(Verdict::Pending, snap) | WaitOutcome::TimedOut(snap) => {
            Outcome::TimedOut {
                after: timeout,
                last_seen: crate::assess::describe(&snap)
                    .into_iter()
                    .map(|(_, l)| l)
                    .collect(),
                hints: timeout_hints(&snap),
            }
        }
    }
}

/// Applies a planned install and waits for OLM. OLM's presence is checked first; the
/// namespace is created only when missing.
pub async fn install(
    cluster: &Cluster,
    req: &InstallRequest,
    catalog: Option<&PackageView>,
    settings: WaitSettings,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(PlannedInstall, Outcome), InstallError> {
    cluster.check_olm_v0().await?;
    let namespace_exists = cluster.namespace_exists(&req.namespace).await?;
    let existing: Vec<OperatorGroup> = if namespace_exists {
        cluster
            .list(&operator_group_resource(), Some(&req.namespace))
            .await?
    } else {
        Vec::new()
    };
    let plan = plan_install(req, catalog, Some(&existing))?;
    let before: Option<Subscription> = cluster
        .get(
            &subscription_resource(),
            Some(&plan.namespace),
            &plan.subscription,
        )
        .await?;
    if let Some(b) = &before {
        let existing_channel = match (b.spec.channel.as_str(), catalog) {
            ("", Some(c)) => c.default_channel.clone(),
            (ch, _) => ch.to_string(),
        };
        if b.spec.name != req.package || existing_channel != plan.channel {
            return Err(PlanInstallError::SubscriptionDiffers {
                namespace: plan.namespace.clone(),
                name: plan.subscription.clone(),
                package: b.spec.name.clone(),
                channel: existing_channel,
                same_package: b.spec.name == req.package,
            }
            .into());
        }
    }
    for n in &plan.notes {
        on_event(Event::Note(n));
    }
    for obj in &plan.objects {
        if obj.get("kind").and_then(Value::as_str) == Some("Namespace") && namespace_exists {
            continue;
        }
        cluster.apply(obj, false).await?;
        on_event(Event::Applied(&manifests::describe(obj)));
    }
    let spec = settings.spec(
        &plan.namespace,
        &plan.subscription,
        Goal::Install {
            passes: plan.passes(),
        },
        Baseline::of(before.as_ref()),
        plan.approval == Approval::Manual,
    );
    let w = wait(cluster, &spec, &mut |l| on_event(Event::Progress(l))).await?;
    Ok((plan, outcome_of(w, settings.timeout)))
}
