//! Resource verbs: get, list, create, update, patch (merge, JSON, strategic, server-side apply),
//! delete, deletecollection, and the status and scale subresources. Objects are converted
//! between the request version and the storage version here; requests in a custom resource's
//! version are defaulted, pruned and validated against that version's schema before storage.
//! Writes make the authorization checks kube-apiserver's handlers add to the filter's (create
//! when an apply or a PUT creates the object) and run the OwnerReferencesPermissionEnforcement
//! admission plugin when it is on.

use std::sync::Arc;

use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{App, json_response};
use crate::auth::admission::{self, OwnerRefWrite};
use crate::auth::{Attributes, Caller};
use crate::error::ApiError;
use crate::lists::Hints;
use crate::managed::{self, Scope, Writer};
use crate::meta;
use crate::patch::{self, ApplyPatchError};
use crate::registry::{ResourceType, VersionInfo};
use crate::requests::RequestInfo;
use crate::schema;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{DeleteOpts, Managed, Propagation, Sub, WriteCtx};
use crate::table::{self, IncludeObject};

const MAX_BODY: usize = 64 * 1024 * 1024;
const PATCH_RETRIES: usize = 8;

/// How the client wants objects rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Want {
    Json,
    Table(IncludeObject),
    Partial,
}

pub(super) fn negotiate(headers: &HeaderMap, q: &Params) -> Want {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    for range in accept.split(',') {
        let r = range.replace(' ', "");
        if r.contains("as=Table") {
            let include = match q.get("includeObject") {
                Some("None") => IncludeObject::None,
                Some("Object") => IncludeObject::Object,
                _ => IncludeObject::Metadata,
            };
            return Want::Table(include);
        }
        if r.contains("as=PartialObjectMetadata") {
            return Want::Partial;
        }
        if r.starts_with("application/json")
            || r.starts_with("*/*")
            || r.starts_with("application/yaml")
        {
            return Want::Json;
        }
    }
    Want::Json
}

/// Query parameters.
pub(super) struct Params(pub Vec<(String, String)>);

impl Params {
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1"))
    }
}

/// One request's resolved target.
pub(super) struct Target {
    pub rt: Arc<ResourceType>,
    pub vinfo: VersionInfo,
    pub version: String,
    /// Storage namespace ("" for cluster-scoped kinds).
    pub ns: String,
    pub name: String,
    pub warnings: Vec<String>,
    /// Who asks (for the extra authorization checks) and the request's attributes.
    pub caller: Caller,
    pub attrs: Attributes,
}

impl Target {
    fn api_version(&self) -> String {
        self.rt.api_version(&self.version)
    }
}

