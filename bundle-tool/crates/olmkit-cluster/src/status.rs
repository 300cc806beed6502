//! `status`: Subscriptions, InstallPlans and CSVs of a namespace (or all), laid out like
//! `kubectl get csv`, with each Subscription's channel and its next upgrade.
//!
//! The next upgrade comes first from OLM itself (a Subscription whose `currentCSV` differs from
//! its `installedCSV` is mid-upgrade, possibly waiting for an approval), then from the local
//! catalog through an [`UpgradeOracle`] (the explain logic: which CSV the channel leads to next
//! from the installed one). Gathering does the I/O; building and rendering the report are pure.
//!
//! OperatorGroups are listed too, because the one dead end real OLM reports nowhere on the
//! Subscription is a namespace with several of them: OLM's `syncOperatorGroups` only marks
//! each group `MultipleOperatorGroup=True MultipleOperatorGroupsFound` and resolves nothing, and
//! a CSV created there fails with `TooManyOperatorGroups`. Both go under NEEDS ATTENTION with
//! the fix. A `ResolutionFailed ConstraintsNotSatisfiable` that OLM left behind after replacing
//! a CSV (see [`crate::assess::replacement_leftover`]) is a note, not something to act on.

use crate::assess::{Snapshot, replacement_leftover};
use crate::client::{Cluster, ClusterError};
use crate::install_mode::Targets;
use crate::olm::{
    Condition, Csv, InstallPlan, OperatorGroup, Subscription, csv_resource, install_plan_resource,
    operator_group_resource, subscription_resource,
};
use crate::table::Table;
use serde::Serialize;

/// Answers "where does channel `channel` of `package` lead from `from`, one InstallPlan on?".
pub trait UpgradeOracle {
    /// The next CSV OLM v0 would install, `None` at the channel head or when unknown.
    fn next_hop(&self, package: &str, channel: &str, from: &str) -> Option<String>;
}

/// What `status` shows about one Subscription.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Package.
    pub package: String,
    /// Channel ("" = default channel).
    pub channel: String,
    /// CatalogSource (namespace/name).
    pub source: String,
    /// Automatic or Manual.
    pub approval: String,
    /// OLM's state.
    pub state: String,
    /// Installed CSV.
    #[serde(rename = "installedCSV")]
    pub installed_csv: String,
    /// CSV OLM progresses to.
    #[serde(rename = "currentCSV")]
    pub current_csv: String,
    /// The next upgrade, if any.
    pub next: Option<NextUpgrade>,
    /// Conditions that are True.
    pub conditions: Vec<Condition>,
}

/// The next upgrade of a Subscription and where that knowledge comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NextUpgrade {
    /// The CSV.
    pub csv: String,
    /// `subscription` (OLM is on it) or `catalog` (the local catalog says so).
    pub source: String,
    /// Extra state, e.g. `needs approval`.
    pub note: String,
}

/// What `status` shows about one InstallPlan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// CSVs it installs.
    pub csvs: Vec<String>,
    /// Automatic or Manual.
    pub approval: String,
    /// Approved.
    pub approved: bool,
    /// Phase.
    pub phase: String,
}

/// What `status` shows about one CSV (the `kubectl get csv` columns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Display name.
    pub display: String,
    /// Version.
    pub version: String,
    /// Release.
    pub release: String,
    /// Replaces.
    pub replaces: String,
    /// Phase.
    pub phase: String,
    /// Reason of the phase.
    pub reason: String,
    /// Message of the phase.
    pub message: String,
}

/// What `status` shows about one OperatorGroup.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.targetNamespaces` (empty with no selector: all namespaces).
    pub target_namespaces: Vec<String>,
    /// Whether `spec.selector` chooses the targets.
    pub selector: bool,
    /// The namespaces OLM resolved (`status.namespaces`; `""` = all).
    pub namespaces: Vec<String>,
    /// Conditions.
    pub conditions: Vec<Condition>,
}

