//! Authentication and authorization the way kube-apiserver does them.
//!
//! - Authentication (`authn`): bearer tokens. The admin token of the stand-in's own kubeconfig
//!   maps to a user in `system:masters`; TokenRequest-issued tokens map to ServiceAccounts
//!   (`system:serviceaccount:<ns>:<name>`); a request without credentials is `system:anonymous`
//!   (kube-apiserver's default `--anonymous-auth=true`); an unknown or expired token is a 401.
//! - Authorization (`rbac`): `system:masters` always allowed (kube-apiserver's privileged-groups
//!   authorizer), then RBAC over the stored Roles, ClusterRoles and bindings
//!   (`RBACAuthorizer.Authorize` in plugin/pkg/auth/authorizer/rbac/rbac.go).
//! - `bootstrap`: the default ClusterRoles and bindings kube-apiserver creates when RBAC is on.
//! - `admission`: the OwnerReferencesPermissionEnforcement admission plugin.
//!
//! Every authorization decision taken for a request (the request's own verb and the extra
//! checks handlers and admission make) is appended to the request's [`AuthTrail`], which the
//! request log records.

pub mod admission;
pub mod authn;
pub mod bootstrap;
pub mod rbac;

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::error::{ApiError, qualified};
use crate::requests::RequestInfo;

pub use authn::{Authenticator, TokenError};

/// The group whose members every request is allowed for.
pub const MASTERS_GROUP: &str = "system:masters";
/// Group of every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Group of anonymous requests.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The anonymous user.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The user of the stand-in's own kubeconfig.
pub const ADMIN_USER: &str = "standin-admin";

/// How requests are authorized (kube-apiserver's `--authorization-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every request is allowed (kube-apiserver's `AlwaysAllow`); decisions are still recorded.
    #[default]
    AlwaysAllow,
    /// `system:masters` is always allowed, everything else must be granted by RBAC.
    Rbac,
}

/// An authenticated identity (`user.Info`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS_USER.into(),
            groups: vec![UNAUTHENTICATED_GROUP.into()],
        }
    }

    pub fn admin() -> Self {
        UserInfo {
            name: ADMIN_USER.into(),
            groups: vec![MASTERS_GROUP.into(), AUTHENTICATED_GROUP.into()],
        }
    }

    /// The identity of a ServiceAccount token (serviceaccount.UserInfo upstream).
    pub fn service_account(ns: &str, name: &str) -> Self {
        UserInfo {
            name: format!("system:serviceaccount:{ns}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                AUTHENTICATED_GROUP.into(),
            ],
        }
    }
}

/// The attributes an authorizer decides on (`authorizer.AttributesRecord`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// False for non-resource URLs such as `/version` (then only `path` and `verb` count).
    pub resource_request: bool,
    pub path: String,
}

impl Attributes {
    /// The attributes of a request, as kube-apiserver's `WithAuthorization` filter builds them
    /// from the RequestInfo. A list or watch whose field selector pins `metadata.name` carries
    /// that name (so `resourceNames` rules apply), as `RequestInfoFactory.NewRequestInfo` does.
    pub fn of_request(info: &RequestInfo, path: &str, query: &[(String, String)]) -> Self {
        let mut name = info.name.clone();
        if name.is_empty() && matches!(info.verb.as_str(), "list" | "watch") {
            name = pinned_name(query).unwrap_or_default();
        }
        Attributes {
            verb: info.verb.clone(),
            group: info.group.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            namespace: info.namespace.clone(),
            name,
            resource_request: info.is_resource,
            path: path.to_string(),
        }
    }

    /// The same resource with another verb (the extra checks handlers make).
    pub fn with_verb(&self, verb: &str) -> Self {
        Attributes {
            verb: verb.to_string(),
            ..self.clone()
        }
    }

