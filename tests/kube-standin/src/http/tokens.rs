//! The TokenRequest API: `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token` with an
//! `authentication.k8s.io/v1` TokenRequest returns a bearer token that authenticates as the
//! ServiceAccount (`TokenREST.Create` in pkg/registry/core/serviceaccount/storage/token.go;
//! <https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-tokens>).
//! The token is opaque, not a JWT: only this stand-in reads it.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::App;
use super::resources::{Target, decode_body};
use crate::auth::authn::BoundServiceAccount;
use crate::error::{ApiError, Details, FieldCause};
use crate::meta;

/// kube-apiserver's default `--service-account-max-token-expiration`-free default lifetime.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// Shortest lifetime the API accepts (`ValidateTokenRequest`).
const MIN_EXPIRATION_SECONDS: i64 = 600;
/// Longest lifetime the API accepts (2^32 seconds).
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
pub use crate::auth::authn::API_AUDIENCE as DEFAULT_AUDIENCE;

fn invalid(name: &str, cause: FieldCause) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!(
            "TokenRequest.authentication.k8s.io {name:?} is invalid: {}: {}",
            cause.field, cause.message
        ),
    )
    .with_details(Details {
        name: name.to_string(),
        group: "authentication.k8s.io".into(),
        kind: "TokenRequest".into(),
        causes: vec![
            json!({"reason": cause.reason, "message": cause.message, "field": cause.field}),
        ],
        ..Details::default()
    })
}

/// Issues a token for the ServiceAccount `t` names (404 when it does not exist).
pub(super) fn create(
    app: &App,
    t: &Target,
    content_type: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let sa = app.store.read().get(&t.rt.key(), &t.ns, &t.name)?;
    let body = if bytes.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        decode_body(bytes, content_type)?
    };
    if let Some(kind) = body.get("kind").and_then(Value::as_str)
        && kind != "TokenRequest"
    {
        return Err(ApiError::bad_request(format!(
            "the body of the request was a {kind}, not an authentication.k8s.io/v1 TokenRequest"
        )));
    }
    let seconds = body
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            &t.name,
            FieldCause::invalid(
                "spec.expirationSeconds",
                &json!(seconds),
                "may not specify a duration less than 10 minutes",
            ),
        ));
    }
    if seconds > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            &t.name,
            FieldCause::invalid(
                "spec.expirationSeconds",
                &json!(seconds),
                "may not specify a duration larger than 2^32 seconds",
            ),
        ));
    }
    let asked: Vec<String> = body
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let audiences = if asked.is_empty() {
        json!([DEFAULT_AUDIENCE])
    } else {
        json!(asked)
    };
    let token = app.auth.tokens.issue_service_account_token(
        BoundServiceAccount {
            namespace: t.ns.clone(),
            name: t.name.clone(),
            uid: meta::uid(&sa).to_string(),
        },
        seconds,
        asked,
    );
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    let out = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": t.name, "namespace": t.ns, "creationTimestamp": meta::now()},
        "spec": {
            "audiences": audiences,
            "expirationSeconds": seconds,
            "boundObjectRef": body.pointer("/spec/boundObjectRef").cloned().unwrap_or(Value::Null),
        },
        "status": {"token": token, "expirationTimestamp": expires},
    });
    Ok(super::json_response(StatusCode::CREATED, &out, &[]))
}
