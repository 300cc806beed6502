//! `cleanup <package>`: removes what `run bundle` created for a package, and what OLM made from
//! it, as operator-sdk's `cleanup` does, but nothing else: a Subscription, CatalogSource or
//! OperatorGroup `run bundle` did not create (no [`crate::run_bundle::RUN_BUNDLE_LABEL`] and
//! package annotation) is never touched.
//!
//! Order (operator-sdk's, with what it leaves to the garbage collector done explicitly, so that
//! everything deleted is reported): the Subscription's InstallPlans, then the Subscription, so
//! OLM installs nothing more; the CRDs the installed CSV owns (with `delete_crds`), waiting until
//! they are gone, so the operator can still handle the finalizers of its custom resources; the
//! CSVs (OLM removes the Deployment, RBAC and copies in other namespaces it made for them); the
//! registry pods and ConfigMaps, then the CatalogSource; and the OperatorGroup `run bundle`
//! created, once no Subscription is left in the namespace (with `delete_operator_groups`). A CRD
//! another CSV of the cluster also owns is kept.

use crate::client::{Cluster, ClusterError, OlmMissingError};
use crate::install::Event;
use crate::olm::{
    CatalogSource, Csv, InstallPlan, OperatorGroup, Subscription, catalog_source_resource,
    csv_resource, install_plan_resource, operator_group_resource, subscription_resource,
};
use crate::run_bundle::live::install_plans_of;
use crate::run_bundle::manifests::injected_bundles;
use crate::run_bundle::{
    RUN_BUNDLE_LABEL, config_map_resource, crd_resource, created_for, pod_resource, selector,
};
use kube::core::ApiResource;
use serde::Serialize;
use std::time::Duration;
use thiserror::Error;
use tokio::time::Instant;

/// What to clean up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanupRequest {
    /// Namespace.
    pub namespace: String,
    /// Package.
    pub package: String,
    /// Delete the CRDs the installed CSVs own (and so every custom resource of them).
    pub delete_crds: bool,
    /// Delete the OperatorGroup `run bundle` created once no Subscription is left.
    pub delete_operator_groups: bool,
    /// Give up waiting for deletions after this long.
    pub timeout: Duration,
    /// Time between two looks while waiting.
    pub poll_interval: Duration,
}

/// One object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ObjectRef {
    /// Kind.
    pub kind: String,
    /// Namespace ("" for cluster-scoped objects).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// An object left in place, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// Why.
    pub reason: String,
}

/// What cleanup did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CleanupReport {
    /// Package.
    pub package: String,
    /// Namespace.
    pub namespace: String,
    /// What was deleted, in order.
    pub deleted: Vec<ObjectRef>,
    /// What was left, and why.
    pub kept: Vec<Kept>,
}

/// Cleanup could not run.
#[derive(Debug, Error)]
pub enum CleanupError {
    /// OLM is missing.
    #[error(transparent)]
    OlmMissing(#[from] OlmMissingError),
    /// An API call failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The package is installed, but not by `run bundle`.
    #[error(
        "package {package} in namespace {namespace} was not installed by run bundle (Subscription {subscriptions}); cleanup removes only what run bundle created"
    )]
    NotRunBundle {
        /// Package.
        package: String,
        /// Namespace.
        namespace: String,
        /// The Subscriptions found.
        subscriptions: String,
    },
    /// An object was not gone in time.
    #[error(
        "{object} is still there after {waited:?} (finalizers, or something keeps recreating it)"
    )]
    Timeout {
        /// The object.
        object: ObjectRef,
        /// How long cleanup waited.
        waited: Duration,
    },
}

