//! Reading OLM v0's progress: from what is on the cluster to "done", "waiting" or "failed, because".
//!
//! A pure function of a [`Snapshot`] (the Subscription, its latest InstallPlan, the CSV it is
//! progressing to and its CatalogSource), so every OLM state the wait loop can meet is unit
//! tested without a cluster. The rules follow OLM's own semantics, as recorded from a real
//! OLM v0 (`tests/fixtures/olm-traces/`, each rule has a unit test built from those traces):
//! - `ResolutionFailed` with reason `ConstraintsNotSatisfiable` is terminal: OLM's
//!   `syncResolvingNamespace` (`pkg/controller/operators/catalog/operator.go`) sets it and does
//!   not requeue. One exception is not a failure: while a CSV is being replaced, OLM's resolver
//!   sees the old CSV, which no Subscription references any more, next to the new one and
//!   reports "clusterserviceversion X exists and is not referenced by a subscription". That
//!   condition appears while X is `Replacing`/`Deleting` and may stay after X is gone (nothing
//!   requeues the namespace), so it is ignored when X is being replaced or gone.
//! - `ErrorPreventedResolution` is requeued by `syncResolvingNamespace`, so it is not terminal
//!   at once: it becomes [`Verdict::Blocked`], and the wait loop fails only when it persists
//!   (an unreachable catalog: OLM's `catalogHealth` may still say healthy).
//! - More than one OperatorGroup in the namespace stops OLM completely: `syncOperatorGroups`
//!   (`pkg/controller/operators/olm/operatorgroup.go`) only flags every group with
//!   `MultipleOperatorGroup=True MultipleOperatorGroupsFound`, and the Subscription shows
//!   nothing; a CSV created there fails with `TooManyOperatorGroups` (`operatorGroupForCSV`).
//! - `BundleUnpackFailed`, an InstallPlan in phase `Failed` and a CSV in phase `Failed` are
//!   terminal.
//! - A CSV is installed when the Subscription's `installedCSV` names it, its phase is
//!   `Succeeded`, no CSV of the namespace is still `Replacing` or `Deleting`, and (when the goal
//!   needs the Subscription to settle) `currentCSV` equals `installedCSV`. OLM's
//!   `transitionCSVState` (`pkg/controller/operators/olm/operator.go`) may still move a
//!   Succeeded CSV back to `Pending` (`NeedsReinstall`, `NeedsCertRotation`) right after, so
//!   [`crate::wait`] also requires the verdict to hold for a settle period. The Subscription's
//!   `AtLatestKnown` state and an InstallPlan's `Complete` phase come before the CSV succeeds
//!   and are not used as "done".
//!
//! Conditions and InstallPlans that were already there when the command started (recorded in a
//! [`Baseline`]) are not blamed for a failure: after a channel switch, yesterday's failed
//! InstallPlan must not be reported as today's.

use crate::olm::{
    CatalogSource, Condition, Csv, InstallPlan, MULTIPLE_OPERATOR_GROUPS_REASON, OperatorGroup,
    Subscription, condition,
};
use std::collections::BTreeSet;

/// What the cluster looked like at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The Subscription (None until it exists).
    pub subscription: Option<Subscription>,
    /// Its latest InstallPlan.
    pub install_plan: Option<InstallPlan>,
    /// The CSV named by `status.currentCSV` (or `installedCSV` when no current one).
    pub csv: Option<Csv>,
    /// The CSV named by `status.installedCSV` when it differs from the current one.
    pub installed_csv: Option<Csv>,
    /// The CatalogSource the Subscription uses.
    pub catalog_source: Option<CatalogSource>,
    /// Every CSV of the namespace except OLM's copies (to see replacements in flight).
    pub csvs: Vec<Csv>,
    /// The OperatorGroups of the namespace (None when not read).
    pub operator_groups: Option<Vec<OperatorGroup>>,
}

/// What the command waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Goal {
    /// A fresh install (or a re-run of one): the Subscription's current CSV is installed.
    Install {
        /// CSVs OLM only passes through on the way to the channel head (the starting CSV of an
        /// Automatic Subscription and the hops after it, from the local catalog): being
        /// installed at one of them is not the end of the install.
        passes: Vec<String>,
    },
    /// An upgrade (channel switch or approval).
    Reach {
        /// The CSV installed when the command started.
        from: Option<String>,
        /// The CSV the catalog says this leads to; `None` when unknown (no local catalog).
        target: Option<String>,
        /// Require `currentCSV == installedCSV` (no later hop in flight). An approval of one
        /// hop of a manual chain does not wait for the next hop.
        settle: bool,
    },
}

/// Things present before the command changed anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Baseline {
    /// `type|status|reason|message` of Subscription conditions seen at the start.
    pub conditions: BTreeSet<String>,
    /// The InstallPlan the Subscription referenced at the start.
    pub install_plan: Option<String>,
}

fn signature(c: &Condition) -> String {
    format!("{}|{}|{}|{}", c.type_, c.status, c.reason, c.message)
}