pub(super) async fn handle(
    app: Arc<App>,
    info: RequestInfo,
    pairs: Vec<(String, String)>,
    req: Request,
) -> Response {
    let q = Params(pairs);
    match handle_inner(&app, &info, &q, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn handle_inner(
    app: &Arc<App>,
    info: &RequestInfo,
    q: &Params,
    req: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let rt = app
        .store
        .read()
        .registry
        .lookup(&info.group, &info.version, &info.resource)
        .ok_or_else(ApiError::no_route)?;
    let vinfo = rt
        .version(&info.version)
        .cloned()
        .ok_or_else(ApiError::no_route)?;
    let mut warnings = Vec::new();
    if vinfo.deprecated {
        warnings.push(vinfo.deprecation_warning.clone().unwrap_or_else(|| {
            format!(
                "{} {} is deprecated",
                rt.api_version(&info.version),
                rt.kind
            )
        }));
    }
    let collection_verb = matches!(info.verb.as_str(), "list" | "watch" | "deletecollection");
    let is_ns_kind = rt.group.is_empty() && rt.plural == "namespaces";
    if rt.namespaced && info.namespace.is_empty() && !(collection_verb && info.name.is_empty()) {
        return Err(ApiError::no_route());
    }
    if !rt.namespaced && !info.namespace.is_empty() && !is_ns_kind {
        return Err(ApiError::no_route());
    }
    let ns = if rt.namespaced {
        info.namespace.clone()
    } else {
        String::new()
    };
    match info.subresource.as_str() {
        "" => {}
        "status" if vinfo.status => {}
        "scale" if vinfo.scale.is_some() => {}
        "token" if rt.group.is_empty() && rt.plural == "serviceaccounts" => {}
        _ => return Err(ApiError::no_route()),
    }
    let t = Target {
        rt: rt.clone(),
        vinfo,
        version: info.version.clone(),
        ns,
        name: info.name.clone(),
        warnings,
        caller: parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_default(),
        attrs: parts
            .extensions
            .get::<Attributes>()
            .cloned()
            .unwrap_or_default(),
    };
    let want = negotiate(&parts.headers, q);
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let manager = match q.get("fieldManager") {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => {
            let ua = user_agent.split('/').next().unwrap_or_default();
            if ua.is_empty() {
                "unknown".to_string()
            } else {
                ua.to_string()
            }
        }
    };
    let bytes = to_bytes(body, MAX_BODY).await.map_err(|e| {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body could not be read: {e}"),
        )
    })?;
    let mut wctx = WriteCtx::new(&manager, &t.api_version());
    wctx.dry_run = q.get("dryRun") == Some("All");
    if info.subresource == "status" {
        wctx.sub = Sub::Status;
    }
    if info.subresource == "scale" {
        return scale(app, &t, info, &content_type, &bytes, &wctx).await;
    }
    if t.rt.create_only {
        return match (info.verb.as_str(), info.subresource.as_str()) {
            ("create", "") => super::reviews::create(app, &t, &content_type, &bytes),
            _ => Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )),
        };
    }
    if info.subresource == "token" {
        return match info.verb.as_str() {
            "create" => super::tokens::create(app, &t, &content_type, &bytes),
            other => Err(ApiError::method_not_allowed(format!(
                "{other} is not supported on serviceaccounts/token"
            ))),
        };
    }
    match info.verb.as_str() {
        "get" => get(app, &t, want).await,
        "list" => list(app, &t, q, want).await,
        "watch" => super::watch::watch(app, t, q, want).await,
        "create" => create(app, &t, q, &content_type, &bytes, &wctx).await,
        "update" => update(app, &t, q, &content_type, &bytes, &wctx).await,
        "patch" => patch(app, &t, q, &content_type, &bytes, &wctx).await,
        "delete" => delete(app, &t, q, &bytes).await,
        "deletecollection" => delete_collection(app, &t, q, &bytes).await,
        other => Err(ApiError::method_not_allowed(format!(
            "{other} is not supported on {}",
            t.rt.plural
        ))),
    }
}

pub(super) fn decode_body(bytes: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") || content_type.contains("cbor") {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format ({content_type}) - accepted media types include: application/json, application/yaml"
        )));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => Ok(v),
        Err(json_err) => {
            if content_type.contains("yaml") {
                let text = std::str::from_utf8(bytes)
                    .map_err(|e| ApiError::bad_request(format!("the body is not UTF-8: {e}")))?;
                serde_saphyr::from_str::<Value>(text)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
            } else {
                Err(ApiError::bad_request(format!(
                    "couldn't get version/kind; json parse error: {json_err}"
                )))
            }
        }
    }
}

/// Checks (and fills) apiVersion and kind of a request body.
fn check_type(t: &Target, obj: &mut Value) -> Result<(), ApiError> {
    let Some(o) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body is not a JSON object",
        ));
    };
    let want_av = t.api_version();
    match o.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        Some(_) => {}
        None => {
            o.insert("apiVersion".into(), json!(want_av));
        }
    }
    match o.get("kind").and_then(Value::as_str) {
        Some(k) if k != t.rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                t.rt.kind
            )));
        }
        Some(_) => {}
        None => {
            o.insert("kind".into(), json!(t.rt.kind));
        }
    }
    if o.get("metadata")
        .is_some_and(|m| !m.is_object() && !m.is_null())
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