impl OperatorGroupRow {
    fn targets(&self) -> String {
        if self.selector {
            "(label selector)".into()
        } else if self.target_namespaces.is_empty() {
            "(all namespaces)".into()
        } else {
            self.target_namespaces.join(",")
        }
    }
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// The namespace, or None for all namespaces.
    pub namespace: Option<String>,
    /// Subscriptions.
    pub subscriptions: Vec<SubscriptionRow>,
    /// InstallPlans.
    pub install_plans: Vec<InstallPlanRow>,
    /// CSVs (copies OLM makes in target namespaces are left out).
    pub cluster_service_versions: Vec<CsvRow>,
    /// OperatorGroups.
    pub operator_groups: Vec<OperatorGroupRow>,
    /// Copied CSVs left out.
    pub copied_csvs_hidden: usize,
    /// Things that need attention, one line each.
    pub attention: Vec<String>,
    /// Things worth knowing that need no action (OLM's leftovers), one line each.
    pub notes: Vec<String>,
}

/// The objects `status` reads.
#[derive(Clone, Debug, Default)]
pub struct Gathered {
    /// Subscriptions.
    pub subscriptions: Vec<Subscription>,
    /// InstallPlans.
    pub install_plans: Vec<InstallPlan>,
    /// CSVs.
    pub csvs: Vec<Csv>,
    /// OperatorGroups.
    pub operator_groups: Vec<OperatorGroup>,
}

/// Reads the four kinds from the cluster.
pub async fn gather(cluster: &Cluster, namespace: Option<&str>) -> Result<Gathered, ClusterError> {
    Ok(Gathered {
        subscriptions: cluster.list(&subscription_resource(), namespace).await?,
        install_plans: cluster.list(&install_plan_resource(), namespace).await?,
        csvs: cluster.list(&csv_resource(), namespace).await?,
        operator_groups: cluster.list(&operator_group_resource(), namespace).await?,
    })
}

/// OperatorGroup rows, and what needs attention: several groups in one namespace (OLM then
/// resolves nothing there) or a group OLM flagged `MultipleOperatorGroupsFound`.
fn operator_group_rows(
    groups: &[OperatorGroup],
    attention: &mut Vec<String>,
) -> Vec<OperatorGroupRow> {
    let mut by_ns: std::collections::BTreeMap<&str, Vec<&OperatorGroup>> = Default::default();
    for g in groups {
        by_ns.entry(&g.metadata.namespace).or_default().push(g);
    }
    for (ns, gs) in &by_ns {
        let flagged = gs.iter().any(|g| g.flagged_multiple());
        if gs.len() > 1 || flagged {
            let names: Vec<&str> = gs.iter().map(|g| g.metadata.name.as_str()).collect();
            let what = if flagged {
                "OLM marks them MultipleOperatorGroup (MultipleOperatorGroupsFound)"
            } else {
                "OLM allows one"
            };
            let fix = if gs.len() > 1 {
                format!(
                    "keep exactly one: kubectl -n {ns} delete operatorgroup {}",
                    names[1..].join(" ")
                )
            } else {
                "only one is left: OLM clears the condition on its next sync".to_string()
            };
            attention.push(format!(
                "namespace {ns} has {} OperatorGroup(s) ({}); {what} and installs nothing there: {fix}",
                gs.len(),
                names.join(", ")
            ));
        }
    }
    groups
        .iter()
        .map(|g| OperatorGroupRow {
            namespace: g.metadata.namespace.clone(),
            name: g.metadata.name.clone(),
            target_namespaces: match Targets::of(g) {
                Targets::Namespaces(ns) => ns,
                _ => Vec::new(),
            },
            selector: Targets::of(g) == Targets::Selector,
            namespaces: g.status.namespaces.clone(),
            conditions: g.status.conditions.clone(),
        })
        .collect()
}

fn sorted_by_ns_name<T>(mut v: Vec<T>, key: impl Fn(&T) -> (String, String)) -> Vec<T> {
    v.sort_by_key(|x| key(x));
    v
}

