//! The request log: one record per HTTP request, with the Kubernetes request attributes the
//! API server derives from the path (verb, group, version, resource, subresource, namespace,
//! name), so tests can assert idempotency and least privilege.

use std::sync::Mutex;

use serde::Serialize;

use crate::auth::AuthzCheck;

/// One served request. Empty strings mean "not applicable" (e.g. `name` of a list).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: String,
    /// get, list, watch, create, update, patch, delete, deletecollection (RBAC verbs).
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub content_type: String,
    pub field_manager: String,
    pub user_agent: String,
    pub code: u16,
    /// The authenticated user ("" when authentication failed: a 401).
    pub user: String,
    pub groups: Vec<String>,
    /// `allow` when every authorization check passed, `deny` when one failed (the request got
    /// a 403), "" when none was made (a 401).
    pub authorization: String,
    /// Every authorization check made for the request, in order: its own verb first, then
    /// the extra ones (create for an apply that creates, admission plugins).
    pub checks: Vec<AuthzCheck>,
}

impl RecordedRequest {
    /// True when an authorization check failed for this request.
    pub fn denied(&self) -> bool {
        self.checks.iter().any(|c| !c.allowed)
    }
}

/// Kubernetes request attributes of a path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub is_resource: bool,
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub watch: bool,
}

/// Parses `/api/v1/...` and `/apis/{group}/{version}/...` like the API server's
/// RequestInfoFactory.
pub fn parse_request_info(method: &str, path: &str, query: &[(String, String)]) -> RequestInfo {
    let mut info = RequestInfo::default();
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let rest: &[&str] = match parts.as_slice() {
        ["api", v, rest @ ..] => {
            info.version = v.to_string();
            rest
        }
        ["apis", g, v, rest @ ..] => {
            info.group = g.to_string();
            info.version = v.to_string();
            rest
        }
        _ => {
            info.verb = method.to_lowercase();
            return info;
        }
    };
    let mut rest = rest;
    if rest.first() == Some(&"watch") {
        info.watch = true;
        rest = &rest[1..];
    }
    if rest.is_empty() {
        info.verb = method.to_lowercase();
        return info;
    }
    info.is_resource = true;
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        info.namespace = rest[1].to_string();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    info.resource = rest.first().map(|s| s.to_string()).unwrap_or_default();
    info.name = rest.get(1).map(|s| s.to_string()).unwrap_or_default();
    info.subresource = rest.get(2).map(|s| s.to_string()).unwrap_or_default();
    if info.resource == "namespaces" && !info.name.is_empty() {
        info.namespace = info.name.clone();
    }
    if rest.len() > 3 {
        info.subresource = rest[2..].join("/");
    }
    let q = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if matches!(q("watch"), Some("true") | Some("1")) {
        info.watch = true;
    }
    info.verb = match (method, info.name.is_empty()) {
        ("GET" | "HEAD", true) if info.watch => "watch",
        ("GET" | "HEAD", true) => "list",
        ("GET" | "HEAD", false) if info.watch => "watch",
        ("GET" | "HEAD", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        (m, _) => {
            return RequestInfo {
                verb: m.to_lowercase(),
                ..info
            };
        }
    }
    .to_string();
    info
}

/// The shared, append-only log.
#[derive(Debug, Default)]
pub struct RequestLog {
    entries: Mutex<Vec<RecordedRequest>>,
}

impl RequestLog {
    pub fn push(&self, r: RecordedRequest) {
        if let Ok(mut e) = self.entries.lock() {
            e.push(r);
        }
    }

    pub fn snapshot(&self) -> Vec<RecordedRequest> {
        self.entries.lock().map(|e| e.clone()).unwrap_or_default()
    }

    pub fn clear(&self) {
        if let Ok(mut e) = self.entries.lock() {
            e.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_info_like_the_api_server() {
        let i = parse_request_info(
            "GET",
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            &[],
        );
        assert_eq!(
            (
                i.verb.as_str(),
                i.group.as_str(),
                i.resource.as_str(),
                i.namespace.as_str(),
                i.name.as_str(),
                i.subresource.as_str()
            ),
            ("get", "apps", "deployments", "ns", "d", "scale")
        );
        let i = parse_request_info("GET", "/api/v1/namespaces/ns/status", &[]);
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.subresource.as_str()),
            ("namespaces", "ns", "status")
        );
        let i = parse_request_info("GET", "/api/v1/pods", &[("watch".into(), "true".into())]);
        assert_eq!((i.verb.as_str(), i.namespace.as_str()), ("watch", ""));
        let i = parse_request_info("DELETE", "/api/v1/namespaces/ns/configmaps", &[]);
        assert_eq!(i.verb, "deletecollection");
        let i = parse_request_info("GET", "/apis", &[]);
        assert!(!i.is_resource);
    }
}