/// Defaulting, pruning and validation of a custom resource in the request version.
fn admit_request(t: &mut Target, obj: &mut Value, q: &Params) -> Result<(), ApiError> {
    if t.rt.is_builtin() {
        return Ok(());
    }
    let Some(s) = t.vinfo.schema.clone() else {
        return Ok(());
    };
    schema::apply_defaults(obj, &s);
    let unknown = schema::prune(obj, &s);
    if !unknown.is_empty() {
        match q.get("fieldValidation") {
            Some("Strict") => {
                let list: Vec<String> = unknown
                    .iter()
                    .map(|u| format!("unknown field \"{u}\""))
                    .collect();
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {}",
                    list.join(", ")
                )));
            }
            Some("Ignore") => {}
            _ => t
                .warnings
                .extend(unknown.iter().map(|u| format!("unknown field \"{u}\""))),
        }
    }
    let causes = schema::validate(obj, &s);
    if !causes.is_empty() {
        return Err(ApiError::invalid(&t.rt, meta::name(obj), causes));
    }
    Ok(())
}

pub(super) async fn to_version(
    app: &App,
    t: &Target,
    objs: Vec<Value>,
) -> Result<Vec<Value>, ApiError> {
    app.converter.convert(&t.rt, objs, &t.version).await
}

async fn one_to_version(app: &App, t: &Target, obj: Value) -> Result<Value, ApiError> {
    to_version(app, t, vec![obj])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))
}

async fn to_storage(app: &App, t: &Target, obj: Value) -> Result<Value, ApiError> {
    app.converter
        .convert(&t.rt, vec![obj], &t.rt.storage_version)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))
}

fn render(t: &Target, obj: Value, want: Want, rv: u64) -> Value {
    match want {
        Want::Json => obj,
        Want::Partial => table::partial(&obj),
        Want::Table(include) => table::table(&t.rt, &t.version, &[obj], include, rv, None),
    }
}

fn respond(t: &Target, code: StatusCode, obj: Value) -> Response {
    json_response(code, &obj, &t.warnings)
}

async fn get(app: &App, t: &Target, want: Want) -> Result<Response, ApiError> {
    let (obj, rv) = {
        let st = app.store.read();
        (st.get(&t.rt.key(), &t.ns, &t.name)?, st.rv())
    };
    let out = one_to_version(app, t, (*obj).clone()).await?;
    Ok(respond(t, StatusCode::OK, render(t, out, want, rv)))
}

fn selectors(t: &Target, q: &Params) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").unwrap_or_default(),
        &t.rt.group,
        &t.rt.plural,
    )
    .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

async fn list(app: &App, t: &Target, q: &Params, want: Want) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(t, q)?;
    let limit = match q.get("limit") {
        Some(l) if !l.is_empty() => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        ),
        _ => None,
    };
    let ns = (!t.ns.is_empty()).then_some(t.ns.as_str());
    let page =
        app.store
            .read()
            .list(&t.rt.key(), ns, &labels, &fields, limit, q.get("continue"))?;
    let items = to_version(app, t, page.items.iter().map(|o| (**o).clone()).collect()).await?;
    let body = match want {
        Want::Table(include) => table::table(
            &t.rt,
            &t.version,
            &items,
            include,
            page.rv,
            page.cont.as_deref(),
        ),
        Want::Partial => {
            let mut md = json!({"resourceVersion": page.rv.to_string()});
            if let Some(c) = &page.cont {
                md["continue"] = json!(c);
            }
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": md,
                "items": items.iter().map(table::partial).collect::<Vec<_>>()})
        }
        Want::Json => {
            let mut md = json!({"resourceVersion": page.rv.to_string()});
            if let Some(c) = &page.cont {
                md["continue"] = json!(c);
            }
            json!({"apiVersion": t.api_version(), "kind": t.rt.list_kind, "metadata": md, "items": items})
        }
    };
    Ok(respond(t, StatusCode::OK, body))
}

