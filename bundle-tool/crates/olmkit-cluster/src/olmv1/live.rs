//! Applying the OLM v1 manifests and waiting for the ClusterExtension.
//!
//! operator-controller reports on a ClusterExtension with two conditions: `Installed`
//! (True once a bundle is installed) and `Progressing` (True/`Succeeded` while moving, True/
//! `Retrying` after an error it retries, False/`Blocked` when a person has to act). catalogd
//! reports `Serving` on the ClusterCatalog. [`assess_v1`] reads those (pure); [`install_v1`]
//! applies and polls.

use crate::assess::Failure;
use crate::client::Cluster;
use crate::install::{Event, InstallError, Outcome, WaitSettings};
use crate::manifests::describe;
use crate::olm::{
    ClusterCatalog, ClusterExtension, cluster_catalog_resource, cluster_extension_resource,
    condition,
};
use serde_json::Value;
use std::collections::BTreeMap;
use tokio::time::Instant;

/// The verdict on a ClusterExtension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum V1Verdict {
    /// Keep waiting.
    Pending,
    /// Installed: bundle name and version.
    Installed {
        /// Bundle name.
        bundle: String,
        /// Version.
        version: String,
    },
    /// Blocked.
    Failed(Failure),
}

/// Judges the ClusterExtension (pure).
pub fn assess_v1(ext: Option<&ClusterExtension>) -> V1Verdict {
    let Some(ext) = ext else {
        return V1Verdict::Pending;
    };
    let conds = &ext.status.conditions;
    if let Some(p) = condition(conds, "Progressing")
        && p.status == "False"
        && p.reason == "Blocked"
    {
        return V1Verdict::Failed(Failure {
            summary: format!("ClusterExtension {} is blocked", ext.metadata.name),
            details: vec![format!("Progressing=False Blocked: {}", p.message)],
            hints: vec![format!(
                "see kubectl get clusterextension {} -o yaml; fix the cause (RBAC of the installer ServiceAccount, an unsupported bundle) and re-apply",
                ext.metadata.name
            )],
        });
    }
    if let Some(i) = condition(conds, "Installed")
        && i.is_true()
        && let Some(install) = &ext.status.install
    {
        return V1Verdict::Installed {
            bundle: install.bundle.name.clone(),
            version: install.bundle.version.clone(),
        };
    }
    V1Verdict::Pending
}

/// Progress lines for the ClusterCatalog and ClusterExtension.
pub fn describe_v1(
    cat: Option<&ClusterCatalog>,
    ext: Option<&ClusterExtension>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(c) = cat {
        let key = format!("ClusterCatalog {}", c.metadata.name);
        let line = match condition(&c.status.conditions, "Serving") {
            Some(s) if s.is_true() => format!("{key}: Serving"),
            Some(s) => format!("{key}: not serving ({}: {})", s.reason, s.message),
            None => format!("{key}: waiting for catalogd to unpack the image"),
        };
        out.push((key, line));
    }
    if let Some(e) = ext {
        let key = format!("ClusterExtension {}", e.metadata.name);
        let mut parts = Vec::new();
        for t in ["Installed", "Progressing"] {
            if let Some(c) = condition(&e.status.conditions, t) {
                let mut p = format!("{t}={} ({})", c.status, c.reason);
                let success_message = t == "Installed" && c.is_true();
                if !c.message.is_empty() && !success_message {
                    p.push_str(&format!(": {}", c.message));
                }
                parts.push(p);
            }
        }
        if parts.is_empty() {
            parts.push("waiting for operator-controller".into());
        }
        out.push((key.clone(), format!("{key}: {}", parts.join(", "))));
    }
    out
}

