//! `upgrade` (switch a Subscription's channel) and `approve` (approve a pending InstallPlan):
//! say beforehand, from the local catalog, which CSV the change leads to, refuse a switch that
//! would silently do nothing, then apply and wait like `install`.
//!
//! Planning ([`plan_switch`], [`plan_approval`]) is pure; [`switch_channel`] and [`approve`]
//! do the I/O.

use crate::assess::{Baseline, Goal};
use crate::catalog_view::{PackageView, UnknownChannelError};
use crate::client::{Cluster, ClusterError, OlmMissingError};
use crate::install::{Event, Outcome, WaitSettings, outcome_of};
use crate::names::{InvalidValueError, check_dns1123_subdomain};
use crate::olm::{
    InstallPlan, MANAGED_BY_LABEL, Subscription, install_plan_resource, subscription_resource,
};
use crate::wait::wait;
use olmkit_catalog::explain::UpgradePath;
use serde_json::{Map, Value, json};
use thiserror::Error;

/// Where a channel switch leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchVerdict {
    /// OLM will upgrade, one InstallPlan per hop.
    Upgrades {
        /// The CSVs installed one after the other; the last is the target.
        hops: Vec<String>,
    },
    /// The installed CSV is already the head of the new channel: the switch only changes
    /// where future upgrades come from.
    AtHead,
    /// Nothing installed yet: OLM will install the new channel's head.
    FreshInstall {
        /// The head, when known.
        head: Option<String>,
    },
    /// No path: the Subscription would stay where it is.
    NoPath {
        /// Why, and the edge that would fix it.
        reason: String,
    },
    /// No local catalog: the destination is unknown.
    Unknown,
}

/// A planned channel switch.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchPlan {
    /// The Subscription as it is.
    pub subscription: Subscription,
    /// Its channel now (the package default when empty).
    pub from_channel: String,
    /// The new channel.
    pub to_channel: String,
    /// The installed CSV ("" when none).
    pub installed: String,
    /// Where it leads.
    pub verdict: SwitchVerdict,
    /// Human-readable plan, one line per item, for stderr.
    pub lines: Vec<String>,
}

/// A switch or approval cannot be planned.
#[derive(Debug, Error)]
pub enum PlanChangeError {
    /// A name is invalid.
    #[error(transparent)]
    Invalid(#[from] InvalidValueError),
    /// The channel is not in the package.
    #[error(transparent)]
    UnknownChannel(#[from] UnknownChannelError),
    /// Already on that channel.
    #[error("Subscription {namespace}/{name} already follows channel {channel}")]
    SameChannel {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Channel.
        channel: String,
    },
    /// The switch leads nowhere.
    #[error(
        "switching Subscription {namespace}/{name} to channel {channel} would do nothing: {reason}"
    )]
    NoPath {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Channel.
        channel: String,
        /// Why.
        reason: String,
    },
    /// No Subscription to act on, or several.
    #[error("{0}")]
    Choose(String),
    /// The InstallPlan is not waiting for approval.
    #[error(
        "InstallPlan {namespace}/{name} does not wait for approval (phase {phase}, approved: {approved})"
    )]
    NotPending {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Phase.
        phase: String,
        /// spec.approved.
        approved: bool,
    },
}

impl PlanChangeError {
    /// A `hint:` line.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::UnknownChannel(e) => Some(format!("use one of: {}", e.available)),
            Self::NoPath { .. } => Some(
                "fix the catalog (add the edge above and release), pick another channel, or pass --force to switch anyway".into(),
            ),
            Self::Choose(_) => Some(
                "bundle-tool status lists the Subscriptions and InstallPlans of the namespace".into(),
            ),
            Self::NotPending { .. } => Some("bundle-tool status lists the InstallPlans and their phases".into()),
            _ => None,
        }
    }
}

