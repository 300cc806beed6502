//! The HTTP layer: axum routing, the request-log middleware, the authentication and
//! authorization filter, discovery documents, admin endpoints under `/standin/`, and response
//! helpers (Status bodies, `Warning` headers). Resource verbs live in `resources`, the
//! TokenRequest API in `tokens`, the TokenReview and (Self)SubjectAccessReview APIs in
//! `reviews`, watch streaming in `watch`.

mod resources;
mod reviews;
mod tokens;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::auth::rbac::Decision;
use crate::auth::{
    Attributes, AuthTrail, Authenticator, AuthorizationMode, AuthzCheck, Caller, UserInfo,
};
use crate::conversion::Converter;
use crate::error::ApiError;
use crate::meta;
use crate::registry::ResourceType;
use crate::requests::{RecordedRequest, RequestLog, parse_request_info};
use crate::store::Store;

/// Everything a request handler needs.
pub struct App {
    pub store: Arc<Store>,
    pub converter: Converter,
    pub log: RequestLog,
    pub port: u16,
    pub bookmark_interval: Duration,
    pub auth: AuthConfig,
}

/// Authentication and authorization settings of a running stand-in.
#[derive(Debug)]
pub struct AuthConfig {
    pub mode: AuthorizationMode,
    /// The OwnerReferencesPermissionEnforcement admission plugin.
    pub owner_references_permission_enforcement: bool,
    pub tokens: Authenticator,
}

impl App {
    /// Asks the authorizer about `a` for `caller` and records the decision in the request's
    /// trail (every check a request needs goes through here, so the log shows them all).
    pub fn decide(&self, caller: &Caller, a: &Attributes) -> Decision {
        let d = match self.auth.mode {
            AuthorizationMode::AlwaysAllow => Decision {
                allowed: true,
                reason: "AlwaysAllow".into(),
            },
            AuthorizationMode::Rbac => {
                crate::auth::rbac::authorize(&self.store.read(), &caller.user, a)
            }
        };
        caller.trail.push(AuthzCheck {
            attributes: a.clone(),
            allowed: d.allowed,
            reason: d.reason.clone(),
        });
        d
    }

    /// What the authorizer answers about `a` for `user`, without recording it as a check of
    /// the current request (a SubjectAccessReview asks about someone else's request). Reasons
    /// are the authorizer's as kube-apiserver reports them: empty for `AlwaysAllow` and for
    /// `system:masters` (the privileged-groups authorizer gives none), RBAC's otherwise.
    pub fn evaluate(&self, user: &UserInfo, a: &Attributes) -> Decision {
        match self.auth.mode {
            AuthorizationMode::AlwaysAllow => Decision {
                allowed: true,
                reason: String::new(),
            },
            AuthorizationMode::Rbac => {
                let mut d = crate::auth::rbac::authorize(&self.store.read(), user, a);
                if d.reason == crate::auth::MASTERS_GROUP {
                    d.reason.clear();
                }
                d
            }
        }
    }

    /// The user a bearer token authenticates as (what the filter and TokenReview both use).
    pub fn authenticate_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<(UserInfo, Vec<String>), crate::auth::TokenError> {
        let sa_uid = |ns: &str, name: &str| {
            self.store
                .read()
                .get_opt(
                    &crate::registry::GroupResource::new("", "serviceaccounts"),
                    ns,
                    name,
                )
                .map(|o| meta::uid(&o).to_string())
        };
        self.auth.tokens.authenticate(token, audiences, sa_uid)
    }

    /// The user of a request's credentials (anonymous without any), or the 401 to send.
    fn authenticate(&self, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let Some(token) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(crate::auth::authn::bearer)
        else {
            return Ok(UserInfo::anonymous());
        };
        // Requests to the API server need a token for the API server's audience.
        self.authenticate_token(token, &[crate::auth::authn::API_AUDIENCE.to_string()])
            .map(|(user, _)| user)
            .map_err(|e| {
                tracing::debug!(error = %e, "authentication failed");
                crate::auth::unauthorized()
            })
    }
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/openapi/v3", get(openapi_root))
        .route("/openapi/v3/{*gv}", get(openapi_gv))
        .route(
            "/standin/requests",
            get(requests_get).delete(requests_delete),
        )
        .route("/standin/compact", post(compact))
        .route("/standin/disconnect-watches", post(disconnect))
        .fallback(dispatch)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .layer(middleware::from_fn_with_state(app.clone(), record))
        .with_state(app)
}

fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding of a query component (`+` is a space).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// kube-apiserver's WithAuthentication and WithAuthorization filters: who is asking (401 for
/// bad credentials), and is the request's own verb allowed (403 otherwise). Handlers make the
/// extra checks some requests need (create on an apply that creates, admission plugins).
/// The stand-in's admin endpoints under `/standin/` are not part of the API and skip this.
async fn guard(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if path.starts_with("/standin/") {
        return next.run(req).await;
    }
    let trail = req
        .extensions()
        .get::<AuthTrail>()
        .cloned()
        .unwrap_or_default();
    let user = match app.authenticate(req.headers()) {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    trail.set_user(&user);
    let caller = Caller { user, trail };
    let pairs = query_pairs(req.uri().query().unwrap_or_default());
    let info = parse_request_info(req.method().as_str(), &path, &pairs);
    let attrs = Attributes::of_request(&info, &path, &pairs);
    let d = app.decide(&caller, &attrs);
    if !d.allowed {
        return crate::auth::filter_forbidden(&caller.user, &attrs, &d.reason).into_response();
    }
    req.extensions_mut().insert(caller);
    req.extensions_mut().insert(attrs);
    next.run(req).await
}

async fn record(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let trail = AuthTrail::default();
    req.extensions_mut().insert(trail.clone());
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let pairs = query_pairs(&query);
    let info = parse_request_info(&method, &path, &pairs);
    let content_type = header_str(req.headers(), header::CONTENT_TYPE);
    let user_agent = header_str(req.headers(), header::USER_AGENT);
    let field_manager = pairs
        .iter()
        .find(|(k, _)| k == "fieldManager")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let resp = next.run(req).await;
    if !path.starts_with("/standin/") {
        let trail = trail.snapshot();
        let user = trail.user.unwrap_or_default();
        let authorization = if trail.checks.is_empty() {
            ""
        } else if trail.checks.iter().all(|c| c.allowed) {
            "allow"
        } else {
            "deny"
        };
        app.log.push(RecordedRequest {
            method,
            path,
            query,
            verb: info.verb,
            group: info.group,
            version: info.version,
            resource: info.resource,
            subresource: info.subresource,
            namespace: info.namespace,
            name: info.name,
            content_type,
            field_manager,
            user_agent,
            code: resp.status().as_u16(),
            user: user.name,
            groups: user.groups,
            authorization: authorization.to_string(),
            checks: trail.checks,
        });
    }
    resp
}

fn header_str(h: &HeaderMap, n: header::HeaderName) -> String {
    h.get(n)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

async fn requests_get(State(app): State<Arc<App>>) -> Response {
    json_response(StatusCode::OK, &json!(app.log.snapshot()), &[])
}

async fn requests_delete(State(app): State<Arc<App>>) -> StatusCode {
    app.log.clear();
    StatusCode::NO_CONTENT
}

async fn compact(State(app): State<Arc<App>>) -> StatusCode {
    app.store.write().compact();
    StatusCode::NO_CONTENT
}

async fn disconnect(State(app): State<Arc<App>>) -> StatusCode {
    app.store.disconnect_watches();
    StatusCode::NO_CONTENT
}

async fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": "36",
            "emulationMajor": "1",
            "emulationMinor": "36",
            "gitVersion": "v1.36.0-standin",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "rust",
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        }),
        &[],
    )
}

/// The OpenAPI v3 discovery root: one document per served group-version.
async fn openapi_root(State(app): State<Arc<App>>) -> Response {
    let st = app.store.read();
    let mut paths = serde_json::Map::new();
    for (g, versions) in st.registry.groups() {
        for v in versions {
            let gv = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            let hash = meta::safe_hash(format!("{gv}/{}", st.rv()).as_bytes(), 16);
            paths.insert(
                gv.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={hash}")}),
            );
        }
    }
    json_response(StatusCode::OK, &json!({"paths": paths}), &[])
}