    /// `deployments` or `deployments/scale`.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// `metadata.name=X` (or `==`) in a `fieldSelector` query parameter.
fn pinned_name(query: &[(String, String)]) -> Option<String> {
    let sel = query.iter().find(|(k, _)| k == "fieldSelector")?.1.as_str();
    sel.split(',').find_map(|term| {
        let (k, v) = term
            .split_once("==")
            .or_else(|| term.split_once('='))
            .filter(|(k, _)| !k.ends_with('!'))?;
        (k.trim() == "metadata.name").then(|| v.trim().to_string())
    })
}

/// One authorization decision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthzCheck {
    #[serde(flatten)]
    pub attributes: Attributes,
    pub allowed: bool,
    /// Why: `system:masters`, `AlwaysAllow`, `RBAC: allowed by ...`, or the RBAC errors.
    pub reason: String,
}

/// What authentication and authorization found for one request (shared between the request-log
/// middleware, the authorization filter and the handlers).
#[derive(Clone, Debug, Default)]
pub struct AuthTrail(Arc<Mutex<Trail>>);

/// The contents of an [`AuthTrail`].
#[derive(Clone, Debug, Default)]
pub struct Trail {
    pub user: Option<UserInfo>,
    pub checks: Vec<AuthzCheck>,
}

impl AuthTrail {
    pub fn set_user(&self, user: &UserInfo) {
        if let Ok(mut t) = self.0.lock() {
            t.user = Some(user.clone());
        }
    }

    pub fn push(&self, check: AuthzCheck) {
        if let Ok(mut t) = self.0.lock() {
            t.checks.push(check);
        }
    }

    pub fn snapshot(&self) -> Trail {
        self.0.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

/// Who sends a request, and where its decisions are recorded.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    pub user: UserInfo,
    pub trail: AuthTrail,
}

/// The message kube-apiserver puts in a 403 (`forbiddenMessage` in
/// k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go).
pub fn forbidden_message(user: &UserInfo, a: &Attributes) -> String {
    if !a.resource_request {
        return format!("User {:?} cannot {} path {:?}", user.name, a.verb, a.path);
    }
    let resource = a.combined_resource();
    if a.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            user.name, a.verb, a.group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            user.name, a.verb, a.group, a.namespace
        )
    }
}

/// `apierrors.NewForbidden(groupResource, name, err)`: the Status every 403 carries.
pub fn forbidden_status(group: &str, resource: &str, name: &str, why: &str) -> ApiError {
    let message = if resource.is_empty() {
        format!("forbidden: {why}")
    } else if name.is_empty() {
        format!("{} is forbidden: {why}", qualified(group, resource))
    } else {
        format!(
            "{} {name:?} is forbidden: {why}",
            qualified(group, resource)
        )
    };
    ApiError::new(403, "Forbidden", message).with_details(crate::error::Details {
        name: name.to_string(),
        group: group.to_string(),
        kind: resource.to_string(),
        ..Default::default()
    })
}

/// The 403 of the authorization filter (`responsewriters.Forbidden`): the forbidden message,
/// followed by the authorizer's reason when it gave one.
pub fn filter_forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let msg = forbidden_message(user, a);
    let why = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    let resource = if a.resource_request {
        a.resource.as_str()
    } else {
        ""
    };
    forbidden_status(&a.group, resource, &a.name, &why)
}

/// The 401 kube-apiserver sends when authentication fails.
pub fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(verb: &str, ns: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: ns.into(),
            resource_request: true,
            ..Default::default()
        }
    }

    #[test]
    fn forbidden_messages_match_kube_apiserver() {
        let u = UserInfo::service_account("ns", "sa");
        assert_eq!(
            filter_forbidden(&u, &attrs("create", "ns"), "").message,
            "deployments.apps is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"ns\""
        );
        assert_eq!(
            forbidden_message(&u, &attrs("list", "")),
            "User \"system:serviceaccount:ns:sa\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"
        );
        let path = Attributes {
            verb: "get".into(),
            path: "/metrics".into(),
            ..Default::default()
        };
        assert_eq!(
            filter_forbidden(&UserInfo::anonymous(), &path, "").message,
            "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
        );
    }

    #[test]
    fn field_selector_pins_the_name() {
        let q = vec![(
            "fieldSelector".to_string(),
            "metadata.name=lease-a".to_string(),
        )];
        assert_eq!(pinned_name(&q).as_deref(), Some("lease-a"));
        let q = vec![("fieldSelector".to_string(), "metadata.name!=x".to_string())];
        assert_eq!(pinned_name(&q), None);
    }
}