/// Picks the Subscription to act on: the named one, or the only one of the namespace.
pub fn choose_subscription<'a>(
    subs: &'a [Subscription],
    name: Option<&str>,
    namespace: &str,
) -> Result<&'a Subscription, PlanChangeError> {
    match name {
        Some(n) => subs.iter().find(|s| s.metadata.name == n).ok_or_else(|| {
            PlanChangeError::Choose(format!(
                "no Subscription {n} in namespace {namespace} (Subscriptions: {})",
                names(subs.iter().map(|s| s.metadata.name.as_str()))
            ))
        }),
        None => match subs {
            [one] => Ok(one),
            [] => Err(PlanChangeError::Choose(format!(
                "no Subscription in namespace {namespace}"
            ))),
            many => Err(PlanChangeError::Choose(format!(
                "namespace {namespace} has {} Subscriptions ({}); say which with --subscription",
                many.len(),
                names(many.iter().map(|s| s.metadata.name.as_str()))
            ))),
        },
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = it.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Plans a channel switch. With `force`, a switch without a path is planned anyway.
pub fn plan_switch(
    sub: &Subscription,
    to_channel: &str,
    catalog: Option<&PackageView>,
    force: bool,
) -> Result<SwitchPlan, PlanChangeError> {
    check_dns1123_subdomain("--channel", to_channel)?;
    let ns = &sub.metadata.namespace;
    let name = &sub.metadata.name;
    let catalog = catalog.filter(|c| c.name == sub.spec.name);
    let from_channel = match (sub.spec.channel.as_str(), catalog) {
        ("", Some(c)) => c.default_channel.clone(),
        (ch, _) => ch.to_string(),
    };
    if from_channel == to_channel {
        return Err(PlanChangeError::SameChannel {
            namespace: ns.clone(),
            name: name.clone(),
            channel: to_channel.into(),
        });
    }
    let installed = sub.status.installed_csv.clone();
    let mut lines = vec![format!(
        "Subscription {ns}/{name} (package {}): channel {} -> {to_channel}",
        sub.spec.name,
        if from_channel.is_empty() {
            "(default)"
        } else {
            &from_channel
        }
    )];
    let verdict = match catalog {
        None => {
            lines.push(
                "no local catalog for this package (--catalog-dir): where the new channel leads is not known beforehand"
                    .into(),
            );
            SwitchVerdict::Unknown
        }
        Some(cat) => {
            cat.channel(to_channel)?;
            if installed.is_empty() {
                let head = cat.head(to_channel);
                lines.push(match &head {
                    Some(h) => format!(
                        "nothing is installed yet: OLM will install {h}, the head of {to_channel}"
                    ),
                    None => format!(
                        "nothing is installed yet: OLM will install the head of {to_channel}"
                    ),
                });
                SwitchVerdict::FreshInstall { head }
            } else {
                switch_from_installed(sub, cat, to_channel, &installed, force, &mut lines)?
            }
        }
    };
    Ok(SwitchPlan {
        subscription: sub.clone(),
        from_channel,
        to_channel: to_channel.into(),
        installed,
        verdict,
        lines,
    })
}

/// Where the new channel leads from the installed CSV, by the local catalog.
fn switch_from_installed(
    sub: &Subscription,
    cat: &PackageView,
    to_channel: &str,
    installed: &str,
    force: bool,
    lines: &mut Vec<String>,
) -> Result<SwitchVerdict, PlanChangeError> {
    let reason = match cat.upgrade_path(to_channel, installed) {
        Ok(path) if !path.steps.is_empty() => {
            return Ok(upgrades(sub, installed, &path, lines));
        }
        Ok(_) if cat.head(to_channel).as_deref() == Some(installed) => {
            lines.push(format!(
                "installed: {installed}, already the head of {to_channel}: nothing to upgrade now; later upgrades come from {to_channel}"
            ));
            return Ok(SwitchVerdict::AtHead);
        }
        Ok(path) => match &path.missing {
            Some(m) => format!(
                "no bundle of channel {to_channel} replaces, skips or skipRanges {installed}; {}",
                m.suggestion
            ),
            None => format!(
                "no bundle of channel {to_channel} replaces, skips or skipRanges {installed}"
            ),
        },
        Err(e) => e.to_string(),
    };
    if !force {
        return Err(PlanChangeError::NoPath {
            namespace: sub.metadata.namespace.clone(),
            name: sub.metadata.name.clone(),
            channel: to_channel.into(),
            reason,
        });
    }
    lines.push(format!("warning (--force): {reason}"));
    Ok(SwitchVerdict::NoPath { reason })
}

/// The upgrades OLM will make after the switch, hop by hop.
fn upgrades(
    sub: &Subscription,
    installed: &str,
    path: &UpgradePath,
    lines: &mut Vec<String>,
) -> SwitchVerdict {
    let hops: Vec<String> = path.steps.iter().map(|s| s.to.clone()).collect();
    lines.push(format!(
        "installed: {installed}; OLM will upgrade {} ({} InstallPlan{}{})",
        std::iter::once(installed)
            .chain(hops.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" -> "),
        hops.len(),
        if hops.len() == 1 { "" } else { "s" },
        if sub.approval() == "Manual" {
            ", each needs approval"
        } else {
            ""
        }
    ));
    for s in &path.steps {
        lines.push(format!(
            "  {} -> {} by {}{}",
            s.from,
            s.to,
            s.edge.as_str(),
            s.version
                .as_ref()
                .map(|v| format!(" (version {v})"))
                .unwrap_or_default()
        ));
    }
    if let Some(m) = &path.missing {
        lines.push(format!(
            "note: the path stops before the head {}: {}",
            m.head, m.suggestion
        ));
    }
    SwitchVerdict::Upgrades { hops }
}

/// The server-side apply body that changes only the channel: the fields this tool applied at
/// install time, with their current values, so nothing else changes hands or disappears.
pub fn switch_manifest(sub: &Subscription, to_channel: &str) -> Value {
    let mut spec = Map::new();
    spec.insert("channel".into(), json!(to_channel));
    spec.insert("installPlanApproval".into(), json!(sub.approval()));
    spec.insert("name".into(), json!(sub.spec.name));
    spec.insert("source".into(), json!(sub.spec.source));
    spec.insert("sourceNamespace".into(), json!(sub.spec.source_namespace));
    if !sub.spec.starting_csv.is_empty() {
        spec.insert("startingCSV".into(), json!(sub.spec.starting_csv));
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(sub.metadata.name));
    metadata.insert("namespace".into(), json!(sub.metadata.namespace));
    if let Some(v) = sub.metadata.labels.get(MANAGED_BY_LABEL) {
        metadata.insert("labels".into(), json!({ MANAGED_BY_LABEL: v }));
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": metadata,
        "spec": spec,
    })
}