impl Baseline {
    /// Records the state of a Subscription before the command acts.
    pub fn of(subscription: Option<&Subscription>) -> Self {
        match subscription {
            None => Self::default(),
            Some(s) => Self {
                conditions: s.status.conditions.iter().map(signature).collect(),
                install_plan: s.status.install_plan_name().map(String::from),
            },
        }
    }
    fn is_new(&self, c: &Condition) -> bool {
        !self.conditions.contains(&signature(c))
    }
}

/// A failure the user has to act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// One line: what failed.
    pub summary: String,
    /// The OLM messages behind it.
    pub details: Vec<String>,
    /// What to do.
    pub hints: Vec<String>,
}

/// The verdict on a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Keep waiting.
    Pending,
    /// The goal is reached: this CSV is installed and Succeeded.
    Succeeded {
        /// The installed CSV.
        csv: String,
    },
    /// The Subscription settled without moving: there was nothing to upgrade to.
    NoChange {
        /// The CSV that stays installed.
        csv: String,
    },
    /// An InstallPlan waits for approval (Manual approval).
    NeedsApproval {
        /// The InstallPlan.
        install_plan: String,
        /// The CSVs it would install.
        csvs: Vec<String>,
    },
    /// OLM gave up.
    Failed(Failure),
    /// OLM cannot progress now but retries (`ErrorPreventedResolution`): a failure when it
    /// persists, which only the caller, who sees time pass, can tell.
    Blocked(Failure),
}

fn sub_ref(s: &Subscription) -> String {
    format!("{}/{}", s.metadata.namespace, s.metadata.name)
}

fn resolution_hints(message: &str, sub: &Subscription) -> Vec<String> {
    let mut hints = Vec::new();
    let m = message.to_ascii_lowercase();
    if m.contains("no operators found in channel") {
        hints.push(format!(
            "check that channel {:?} exists in package {}: bundle-tool status --catalog-dir catalog lists the channels",
            sub.spec.channel, sub.spec.name
        ));
    }
    if m.contains("no operators found with name") || m.contains("startingcsv") {
        hints.push(format!(
            "check spec.startingCSV ({:?}): it must be a bundle of channel {:?}",
            sub.spec.starting_csv, sub.spec.channel
        ));
    }
    if m.contains("no operators found from catalog") || m.contains("no operators found in package")
    {
        hints.push(format!(
            "check that the catalog image of CatalogSource {}/{} contains package {}",
            sub.spec.source_namespace, sub.spec.source, sub.spec.name
        ));
    }
    if m.contains("exists and is not referenced by a subscription") {
        hints.push(
            "a CSV of this package is already installed without a Subscription: delete it or subscribe from its version".into(),
        );
    }
    if m.contains("provide") && m.contains("constraints not satisfiable") {
        hints.push(
            "two operators provide the same API: remove the other Subscription/CSV or pick another channel".into(),
        );
    }
    if hints.is_empty() {
        hints.push(format!(
            "inspect the resolution: kubectl -n {} get subscription {} -o yaml",
            sub.metadata.namespace, sub.metadata.name
        ));
    }
    hints
}

fn csv_failure_hints(csv: &Csv, sub: Option<&Subscription>) -> Vec<String> {
    let ns = &csv.metadata.namespace;
    match csv.status.reason.as_str() {
        "UnsupportedOperatorGroup" | "InvalidInstallModes" => vec![format!(
            "the OperatorGroup of {ns} targets namespaces in a way the CSV's install modes do not allow: rerun install with --target-namespaces, or see kubectl -n {ns} get operatorgroup -o yaml"
        )],
        "TooManyOperatorGroups" => vec![format!(
            "keep exactly one OperatorGroup in {ns}: kubectl -n {ns} get operatorgroups"
        )],
        "NoOperatorGroup" => vec![format!(
            "create an OperatorGroup in {ns} (bundle-tool install creates one unless --print is used)"
        )],
        "InstallCheckFailed" | "InstallComponentFailed" | "ComponentUnhealthy" => vec![
            format!(
                "the operator's Deployment did not become available: kubectl -n {ns} get deployments,pods and kubectl -n {ns} describe pods"
            ),
            "check that the operator image in the bundle is pullable from the cluster".into(),
        ],
        "RequirementsNotMet" => vec![format!(
            "a requirement of the CSV is missing (CRD, permission, service account): kubectl -n {ns} get csv {} -o jsonpath='{{.status.requirementStatus}}'",
            csv.metadata.name
        )],
        _ => {
            let mut h = vec![format!(
                "see the CSV's conditions: kubectl -n {ns} get csv {} -o yaml",
                csv.metadata.name
            )];
            if let Some(s) = sub {
                h.push(format!(
                    "and the Subscription's: kubectl -n {} get subscription {} -o yaml",
                    s.metadata.namespace, s.metadata.name
                ));
            }
            h
        }
    }
}

