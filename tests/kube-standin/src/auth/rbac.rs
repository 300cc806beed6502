//! The RBAC authorizer: which stored rules grant a request, following
//! `RBACAuthorizer.Authorize` and `DefaultRuleResolver.VisitRulesFor`
//! (plugin/pkg/auth/authorizer/rbac/rbac.go, pkg/registry/rbac/validation/rule.go) and the
//! documented semantics (<https://kubernetes.io/docs/reference/access-authn-authz/rbac/>).
//!
//! ClusterRoleBindings grant their ClusterRole's rules everywhere; RoleBindings grant their
//! Role's (same namespace) or ClusterRole's rules in their own namespace only. A rule matches
//! when each of its parts does (one small function per part below). A ClusterRole with an
//! `aggregationRule` has the rules of every ClusterRole its selectors match (what the
//! clusterrole-aggregation controller writes into it, computed here at authorization time).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::{Attributes, MASTERS_GROUP, UserInfo};
use crate::registry::GroupResource;
use crate::selectors::LabelSelector;
use crate::store::State;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// An authorizer's answer: allowed or not, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

fn key(resource: &str) -> GroupResource {
    GroupResource::new(RBAC_GROUP, resource)
}

fn strings(v: &Value, field: &str) -> Vec<String> {
    v.get(field)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == want)
}

/// `VerbMatches`: the verb, or `*`.
fn verb_matches(rule: &Value, a: &Attributes) -> bool {
    let verbs = strings(rule, "verbs");
    has(&verbs, "*") || has(&verbs, &a.verb)
}

/// `APIGroupMatches`: the group, or `*`.
fn api_group_matches(rule: &Value, a: &Attributes) -> bool {
    let groups = strings(rule, "apiGroups");
    has(&groups, "*") || has(&groups, &a.group)
}

/// `ResourceMatches`: `*` (every resource and subresource), the exact `resource` or
/// `resource/subresource`, or `*/subresource` for that subresource of any resource.
fn resource_matches(rule: &Value, a: &Attributes) -> bool {
    let combined = a.combined_resource();
    strings(rule, "resources").iter().any(|r| {
        r == "*"
            || *r == combined
            || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource))
    })
}

/// `ResourceNameMatches`: no `resourceNames` allows any name; otherwise the request must name
/// one of them (so create, list and watch without a pinned name never match such a rule).
fn resource_name_matches(rule: &Value, a: &Attributes) -> bool {
    let names = strings(rule, "resourceNames");
    names.is_empty() || has(&names, &a.name)
}

/// `NonResourceURLMatches`: `*`, the exact path, or a prefix ending in `*`.
fn non_resource_url_matches(rule: &Value, a: &Attributes) -> bool {
    strings(rule, "nonResourceURLs").iter().any(|u| {
        u == "*"
            || *u == a.path
            || u.strip_suffix('*')
                .is_some_and(|prefix| a.path.starts_with(prefix))
    })
}

/// The parts of a rule that must all match a resource request.
const RESOURCE_RULE_PARTS: &[fn(&Value, &Attributes) -> bool] = &[
    verb_matches,
    api_group_matches,
    resource_matches,
    resource_name_matches,
];

/// The parts of a rule that must all match a non-resource request.
const NON_RESOURCE_RULE_PARTS: &[fn(&Value, &Attributes) -> bool] =
    &[verb_matches, non_resource_url_matches];

/// `RuleAllows`.
pub fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let parts = if a.resource_request {
        RESOURCE_RULE_PARTS
    } else {
        NON_RESOURCE_RULE_PARTS
    };
    parts.iter().all(|part| part(rule, a))
}

/// `appliesToUser`: does one binding subject name this user? A ServiceAccount subject without
/// a namespace means the binding's own namespace.
fn subject_applies(subject: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or_default();
    match field("kind") {
        "User" => field("name") == user.name,
        "Group" => has(&user.groups, field("name")),
        "ServiceAccount" => {
            let ns = match field("namespace") {
                "" => binding_ns,
                n => n,
            };
            user.name == format!("system:serviceaccount:{ns}:{}", field("name"))
        }
        _ => false,
    }
}

/// A subject as the RBAC authorizer's `allowed by` reason describes it.
fn describe_subject(subject: &Value, binding_ns: &str) -> String {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or_default();
    if field("kind") == "ServiceAccount" {
        let ns = match field("namespace") {
            "" => binding_ns,
            n => n,
        };
        format!("ServiceAccount {:?}", format!("{}/{ns}", field("name")))
    } else {
        format!("{} {:?}", field("kind"), field("name"))
    }
}

/// Rules of a ClusterRole, aggregated ones included; the error the upstream resolver reports
/// when it does not exist.
fn cluster_role_rules(st: &State, name: &str) -> Result<Vec<Value>, String> {
    let mut seen = BTreeSet::new();
    collect_cluster_role_rules(st, name, &mut seen)
        .ok_or_else(|| format!("clusterrole.rbac.authorization.k8s.io {name:?} not found"))
}

fn collect_cluster_role_rules(
    st: &State,
    name: &str,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<Value>> {
    let role = st.get_opt(&key("clusterroles"), "", name)?;
    seen.insert(name.to_string());
    let selectors: Vec<LabelSelector> = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| LabelSelector::from_object(s).ok())
                .collect()
        })
        .unwrap_or_default();
    if selectors.is_empty() {
        return Some(rules_of(&role));
    }
    let mut rules = Vec::new();
    for other in st.objects(&key("clusterroles"), None) {
        let other_name = crate::meta::name(&other).to_string();
        if seen.contains(&other_name) || !selectors.iter().any(|s| s.matches(&other)) {
            continue;
        }
        rules.extend(collect_cluster_role_rules(st, &other_name, seen).unwrap_or_default());
    }
    Some(rules)
}