/// Attention items and notes from a Subscription's true conditions. A `ConstraintsNotSatisfiable`
/// left over from a replacement is a note ([`replacement_leftover`]).
fn condition_lines(
    s: &Subscription,
    conditions: &[Condition],
    csvs: &[Csv],
    attention: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    for c in conditions {
        if c.type_ == "ResolutionFailed" && c.reason == "ConstraintsNotSatisfiable" {
            let snap = Snapshot {
                subscription: Some(s.clone()),
                csvs: csvs
                    .iter()
                    .filter(|c| c.metadata.namespace == s.metadata.namespace)
                    .cloned()
                    .collect(),
                ..Default::default()
            };
            if let Some(old) = replacement_leftover(c, &snap) {
                notes.push(format!(
                    "Subscription {}/{}: ResolutionFailed (ConstraintsNotSatisfiable) about {old} is left over from its replacement (OLM sets it while a CSV is replaced and clears it on its next resolution); nothing to do",
                    s.metadata.namespace, s.metadata.name
                ));
                continue;
            }
        }
        if matches!(
            c.type_.as_str(),
            "ResolutionFailed"
                | "CatalogSourcesUnhealthy"
                | "InstallPlanFailed"
                | "InstallPlanMissing"
                | "BundleUnpackFailed"
                | "Deprecated"
        ) {
            attention.push(format!(
                "Subscription {}/{}: {} ({}): {}",
                s.metadata.namespace, s.metadata.name, c.type_, c.reason, c.message
            ));
        }
    }
}

/// Builds the report (pure).
pub fn build_report(
    namespace: Option<&str>,
    gathered: Gathered,
    oracle: Option<&dyn UpgradeOracle>,
) -> StatusReport {
    let Gathered {
        subscriptions: subs,
        install_plans: ips,
        csvs,
        operator_groups,
    } = gathered;
    let groups = sorted_by_ns_name(operator_groups, |g| {
        (g.metadata.namespace.clone(), g.metadata.name.clone())
    });
    let subs = sorted_by_ns_name(subs, |s| {
        (s.metadata.namespace.clone(), s.metadata.name.clone())
    });
    let ips = sorted_by_ns_name(ips, |i| {
        (i.metadata.namespace.clone(), i.metadata.name.clone())
    });
    let csvs = sorted_by_ns_name(csvs, |c| {
        (c.metadata.namespace.clone(), c.metadata.name.clone())
    });
    let mut attention = Vec::new();
    let mut notes = Vec::new();
    let sub_rows: Vec<SubscriptionRow> = subs
        .iter()
        .map(|s| subscription_row(s, &ips, &csvs, oracle, &mut attention, &mut notes))
        .collect();
    let ip_rows: Vec<InstallPlanRow> = ips
        .iter()
        .map(|i| install_plan_row(i, &mut attention))
        .collect();
    let hidden = csvs.iter().filter(|c| c.is_copy()).count();
    let csv_rows: Vec<CsvRow> = csvs
        .iter()
        .filter(|c| !c.is_copy())
        .map(|c| csv_row(c, &mut attention))
        .collect();
    let operator_groups = operator_group_rows(&groups, &mut attention);
    StatusReport {
        namespace: namespace.map(String::from),
        subscriptions: sub_rows,
        install_plans: ip_rows,
        cluster_service_versions: csv_rows,
        operator_groups,
        copied_csvs_hidden: hidden,
        attention,
        notes,
    }
}