/// A live change could not run to a verdict.
#[derive(Debug, Error)]
pub enum ChangeError {
    /// Refused by planning.
    #[error(transparent)]
    Plan(#[from] PlanChangeError),
    /// OLM is missing.
    #[error(transparent)]
    OlmMissing(#[from] OlmMissingError),
    /// An API call failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

/// What `upgrade` was asked to do.
#[derive(Clone, Copy, Debug)]
pub struct SwitchRequest<'a> {
    /// Namespace of the Subscription.
    pub namespace: &'a str,
    /// Subscription name (None: the only one of the namespace).
    pub subscription: Option<&'a str>,
    /// Channel to switch to.
    pub to_channel: &'a str,
    /// Local catalog of the package.
    pub catalog: Option<&'a PackageView>,
    /// Switch even without an upgrade path.
    pub force: bool,
    /// Waiting.
    pub settings: WaitSettings,
}

/// Switches the channel after `confirm` accepts the plan; returns the plan and, when confirmed,
/// the outcome.
pub async fn switch_channel(
    cluster: &Cluster,
    req: &SwitchRequest<'_>,
    confirm: &mut dyn FnMut(&SwitchPlan) -> bool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(SwitchPlan, Option<Outcome>), ChangeError> {
    let SwitchRequest {
        namespace,
        subscription,
        to_channel,
        catalog,
        force,
        settings,
    } = *req;
    cluster.check_olm_v0().await?;
    let subs: Vec<Subscription> = cluster
        .list(&subscription_resource(), Some(namespace))
        .await?;
    let sub = choose_subscription(&subs, subscription, namespace)?;
    let plan = plan_switch(sub, to_channel, catalog, force)?;
    for l in &plan.lines {
        on_event(Event::Note(l));
    }
    if !confirm(&plan) {
        return Ok((plan, None));
    }
    let baseline = Baseline::of(Some(sub));
    cluster
        .apply(&switch_manifest(sub, to_channel), true)
        .await?;
    on_event(Event::Applied(&format!(
        "Subscription {namespace}/{} (channel: {to_channel})",
        sub.metadata.name
    )));
    let (goal, wait_needed) = match &plan.verdict {
        SwitchVerdict::Upgrades { hops } => (
            Goal::Reach {
                from: Some(plan.installed.clone()),
                target: hops.last().cloned(),
                settle: true,
            },
            true,
        ),
        SwitchVerdict::FreshInstall { .. } => (Goal::Install { passes: Vec::new() }, true),
        SwitchVerdict::Unknown => (
            Goal::Reach {
                from: Some(plan.installed.clone()),
                target: None,
                settle: true,
            },
            true,
        ),
        SwitchVerdict::AtHead | SwitchVerdict::NoPath { .. } => {
            (Goal::Install { passes: Vec::new() }, false)
        }
    };
    if !wait_needed {
        return Ok((
            plan.clone(),
            Some(Outcome::Unchanged {
                csv: plan.installed.clone(),
            }),
        ));
    }
    let spec = settings.spec(
        namespace,
        &sub.metadata.name,
        goal,
        baseline,
        sub.approval() == "Manual",
    );
    let w = wait(cluster, &spec, &mut |l| on_event(Event::Progress(l))).await?;
    Ok((plan, Some(outcome_of(w, settings.timeout))))
}

/// A planned approval.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalPlan {
    /// The InstallPlan.
    pub install_plan: InstallPlan,
    /// The Subscription it belongs to, when found.
    pub subscription: Option<Subscription>,
    /// The CSV the approval installs.
    pub target: String,
    /// Human-readable plan for stderr.
    pub lines: Vec<String>,
}

/// The InstallPlan to approve: the named one (which must wait for approval), or the only one
/// waiting in the namespace.
fn install_plan_to_approve<'a>(
    ips: &'a [InstallPlan],
    name: Option<&str>,
    namespace: &str,
) -> Result<&'a InstallPlan, PlanChangeError> {
    Ok(match name {
        Some(n) => {
            let ip = ips.iter().find(|i| i.metadata.name == n).ok_or_else(|| {
                PlanChangeError::Choose(format!(
                    "no InstallPlan {n} in namespace {namespace} (InstallPlans: {})",
                    names(ips.iter().map(|i| i.metadata.name.as_str()))
                ))
            })?;
            if !ip.awaits_approval() {
                return Err(PlanChangeError::NotPending {
                    namespace: namespace.into(),
                    name: n.into(),
                    phase: ip.status.phase.clone(),
                    approved: ip.spec.approved,
                });
            }
            ip
        }
        None => {
            let pending: Vec<&InstallPlan> = ips.iter().filter(|i| i.awaits_approval()).collect();
            match pending.as_slice() {
                [one] => *one,
                [] => {
                    return Err(PlanChangeError::Choose(format!(
                        "no InstallPlan waits for approval in namespace {namespace}"
                    )));
                }
                many => {
                    return Err(PlanChangeError::Choose(format!(
                        "{} InstallPlans wait for approval in namespace {namespace} ({}); say which with --install-plan",
                        many.len(),
                        names(many.iter().map(|i| i.metadata.name.as_str()))
                    )));
                }
            }
        }
    })
}