async fn create(
    app: &App,
    t: &Target,
    q: &Params,
    content_type: &str,
    bytes: &[u8],
    wctx: &WriteCtx,
) -> Result<Response, ApiError> {
    if !t.name.is_empty() {
        return Err(ApiError::method_not_allowed(format!(
            "POST is not supported on a single {}",
            t.rt.singular
        )));
    }
    let mut t = clone_target(t);
    let mut obj = decode_body(bytes, content_type)?;
    check_type(&t, &mut obj)?;
    let body_ns = meta::namespace(&obj).to_string();
    if t.rt.namespaced && !body_ns.is_empty() && body_ns != t.ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    admit_request(&mut t, &mut obj, q)?;
    admit_owner_refs(app, &t, None, &obj)?;
    let stored = to_storage(app, &t, obj).await?;
    let created = app.store.write().create(&t.rt.key(), &t.ns, stored, wctx)?;
    let out = one_to_version(app, &t, (*created).clone()).await?;
    Ok(respond(&t, StatusCode::CREATED, out))
}

fn clone_target(t: &Target) -> Target {
    Target {
        rt: t.rt.clone(),
        vinfo: t.vinfo.clone(),
        version: t.version.clone(),
        ns: t.ns.clone(),
        name: t.name.clone(),
        warnings: t.warnings.clone(),
        caller: t.caller.clone(),
        attrs: t.attrs.clone(),
    }
}

/// Kinds whose registry strategy allows create on update (`AllowCreateOnUpdate() == true` in
/// pkg/registry/...): a PUT of a missing object creates it.
const CREATE_ON_UPDATE: &[(&str, &str)] = &[
    ("", "services"),
    ("", "endpoints"),
    ("", "events"),
    ("events.k8s.io", "events"),
    ("coordination.k8s.io", "leases"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
];

fn allows_create_on_update(t: &Target) -> bool {
    t.attrs.subresource.is_empty()
        && CREATE_ON_UPDATE
            .iter()
            .any(|(g, r)| *g == t.rt.group && *r == t.rt.plural)
}

/// The extra `create` check of a PUT or an apply PATCH that creates the object: kube-apiserver's
/// handlers wrap the create validation in `withAuthorization` with the create attributes
/// (k8s.io/apiserver/pkg/endpoints/handlers/rest.go, used by patch.go and update.go). A denial
/// is `NewForbidden(resource, name, reason)` with the authorizer's reason as the message.
fn authorize_create(app: &App, t: &Target) -> Result<(), ApiError> {
    let d = app.decide(&t.caller, &t.attrs.with_verb("create"));
    if d.allowed {
        Ok(())
    } else {
        Err(crate::auth::forbidden_status(
            &t.rt.group,
            &t.rt.plural,
            &t.name,
            &d.reason,
        ))
    }
}

/// OwnerReferencesPermissionEnforcement (when on) for a write of `new` over `old`.
fn admit_owner_refs(
    app: &App,
    t: &Target,
    old: Option<&Value>,
    new: &Value,
) -> Result<(), ApiError> {
    if !app.auth.owner_references_permission_enforcement {
        return Ok(());
    }
    let w = OwnerRefWrite {
        attributes: &t.attrs,
        create: old.is_none(),
        old,
        new,
    };
    admission::enforce(
        &w,
        |api_version, kind| owner_resources(app, api_version, kind),
        |a| app.decide(&t.caller, a),
    )
}

/// The RESTMapper's answer for an owner reference: the resources serving `kind` in
/// `api_version`.
fn owner_resources(
    app: &App,
    api_version: &str,
    kind: &str,
) -> Result<Vec<(String, String)>, String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let st = app.store.read();
    let found: Vec<(String, String)> = st
        .registry
        .all()
        .filter(|t| t.group == group && t.kind == kind && t.version(version).is_some())
        .map(|t| (t.group.clone(), t.plural.clone()))
        .collect();
    if found.is_empty() {
        Err(format!(
            "no matches for kind {kind:?} in version {api_version:?}"
        ))
    } else {
        Ok(found)
    }
}

/// A PUT of a missing object of a create-on-update kind: authorized as create too, then created.
async fn create_on_update(
    app: &App,
    mut t: Target,
    q: &Params,
    mut obj: Value,
    wctx: &WriteCtx,
) -> Result<Response, ApiError> {
    authorize_create(app, &t)?;
    meta::meta_mut(&mut obj).shift_remove("resourceVersion");
    admit_request(&mut t, &mut obj, q)?;
    admit_owner_refs(app, &t, None, &obj)?;
    let stored = to_storage(app, &t, obj).await?;
    let created = app.store.write().create(&t.rt.key(), &t.ns, stored, wctx)?;
    let out = one_to_version(app, &t, (*created).clone()).await?;
    Ok(respond(&t, StatusCode::CREATED, out))
}