impl CleanupError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            CleanupError::OlmMissing(m) => vec![m.hint()],
            CleanupError::Cluster(c) => c.hint().into_iter().collect(),
            CleanupError::NotRunBundle { namespace, .. } => vec![format!(
                "remove that install yourself (kubectl -n {namespace} delete subscription NAME, then its CSV)"
            )],
            CleanupError::Timeout { object, .. } => vec![
                format!(
                    "see what holds it: kubectl get {} {}{} -o yaml (metadata.finalizers)",
                    object.kind.to_lowercase(),
                    object.name,
                    if object.namespace.is_empty() {
                        String::new()
                    } else {
                        format!(" -n {}", object.namespace)
                    }
                ),
                "rerun with a longer --timeout".into(),
            ],
        }
    }
    /// True when the user can act on it (exit 1).
    pub fn is_user_error(&self) -> bool {
        match self {
            CleanupError::Cluster(c) => c.is_user_error(),
            CleanupError::OlmMissing(OlmMissingError::Cluster(c)) => c.is_user_error(),
            _ => true,
        }
    }
}

/// Any object, by its metadata.
#[derive(Clone, Debug, Default, serde::Deserialize)]
struct Named {
    #[serde(default)]
    metadata: crate::olm::Meta,
}

fn obj(ar: &ApiResource, namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        kind: ar.kind.clone(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

struct Deleter<'a> {
    cluster: &'a Cluster,
    deadline: Instant,
    poll: Duration,
    timeout: Duration,
    report: CleanupReport,
}

impl Deleter<'_> {
    /// Deletes one object; with `wait`, until it is gone.
    async fn delete(
        &mut self,
        ar: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        wait: bool,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), CleanupError> {
        let o = obj(ar, namespace.unwrap_or(""), name);
        if !self.cluster.delete(ar, namespace, name).await? {
            return Ok(());
        }
        on_event(Event::Note(&format!("deleted {o}")));
        if wait {
            loop {
                let gone = self
                    .cluster
                    .get::<serde_json::Value>(ar, namespace, name)
                    .await?
                    .is_none();
                if gone {
                    break;
                }
                let now = Instant::now();
                if now >= self.deadline {
                    return Err(CleanupError::Timeout {
                        object: o,
                        waited: self.timeout,
                    });
                }
                tokio::time::sleep(self.poll.min(self.deadline - now)).await;
            }
        }
        self.report.deleted.push(o);
        Ok(())
    }
}

/// What `run bundle` may have left in the namespace for the package.
struct Found {
    /// The package's Subscriptions `run bundle` created.
    ours: Vec<Subscription>,
    /// The package's Subscriptions it did not create (kept).
    others: Vec<Subscription>,
    /// Its CatalogSources, registry pods and ConfigMaps.
    sources: Vec<CatalogSource>,
    pods: Vec<Named>,
    config_maps: Vec<Named>,
}

impl Found {
    async fn list(cluster: &Cluster, ns: &str, package: &str) -> Result<Self, CleanupError> {
        let subs: Vec<Subscription> = cluster.list(&subscription_resource(), Some(ns)).await?;
        let (ours, others): (Vec<Subscription>, Vec<Subscription>) = subs
            .into_iter()
            .filter(|s| s.spec.name == package || created_for(&s.metadata, package))
            .partition(|s| created_for(&s.metadata, package));
        let sel = selector(package);
        let sources: Vec<CatalogSource> = cluster
            .list_selected(&catalog_source_resource(), Some(ns), &sel)
            .await?;
        let sources: Vec<CatalogSource> = sources
            .into_iter()
            .filter(|c| created_for(&c.metadata, package))
            .collect();
        let pods: Vec<Named> = cluster
            .list_selected(&pod_resource(), Some(ns), &sel)
            .await?;
        let config_maps: Vec<Named> = cluster
            .list_selected(&config_map_resource(), Some(ns), &sel)
            .await?;
        Ok(Self {
            ours,
            others,
            sources,
            pods,
            config_maps,
        })
    }
}