/// What the local catalog says of the target: its version and where the channel leads after it.
fn catalog_lines(cat: &PackageView, channel: &str, target: &str, lines: &mut Vec<String>) {
    if let Some(v) = cat.version(target) {
        lines.push(format!("{target} is version {v} in the local catalog"));
    }
    if let Ok(path) = cat.upgrade_path(channel, target) {
        if path.steps.is_empty() {
            lines.push(format!(
                "after it, the channel has no further upgrade ({})",
                if path.reaches_head || cat.head(channel).as_deref() == Some(target) {
                    "it is the head"
                } else {
                    "it is not connected to the head"
                }
            ));
        } else {
            lines.push(format!(
                "after it, the channel leads on to {} (each needs its own approval)",
                path.steps
                    .iter()
                    .map(|s| s.to.as_str())
                    .collect::<Vec<_>>()
                    .join(" -> ")
            ));
        }
    }
}

/// Plans an approval: the named InstallPlan, or the only one waiting in the namespace.
pub fn plan_approval(
    ips: &[InstallPlan],
    subs: &[Subscription],
    name: Option<&str>,
    namespace: &str,
    catalog: Option<&PackageView>,
) -> Result<ApprovalPlan, PlanChangeError> {
    let ip = install_plan_to_approve(ips, name, namespace)?;
    let sub = subs
        .iter()
        .find(|s| s.status.install_plan_name() == Some(ip.metadata.name.as_str()))
        .or_else(|| {
            subs.iter().find(|s| {
                ip.spec
                    .cluster_service_version_names
                    .contains(&s.status.current_csv)
            })
        });
    let csvs = &ip.spec.cluster_service_version_names;
    let target = sub
        .map(|s| s.status.current_csv.clone())
        .filter(|c| csvs.contains(c))
        .or_else(|| csvs.last().cloned())
        .unwrap_or_default();
    let mut lines = vec![format!(
        "InstallPlan {namespace}/{} installs {}",
        ip.metadata.name,
        csvs.join(", ")
    )];
    if let Some(s) = sub {
        let from = if s.status.installed_csv.is_empty() {
            "nothing installed yet".to_string()
        } else {
            format!("replacing {}", s.status.installed_csv)
        };
        lines.push(format!(
            "for Subscription {}/{} (channel {}): {target}, {from}",
            s.metadata.namespace,
            s.metadata.name,
            if s.spec.channel.is_empty() {
                "(default)"
            } else {
                &s.spec.channel
            }
        ));
        if let Some(cat) = catalog.filter(|c| c.name == s.spec.name) {
            catalog_lines(cat, &s.spec.channel, &target, &mut lines);
        }
    }
    Ok(ApprovalPlan {
        install_plan: ip.clone(),
        subscription: sub.cloned(),
        target,
        lines,
    })
}