fn check_name(t: &Target, obj: &mut Value) -> Result<(), ApiError> {
    let body_name = meta::name(obj).to_string();
    if body_name.is_empty() {
        meta::meta_mut(obj).insert("name".into(), json!(t.name));
    } else if body_name != t.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            t.name
        )));
    }
    let body_ns = meta::namespace(obj).to_string();
    if t.rt.namespaced && !body_ns.is_empty() && body_ns != t.ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

async fn update(
    app: &App,
    t: &Target,
    q: &Params,
    content_type: &str,
    bytes: &[u8],
    wctx: &WriteCtx,
) -> Result<Response, ApiError> {
    let mut t = clone_target(t);
    let mut obj = decode_body(bytes, content_type)?;
    check_type(&t, &mut obj)?;
    check_name(&t, &mut obj)?;
    let old = app.store.read().get_opt(&t.rt.key(), &t.ns, &t.name);
    if old.is_none() && allows_create_on_update(&t) {
        return create_on_update(app, t, q, obj, wctx).await;
    }
    let rv_text = meta::meta_str(&obj, "resourceVersion").to_string();
    let precondition =
        if rv_text.is_empty() {
            if !t.rt.is_builtin() {
                return Err(ApiError::invalid(
                    &t.rt,
                    &t.name,
                    vec![crate::error::FieldCause::invalid(
                        "metadata.resourceVersion",
                        &json!(0),
                        "must be specified for an update",
                    )],
                ));
            }
            None
        } else {
            Some(rv_text.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {rv_text:?}"))
            })?)
        };
    admit_request(&mut t, &mut obj, q)?;
    if let Some(old) = &old {
        admit_owner_refs(app, &t, Some(old), &obj)?;
    }
    let stored = to_storage(app, &t, obj).await?;
    let updated =
        app.store
            .write()
            .update(&t.rt.key(), &t.ns, &t.name, stored, wctx, precondition)?;
    let out = one_to_version(app, &t, (*updated).clone()).await?;
    Ok(respond(&t, StatusCode::OK, out))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

fn patch_type(t: &Target, content_type: &str) -> Result<PatchType, ApiError> {
    let base = content_type.split(';').next().unwrap_or_default().trim();
    let unsupported = || {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}",
            if t.rt.is_builtin() {
                ", application/strategic-merge-patch+json"
            } else {
                ""
            }
        ))
    };
    match base {
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/strategic-merge-patch+json" if t.rt.is_builtin() => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" => Ok(PatchType::Apply),
        _ => Err(unsupported()),
    }
}

fn patch_error(t: &Target, e: ApplyPatchError) -> ApiError {
    match e {
        ApplyPatchError::Syntax(m) => ApiError::bad_request(m),
        ApplyPatchError::Failed(m) => {
            ApiError::new(422, "Invalid", m).with_details(crate::error::Details {
                name: t.name.clone(),
                group: t.rt.group.clone(),
                kind: t.rt.kind.clone(),
                ..Default::default()
            })
        }
    }
}

fn conflict_error(t: &Target, conflicts: Vec<managed::Conflict>) -> ApiError {
    let lines: Vec<String> = conflicts
        .iter()
        .map(|c| {
            format!(
                "conflict with \"{}\" using {}: {}",
                c.manager, c.api_version, c.field
            )
        })
        .collect();
    let message = if lines.len() == 1 {
        format!("Apply failed with 1 conflict: {}", lines.join(""))
    } else {
        format!(
            "Apply failed with {} conflicts: {}",
            lines.len(),
            lines.join("\n")
        )
    };
    ApiError::new(409, "Conflict", message).with_details(crate::error::Details {
        name: t.name.clone(),
        group: t.rt.group.clone(),
        kind: t.rt.plural.clone(),
        causes: conflicts
            .iter()
            .map(|c| {
                json!({"type": "FieldManagerConflict",
                    "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version),
                    "field": c.field})
            })
            .collect(),
        ..Default::default()
    })
}

