//! The review APIs, create-only kinds that evaluate the request and store nothing
//! (<https://kubernetes.io/docs/reference/access-authn-authz/authentication/#webhook-token-authentication>,
//! <https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access>):
//!
//! - `authentication.k8s.io/v1` TokenReview (`pkg/registry/authentication/tokenreview` upstream):
//!   `spec.token` is run through the stand-in's authenticator; `status.authenticated`,
//!   `status.user` (username, uid for ServiceAccounts, groups) and `status.audiences`, or
//!   `status.error` for a token it refuses. An empty token is a 400.
//! - `authorization.k8s.io/v1` SubjectAccessReview (`pkg/registry/authorization/
//!   subjectaccessreview`): the user, groups and exactly one of `resourceAttributes` /
//!   `nonResourceAttributes` of the spec go through the stand-in's authorizer (RBAC in `Rbac`
//!   mode, `nonResourceURLs` included); `status.allowed`, `status.denied` (never set: RBAC has
//!   no deny rules), `status.reason`. A spec without user and groups, or with both or neither
//!   attribute kinds, is a 422.
//! - `authorization.k8s.io/v1` SelfSubjectAccessReview: the same for the caller itself.
//!
//! The caller needs `create` on the review resource (checked by the authorization filter before
//! this runs); the evaluation itself is not one of the request's checks in the request log.
//! Answers are 201 Created with the review, status filled in, as kube-apiserver sends them.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::App;
use super::resources::{Target, decode_body};
use super::tokens::DEFAULT_AUDIENCE;
use crate::auth::{Attributes, UserInfo};
use crate::error::{ApiError, FieldCause};
use crate::registry::GroupResource;

/// Answers a create of the review kind `t` names.
pub(super) fn create(
    app: &App,
    t: &Target,
    content_type: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let body = decode_body(bytes, content_type)?;
    if !body.is_object() {
        return Err(ApiError::bad_request(format!(
            "not a {}: the request body is not a JSON object",
            t.rt.kind
        )));
    }
    if let Some(kind) = body.get("kind").and_then(Value::as_str)
        && kind != t.rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "not a {}: the body is a {kind}",
            t.rt.kind
        )));
    }
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let status = match t.rt.plural.as_str() {
        "tokenreviews" => token_review(app, &spec)?,
        "subjectaccessreviews" => {
            let user = review_user(&spec);
            let attrs = access_attributes(t, &spec, user.is_none())?;
            access_status(app, &user.unwrap_or_default(), &attrs)
        }
        "selfsubjectaccessreviews" => {
            let attrs = access_attributes(t, &spec, false)?;
            access_status(app, &t.caller.user, &attrs)
        }
        other => {
            return Err(ApiError::method_not_allowed(format!(
                "create is not supported on {other}"
            )));
        }
    };
    Ok(super::json_response(
        StatusCode::CREATED,
        &answer(t, body, status),
        &[],
    ))
}

/// The review as sent, with apiVersion, kind, metadata and the computed status.
fn answer(t: &Target, body: Value, status: Value) -> Value {
    let mut o = match body {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    o.insert("apiVersion".into(), json!(t.rt.api_version(&t.version)));
    o.insert("kind".into(), json!(t.rt.kind));
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert("creationTimestamp".into(), Value::Null);
    }
    o.entry("spec").or_insert_with(|| json!({}));
    o.insert("status".into(), status);
    Value::Object(o)
}

/// TokenReview: authenticate `spec.token`.
fn token_review(app: &App, spec: &Value) -> Result<Value, ApiError> {
    let token = spec
        .get("token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication.k8s.io",
        ));
    }
    // No audiences asked for means the API server's (kube-apiserver's TokenReview handler).
    let mut wanted: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if wanted.is_empty() {
        wanted.push(DEFAULT_AUDIENCE.to_string());
    }
    Ok(match app.authenticate_token(token, &wanted) {
        // `status.audiences`: those asked for that the token is good for.
        Ok((user, audiences)) => {
            let mut info = Map::new();
            info.insert("username".into(), json!(user.name));
            if let Some(uid) = service_account_uid(app, &user.name) {
                info.insert("uid".into(), json!(uid));
            }
            info.insert("groups".into(), json!(user.groups));
            json!({"authenticated": true, "user": info, "audiences": audiences})
        }
        Err(e) => {
            // kube-apiserver's bearer-token authenticator turns "not mine" into this error,
            // and reports the reason of a token it recognised but refused.
            let error = match e {
                crate::auth::TokenError::Unknown => "invalid bearer token".to_string(),
                other => format!("[invalid bearer token, {other}]"),
            };
            json!({"user": {}, "error": error})
        }
    })
}