fn install_plan_failure(ip: &InstallPlan) -> Failure {
    let mut details = Vec::new();
    for c in &ip.status.conditions {
        if c.status == "False" || !c.reason.is_empty() && c.type_ == "Installed" {
            details.push(format!(
                "{}={} {}: {}",
                c.type_, c.status, c.reason, c.message
            ));
        }
    }
    if !ip.status.message.is_empty() {
        details.push(ip.status.message.clone());
    }
    for lookup in &ip.status.bundle_lookups {
        for c in &lookup.conditions {
            if c.is_true() && c.type_.contains("Failed") {
                details.push(format!(
                    "bundle {}: {} {}: {}",
                    lookup.path, c.type_, c.reason, c.message
                ));
            }
        }
    }
    let ns = &ip.metadata.namespace;
    Failure {
        summary: format!(
            "InstallPlan {ns}/{} failed (installing {})",
            ip.metadata.name,
            ip.spec.cluster_service_version_names.join(", ")
        ),
        details,
        hints: vec![format!(
            "see the InstallPlan: kubectl -n {ns} get installplan {} -o yaml",
            ip.metadata.name
        )],
    }
}

/// The CSVs named by "clusterserviceversion X exists and is not referenced by a subscription"
/// in a resolution failure message (OLM's resolver wording for an installed CSV without a
/// Subscription).
pub fn unreferenced_csvs(message: &str) -> Vec<String> {
    const TAIL: &str = " exists and is not referenced by a subscription";
    const HEAD: &str = "clusterserviceversion ";
    let mut out = Vec::new();
    let mut rest = message;
    while let Some(end) = rest.find(TAIL) {
        let before = &rest[..end];
        if let Some(start) = before.rfind(HEAD) {
            let name = before[start + HEAD.len()..].trim();
            if !name.is_empty() && !name.contains(' ') {
                out.push(name.to_string());
            }
        }
        rest = &rest[end + TAIL.len()..];
    }
    out
}

/// The CSV being replaced that a `ConstraintsNotSatisfiable` condition is about, when that is
/// all it is about: every CSV it calls "not referenced by a subscription" is not the installed
/// one and is `Replacing`/`Deleting` or already gone. OLM sets this condition during every
/// replacement (see the module docs) and may leave it behind, so it is no failure.
pub fn replacement_leftover(c: &Condition, s: &Snapshot) -> Option<String> {
    let sub = s.subscription.as_ref()?;
    let names = unreferenced_csvs(&c.message);
    if names.is_empty() {
        return None;
    }
    let all_replaced = names.iter().all(|n| {
        *n != sub.status.installed_csv
            && s.csvs
                .iter()
                .find(|c| &c.metadata.name == n)
                .is_none_or(|c| matches!(c.status.phase.as_str(), "Replacing" | "Deleting"))
    });
    all_replaced.then(|| names.join(", "))
}

/// More than one OperatorGroup in the namespace: OLM does nothing for any Subscription there.
fn operator_group_failure(s: &Snapshot, sub: &Subscription) -> Option<Failure> {
    let groups = s.operator_groups.as_ref()?;
    if groups.len() < 2 {
        return None;
    }
    let ns = &sub.metadata.namespace;
    let names: Vec<&str> = groups.iter().map(|g| g.metadata.name.as_str()).collect();
    let mut details = vec![format!(
        "namespace {ns} has {} OperatorGroups: {}",
        groups.len(),
        names.join(", ")
    )];
    for g in groups.iter().filter(|g| g.flagged_multiple()) {
        details.push(format!(
            "OperatorGroup {}: MultipleOperatorGroup=True {MULTIPLE_OPERATOR_GROUPS_REASON}",
            g.metadata.name
        ));
    }
    details.push(
        "OLM resolves nothing in a namespace with several OperatorGroups (the Subscription shows no error)"
            .into(),
    );
    Some(Failure {
        summary: format!(
            "OLM will not install Subscription {}: more than one OperatorGroup in namespace {ns}",
            sub_ref(sub)
        ),
        details,
        hints: vec![format!(
            "keep exactly one OperatorGroup in {ns}: kubectl -n {ns} delete operatorgroup {}",
            names[1..].join(" ")
        )],
    })
}