fn scope(t: &Target, sub: Sub) -> Scope {
    match (t.vinfo.status, sub) {
        (false, _) => Scope::All,
        (true, Sub::Main) => Scope::Main,
        (true, Sub::Status) => Scope::Status,
    }
}

async fn patch(
    app: &App,
    t: &Target,
    q: &Params,
    content_type: &str,
    bytes: &[u8],
    wctx: &WriteCtx,
) -> Result<Response, ApiError> {
    let mut t = clone_target(t);
    let ptype = patch_type(&t, content_type)?;
    let doc = decode_body(
        bytes,
        if ptype == PatchType::Apply {
            "application/yaml"
        } else {
            content_type
        },
    )?;
    let force = q.flag("force");
    if ptype == PatchType::Apply {
        if q.get("fieldManager").is_none_or(str::is_empty) {
            return Err(ApiError::new(
                422,
                "Invalid",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let mut probe = doc.clone();
        check_type(&t, &mut probe)?;
        if doc.get("apiVersion").is_none() || doc.get("kind").is_none() {
            return Err(ApiError::bad_request(
                "apiVersion and kind must be set in an applied configuration",
            ));
        }
        check_name(&t, &mut probe)?;
    } else if force {
        return Err(ApiError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
        ));
    }
    let key = t.rt.key();
    let hints_schema = t.vinfo.schema.clone();
    let hints = Hints::root(hints_schema.as_ref(), t.rt.is_builtin());
    let sc = scope(&t, wctx.sub);
    let api_version = t.api_version();
    let sub_name = if wctx.sub == Sub::Status {
        "status"
    } else {
        ""
    };
    for attempt in 0..PATCH_RETRIES {
        let current = app.store.read().get_opt(&key, &t.ns, &t.name);
        let now = meta::now();
        let writer = Writer {
            manager: &wctx.manager,
            api_version: &api_version,
            subresource: sub_name,
            now: &now,
        };
        let Some(current) = current else {
            if ptype != PatchType::Apply || wctx.sub == Sub::Status {
                return Err(ApiError::not_found_in(&t.rt, &t.name));
            }
            let mut cfg = doc.clone();
            check_name(&t, &mut cfg)?;
            let mut obj = managed::apply(None, &cfg, hints, sc, force, &writer)
                .map_err(|c| conflict_error(&t, c))?;
            meta::meta_mut(&mut obj).shift_remove("resourceVersion");
            authorize_create(app, &t)?;
            admit_request(&mut t, &mut obj, q)?;
            admit_owner_refs(app, &t, None, &obj)?;
            let stored = to_storage(app, &t, obj).await?;
            let mut ctx = wctx.clone();
            ctx.managed = Managed::Given;
            let created = app.store.write().create(&key, &t.ns, stored, &ctx);
            match created {
                Ok(c) => {
                    let out = one_to_version(app, &t, (*c).clone()).await?;
                    return Ok(respond(&t, StatusCode::CREATED, out));
                }
                Err(e) if e.reason == "AlreadyExists" && attempt + 1 < PATCH_RETRIES => continue,
                Err(e) => return Err(e),
            }
        };
        let current_rv = meta::resource_version(&current);
        let cur = one_to_version(app, &t, (*current).clone()).await?;
        let mut new = cur.clone();
        let mut ctx = wctx.clone();
        match ptype {
            PatchType::Merge => {
                patch::merge_patch(&mut new, &doc).map_err(|e| patch_error(&t, e))?
            }
            PatchType::Json => patch::json_patch(&mut new, &doc).map_err(|e| patch_error(&t, e))?,
            PatchType::Strategic => {
                patch::strategic_merge_patch(&mut new, &doc).map_err(|e| patch_error(&t, e))?
            }
            PatchType::Apply => {
                let mut cfg = doc.clone();
                if let Some(m) = cfg.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.shift_remove("resourceVersion");
                    m.shift_remove("managedFields");
                }
                new = managed::apply(Some(&cur), &cfg, hints, sc, force, &writer)
                    .map_err(|c| conflict_error(&t, c))?;
                ctx.managed = Managed::Given;
            }
        }
        if meta::name(&new) != t.name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({})",
                meta::name(&new),
                t.name
            )));
        }
        if !new.is_object() {
            return Err(ApiError::bad_request("the patch did not produce an object"));
        }
        let rv_text = meta::meta_str(&new, "resourceVersion").to_string();
        let user_rv = !rv_text.is_empty() && rv_text != current_rv.to_string();
        let precondition = if rv_text.is_empty() {
            current_rv
        } else {
            rv_text.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {rv_text:?}"))
            })?
        };
        admit_request(&mut t, &mut new, q)?;
        admit_owner_refs(app, &t, Some(&cur), &new)?;
        let stored = to_storage(app, &t, new).await?;
        let result =
            app.store
                .write()
                .update(&key, &t.ns, &t.name, stored, &ctx, Some(precondition));
        match result {
            Ok(o) => {
                let out = one_to_version(app, &t, (*o).clone()).await?;
                return Ok(respond(&t, StatusCode::OK, out));
            }
            Err(e) if e.reason == "Conflict" && !user_rv && attempt + 1 < PATCH_RETRIES => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::stale(&t.rt, &t.name))
}