/// Removes what `run bundle` created for the package. A package with nothing of `run bundle`
/// in the namespace gives an empty report (operator-sdk warns and succeeds too).
pub async fn cleanup(
    cluster: &Cluster,
    req: &CleanupRequest,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<CleanupReport, CleanupError> {
    cluster.check_olm_v0().await?;
    let ns = req.namespace.as_str();
    let package = req.package.as_str();
    let found = Found::list(cluster, ns, package).await?;
    if found.ours.is_empty() && !found.others.is_empty() {
        return Err(CleanupError::NotRunBundle {
            package: package.into(),
            namespace: ns.into(),
            subscriptions: found
                .others
                .iter()
                .map(|s| s.metadata.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let mut d = Deleter {
        cluster,
        deadline: Instant::now() + req.timeout,
        poll: req.poll_interval,
        timeout: req.timeout,
        report: CleanupReport {
            package: package.into(),
            namespace: ns.into(),
            ..Default::default()
        },
    };
    for s in &found.others {
        d.report.kept.push(Kept {
            object: obj(&subscription_resource(), ns, &s.metadata.name),
            reason: "not created by run bundle".into(),
        });
    }
    let csvs = csvs_of(cluster, ns, &found.ours).await?;
    let crds_to_delete = d.crds_to_delete(ns, &csvs, req.delete_crds).await?;
    let plans = install_plans_to_delete(cluster, ns, &found, &csvs).await?;
    for ip in &plans {
        d.delete(&install_plan_resource(), Some(ns), ip, false, on_event)
            .await?;
    }
    for s in &found.ours {
        d.delete(
            &subscription_resource(),
            Some(ns),
            &s.metadata.name,
            false,
            on_event,
        )
        .await?;
    }
    for crd in &crds_to_delete {
        d.delete(&crd_resource(), None, crd, true, on_event).await?;
    }
    for c in &csvs {
        d.delete(&csv_resource(), Some(ns), &c.metadata.name, true, on_event)
            .await?;
    }
    d.delete_catalog(ns, package, &found, on_event).await?;
    d.delete_operator_groups(ns, req.delete_operator_groups, on_event)
        .await?;
    Ok(d.report)
}

/// The CSVs of our Subscriptions (installed and current).
async fn csvs_of(
    cluster: &Cluster,
    ns: &str,
    ours: &[Subscription],
) -> Result<Vec<Csv>, CleanupError> {
    let mut csvs: Vec<Csv> = Vec::new();
    for s in ours {
        for name in [&s.status.installed_csv, &s.status.current_csv] {
            if name.is_empty() || csvs.iter().any(|c| &c.metadata.name == name) {
                continue;
            }
            if let Some(c) = cluster.get::<Csv>(&csv_resource(), Some(ns), name).await? {
                csvs.push(c);
            }
        }
    }
    Ok(csvs)
}

/// The InstallPlans OLM made for our Subscriptions: owned by them, or (an OLM that sets no
/// owner) installing only CSVs of our catalog.
async fn install_plans_to_delete(
    cluster: &Cluster,
    ns: &str,
    found: &Found,
    csvs: &[Csv],
) -> Result<Vec<String>, CleanupError> {
    let ours_csvs: Vec<String> = found
        .sources
        .iter()
        .flat_map(|cs| injected_bundles(&cs.metadata.annotations))
        .map(|b| b.csv)
        .chain(csvs.iter().map(|c| c.metadata.name.clone()))
        .collect();
    let mut plans: Vec<String> = Vec::new();
    for s in &found.ours {
        plans.extend(
            install_plans_of(cluster, s)
                .await?
                .into_iter()
                .map(|ip| ip.metadata.name),
        );
    }
    let all_plans: Vec<InstallPlan> = cluster.list(&install_plan_resource(), Some(ns)).await?;
    for ip in &all_plans {
        let names = &ip.spec.cluster_service_version_names;
        let unowned = !ip
            .metadata
            .owner_references
            .iter()
            .any(|o| o.kind == "Subscription");
        if unowned && !names.is_empty() && names.iter().all(|n| ours_csvs.contains(n)) {
            plans.push(ip.metadata.name.clone());
        }
    }
    plans.sort();
    plans.dedup();
    Ok(plans)
}

impl Deleter<'_> {
    /// The CRDs our CSVs own that can go: owned by no other CSV, and CRD deletion on. The others
    /// are reported as kept.
    async fn crds_to_delete(
        &mut self,
        ns: &str,
        csvs: &[Csv],
        delete_crds: bool,
    ) -> Result<Vec<String>, CleanupError> {
        let mut crds: Vec<String> = csvs
            .iter()
            .flat_map(|c| c.view().owned_crds())
            .filter_map(|d| d.name())
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect();
        crds.sort();
        crds.dedup();
        let mut crds_to_delete = Vec::new();
        if crds.is_empty() {
            return Ok(crds_to_delete);
        }
        let all: Vec<Csv> = self.cluster.list(&csv_resource(), None).await?;
        for crd in crds {
            let other = all.iter().find(|c| {
                let ours = c.metadata.namespace == ns
                    && csvs.iter().any(|o| o.metadata.name == c.metadata.name);
                !(c.is_copy() || ours)
                    && c.view()
                        .owned_crds()
                        .any(|d| d.name() == Some(crd.as_str()))
            });
            let o = obj(&crd_resource(), "", &crd);
            match (other, delete_crds) {
                (Some(c), _) => self.report.kept.push(Kept {
                    object: o,
                    reason: format!(
                        "also owned by ClusterServiceVersion {}/{}",
                        c.metadata.namespace, c.metadata.name
                    ),
                }),
                (None, false) => self.report.kept.push(Kept {
                    object: o,
                    reason: "CRD deletion is off (--delete-crds=false, --delete-all=false)".into(),
                }),
                (None, true) => crds_to_delete.push(crd),
            }
        }
        Ok(crds_to_delete)
    }

    /// Deletes the registry pods and ConfigMaps before their owner, the CatalogSource, so that
    /// each is deleted (and reported) here rather than by the garbage collector.
    async fn delete_catalog(
        &mut self,
        ns: &str,
        package: &str,
        found: &Found,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), CleanupError> {
        for p in found
            .pods
            .iter()
            .filter(|p| created_for(&p.metadata, package))
        {
            self.delete(&pod_resource(), Some(ns), &p.metadata.name, false, on_event)
                .await?;
        }
        for c in found
            .config_maps
            .iter()
            .filter(|c| created_for(&c.metadata, package))
        {
            self.delete(
                &config_map_resource(),
                Some(ns),
                &c.metadata.name,
                false,
                on_event,
            )
            .await?;
        }
        for cs in &found.sources {
            self.delete(
                &catalog_source_resource(),
                Some(ns),
                &cs.metadata.name,
                true,
                on_event,
            )
            .await?;
        }
        Ok(())
    }

    /// The OperatorGroup run bundle created (for this package or another one it ran here) goes
    /// once no Subscription of the namespace needs it.
    async fn delete_operator_groups(
        &mut self,
        ns: &str,
        delete_operator_groups: bool,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), CleanupError> {
        let groups: Vec<OperatorGroup> = self
            .cluster
            .list(&operator_group_resource(), Some(ns))
            .await?;
        let left: Vec<Subscription> = self
            .cluster
            .list(&subscription_resource(), Some(ns))
            .await?;
        for g in groups
            .iter()
            .filter(|g| g.metadata.labels.contains_key(RUN_BUNDLE_LABEL))
        {
            let o = obj(&operator_group_resource(), ns, &g.metadata.name);
            if !delete_operator_groups {
                self.report.kept.push(Kept {
                    object: o,
                    reason: "OperatorGroup deletion is off (--delete-operator-groups=false, --delete-all=false)".into(),
                });
            } else if let Some(s) = left.first() {
                self.report.kept.push(Kept {
                    object: o,
                    reason: format!(
                        "Subscription {}/{} still needs it",
                        s.metadata.namespace, s.metadata.name
                    ),
                });
            } else {
                self.delete(
                    &operator_group_resource(),
                    Some(ns),
                    &g.metadata.name,
                    false,
                    on_event,
                )
                .await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_refs_read_like_kubectl_names() {
        let o = obj(&crd_resource(), "", "memcacheds.cache.example.com");
        assert_eq!(
            o.to_string(),
            "CustomResourceDefinition memcacheds.cache.example.com"
        );
        let o = obj(&subscription_resource(), "ops", "memcached-operator");
        assert_eq!(o.to_string(), "Subscription ops/memcached-operator");
        let e = CleanupError::Timeout {
            object: o,
            waited: Duration::from_secs(120),
        };
        assert!(e.hints()[0].contains("kubectl get subscription memcached-operator -n ops"));
    }
}