/// `ErrorPreventedResolution`: OLM retries, most often because it cannot reach the catalog.
fn resolution_blocked(c: &Condition, s: &Snapshot, sub: &Subscription) -> Failure {
    let mut details = vec![format!("ResolutionFailed {}: {}", c.reason, c.message)];
    let mut hints = Vec::new();
    if let Some(cs) = &s.catalog_source {
        let state = match cs.connection() {
            "" => "no connection state".to_string(),
            st => format!("connection {st}"),
        };
        details.push(format!(
            "CatalogSource {}/{}: {state}",
            cs.metadata.namespace, cs.metadata.name
        ));
        if cs.spec.address.is_empty() {
            hints.push(format!(
                "check the catalog pod: kubectl -n {} get pods -l olm.catalogSource={} (is the image {} pullable and serving?)",
                cs.metadata.namespace, cs.metadata.name, cs.spec.image
            ));
        } else {
            hints.push(format!(
                "check that {} serves the operator-registry gRPC API (spec.address of CatalogSource {}/{})",
                cs.spec.address, cs.metadata.namespace, cs.metadata.name
            ));
        }
    }
    if sub.status.catalog_health.iter().any(|h| h.healthy) {
        details.push(
            "(OLM's status.catalogHealth says healthy: it does not reflect the gRPC connection)"
                .into(),
        );
    }
    hints.push(format!(
        "once the catalog is reachable OLM resolves again by itself; rerun this command or watch kubectl -n {} get subscription {} -o yaml",
        sub.metadata.namespace, sub.metadata.name
    ));
    let unreachable = c.message.contains("catalogsource") || c.message.contains("rpc error");
    Failure {
        summary: if unreachable {
            format!(
                "OLM cannot reach the catalog of Subscription {}",
                sub_ref(sub)
            )
        } else {
            format!(
                "OLM cannot resolve Subscription {} (ErrorPreventedResolution)",
                sub_ref(sub)
            )
        },
        details,
        hints,
    }
}

fn csv_failed(csv: &Csv, sub: &Subscription) -> Failure {
    let mut details = vec![format!(
        "phase Failed, reason {}: {}",
        csv.status.reason, csv.status.message
    )];
    for r in &csv.status.requirement_status {
        if r.status != "Present" && !r.status.is_empty() {
            details.push(format!(
                "requirement {} {} ({}): {} {}",
                r.kind, r.name, r.group, r.status, r.message
            ));
        }
    }
    Failure {
        summary: format!(
            "ClusterServiceVersion {}/{} failed",
            csv.metadata.namespace, csv.metadata.name
        ),
        details,
        hints: csv_failure_hints(csv, Some(sub)),
    }
}

/// Failures and blocks from the Subscription's conditions.
fn condition_verdict(baseline: &Baseline, s: &Snapshot, sub: &Subscription) -> Option<Verdict> {
    let conds = &sub.status.conditions;
    if let Some(c) = condition(conds, "ResolutionFailed")
        && c.is_true()
    {
        match c.reason.as_str() {
            "ConstraintsNotSatisfiable"
                if baseline.is_new(c) && replacement_leftover(c, s).is_none() =>
            {
                return Some(Verdict::Failed(Failure {
                    summary: format!("OLM cannot resolve Subscription {}", sub_ref(sub)),
                    details: vec![format!("ResolutionFailed {}: {}", c.reason, c.message)],
                    hints: resolution_hints(&c.message, sub),
                }));
            }
            "ErrorPreventedResolution" => {
                return Some(Verdict::Blocked(resolution_blocked(c, s, sub)));
            }
            _ => {}
        }
    }
    if let Some(c) = condition(conds, "BundleUnpackFailed")
        && c.is_true()
        && baseline.is_new(c)
    {
        return Some(Verdict::Failed(Failure {
            summary: format!(
                "OLM could not unpack the bundle for Subscription {}",
                sub_ref(sub)
            ),
            details: vec![format!("BundleUnpackFailed {}: {}", c.reason, c.message)],
            hints: vec![
                "check that the bundle image in the catalog exists and is pullable from the cluster (registry credentials, a typo in the image reference)".into(),
                format!(
                    "the unpack job's logs are in the CatalogSource's namespace ({}): kubectl -n {} get jobs",
                    sub.spec.source_namespace, sub.spec.source_namespace
                ),
            ],
        }));
    }
    None
}

/// True while a replacement is still finishing: a CSV of the namespace is `Replacing` or
/// `Deleting` (OLM deletes the old CSV only after the new one succeeded, and the new one often
/// goes back to `Pending` right after).
pub fn replacement_in_flight(s: &Snapshot) -> bool {
    s.csvs
        .iter()
        .any(|c| matches!(c.status.phase.as_str(), "Replacing" | "Deleting"))
}