fn delete_opts(q: &Params, bytes: &[u8]) -> Result<DeleteOpts, ApiError> {
    let body: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let policy = q
        .get("propagationPolicy")
        .map(str::to_string)
        .or_else(|| {
            body.get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .or_else(
            || match body.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some("Orphan".into()),
                Some(false) => Some("Background".into()),
                None => None,
            },
        )
        .or_else(|| match q.get("orphanDependents") {
            Some("true") => Some("Orphan".into()),
            _ => None,
        });
    let propagation = match policy.as_deref() {
        None | Some("") => None,
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    };
    let dry_run = q.get("dryRun") == Some("All")
        || body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"));
    Ok(DeleteOpts {
        propagation,
        precondition_uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_rv: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok()),
        dry_run,
    })
}

async fn delete(app: &App, t: &Target, q: &Params, bytes: &[u8]) -> Result<Response, ApiError> {
    let opts = delete_opts(q, bytes)?;
    let (obj, gone) = app
        .store
        .write()
        .delete(&t.rt.key(), &t.ns, &t.name, &opts)?;
    let out = one_to_version(app, t, (*obj).clone()).await?;
    let code = if gone {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok(respond(t, code, out))
}

async fn delete_collection(
    app: &App,
    t: &Target,
    q: &Params,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let opts = delete_opts(q, bytes)?;
    let (labels, fields) = selectors(t, q)?;
    let ns = (!t.ns.is_empty()).then_some(t.ns.as_str());
    let deleted = app
        .store
        .write()
        .delete_collection(&t.rt.key(), ns, &labels, &fields, &opts)?;
    let items = to_version(app, t, deleted.iter().map(|o| (**o).clone()).collect()).await?;
    let rv = app.store.read().rv();
    Ok(respond(
        t,
        StatusCode::OK,
        json!({"apiVersion": t.api_version(), "kind": t.rt.list_kind,
            "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
    ))
}

fn path_pointer(path: &str) -> String {
    path.trim()
        .trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut acc, seg| {
            acc.push('/');
            acc.push_str(seg);
            acc
        })
}

fn set_path(obj: &mut Value, path: &str, v: Value) {
    let segs: Vec<&str> = path.trim().trim_start_matches('.').split('.').collect();
    let mut cur = obj;
    for (i, seg) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(m) = cur.as_object_mut() else { return };
        if i + 1 == segs.len() {
            m.insert((*seg).to_string(), v);
            return;
        }
        cur = m.entry(*seg).or_insert_with(|| json!({}));
    }
}

fn scale_view(t: &Target, obj: &Value) -> Value {
    let Some(s) = &t.vinfo.scale else {
        return Value::Null;
    };
    let spec = obj
        .pointer(&path_pointer(&s.spec_replicas_path))
        .cloned()
        .unwrap_or(json!(0));
    let status = obj
        .pointer(&path_pointer(&s.status_replicas_path))
        .cloned()
        .unwrap_or(json!(0));
    let selector = match &s.label_selector_path {
        Some(p) => obj
            .pointer(&path_pointer(p))
            .and_then(Value::as_str)
            .map(str::to_string),
        None => obj
            .pointer("/spec/selector")
            .and_then(|sel| LabelSelector::from_object(sel).ok())
            .map(|s| s.to_query()),
    };
    let mut m = serde_json::Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.pointer(&format!("/metadata/{k}")) {
            m.insert(k.into(), v.clone());
        }
    }
    let mut status_obj = json!({"replicas": status});
    if let Some(sel) = selector {
        status_obj["selector"] = json!(sel);
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": m,
        "spec": {"replicas": spec}, "status": status_obj})
}