/// Applies the OLM v1 manifests (the Namespace only when missing) and waits for the
/// ClusterExtension to report `Installed=True`.
pub async fn install_v1(
    cluster: &Cluster,
    objects: &[Value],
    settings: WaitSettings,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Outcome, InstallError> {
    cluster.check_olm_v1().await?;
    let name_of = |kind: &str| {
        objects
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|o| o.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let ext_name = name_of("ClusterExtension").unwrap_or_default();
    let cat_name = name_of("ClusterCatalog").unwrap_or_default();
    for obj in objects {
        if obj.get("kind").and_then(Value::as_str) == Some("Namespace")
            && let Some(ns) = obj.pointer("/metadata/name").and_then(Value::as_str)
            && cluster.namespace_exists(ns).await?
        {
            continue;
        }
        cluster.apply(obj, false).await?;
        on_event(Event::Applied(&describe(obj)));
    }
    let start = Instant::now();
    let deadline = start + settings.timeout;
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut last = Vec::new();
    loop {
        let ext: Option<ClusterExtension> = cluster
            .get(&cluster_extension_resource(), None, &ext_name)
            .await?;
        let cat: Option<ClusterCatalog> = cluster
            .get(&cluster_catalog_resource(), None, &cat_name)
            .await?;
        last.clear();
        for (key, line) in describe_v1(cat.as_ref(), ext.as_ref()) {
            if seen.get(&key) != Some(&line) {
                on_event(Event::Progress(&format!(
                    "[{:6.1}s] {line}",
                    start.elapsed().as_secs_f64()
                )));
                seen.insert(key, line.clone());
            }
            last.push(line);
        }
        match assess_v1(ext.as_ref()) {
            V1Verdict::Installed { bundle, .. } => return Ok(Outcome::Installed { csv: bundle }),
            V1Verdict::Failed(f) => return Ok(Outcome::Failed(f)),
            V1Verdict::Pending => {}
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(Outcome::TimedOut {
                after: settings.timeout,
                last_seen: last,
                hints: vec![
                    format!(
                        "kubectl get clusterextension {ext_name} -o yaml shows operator-controller's conditions"
                    ),
                    format!(
                        "kubectl get clustercatalog {cat_name} -o yaml shows whether catalogd serves the catalog"
                    ),
                ],
            });
        }
        tokio::time::sleep(settings.poll_interval.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::olm::*;

    fn ext(conds: Vec<(&str, &str, &str)>, bundle: Option<(&str, &str)>) -> ClusterExtension {
        ClusterExtension {
            metadata: Meta {
                name: "memcached-operator".into(),
                ..Default::default()
            },
            status: ClusterExtensionStatus {
                conditions: conds
                    .into_iter()
                    .map(|(t, s, r)| Condition {
                        type_: t.into(),
                        status: s.into(),
                        reason: r.into(),
                        message: "m".into(),
                        last_transition_time: None,
                    })
                    .collect(),
                install: bundle.map(|(n, v)| ClusterExtensionInstall {
                    bundle: InstalledBundle {
                        name: n.into(),
                        version: v.into(),
                    },
                }),
            },
        }
    }

    #[test]
    fn installed_blocked_and_retrying() {
        let e = ext(
            vec![
                ("Installed", "True", "Succeeded"),
                ("Progressing", "True", "Succeeded"),
            ],
            Some(("memcached-operator.v0.2.0", "0.2.0")),
        );
        assert_eq!(
            assess_v1(Some(&e)),
            V1Verdict::Installed {
                bundle: "memcached-operator.v0.2.0".into(),
                version: "0.2.0".into()
            }
        );
        let e = ext(vec![("Progressing", "False", "Blocked")], None);
        assert!(matches!(assess_v1(Some(&e)), V1Verdict::Failed(_)));
        let e = ext(vec![("Progressing", "True", "Retrying")], None);
        assert_eq!(assess_v1(Some(&e)), V1Verdict::Pending);
        assert_eq!(assess_v1(None), V1Verdict::Pending);
        let lines = describe_v1(None, Some(&e));
        assert_eq!(
            lines[0].1,
            "ClusterExtension memcached-operator: Progressing=True (Retrying): m"
        );
    }
}