/// The row of a Subscription, and what its conditions say needs attention.
fn subscription_row(
    s: &Subscription,
    ips: &[InstallPlan],
    csvs: &[Csv],
    oracle: Option<&dyn UpgradeOracle>,
    attention: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> SubscriptionRow {
    let st = &s.status;
    let ip = st.install_plan_name().and_then(|n| {
        ips.iter()
            .find(|i| i.metadata.name == n && i.metadata.namespace == s.metadata.namespace)
    });
    let next = next_upgrade(s, ip, oracle);
    let conditions: Vec<Condition> = st
        .conditions
        .iter()
        .filter(|c| c.is_true())
        .cloned()
        .collect();
    condition_lines(s, &conditions, csvs, attention, notes);
    SubscriptionRow {
        namespace: s.metadata.namespace.clone(),
        name: s.metadata.name.clone(),
        package: s.spec.name.clone(),
        channel: s.spec.channel.clone(),
        source: format!("{}/{}", s.spec.source_namespace, s.spec.source),
        approval: s.approval().to_string(),
        state: st.state.clone(),
        installed_csv: st.installed_csv.clone(),
        current_csv: st.current_csv.clone(),
        next,
        conditions,
    }
}

/// The Subscription's next upgrade: the one OLM resolved (and its InstallPlan's state), or,
/// once installed, the next hop the local catalog offers.
fn next_upgrade(
    s: &Subscription,
    ip: Option<&InstallPlan>,
    oracle: Option<&dyn UpgradeOracle>,
) -> Option<NextUpgrade> {
    let st = &s.status;
    if !st.current_csv.is_empty() && st.current_csv != st.installed_csv {
        let note = match ip {
            Some(ip) if ip.awaits_approval() => "needs approval".to_string(),
            Some(ip) if !ip.status.phase.is_empty() => ip.status.phase.clone(),
            _ => "pending".to_string(),
        };
        Some(NextUpgrade {
            csv: st.current_csv.clone(),
            source: "subscription".into(),
            note,
        })
    } else if !st.installed_csv.is_empty() {
        oracle
            .and_then(|o| o.next_hop(&s.spec.name, &s.spec.channel, &st.installed_csv))
            .map(|csv| NextUpgrade {
                csv,
                source: "catalog".into(),
                note: "in local catalog".into(),
            })
    } else {
        None
    }
}

/// The row of an InstallPlan; one waiting for approval or failed needs attention.
fn install_plan_row(i: &InstallPlan, attention: &mut Vec<String>) -> InstallPlanRow {
    if i.awaits_approval() {
        attention.push(format!(
            "InstallPlan {}/{} waits for approval to install {}: bundle-tool approve --install-plan {} --namespace {}",
            i.metadata.namespace,
            i.metadata.name,
            i.spec.cluster_service_version_names.join(", "),
            i.metadata.name,
            i.metadata.namespace
        ));
    }
    if i.status.phase == "Failed" {
        let why = i
            .status
            .conditions
            .iter()
            .find(|c| c.status == "False")
            .map(|c| format!("{}: {}", c.reason, c.message))
            .unwrap_or_else(|| i.status.message.clone());
        attention.push(format!(
            "InstallPlan {}/{} failed: {why}",
            i.metadata.namespace, i.metadata.name
        ));
    }
    InstallPlanRow {
        namespace: i.metadata.namespace.clone(),
        name: i.metadata.name.clone(),
        csvs: i.spec.cluster_service_version_names.clone(),
        approval: i.spec.approval.clone(),
        approved: i.spec.approved,
        phase: i.status.phase.clone(),
    }
}

/// The row of a (not copied) CSV; a failed one needs attention.
fn csv_row(c: &Csv, attention: &mut Vec<String>) -> CsvRow {
    if c.status.phase == "Failed" {
        let ns = &c.metadata.namespace;
        let fix = if c.status.reason == "TooManyOperatorGroups" {
            format!("; keep exactly one OperatorGroup: kubectl -n {ns} get operatorgroups")
        } else {
            String::new()
        };
        attention.push(format!(
            "ClusterServiceVersion {ns}/{} failed ({}): {}{fix}",
            c.metadata.name, c.status.reason, c.status.message
        ));
    }
    CsvRow {
        namespace: c.metadata.namespace.clone(),
        name: c.metadata.name.clone(),
        display: spec_str(c.view().display_name()),
        version: spec_str(c.view().version()),
        release: spec_str(c.view().release()),
        replaces: spec_str(c.view().replaces()),
        phase: c.status.phase.clone(),
        reason: c.status.reason.clone(),
        message: c.status.message.clone(),
    }
}

fn with_ns(all: bool, ns: &str, mut row: Vec<String>) -> Vec<String> {
    if all {
        row.insert(0, ns.to_string());
    }
    row
}

fn headers(all: bool, h: &[&str]) -> Table {
    if all {
        let mut v = vec!["NAMESPACE"];
        v.extend_from_slice(h);
        Table::new(&v)
    } else {
        Table::new(h)
    }
}

/// Renders the report as text: three `kubectl get`-style tables, then what needs attention.
pub fn render_text(r: &StatusReport) -> String {
    let all = r.namespace.is_none();
    let where_ = match &r.namespace {
        Some(ns) => format!("in namespace {ns}"),
        None => "in any namespace".to_string(),
    };
    let mut out = String::new();

    out.push_str("SUBSCRIPTIONS\n");
    if r.subscriptions.is_empty() {
        out.push_str(&format!("No Subscriptions found {where_}.\n"));
    } else {
        out.push_str(&subscriptions_table(all, &r.subscriptions));
    }

    out.push_str("\nINSTALLPLANS\n");
    if r.install_plans.is_empty() {
        out.push_str(&format!("No InstallPlans found {where_}.\n"));
    } else {
        out.push_str(&install_plans_table(all, &r.install_plans));
    }

    out.push_str("\nCLUSTERSERVICEVERSIONS\n");
    if r.cluster_service_versions.is_empty() {
        out.push_str(&format!("No ClusterServiceVersions found {where_}.\n"));
    } else {
        out.push_str(&csvs_table(all, &r.cluster_service_versions));
    }
    if r.copied_csvs_hidden > 0 {
        out.push_str(&format!(
            "({} copied CSV(s) that OLM places in target namespaces not shown)\n",
            r.copied_csvs_hidden
        ));
    }
    out.push_str("\nOPERATORGROUPS\n");
    if r.operator_groups.is_empty() {
        out.push_str(&format!("No OperatorGroups found {where_}.\n"));
    } else {
        out.push_str(&operator_groups_table(all, &r.operator_groups));
    }
    if !r.notes.is_empty() {
        out.push_str("\nNOTES\n");
        for n in &r.notes {
            out.push_str(&format!("- {n}\n"));
        }
    }
    if !r.attention.is_empty() {
        out.push_str("\nNEEDS ATTENTION\n");
        for a in &r.attention {
            out.push_str(&format!("- {a}\n"));
        }
    }
    out
}

/// The SUBSCRIPTIONS table.
fn subscriptions_table(all: bool, rows: &[SubscriptionRow]) -> String {
    let mut t = headers(
        all,
        &[
            "NAME",
            "PACKAGE",
            "CHANNEL",
            "APPROVAL",
            "INSTALLED",
            "STATE",
            "NEXT",
        ],
    );
    for s in rows {
        let next = match &s.next {
            Some(n) => format!("{} ({})", n.csv, n.note),
            None if s.installed_csv.is_empty() => String::new(),
            None => "-".into(),
        };
        let channel = if s.channel.is_empty() {
            "(default)".to_string()
        } else {
            s.channel.clone()
        };
        t.push(with_ns(
            all,
            &s.namespace,
            vec![
                s.name.clone(),
                s.package.clone(),
                channel,
                s.approval.clone(),
                s.installed_csv.clone(),
                s.state.clone(),
                next,
            ],
        ));
    }
    t.render()
}

/// The INSTALLPLANS table.
fn install_plans_table(all: bool, rows: &[InstallPlanRow]) -> String {
    let mut t = headers(all, &["NAME", "CSV", "APPROVAL", "APPROVED", "PHASE"]);
    for i in rows {
        t.push(with_ns(
            all,
            &i.namespace,
            vec![
                i.name.clone(),
                i.csvs.join(","),
                i.approval.clone(),
                i.approved.to_string(),
                i.phase.clone(),
            ],
        ));
    }
    t.render()
}

/// The CLUSTERSERVICEVERSIONS table (without RELEASE when no CSV has one).
fn csvs_table(all: bool, rows: &[CsvRow]) -> String {
    let mut t = headers(
        all,
        &["NAME", "DISPLAY", "VERSION", "RELEASE", "REPLACES", "PHASE"],
    );
    for c in rows {
        t.push(with_ns(
            all,
            &c.namespace,
            vec![
                c.name.clone(),
                c.display.clone(),
                c.version.clone(),
                c.release.clone(),
                c.replaces.clone(),
                c.phase.clone(),
            ],
        ));
    }
    t.drop_empty_column("RELEASE");
    t.render()
}

/// The OPERATORGROUPS table.
fn operator_groups_table(all: bool, rows: &[OperatorGroupRow]) -> String {
    let mut t = headers(all, &["NAME", "TARGET NAMESPACES", "CONDITIONS"]);
    for g in rows {
        let conds: Vec<String> = g
            .conditions
            .iter()
            .map(|c| format!("{}={} ({})", c.type_, c.status, c.reason))
            .collect();
        t.push(with_ns(
            all,
            &g.namespace,
            vec![
                g.name.clone(),
                g.targets(),
                if conds.is_empty() {
                    "-".into()
                } else {
                    conds.join(", ")
                },
            ],
        ));
    }
    t.render()
}

/// A CSV spec field as `kubectl get csv` shows it: empty when absent.
fn spec_str(field: Option<&str>) -> String {
    field.unwrap_or_default().to_string()
}

/// The `kubectl get csv` table of one CSV (what `install` prints when it is done).
pub fn csv_table(csv: &Csv) -> String {
    let mut t = Table::new(&["NAME", "DISPLAY", "VERSION", "RELEASE", "REPLACES", "PHASE"]);
    t.push(vec![
        csv.metadata.name.clone(),
        spec_str(csv.view().display_name()),
        spec_str(csv.view().version()),
        spec_str(csv.view().release()),
        spec_str(csv.view().replaces()),
        csv.status.phase.clone(),
    ]);
    t.drop_empty_column("RELEASE");
    t.render()
}

/// Reads one CSV and renders its `kubectl get csv` table.
pub async fn csv_table_of(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> Result<Option<String>, ClusterError> {
    let csv: Option<Csv> = cluster.get(&csv_resource(), Some(namespace), name).await?;
    Ok(csv.as_ref().map(csv_table))
}

/// Renders the report as pretty JSON.
pub fn render_json(r: &StatusReport) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::olm::*;

    struct Fixed;
    impl UpgradeOracle for Fixed {
        fn next_hop(&self, _p: &str, channel: &str, from: &str) -> Option<String> {
            (channel == "stable" && from == "m.v0.2.0").then(|| "m.v0.3.0".to_string())
        }
    }

    fn sub(name: &str, installed: &str, current: &str, ip: Option<&str>) -> Subscription {
        Subscription {
            metadata: Meta {
                name: name.into(),
                namespace: "ops".into(),
                ..Default::default()
            },
            spec: SubscriptionSpec {
                name: "m".into(),
                channel: "stable".into(),
                source: "cat".into(),
                source_namespace: "ops".into(),
                install_plan_approval: "Manual".into(),
                ..Default::default()
            },
            status: SubscriptionStatus {
                installed_csv: installed.into(),
                current_csv: current.into(),
                state: if installed == current {
                    "AtLatestKnown".into()
                } else {
                    "UpgradePending".into()
                },
                install_plan_ref: ip.map(|n| ObjectRef {
                    name: n.into(),
                    namespace: "ops".into(),
                }),
                ..Default::default()
            },
        }
    }

    fn csv(name: &str, version: &str, replaces: &str, phase: &str) -> Csv {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ops"},
            "spec": {
                "displayName": "Memcached Operator",
                "version": version,
                "replaces": replaces,
            },
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    fn group(ns: &str, name: &str, flagged: bool) -> OperatorGroup {
        OperatorGroup {
            metadata: Meta {
                name: name.into(),
                namespace: ns.into(),
                ..Default::default()
            },
            status: OperatorGroupStatus {
                namespaces: vec!["".into()],
                conditions: if flagged {
                    vec![Condition {
                        type_: MULTIPLE_OPERATOR_GROUPS_CONDITION.into(),
                        status: "True".into(),
                        reason: MULTIPLE_OPERATOR_GROUPS_REASON.into(),
                        message: "Multiple OperatorGroup found in the same namespace".into(),
                        last_transition_time: None,
                    }]
                } else {
                    vec![]
                },
            },
            ..Default::default()
        }
    }

    /// The end of the two-operatorgroups trace: both groups flagged, the Subscription silent.
    #[test]
    fn several_operator_groups_need_attention_with_the_fix() {
        let mut s = sub("memcached-operator", "", "", None);
        s.status.state = String::new();
        let r = build_report(
            Some("ops"),
            Gathered {
                subscriptions: vec![s],
                operator_groups: vec![group("ops", "og", true), group("ops", "og-2", true)],
                ..Default::default()
            },
            None,
        );
        assert_eq!(r.operator_groups.len(), 2);
        assert_eq!(r.attention.len(), 1, "{:?}", r.attention);
        assert!(r.attention[0].contains("MultipleOperatorGroupsFound"));
        assert!(r.attention[0].contains("kubectl -n ops delete operatorgroup og-2"));
        let text = render_text(&r);
        assert!(
            text.contains("og-2   (all namespaces)    MultipleOperatorGroup=True (MultipleOperatorGroupsFound)"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&render_json(&r)).unwrap();
        assert_eq!(
            json["operatorGroups"][1]["conditions"][0]["reason"],
            MULTIPLE_OPERATOR_GROUPS_REASON
        );
    }

    /// The end of the install-manual-then-approve trace: the replaced CSV is gone, the
    /// condition about it stays. A note, not an attention item.
    #[test]
    fn a_resolution_failure_left_over_from_a_replacement_is_a_note() {
        let mut s = sub("memcached-operator", "m.v0.3.0", "m.v0.3.0", None);
        s.status.conditions = vec![Condition {
            type_: "ResolutionFailed".into(),
            status: "True".into(),
            reason: "ConstraintsNotSatisfiable".into(),
            message: "constraints not satisfiable: clusterserviceversion m.v0.1.0 exists and is not referenced by a subscription, subscription memcached-operator exists".into(),
            last_transition_time: None,
        }];
        let mut r = build_report(
            Some("ops"),
            Gathered {
                subscriptions: vec![s.clone()],
                csvs: vec![csv("m.v0.3.0", "0.3.0", "m.v0.1.0", "Succeeded")],
                operator_groups: vec![group("ops", "og", false)],
                ..Default::default()
            },
            None,
        );
        assert!(r.attention.is_empty(), "{:?}", r.attention);
        assert!(r.notes[0].contains("left over"), "{:?}", r.notes);
        // The same condition about a CSV that is installed on its own is a real problem.
        r = build_report(
            Some("ops"),
            Gathered {
                subscriptions: vec![s],
                csvs: vec![
                    csv("m.v0.3.0", "0.3.0", "m.v0.1.0", "Succeeded"),
                    csv("m.v0.1.0", "0.1.0", "", "Succeeded"),
                ],
                ..Default::default()
            },
            None,
        );
        assert_eq!(r.attention.len(), 1, "{:?}", r.attention);
        assert!(r.notes.is_empty());
    }

    #[test]
    fn next_upgrade_from_olm_then_catalog() {
        let ip = InstallPlan {
            metadata: Meta {
                name: "install-2".into(),
                namespace: "ops".into(),
                ..Default::default()
            },
            spec: InstallPlanSpec {
                cluster_service_version_names: vec!["m.v0.3.0".into()],
                approval: "Manual".into(),
                approved: false,
            },
            status: InstallPlanStatus {
                phase: "RequiresApproval".into(),
                ..Default::default()
            },
        };
        let r = build_report(
            Some("ops"),
            Gathered {
                subscriptions: vec![
                    sub("a", "m.v0.2.0", "m.v0.3.0", Some("install-2")),
                    sub("b", "m.v0.2.0", "m.v0.2.0", None),
                ],
                install_plans: vec![ip],
                csvs: vec![
                    csv("m.v0.2.0", "0.2.0", "m.v0.1.0", "Succeeded"),
                    csv("m.v0.1.0", "0.1.0", "", "Replacing"),
                ],
                operator_groups: vec![group("ops", "og", false)],
            },
            Some(&Fixed),
        );
        let a = &r.subscriptions[0];
        assert_eq!(a.next.as_ref().unwrap().note, "needs approval");
        let b = &r.subscriptions[1];
        assert_eq!(b.next.as_ref().unwrap().source, "catalog");
        assert!(r.attention[0].contains("bundle-tool approve --install-plan install-2"));
        insta::assert_snapshot!(render_text(&r));
    }

    #[test]
    fn all_namespaces_adds_a_column_and_hides_copies() {
        let mut copy = csv("m.v0.2.0", "0.2.0", "", "Succeeded");
        copy.metadata.namespace = "default".into();
        copy.metadata
            .labels
            .insert(COPIED_FROM_LABEL.into(), "ops".into());
        let r = build_report(
            None,
            Gathered {
                subscriptions: vec![sub("a", "m.v0.2.0", "m.v0.2.0", None)],
                csvs: vec![csv("m.v0.2.0", "0.2.0", "", "Succeeded"), copy],
                ..Default::default()
            },
            None,
        );
        assert_eq!(r.copied_csvs_hidden, 1);
        let text = render_text(&r);
        assert!(text.contains("NAMESPACE   NAME"), "{text}");
        assert!(text.contains("No InstallPlans found in any namespace."));
        assert!(text.contains("1 copied CSV"));
    }
}