async fn scale(
    app: &App,
    t: &Target,
    info: &RequestInfo,
    content_type: &str,
    bytes: &[u8],
    wctx: &WriteCtx,
) -> Result<Response, ApiError> {
    let key = t.rt.key();
    let spec_path = t
        .vinfo
        .scale
        .as_ref()
        .map(|s| s.spec_replicas_path.clone())
        .unwrap_or_else(|| ".spec.replicas".into());
    let mut ctx = wctx.clone();
    ctx.sub = Sub::Main;
    for attempt in 0..PATCH_RETRIES {
        let current = app.store.read().get(&key, &t.ns, &t.name)?;
        let cur = one_to_version(app, t, (*current).clone()).await?;
        let view = scale_view(t, &cur);
        let (wanted, precondition, user_rv) = match info.verb.as_str() {
            "get" => return Ok(respond(t, StatusCode::OK, view)),
            "update" => {
                let body = decode_body(bytes, content_type)?;
                let rv = meta::meta_str(&body, "resourceVersion").to_string();
                let pre = if rv.is_empty() {
                    meta::resource_version(&current)
                } else {
                    rv.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                    })?
                };
                (body, pre, !rv.is_empty())
            }
            "patch" => {
                let doc = decode_body(bytes, content_type)?;
                let mut v = view.clone();
                let base = content_type.split(';').next().unwrap_or_default().trim();
                match base {
                    "application/merge-patch+json" | "application/apply-patch+yaml" => {
                        patch::merge_patch(&mut v, &doc).map_err(|e| patch_error(t, e))?
                    }
                    "application/strategic-merge-patch+json" => {
                        patch::strategic_merge_patch(&mut v, &doc).map_err(|e| patch_error(t, e))?
                    }
                    "application/json-patch+json" => {
                        patch::json_patch(&mut v, &doc).map_err(|e| patch_error(t, e))?
                    }
                    other => {
                        return Err(ApiError::unsupported_media_type(format!(
                            "the body of the request was in an unknown format ({other})"
                        )));
                    }
                }
                (v, meta::resource_version(&current), false)
            }
            other => {
                return Err(ApiError::method_not_allowed(format!(
                    "{other} is not supported on scale"
                )));
            }
        };
        let replicas = wanted
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .ok_or_else(|| {
                ApiError::invalid(
                    &t.rt,
                    &t.name,
                    vec![crate::error::FieldCause::required("spec.replicas", "")],
                )
            })?;
        if replicas < 0 {
            return Err(ApiError::invalid(
                &t.rt,
                &t.name,
                vec![crate::error::FieldCause::invalid(
                    "spec.replicas",
                    &json!(replicas),
                    "must be greater than or equal to 0",
                )],
            ));
        }
        let mut new = cur.clone();
        set_path(&mut new, &spec_path, json!(replicas));
        let stored = to_storage(app, t, new).await?;
        let result =
            app.store
                .write()
                .update(&key, &t.ns, &t.name, stored, &ctx, Some(precondition));
        match result {
            Ok(o) => {
                let out = one_to_version(app, t, (*o).clone()).await?;
                return Ok(respond(t, StatusCode::OK, scale_view(t, &out)));
            }
            Err(e) if e.reason == "Conflict" && !user_rv && attempt + 1 < PATCH_RETRIES => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::stale(&t.rt, &t.name))
}