/// Judges a snapshot against a goal. `stop_at_approval`: report an InstallPlan that awaits
/// approval instead of waiting for someone to approve it.
pub fn assess(goal: &Goal, baseline: &Baseline, s: &Snapshot, stop_at_approval: bool) -> Verdict {
    let Some(sub) = &s.subscription else {
        return Verdict::Pending;
    };
    if let Some(f) = operator_group_failure(s, sub) {
        return Verdict::Failed(f);
    }
    if let Some(v) = condition_verdict(baseline, s, sub) {
        return v;
    }

    // The latest InstallPlan.
    let ip_is_new = |ip: &InstallPlan| baseline.install_plan.as_deref() != Some(&ip.metadata.name);
    if let Some(ip) = &s.install_plan {
        if ip.status.phase == "Failed" && ip_is_new(ip) {
            return Verdict::Failed(install_plan_failure(ip));
        }
        if ip.awaits_approval() && stop_at_approval {
            return Verdict::NeedsApproval {
                install_plan: ip.metadata.name.clone(),
                csvs: ip.spec.cluster_service_version_names.clone(),
            };
        }
    }

    // The CSV being installed.
    if let Some(csv) = &s.csv
        && csv.status.phase == "Failed"
        && (csv.metadata.name == sub.status.current_csv
            || csv.metadata.name == sub.status.installed_csv)
    {
        return Verdict::Failed(csv_failed(csv, sub));
    }

    let installed = sub.status.installed_csv.as_str();
    let current = sub.status.current_csv.as_str();
    let csv_succeeded = [s.csv.as_ref(), s.installed_csv.as_ref()]
        .into_iter()
        .flatten()
        .any(|c| c.metadata.name == installed && c.status.phase == "Succeeded")
        && !replacement_in_flight(s);
    let settled = current.is_empty() || current == installed;

    match goal {
        Goal::Install { passes } => {
            if !installed.is_empty()
                && csv_succeeded
                && settled
                && !passes.iter().any(|p| p == installed)
            {
                return Verdict::Succeeded {
                    csv: installed.to_string(),
                };
            }
        }
        Goal::Reach {
            from,
            target,
            settle,
        } => {
            let moved = from.as_deref() != Some(installed);
            let at_target = match target {
                Some(t) => installed == t,
                None => moved,
            };
            if !installed.is_empty() && at_target && csv_succeeded && (settled || !settle) {
                return Verdict::Succeeded {
                    csv: installed.to_string(),
                };
            }
            // Nothing to upgrade to: OLM settled at the CSV we started from.
            if target.is_none()
                && !moved
                && settled
                && csv_succeeded
                && sub.status.state == "AtLatestKnown"
                && s.install_plan.as_ref().is_none_or(|ip| !ip_is_new(ip))
            {
                return Verdict::NoChange {
                    csv: installed.to_string(),
                };
            }
        }
    }
    Verdict::Pending
}

/// One line per object for progress output, keyed by object so callers print only changes.
pub fn describe(s: &Snapshot) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(cs) = &s.catalog_source {
        out.push(catalog_source_line(cs));
    }
    match &s.subscription {
        None => out.push((
            "Subscription".into(),
            "Subscription: not created yet".into(),
        )),
        Some(sub) => out.push(subscription_line(sub, s)),
    }
    // OperatorGroups only matter when there are several (or OLM says so).
    let groups = s.operator_groups.as_deref().unwrap_or_default();
    for g in groups
        .iter()
        .filter(|g| groups.len() > 1 || g.flagged_multiple())
    {
        let key = format!("OperatorGroup {}/{}", g.metadata.namespace, g.metadata.name);
        let line = if g.flagged_multiple() {
            format!("{key}: MultipleOperatorGroup ({MULTIPLE_OPERATOR_GROUPS_REASON})")
        } else {
            format!("{key}: one of {} in the namespace", groups.len())
        };
        out.push((key, line));
    }
    if let Some(ip) = &s.install_plan {
        out.push(install_plan_line(ip));
    }
    // Every CSV of the namespace when listed (the replaced one too), else the current one.
    let csvs: Vec<&Csv> = if s.csvs.is_empty() {
        s.csv.iter().collect()
    } else {
        s.csvs.iter().collect()
    };
    out.extend(csvs.into_iter().map(csv_line));
    out
}

/// The progress line of the CatalogSource: its connection state.
fn catalog_source_line(cs: &CatalogSource) -> (String, String) {
    let key = format!(
        "CatalogSource {}/{}",
        cs.metadata.namespace, cs.metadata.name
    );
    let state = match cs.connection() {
        "" if !cs.spec.address.is_empty() => {
            format!("waiting for OLM to connect to {}", cs.spec.address)
        }
        "" => "waiting for OLM to start the catalog pod".to_string(),
        st => st.to_string(),
    };
    let mut line = format!("{key}: {state}");
    if !cs.status.message.is_empty() {
        line.push_str(&format!(" ({})", cs.status.message));
    }
    (key, line)
}

/// The progress line of the Subscription: its state, CSVs and notable conditions.
fn subscription_line(sub: &Subscription, s: &Snapshot) -> (String, String) {
    let key = format!("Subscription {}", sub_ref(sub));
    let st = &sub.status;
    let mut parts = Vec::new();
    if st.state.is_empty() {
        parts.push("resolving".to_string());
    } else {
        parts.push(st.state.clone());
    }
    if !st.installed_csv.is_empty() {
        parts.push(format!("installed {}", st.installed_csv));
    }
    if !st.current_csv.is_empty() && st.current_csv != st.installed_csv {
        parts.push(format!("upgrading to {}", st.current_csv));
    }
    for c in &st.conditions {
        let notable = matches!(
            c.type_.as_str(),
            "ResolutionFailed"
                | "CatalogSourcesUnhealthy"
                | "BundleUnpacking"
                | "BundleUnpackFailed"
                | "InstallPlanPending"
                | "InstallPlanFailed"
                | "InstallPlanMissing"
                | "Deprecated"
        );
        if notable && c.is_true() {
            let mut p = c.type_.clone();
            if !c.reason.is_empty() {
                p.push_str(&format!(" ({})", c.reason));
            }
            if c.type_ == "ResolutionFailed"
                && c.reason == "ConstraintsNotSatisfiable"
                && let Some(old) = replacement_leftover(c, s)
            {
                p.push_str(&format!(
                    ": about {old}, which is being replaced (OLM sets this during a replacement; not a failure)"
                ));
            } else if !c.message.is_empty() && c.type_ != "InstallPlanPending" {
                p.push_str(&format!(": {}", c.message));
            }
            parts.push(p);
        }
    }
    let line = format!("{key}: {}", parts.join(", "));
    (key, line)
}

