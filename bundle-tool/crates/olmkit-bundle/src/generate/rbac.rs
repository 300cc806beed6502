//! From RBAC manifests to CSV `permissions` / `clusterPermissions`.
//!
//! OLM creates the operator's service accounts and grants them what the CSV lists, scoped to
//! the install (namespace(s) of the OperatorGroup for `permissions`, cluster-wide for
//! `clusterPermissions`). This follows operator-sdk's `SplitCSVPermissionsObjects`:
//! - a Role bound by a RoleBinding to a service account of an install Deployment becomes a
//!   `permissions` entry of that account; so does a ClusterRole bound by a RoleBinding;
//! - a ClusterRole bound by a ClusterRoleBinding to such an account becomes `clusterPermissions`;
//! - the bindings lose those subjects and disappear when none is left; everything else (roles
//!   bound to other accounts, unbound roles such as the metrics-reader ClusterRole) stays a
//!   bundle manifest, which OLM creates as is.
//!
//! The service accounts are those of the install Deployments plus `--extra-service-accounts`
//! (operator-sdk's `csvSAs`).
//!
//! Two deliberate differences, each an [`Improvement`]: operator-sdk drops an absorbed role
//! even when a binding that stays in the bundle still references it, and ships such a binding
//! unmodified, operator accounts included; here the role is kept and the binding keeps only
//! the other subjects ([`Improvement::RbacSplit`]). And rules granted twice to one account are
//! listed once ([`Improvement::DedupRbacRules`]; operator-sdk's `applyRoles` appends them all).

use super::collect::Collected;
use super::{Improvement, Settings};
use crate::json::arr_at;
use olmkit_core::csv::str_at;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Rules granted to one service account.
#[derive(Clone, Debug, PartialEq)]
pub struct Permission {
    /// The service account.
    pub service_account: String,
    /// Its rules, in binding order, duplicates removed.
    pub rules: Vec<Value>,
}

/// The result of the split.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RbacSplit {
    /// `spec.install.spec.permissions`, sorted by service account.
    pub permissions: Vec<Permission>,
    /// `spec.install.spec.clusterPermissions`, sorted by service account.
    pub cluster_permissions: Vec<Permission>,
    /// RBAC objects that stay bundle manifests (bindings possibly with fewer subjects).
    pub manifests: Vec<Value>,
    /// The service accounts the CSV covers: the Deployments' and the extra ones, sorted.
    pub accounts: Vec<String>,
}

fn accept_group(binding: &Value) -> bool {
    matches!(
        str_at(binding, "/roleRef/apiGroup"),
        None | Some("") | Some("rbac.authorization.k8s.io")
    )
}

fn is_operator_sa(subject: &Value, accounts: &BTreeSet<String>) -> bool {
    str_at(subject, "/kind") == Some("ServiceAccount")
        && str_at(subject, "/name").is_some_and(|n| accounts.contains(n))
}

fn push_rules(into: &mut BTreeMap<String, Vec<Value>>, sa: &str, rules: &[Value], dedup: bool) {
    let list = into.entry(sa.to_string()).or_default();
    for r in rules {
        if !dedup || !list.contains(r) {
            list.push(r.clone());
        }
    }
}

fn finish(map: BTreeMap<String, Vec<Value>>) -> Vec<Permission> {
    map.into_iter()
        .filter(|(_, rules)| !rules.is_empty())
        .map(|(service_account, rules)| Permission {
            service_account,
            rules,
        })
        .collect()
}

/// Splits the collected RBAC into CSV permissions and bundle manifests.
pub fn split(c: &Collected, settings: &Settings) -> RbacSplit {
    let dedup = settings.improvements.has(Improvement::DedupRbacRules);
    let ours = settings.improvements.has(Improvement::RbacSplit);
    let mut accounts: BTreeSet<String> = c.deployment_service_accounts().into_iter().collect();
    accounts.extend(
        settings
            .extra_service_accounts
            .iter()
            .filter(|s| !s.is_empty())
            .cloned(),
    );
    let find = |list: &[crate::model::Manifest], name: &str| {
        list.iter()
            .find(|d| d.name() == name)
            .map(|d| arr_at(&d.object, "/rules").to_vec())
    };
    let mut perms: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut cperms: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut absorbed_roles = BTreeSet::new();
    let mut absorbed_cluster_roles = BTreeSet::new();
    let mut kept_bindings: Vec<Value> = Vec::new();

    let bindings = c
        .role_bindings
        .iter()
        .map(|b| (b, false))
        .chain(c.cluster_role_bindings.iter().map(|b| (b, true)));
    for (binding, cluster) in bindings {
        let obj = &binding.object;
        let ref_kind = str_at(obj, "/roleRef/kind").unwrap_or("");
        let ref_name = str_at(obj, "/roleRef/name").unwrap_or("");
        let rules = match (cluster, ref_kind) {
            (false, "Role") => find(&c.roles, ref_name),
            (_, "ClusterRole") => find(&c.cluster_roles, ref_name),
            _ => None,
        };
        let Some(rules) = rules.filter(|_| accept_group(obj)) else {
            kept_bindings.push(obj.clone());
            continue;
        };
        let subjects = arr_at(obj, "/subjects");
        let (matched, rest): (Vec<&Value>, Vec<&Value>) =
            subjects.iter().partition(|s| is_operator_sa(s, &accounts));
        if matched.is_empty() {
            kept_bindings.push(obj.clone());
            continue;
        }
        for s in &matched {
            let sa = str_at(s, "/name").unwrap_or("");
            let target = if cluster { &mut cperms } else { &mut perms };
            push_rules(target, sa, &rules, dedup);
        }
        if ref_kind == "Role" {
            absorbed_roles.insert(ref_name.to_string());
        } else {
            absorbed_cluster_roles.insert(ref_name.to_string());
        }
        if !rest.is_empty() && !ours {
            kept_bindings.push(obj.clone());
        } else if !rest.is_empty() {
            let mut b = obj.clone();
            if let Some(m) = b.as_object_mut() {
                m.insert(
                    "subjects".into(),
                    Value::Array(rest.into_iter().cloned().collect()),
                );
            }
            kept_bindings.push(b);
        }
    }

    let referenced = |kind: &str, name: &str| {
        ours && kept_bindings.iter().any(|b| {
            str_at(b, "/roleRef/kind") == Some(kind) && str_at(b, "/roleRef/name") == Some(name)
        })
    };
    let mut manifests = Vec::new();
    for r in &c.roles {
        if !absorbed_roles.contains(r.name()) || referenced("Role", r.name()) {
            manifests.push(r.object.clone());
        }
    }
    for r in &c.cluster_roles {
        if !absorbed_cluster_roles.contains(r.name()) || referenced("ClusterRole", r.name()) {
            manifests.push(r.object.clone());
        }
    }
    manifests.extend(kept_bindings);
    RbacSplit {
        permissions: finish(perms),
        cluster_permissions: finish(cperms),
        manifests,
        accounts: accounts.into_iter().collect(),
    }
}