/// Approves a pending InstallPlan (`spec.approved: true`) and waits for its CSV.
pub async fn approve(
    cluster: &Cluster,
    namespace: &str,
    install_plan: Option<&str>,
    catalog: Option<&PackageView>,
    settings: WaitSettings,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(ApprovalPlan, Outcome), ChangeError> {
    cluster.check_olm_v0().await?;
    let ips: Vec<InstallPlan> = cluster
        .list(&install_plan_resource(), Some(namespace))
        .await?;
    let subs: Vec<Subscription> = cluster
        .list(&subscription_resource(), Some(namespace))
        .await?;
    let plan = plan_approval(&ips, &subs, install_plan, namespace, catalog)?;
    for l in &plan.lines {
        on_event(Event::Note(l));
    }
    cluster
        .merge_patch(
            &install_plan_resource(),
            Some(namespace),
            &plan.install_plan.metadata.name,
            &json!({ "spec": { "approved": true } }),
        )
        .await?;
    on_event(Event::Applied(&format!(
        "InstallPlan {namespace}/{} (approved: true)",
        plan.install_plan.metadata.name
    )));
    let Some(sub) = &plan.subscription else {
        // Without a Subscription there is nothing to follow; the approval itself is the result.
        return Ok((
            plan.clone(),
            Outcome::Unchanged {
                csv: plan.target.clone(),
            },
        ));
    };
    // The approved plan failing is news, so it is not part of the baseline.
    let mut baseline = Baseline::of(Some(sub));
    baseline.install_plan = None;
    let installed = sub.status.installed_csv.clone();
    let spec = settings.spec(
        namespace,
        &sub.metadata.name,
        Goal::Reach {
            from: (!installed.is_empty()).then_some(installed),
            target: Some(plan.target.clone()),
            settle: false,
        },
        baseline,
        false,
    );
    let w = wait(cluster, &spec, &mut |l| on_event(Event::Progress(l))).await?;
    Ok((plan, outcome_of(w, settings.timeout)))
}