/// The uid of the ServiceAccount a `system:serviceaccount:<ns>:<name>` user names.
fn service_account_uid(app: &App, user: &str) -> Option<String> {
    let (ns, name) = user
        .strip_prefix("system:serviceaccount:")?
        .split_once(':')?;
    let sa = app
        .store
        .read()
        .get_opt(&GroupResource::new("", "serviceaccounts"), ns, name)?;
    Some(crate::meta::uid(&sa).to_string())
}

/// The user a SubjectAccessReview asks about; None when it names neither user nor group.
fn review_user(spec: &Value) -> Option<UserInfo> {
    let name = spec
        .get("user")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let groups: Vec<String> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    (!name.is_empty() || !groups.is_empty()).then_some(UserInfo { name, groups })
}

/// The authorizer attributes of a (Self)SubjectAccessReview spec, or the 422 upstream's
/// `ValidateSubjectAccessReviewSpec` gives (every problem in one error).
fn access_attributes(t: &Target, spec: &Value, no_user: bool) -> Result<Attributes, ApiError> {
    let present = |k: &str| spec.get(k).filter(|v| !v.is_null());
    let resource = present("resourceAttributes");
    let non_resource = present("nonResourceAttributes");
    let mut causes = Vec::new();
    match (resource, non_resource) {
        (Some(_), Some(n)) => causes.push(FieldCause::invalid(
            "spec.nonResourceAttributes",
            n,
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => causes.push(FieldCause::invalid(
            "spec.resourceAttributes",
            // Upstream prints the nil pointer as the string "null".
            &json!("null"),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    if no_user {
        causes.push(FieldCause::invalid(
            "spec.user",
            &json!(""),
            "at least one of user or group must be specified",
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&t.rt, "", causes));
    }
    let field = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(match resource {
        Some(r) => Attributes {
            verb: field(r, "verb"),
            group: field(r, "group"),
            resource: field(r, "resource"),
            subresource: field(r, "subresource"),
            namespace: field(r, "namespace"),
            name: field(r, "name"),
            resource_request: true,
            path: String::new(),
        },
        None => {
            let n = non_resource.unwrap_or(&Value::Null);
            Attributes {
                verb: field(n, "verb"),
                path: field(n, "path"),
                resource_request: false,
                ..Default::default()
            }
        }
    })
}

/// `status` of an access review: the authorizer's decision about `user` doing `a`.
fn access_status(app: &App, user: &UserInfo, a: &Attributes) -> Value {
    let d = app.evaluate(user, a);
    let mut status = Map::new();
    status.insert("allowed".into(), json!(d.allowed));
    if !d.reason.is_empty() {
        status.insert("reason".into(), json!(d.reason));
    }
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use crate::{AuthorizationMode, StandIn, StandInOptions};

    async fn standin() -> StandIn {
        StandIn::start(StandInOptions {
            namespaces: vec!["ns".into()],
            authorization: AuthorizationMode::Rbac,
            ..Default::default()
        })
        .await
        .unwrap()
    }

    /// POSTs `body` to `path` with `token`; the status code and the JSON answer.
    async fn post(s: &StandIn, token: &str, path: &str, body: Value) -> (u16, Value) {
        let resp = reqwest::Client::new()
            .post(format!("{}{path}", s.url()))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    }

    const TOKENREVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
    const SARS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

    async fn apply(s: &StandIn, path: &str, obj: Value) {
        let (code, body) = post(s, s.admin_token(), path, obj).await;
        assert_eq!(code, 201, "{body}");
    }

    /// Binds the ClusterRole `name` granting `rules` to the ServiceAccount ns/`sa`.
    async fn grant(s: &StandIn, name: &str, sa: &str, rules: Value) {
        let rbac = "/apis/rbac.authorization.k8s.io/v1";
        apply(
            s,
            &format!("{rbac}/clusterroles"),
            json!({"metadata": {"name": name}, "rules": rules}),
        )
        .await;
        apply(s, &format!("{rbac}/clusterrolebindings"), json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": "ns"}],
        }))
        .await;
    }

    #[tokio::test]
    async fn token_reviews_authenticate_known_tokens_only() {
        let s = standin().await;
        let reviewer = s.service_account_token("ns", "reviewer").unwrap();
        let scraper = s.service_account_token("ns", "scraper").unwrap();
        // Creating reviews needs create on tokenreviews, like any other create.
        let review = |token: &str| {
            json!({"apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview", "spec": {"token": token}})
        };
        let (code, body) = post(&s, &reviewer, TOKENREVIEWS, review(&scraper)).await;
        assert_eq!(code, 403, "{body}");
        assert_eq!(
            body["message"],
            "tokenreviews.authentication.k8s.io is forbidden: User \
             \"system:serviceaccount:ns:reviewer\" cannot create resource \"tokenreviews\" in \
             API group \"authentication.k8s.io\" at the cluster scope"
        );
        grant(
            &s,
            "reviews",
            "reviewer",
            json!([{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
                "verbs": ["create"]}]),
        )
        .await;

        let (code, body) = post(&s, &reviewer, TOKENREVIEWS, review(&scraper)).await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["kind"], "TokenReview");
        let status = &body["status"];
        assert_eq!(status["authenticated"], true);
        assert_eq!(
            status["user"]["username"],
            "system:serviceaccount:ns:scraper"
        );
        assert_eq!(
            status["user"]["groups"],
            json!([
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ])
        );
        let uid =
            s.object("", "serviceaccounts", "ns", "scraper").unwrap()["metadata"]["uid"].clone();
        assert_eq!(status["user"]["uid"], uid);
        assert_eq!(
            status["audiences"],
            json!(["https://kubernetes.default.svc.cluster.local"])
        );

        let (code, body) = post(&s, &reviewer, TOKENREVIEWS, review("made-up")).await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["status"]["authenticated"], Value::Null);
        assert_eq!(body["status"]["error"], "invalid bearer token");

        let (code, body) = post(&s, &reviewer, TOKENREVIEWS, review("")).await;
        assert_eq!(code, 400, "{body}");
        assert_eq!(
            body["message"],
            "token is required for TokenReview in authentication.k8s.io"
        );
        // A review kind stores nothing: no get or list.
        let resp = reqwest::Client::new()
            .get(format!("{}{TOKENREVIEWS}", s.url()))
            .bearer_auth(s.admin_token())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 405);
        s.shutdown().await;
    }

    #[tokio::test]
    async fn subject_access_reviews_follow_rbac() {
        let s = standin().await;
        grant(
            &s,
            "metrics-reader",
            "scraper",
            json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
        )
        .await;
        let sar = |user: &str, attrs: Value| {
            let mut spec = json!({"user": user, "groups": ["system:serviceaccounts",
                "system:serviceaccounts:ns", "system:authenticated"]});
            spec.as_object_mut()
                .unwrap()
                .extend(attrs.as_object().unwrap().clone());
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": spec})
        };
        let metrics = json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}});
        let admin = s.admin_token().to_string();

        let (code, body) = post(
            &s,
            &admin,
            SARS,
            sar("system:serviceaccount:ns:scraper", metrics.clone()),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["status"]["allowed"], true);
        assert_eq!(
            body["status"]["reason"],
            "RBAC: allowed by ClusterRoleBinding \"metrics-reader\" of ClusterRole \
             \"metrics-reader\" to ServiceAccount \"scraper/ns\""
        );

        let (_, body) = post(
            &s,
            &admin,
            SARS,
            sar("system:serviceaccount:ns:other", metrics.clone()),
        )
        .await;
        assert_eq!(body["status"]["allowed"], false);
        assert_eq!(
            body["status"]["denied"],
            Value::Null,
            "RBAC never denies explicitly"
        );

        let post_metrics = json!({"nonResourceAttributes": {"path": "/metrics", "verb": "post"}});
        let (_, body) = post(
            &s,
            &admin,
            SARS,
            sar("system:serviceaccount:ns:scraper", post_metrics),
        )
        .await;
        assert_eq!(body["status"]["allowed"], false);

        // Resource attributes, and the default roles: any authenticated user may create
        // selfsubjectaccessreviews (system:basic-user), nobody here may list secrets.
        let ssar = json!({"resourceAttributes": {"group": "authorization.k8s.io",
            "resource": "selfsubjectaccessreviews", "verb": "create"}});
        let (_, body) = post(&s, &admin, SARS, sar("someone", ssar)).await;
        assert_eq!(body["status"]["allowed"], true, "{body}");
        let secrets = json!({"resourceAttributes": {"namespace": "ns", "resource": "secrets",
            "verb": "list"}});
        let (_, body) = post(&s, &admin, SARS, sar("someone", secrets)).await;
        assert_eq!(body["status"]["allowed"], false);

        // Validation: attributes exactly once, a user or a group.
        let (code, body) = post(&s, &admin, SARS, json!({"spec": {"user": "u"}})).await;
        assert_eq!(code, 422, "{body}");
        assert_eq!(
            body["message"],
            "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: \
             Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes \
             must be specified"
        );
        let (code, body) = post(&s, &admin, SARS, json!({"spec": metrics})).await;
        assert_eq!(code, 422, "{body}");
        assert!(
            body["message"].as_str().unwrap().ends_with(
                "spec.user: Invalid value: \"\": at least one of user or group must be specified"
            ),
            "{body}"
        );

        // The caller needs create on subjectaccessreviews.
        let scraper = s.service_account_token("ns", "scraper").unwrap();
        let (code, _) = post(&s, &scraper, SARS, sar("x", metrics)).await;
        assert_eq!(code, 403);
        // SelfSubjectAccessReview: about the caller, allowed to every authenticated user.
        let (code, body) = post(
            &s,
            &scraper,
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json!({"spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["status"]["allowed"], true);
        s.shutdown().await;
    }
}