fn rules_of(role: &Arc<Value>) -> Vec<Value> {
    role.get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The rules a binding's roleRef grants.
fn bound_rules(st: &State, binding: &Value, binding_ns: &str) -> Result<Vec<Value>, String> {
    let kind = binding
        .pointer("/roleRef/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = binding
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "ClusterRole" => cluster_role_rules(st, name),
        "Role" => st
            .get_opt(&key("roles"), binding_ns, name)
            .map(|r| rules_of(&r))
            .ok_or_else(|| format!("role.rbac.authorization.k8s.io {name:?} not found")),
        other => Err(format!("unknown roleRef kind {other:?}")),
    }
}

/// Authorizes one request: `system:masters` first (the privileged-groups authorizer that
/// precedes RBAC), then every ClusterRoleBinding, then the RoleBindings of the request's
/// namespace. Denied requests carry RBAC's reason: the resolution errors met on the way.
pub fn authorize(st: &State, user: &UserInfo, a: &Attributes) -> Decision {
    if has(&user.groups, MASTERS_GROUP) {
        return Decision {
            allowed: true,
            reason: MASTERS_GROUP.to_string(),
        };
    }
    let mut errors = Vec::new();
    let mut scopes: Vec<(&str, &str, Vec<Arc<Value>>)> = vec![(
        "ClusterRoleBinding",
        "",
        st.objects(&key("clusterrolebindings"), None),
    )];
    if !a.namespace.is_empty() {
        scopes.push((
            "RoleBinding",
            a.namespace.as_str(),
            st.objects(&key("rolebindings"), Some(&a.namespace)),
        ));
    }
    for (binding_kind, ns, bindings) in scopes {
        for b in bindings {
            let subjects = b
                .get("subjects")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let Some(subject) = subjects.iter().find(|s| subject_applies(s, user, ns)) else {
                continue;
            };
            match bound_rules(st, &b, ns) {
                Ok(rules) if rules.iter().any(|r| rule_allows(r, a)) => {
                    return Decision {
                        allowed: true,
                        reason: allowed_by(binding_kind, &b, ns, subject),
                    };
                }
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
    }
    let reason = match errors.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    };
    Decision {
        allowed: false,
        reason,
    }
}

fn allowed_by(binding_kind: &str, b: &Value, ns: &str, subject: &Value) -> String {
    let role_kind = b
        .pointer("/roleRef/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let role_name = b
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = crate::meta::name(b);
    let binding = if ns.is_empty() {
        format!("{binding_kind} {name:?}")
    } else {
        format!("{binding_kind} {:?}", format!("{name}/{ns}"))
    };
    format!(
        "RBAC: allowed by {binding} of {role_kind} {role_name:?} to {}",
        describe_subject(subject, ns)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: "ns".into(),
            name: name.into(),
            resource_request: true,
            path: String::new(),
        }
    }

    #[test]
    fn rule_parts() {
        let rule = json!({"apiGroups": ["apps"], "resources": ["deployments", "*/scale"], "verbs": ["get", "patch"]});
        assert!(rule_allows(
            &rule,
            &req("get", "apps", "deployments", "", "d")
        ));
        assert!(!rule_allows(
            &rule,
            &req("create", "apps", "deployments", "", "")
        ));
        assert!(!rule_allows(&rule, &req("get", "", "deployments", "", "d")));
        assert!(!rule_allows(
            &rule,
            &req("get", "apps", "deployments", "status", "d")
        ));
        assert!(rule_allows(
            &rule,
            &req("patch", "apps", "replicasets", "scale", "r")
        ));
        let star = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(rule_allows(
            &star,
            &req("delete", "x.io", "things", "status", "t")
        ));
        let named = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"], "resourceNames": ["a"]});
        assert!(rule_allows(&named, &req("get", "", "configmaps", "", "a")));
        assert!(!rule_allows(&named, &req("get", "", "configmaps", "", "b")));
        assert!(!rule_allows(&named, &req("list", "", "configmaps", "", "")));
        let urls = json!({"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]});
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Default::default()
        };
        assert!(rule_allows(&urls, &path("/healthz")));
        assert!(rule_allows(&urls, &path("/apis/apps/v1")));
        assert!(!rule_allows(&urls, &path("/healthz/etcd")));
        assert!(!rule_allows(&urls, &req("get", "", "healthz", "", "")));
    }

    #[test]
    fn subjects() {
        let sa = UserInfo::service_account("ns", "op");
        assert!(subject_applies(
            &json!({"kind": "ServiceAccount", "name": "op"}),
            &sa,
            "ns"
        ));
        assert!(!subject_applies(
            &json!({"kind": "ServiceAccount", "name": "op"}),
            &sa,
            "other"
        ));
        assert!(subject_applies(
            &json!({"kind": "ServiceAccount", "name": "op", "namespace": "ns"}),
            &sa,
            ""
        ));
        assert!(subject_applies(
            &json!({"kind": "Group", "name": "system:serviceaccounts:ns"}),
            &sa,
            ""
        ));
        assert!(subject_applies(
            &json!({"kind": "User", "name": "system:serviceaccount:ns:op"}),
            &sa,
            ""
        ));
        assert!(!subject_applies(
            &json!({"kind": "User", "name": "op"}),
            &sa,
            ""
        ));
    }
}