/// The progress line of the InstallPlan: its phase, CSVs and approval.
fn install_plan_line(ip: &InstallPlan) -> (String, String) {
    let key = format!("InstallPlan {}/{}", ip.metadata.namespace, ip.metadata.name);
    let phase = if ip.status.phase.is_empty() {
        "Planning"
    } else {
        &ip.status.phase
    };
    let mut line = format!(
        "{key}: {phase} ({})",
        ip.spec.cluster_service_version_names.join(", ")
    );
    if ip.awaits_approval() {
        line.push_str(", waiting for approval");
    } else if ip.status.phase == "RequiresApproval" && ip.spec.approved {
        line.push_str(", approved");
    }
    (key, line)
}

/// The progress line of a CSV: its phase, reason and (until it succeeds) message.
fn csv_line(csv: &Csv) -> (String, String) {
    let key = format!(
        "ClusterServiceVersion {}/{}",
        csv.metadata.namespace, csv.metadata.name
    );
    let phase = if csv.status.phase.is_empty() {
        "(no phase yet)"
    } else {
        &csv.status.phase
    };
    let mut line = format!("{key}: {phase}");
    if !csv.status.reason.is_empty() {
        line.push_str(&format!(" ({})", csv.status.reason));
    }
    if !csv.status.message.is_empty() && csv.status.phase != "Succeeded" {
        line.push_str(&format!(": {}", csv.status.message));
    }
    (key, line)
}

/// Hints for a timeout: what the last snapshot suggests is stuck.
pub fn timeout_hints(s: &Snapshot) -> Vec<String> {
    let mut hints = Vec::new();
    if let Some(cs) = &s.catalog_source
        && cs.connection() != "READY"
    {
        let state = if cs.connection().is_empty() {
            "no connection yet"
        } else {
            cs.connection()
        };
        hints.push(if cs.spec.address.is_empty() {
            format!(
                "the CatalogSource is not READY ({state}): check its pod with kubectl -n {} get pods -l olm.catalogSource={} and that the image {} is pullable",
                cs.metadata.namespace, cs.metadata.name, cs.spec.image
            )
        } else {
            format!(
                "the CatalogSource is not READY ({state}): check that {} serves the operator-registry gRPC API",
                cs.spec.address
            )
        });
    }
    if let Some(sub) = &s.subscription {
        if let Some(c) = condition(&sub.status.conditions, "ResolutionFailed")
            && c.is_true()
        {
            hints.push(format!("OLM could not resolve yet: {}", c.message));
        }
        if sub.status.install_plan_name().is_none() && sub.status.current_csv.is_empty() {
            hints.push(format!(
                "OLM has not resolved the Subscription: is OLM running (kubectl get pods -n olm) and does namespace {} have an OperatorGroup?",
                sub.metadata.namespace
            ));
        }
    }
    if let Some(ip) = &s.install_plan {
        if ip.awaits_approval() {
            hints.push(format!(
                "InstallPlan {} waits for approval: bundle-tool approve --install-plan {} --namespace {}",
                ip.metadata.name, ip.metadata.name, ip.metadata.namespace
            ));
        } else if ip.status.phase == "Installing" {
            hints.push(format!(
                "InstallPlan {} is still Installing: kubectl -n {} get installplan {} -o yaml shows the steps",
                ip.metadata.name, ip.metadata.namespace, ip.metadata.name
            ));
        }
    }
    if let Some(csv) = &s.csv
        && csv.status.phase != "Succeeded"
    {
        hints.extend(csv_failure_hints(csv, s.subscription.as_ref()));
    }
    hints
}