/// A group-version's OpenAPI v3 document. It describes operations (enough for kubectl to see
/// that the server validates fields itself, `fieldValidation`), not object schemas.
async fn openapi_gv(
    State(app): State<Arc<App>>,
    axum::extract::Path(gv): axum::extract::Path<String>,
) -> Response {
    let parts: Vec<&str> = gv.trim_matches('/').split('/').collect();
    let (group, version) = match parts.as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return ApiError::no_route().into_response(),
    };
    let st = app.store.read();
    let types = st.registry.in_group_version(&group, &version);
    if types.is_empty() {
        return ApiError::no_route().into_response();
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let param = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    let mut paths = serde_json::Map::new();
    // Review kinds have no object paths to describe.
    for t in types.into_iter().filter(|t| !t.create_only) {
        let gvk = json!({"group": t.group, "version": version, "kind": t.kind});
        let item = if t.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{prefix}/{}/{{name}}", t.plural)
        };
        let op = |action: &str| {
            json!({"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
                "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation")],
                "responses": {"200": {"description": "OK"}}})
        };
        paths.insert(item, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
    }
    json_response(
        StatusCode::OK,
        &json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.36.0"},
            "paths": paths, "components": {"schemas": {}}}),
        &[],
    )
}

/// A JSON response with optional `Warning` headers.
pub fn json_response(code: StatusCode, body: &Value, warnings: &[String]) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    add_warnings(resp.headers_mut(), warnings);
    resp
}

pub fn add_warnings(h: &mut HeaderMap, warnings: &[String]) {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            h.append(header::WARNING, v);
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.status_json(), &[])
    }
}

async fn dispatch(State(app): State<Arc<App>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let pairs = query_pairs(&query);
    let info = parse_request_info(req.method().as_str(), &path, &pairs);
    if !path.starts_with("/api/") && path != "/api" && !path.starts_with("/apis") {
        return ApiError::no_route().into_response();
    }
    if !info.is_resource {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )
            .into_response();
        }
        return discovery(&app, &path).unwrap_or_else(|e| e.into_response());
    }
    resources::handle(app, info, pairs, req).await
}

fn discovery(app: &App, path: &str) -> Result<Response, ApiError> {
    let st = app.store.read();
    let reg = &st.registry;
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let ok = |v: Value| Ok(json_response(StatusCode::OK, &v, &[]));
    match parts.as_slice() {
        ["api"] => ok(json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": format!("127.0.0.1:{}", app.port)}],
        })),
        ["api", v] if *v == "v1" => ok(resource_list(reg.in_group_version("", "v1"), "", "v1")),
        ["apis"] => {
            let groups: Vec<Value> = reg
                .groups()
                .into_iter()
                .filter(|(g, _)| !g.is_empty())
                .map(|(g, vs)| group_json(&g, &vs))
                .collect();
            ok(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        ["apis", g] => match reg.groups().get(*g) {
            Some(vs) => {
                let mut v = group_json(g, vs);
                v["kind"] = json!("APIGroup");
                v["apiVersion"] = json!("v1");
                ok(v)
            }
            None => Err(ApiError::no_route()),
        },
        ["apis", g, v] => {
            let types = reg.in_group_version(g, v);
            if types.is_empty() {
                return Err(ApiError::no_route());
            }
            ok(resource_list(types, g, v))
        }
        _ => Err(ApiError::no_route()),
    }
}

fn group_json(g: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({
        "name": g,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

fn resource_list(types: Vec<Arc<ResourceType>>, group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for t in types {
        let Some(v) = t.version(version) else {
            continue;
        };
        let mut r = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": if t.create_only {
                json!(["create"])
            } else {
                json!(["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"])
            },
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        if v.status {
            resources.push(json!({
                "name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced,
                "kind": t.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        if v.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", t.plural), "singularName": "", "namespaced": t.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
            }));
        }
        if t.group.is_empty() && t.plural == "serviceaccounts" {
            resources.push(json!({
                "name": "serviceaccounts/token", "singularName": "", "namespaced": true,
                "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        assert_eq!(
            query_pairs("labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1&x"),
            vec![
                (
                    "labelSelector".to_string(),
                    "app=web,tier in (a)".to_string()
                ),
                ("watch".to_string(), "1".to_string()),
                ("x".to_string(), String::new())
            ]
        );
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
    }
}