#[cfg(test)]
mod trace_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::olm::*;

    fn sub(installed: &str, current: &str, state: &str, conds: Vec<Condition>) -> Subscription {
        Subscription {
            metadata: Meta {
                name: "memcached-operator".into(),
                namespace: "operators".into(),
                ..Default::default()
            },
            spec: SubscriptionSpec {
                name: "memcached-operator".into(),
                channel: "alpha".into(),
                source: "cat".into(),
                source_namespace: "operators".into(),
                ..Default::default()
            },
            status: SubscriptionStatus {
                installed_csv: installed.into(),
                current_csv: current.into(),
                state: state.into(),
                conditions: conds,
                install_plan_ref: Some(ObjectRef {
                    name: "install-1".into(),
                    namespace: "operators".into(),
                }),
                ..Default::default()
            },
        }
    }

    fn cond(t: &str, reason: &str, msg: &str) -> Condition {
        Condition {
            type_: t.into(),
            status: "True".into(),
            reason: reason.into(),
            message: msg.into(),
            last_transition_time: None,
        }
    }

    fn csv(name: &str, phase: &str, reason: &str) -> Csv {
        Csv {
            metadata: Meta {
                name: name.into(),
                namespace: "operators".into(),
                ..Default::default()
            },
            status: CsvStatus {
                phase: phase.into(),
                reason: reason.into(),
                message: "msg".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn ip(name: &str, phase: &str, approved: bool) -> InstallPlan {
        InstallPlan {
            metadata: Meta {
                name: name.into(),
                namespace: "operators".into(),
                ..Default::default()
            },
            spec: InstallPlanSpec {
                cluster_service_version_names: vec!["m.v2".into()],
                approval: "Manual".into(),
                approved,
            },
            status: InstallPlanStatus {
                phase: phase.into(),
                ..Default::default()
            },
        }
    }

    fn snap(s: Subscription, ip: Option<InstallPlan>, c: Option<Csv>) -> Snapshot {
        Snapshot {
            subscription: Some(s),
            install_plan: ip,
            csv: c,
            installed_csv: None,
            catalog_source: None,
            csvs: Vec::new(),
            operator_groups: None,
        }
    }

    fn install() -> Goal {
        Goal::Install { passes: vec![] }
    }

    #[test]
    fn install_succeeds_when_settled_and_succeeded() {
        let s = snap(
            sub("m.v1", "m.v1", "AtLatestKnown", vec![]),
            None,
            Some(csv("m.v1", "Succeeded", "InstallSucceeded")),
        );
        assert_eq!(
            assess(&install(), &Baseline::default(), &s, false),
            Verdict::Succeeded { csv: "m.v1".into() }
        );
    }

    #[test]
    fn install_waits_while_an_upgrade_is_in_flight() {
        let s = snap(
            sub("m.v1", "m.v2", "UpgradePending", vec![]),
            Some(ip("install-1", "Installing", true)),
            Some(csv("m.v2", "Installing", "InstallWaiting")),
        );
        assert_eq!(
            assess(&install(), &Baseline::default(), &s, false),
            Verdict::Pending
        );
    }

    #[test]
    fn constraints_not_satisfiable_is_terminal_but_errors_only_block() {
        let s = snap(
            sub(
                "",
                "",
                "",
                vec![cond(
                    "ResolutionFailed",
                    "ConstraintsNotSatisfiable",
                    "constraints not satisfiable: no operators found in channel beta of package memcached-operator",
                )],
            ),
            None,
            None,
        );
        let Verdict::Failed(f) = assess(&install(), &Baseline::default(), &s, false) else {
            panic!("expected a failure")
        };
        assert!(f.details[0].contains("no operators found in channel"));
        assert!(f.hints[0].contains("channel"));
        let s = snap(
            sub(
                "",
                "",
                "",
                vec![cond(
                    "ResolutionFailed",
                    "ErrorPreventedResolution",
                    "failed to populate resolver cache",
                )],
            ),
            None,
            None,
        );
        // OLM requeues it: a block, which the wait loop fails only when it persists.
        assert!(matches!(
            assess(&install(), &Baseline::default(), &s, false),
            Verdict::Blocked(_)
        ));
    }

    #[test]
    fn a_failed_csv_reports_reason_and_hint() {
        let s = snap(
            sub("", "m.v1", "UpgradePending", vec![]),
            Some(ip("install-1", "Complete", true)),
            Some(csv("m.v1", "Failed", "UnsupportedOperatorGroup")),
        );
        let Verdict::Failed(f) = assess(&install(), &Baseline::default(), &s, false) else {
            panic!("expected a failure")
        };
        assert!(f.summary.contains("m.v1 failed"));
        assert!(f.details[0].contains("UnsupportedOperatorGroup"));
        assert!(f.hints[0].contains("--target-namespaces"));
    }

    #[test]
    fn manual_approval_stops_or_waits() {
        let s = snap(
            sub("", "m.v2", "UpgradePending", vec![]),
            Some(ip("install-1", "RequiresApproval", false)),
            None,
        );
        assert_eq!(
            assess(&install(), &Baseline::default(), &s, true),
            Verdict::NeedsApproval {
                install_plan: "install-1".into(),
                csvs: vec!["m.v2".into()]
            }
        );
        assert_eq!(
            assess(&install(), &Baseline::default(), &s, false),
            Verdict::Pending
        );
    }

    #[test]
    fn old_failures_are_not_blamed_on_a_new_change() {
        let old = sub(
            "m.v1",
            "m.v2",
            "UpgradeFailed",
            vec![cond("ResolutionFailed", "ConstraintsNotSatisfiable", "old")],
        );
        let baseline = Baseline::of(Some(&old));
        let s = snap(old.clone(), Some(ip("install-1", "Failed", true)), None);
        let goal = Goal::Reach {
            from: Some("m.v1".into()),
            target: Some("m.v3".into()),
            settle: true,
        };
        assert_eq!(assess(&goal, &baseline, &s, false), Verdict::Pending);
        // A new failed InstallPlan is blamed.
        let mut new = old;
        new.status.install_plan_ref = Some(ObjectRef {
            name: "install-2".into(),
            namespace: "operators".into(),
        });
        let s = snap(new, Some(ip("install-2", "Failed", true)), None);
        assert!(matches!(
            assess(&goal, &baseline, &s, false),
            Verdict::Failed(_)
        ));
    }

    #[test]
    fn reach_waits_for_the_target_hop_by_hop() {
        let goal = Goal::Reach {
            from: Some("m.v1".into()),
            target: Some("m.v3".into()),
            settle: true,
        };
        let mid = snap(
            sub("m.v2", "m.v3", "UpgradePending", vec![]),
            None,
            Some(csv("m.v2", "Succeeded", "")),
        );
        assert_eq!(
            assess(&goal, &Baseline::default(), &mid, false),
            Verdict::Pending
        );
        let done = snap(
            sub("m.v3", "m.v3", "AtLatestKnown", vec![]),
            None,
            Some(csv("m.v3", "Succeeded", "")),
        );
        assert_eq!(
            assess(&goal, &Baseline::default(), &done, false),
            Verdict::Succeeded { csv: "m.v3".into() }
        );
    }

    #[test]
    fn approval_of_one_hop_does_not_wait_for_the_next() {
        let goal = Goal::Reach {
            from: Some("m.v1".into()),
            target: Some("m.v2".into()),
            settle: false,
        };
        let mut s = snap(
            sub("m.v2", "m.v3", "UpgradePending", vec![]),
            Some(ip("install-2", "RequiresApproval", false)),
            None,
        );
        s.installed_csv = Some(csv("m.v2", "Succeeded", ""));
        // The installed CSV succeeded; the next hop waiting for approval does not matter.
        assert_eq!(
            assess(&goal, &Baseline::default(), &s, false),
            Verdict::Succeeded { csv: "m.v2".into() }
        );
    }

    #[test]
    fn unknown_target_and_nothing_to_do_is_no_change() {
        let goal = Goal::Reach {
            from: Some("m.v1".into()),
            target: None,
            settle: true,
        };
        let s = snap(
            sub("m.v1", "m.v1", "AtLatestKnown", vec![]),
            Some(ip("install-1", "Complete", true)),
            Some(csv("m.v1", "Succeeded", "")),
        );
        let baseline = Baseline {
            install_plan: Some("install-1".into()),
            ..Default::default()
        };
        assert_eq!(
            assess(&goal, &baseline, &s, false),
            Verdict::NoChange { csv: "m.v1".into() }
        );
    }

    #[test]
    fn describe_lists_each_object() {
        let s = snap(
            sub(
                "",
                "m.v1",
                "UpgradePending",
                vec![cond("InstallPlanPending", "Installing", "")],
            ),
            Some(ip("install-1", "Installing", true)),
            Some(csv("m.v1", "Installing", "InstallWaiting")),
        );
        let lines: Vec<String> = describe(&s).into_iter().map(|(_, l)| l).collect();
        assert_eq!(
            lines,
            vec![
                "Subscription operators/memcached-operator: UpgradePending, upgrading to m.v1, InstallPlanPending (Installing)",
                "InstallPlan operators/install-1: Installing (m.v2)",
                "ClusterServiceVersion operators/m.v1: Installing (InstallWaiting): msg",
            ]
        );
    }

    #[test]
    fn describe_says_approved_and_where_olm_connects() {
        let mut s = snap(
            sub("", "m.v2", "UpgradePending", vec![]),
            Some(ip("install-1", "RequiresApproval", true)),
            None,
        );
        s.catalog_source = Some(CatalogSource {
            metadata: crate::olm::Meta {
                name: "cat".into(),
                namespace: "operators".into(),
                ..Default::default()
            },
            spec: crate::olm::CatalogSourceSpec {
                source_type: "grpc".into(),
                address: "10.0.0.7:50051".into(),
                ..Default::default()
            },
            ..Default::default()
        });
        let lines: Vec<String> = describe(&s).into_iter().map(|(_, l)| l).collect();
        assert!(
            lines.contains(
                &"CatalogSource operators/cat: waiting for OLM to connect to 10.0.0.7:50051".into()
            ),
            "{lines:?}"
        );
        assert!(
            lines.contains(
                &"InstallPlan operators/install-1: RequiresApproval (m.v2), approved".into()
            ),
            "{lines:?}"
        );
    }

    #[test]
    fn timeout_hints_name_the_stuck_part() {
        let s = snap(
            sub("", "m.v2", "UpgradePending", vec![]),
            Some(ip("install-1", "RequiresApproval", false)),
            None,
        );
        let h = timeout_hints(&s);
        assert!(h.iter().any(|h| h.contains("bundle-tool approve")), "{h:?}");
    }
}
