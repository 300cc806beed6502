//! Answers one ConversionReview: from request body bytes to response status and body.
//!
//! Pure apart from logging, so the HTTP layer, golden-file tests and benchmarks share it.
//!
//! How bad input is answered (the API server reads only a 200 response with a ConversionReview
//! body; anything else fails the conversion with the HTTP status in its message):
//!
//! | input | answer |
//! |---|---|
//! | every object converts | 200, `result.status: Success`, `convertedObjects` in request order |
//! | an object cannot be converted (foreign group, other kind, unknown version, malformed) | 200, `result.status: Failure`, code 422, one message naming every failing object by index and namespace/name, one `details.causes` entry per object; no `convertedObjects` |
//! | `desiredAPIVersion` is not a served version | 200, Failure, code 422 |
//! | a review whose `request.uid` can be read but whose `apiVersion`/`kind` is not a ConversionReview, or whose request is malformed | 200, Failure, code 400, the uid echoed |
//! | body not JSON, not an object, no `request`, no readable `request.uid` | 400 with a `Status` body |
//!
//! The HTTP layer adds 415 (Content-Type not JSON), 413 (body over the limit), 405 (method) and
//! 408 (timeout).

use http::StatusCode;
use kube::core::conversion::ConversionResponse;
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::{Status, TypeMeta};
use crate::conversion::{ConvertError, Converter};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::borrow::Cow;

/// ConversionReview `apiVersion`s this webhook answers (the same shape in both).
pub const REVIEW_API_VERSIONS: [&str; 2] =
    ["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"];
/// ConversionReview `kind`.
pub const REVIEW_KIND: &str = "ConversionReview";

/// How many failing objects the result message lists before summarising the rest.
const MAX_LISTED_FAILURES: usize = 10;

/// An HTTP answer: status and JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status code.
    pub status: StatusCode,
    /// JSON body.
    pub body: Vec<u8>,
}

/// What happened, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every object converted.
    Converted {
        /// Number of objects.
        objects: usize,
    },
    /// The review was answered with a Failure result.
    Failed {
        /// Why.
        message: String,
    },
    /// The request was rejected at the HTTP level.
    Rejected {
        /// Why.
        message: String,
    },
}

/// The resources the webhook converts, looked up by the group of the desired version and
/// the kind of each object.
pub type Converters = [std::sync::Arc<dyn Converter>];

/// The converter for objects of `kind` in the group of `desired_api_version`: the one of that
/// group and kind, else the first of that group (whose error then names the wrong kind), else
/// the first (whose error names the wrong group).
fn converter_for<'c>(
    converters: &'c Converters,
    desired_api_version: &str,
    kind: Option<&str>,
) -> Option<&'c dyn Converter> {
    let group = desired_api_version
        .split_once('/')
        .map_or("", |(g, _)| g);
    let in_group = || converters.iter().filter(|c| c.group() == group);
    in_group()
        .find(|c| Some(c.kind()) == kind)
        .or_else(|| in_group().next())
        .or_else(|| converters.first())
        .map(|c| &**c)
}

/// The `kind` of a raw object, if it is a string.
fn kind_of(object: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Kind {
        kind: Option<String>,
    }
    serde_json::from_str::<Kind>(object).ok()?.kind
}

/// Answers a ConversionReview request body; `uid` in logs is the review's.
pub fn answer(body: &[u8], converters: &Converters) -> (Reply, Outcome) {
    if let Some(answered) = fast_answer(body, converters) {
        return answered;
    }
    slow_answer(body, converters)
}

/// A well-formed review, read without building `serde_json::Value`s for its objects.
#[derive(serde::Deserialize)]
struct FastReview<'a> {
    #[serde(rename = "apiVersion", borrow)]
    api_version: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    request: FastRequest<'a>,
}

#[derive(serde::Deserialize)]
struct FastRequest<'a> {
    #[serde(borrow)]
    uid: Cow<'a, str>,
    #[serde(rename = "desiredAPIVersion", borrow)]
    desired_api_version: Cow<'a, str>,
    #[serde(borrow)]
    objects: Vec<&'a RawValue>,
}

/// The common case, fast: a well-formed review whose objects all convert. Objects stay JSON text
/// (an object already in the desired version is copied through byte for byte) and the response
/// is written directly. Returns `None` for anything else, which [`slow_answer`] then explains; the
/// two produce the same answer for the same input.
pub(crate) fn fast_answer(body: &[u8], converters: &Converters) -> Option<(Reply, Outcome)> {
    let review: FastReview<'_> = serde_json::from_slice(body).ok()?;
    let api_version = review.api_version.as_ref();
    if !REVIEW_API_VERSIONS.contains(&api_version)
        || review.kind != REVIEW_KIND
        || review.request.uid.is_empty()
    {
        return None;
    }
    let desired = review.request.desired_api_version.as_ref();
    converter_for(converters, desired, None)?
        .check_api_version(desired)
        .ok()?;
    let uid = review.request.uid.as_ref();
    let objects = &review.request.objects;
    let mut out = Vec::with_capacity(body.len() + body.len() / 4 + 256);
    out.extend_from_slice(b"{\"apiVersion\":");
    serde_json::to_writer(&mut out, api_version).ok()?;
    out.extend_from_slice(b",\"kind\":\"ConversionReview\",\"response\":{\"uid\":");
    serde_json::to_writer(&mut out, uid).ok()?;
    out.extend_from_slice(b",\"result\":{\"status\":\"Success\"},\"convertedObjects\":[");
    let mut warnings = Vec::new();
    for (index, raw) in objects.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let kind = kind_of(raw.get());
        let converted = converter_for(converters, desired, kind.as_deref())?
            .convert_str(raw.get(), desired)
            .ok()?;
        out.extend_from_slice(converted.object.as_bytes());
        warnings.extend(converted.warnings.into_iter().map(|w| (index, w)));
    }
    out.extend_from_slice(b"]}}");
    // Logged only once the whole review succeeded, so the slow path never logs them twice.
    for (index, warning) in warnings {
        let name = serde_json::from_str::<Value>(objects[index].get())
            .map(|v| object_name(&v))
            .unwrap_or_default();
        tracing::warn!(%uid, index, object = %name, "{warning}");
    }
    Some((
        Reply {
            status: StatusCode::OK,
            body: out,
        },
        Outcome::Converted {
            objects: objects.len(),
        },
    ))
}

/// Any review, good or bad, through `serde_json::Value`s, with a precise answer for each problem.
pub(crate) fn slow_answer(body: &[u8], converters: &Converters) -> (Reply, Outcome) {
    let review: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return reject(format!("request body is not JSON: {e}")),
    };
    let Value::Object(mut review) = review else {
        return reject("request body is not a JSON object".into());
    };
    let uid = review
        .get("request")
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        .filter(|uid| !uid.is_empty())
        .map(str::to_owned);

    let api_version = review.get("apiVersion").and_then(Value::as_str);
    let kind = review.get("kind").and_then(Value::as_str);
    let known_version = api_version.filter(|v| REVIEW_API_VERSIONS.contains(v));
    let types = TypeMeta {
        api_version: known_version.unwrap_or(REVIEW_API_VERSIONS[0]).to_string(),
        kind: REVIEW_KIND.to_string(),
    };
    let shape_problem = match (known_version, kind) {
        (Some(_), Some(REVIEW_KIND)) => None,
        _ => Some(format!(
            "expected apiVersion apiextensions.k8s.io/v1 and kind ConversionReview, got apiVersion {} and kind {}",
            describe(api_version),
            describe(kind)
        )),
    };
    let Some(uid) = uid else {
        let why = match review.get("request") {
            None | Some(Value::Null) => "ConversionReview has no request",
            Some(_) => "ConversionReview request has no uid",
        };
        return reject(match shape_problem {
            Some(shape) => format!("{why}; {shape}"),
            None => why.to_string(),
        });
    };
    if let Some(problem) = shape_problem {
        return fail_review(types, uid, bad_request(problem));
    }
    // Read field by field (rather than through serde) so a problem names the field.
    let mut request = match review.remove("request") {
        Some(Value::Object(request)) => request,
        _ => Map::new(),
    };
    let desired_api_version = match request.remove("desiredAPIVersion") {
        Some(Value::String(v)) => v,
        other => {
            return fail_review(
                types,
                uid,
                bad_request(format!(
                    "request.desiredAPIVersion must be a string, got {}",
                    json_type(other.as_ref())
                )),
            );
        }
    };
    // Go decodes a missing or null list as empty; so does this.
    let objects = match request.remove("objects") {
        Some(Value::Array(objects)) => objects,
        None | Some(Value::Null) => Vec::new(),
        Some(other) => {
            return fail_review(
                types,
                uid,
                bad_request(format!(
                    "request.objects must be a list, got {}",
                    json_type(Some(&other))
                )),
            );
        }
    };
    let Some(first) = converter_for(converters, &desired_api_version, None) else {
        let message = "cannot convert: this webhook serves no resource".to_string();
        return fail_review(types, uid, invalid(message, Vec::new(), None));
    };
    if let Err(e) = first.check_api_version(&desired_api_version) {
        let message = format!("cannot convert to desiredAPIVersion: {e}");
        return fail_review(types, uid, invalid(message, Vec::new(), None));
    }
    convert_objects(types, uid, converters, &desired_api_version, objects)
}

/// Converts one object of a review.
fn convert_value(
    converters: &Converters,
    desired: &str,
    object: &Value,
) -> Result<crate::conversion::Converted<Value>, ConvertError> {
    let kind = object.get("kind").and_then(Value::as_str);
    let Some(converter) = converter_for(converters, desired, kind) else {
        return Err(ConvertError::NotAnObject);
    };
    let text = serde_json::to_string(object).map_err(ConvertError::Encode)?;
    let converted = converter.convert_str(&text, desired)?;
    let value = serde_json::from_str(&converted.object).map_err(ConvertError::Encode)?;
    Ok(crate::conversion::Converted {
        object: value,
        warnings: converted.warnings,
    })
}

fn convert_objects(
    types: TypeMeta,
    uid: String,
    converters: &Converters,
    desired: &str,
    objects: Vec<Value>,
) -> (Reply, Outcome) {
    let total = objects.len();
    let mut converted = Vec::with_capacity(total);
    let mut failures: Vec<(usize, String, String)> = Vec::new();
    for (index, object) in objects.into_iter().enumerate() {
        let name = object_name(&object);
        match convert_value(converters, desired, &object) {
            Ok(done) => {
                for warning in &done.warnings {
                    tracing::warn!(%uid, index, object = %name, "{warning}");
                }
                converted.push(done.object);
            }
            Err(e) => {
                tracing::warn!(%uid, index, object = %name, error = %e, "cannot convert object");
                failures.push((index, name, e.to_string()));
            }
        }
    }
    if failures.is_empty() {
        let response = ConversionResponse {
            types: Some(types),
            uid,
            result: Status::success(),
            converted_objects: converted,
        };
        return (
            encode(StatusCode::OK, &response.into_review()),
            Outcome::Converted { objects: total },
        );
    }
    let mut message = format!(
        "cannot convert {} of {total} objects to {desired}: ",
        failures.len(),
    );
    let listed: Vec<String> = failures
        .iter()
        .take(MAX_LISTED_FAILURES)
        .map(|(index, name, error)| format!("objects[{index}] ({name}): {error}"))
        .collect();
    message.push_str(&listed.join("; "));
    if failures.len() > MAX_LISTED_FAILURES {
        message.push_str(&format!(
            "; and {} more",
            failures.len() - MAX_LISTED_FAILURES
        ));
    }
    let causes = failures
        .into_iter()
        .map(|(index, name, error)| StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!("{name}: {error}"),
            field: format!("request.objects[{index}]"),
        })
        .collect();
    let owner = converter_for(converters, desired, None).map(|c| (c.group(), c.kind()));
    fail_review(types, uid, invalid(message, causes, owner))
}

/// `namespace/name`, `name`, or a placeholder, read leniently from a raw object.
fn object_name(object: &Value) -> String {
    let meta = object.get("metadata");
    let field = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    match (field("namespace"), field("name").or(field("generateName"))) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_string(),
        (Some(ns), None) => format!("{ns}/<unnamed>"),
        (None, None) => "<unnamed>".to_string(),
    }
}

fn json_type(value: Option<&Value>) -> &'static str {
    match value {
        None => "nothing",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "a boolean",
        Some(Value::Number(_)) => "a number",
        Some(Value::String(_)) => "a string",
        Some(Value::Array(_)) => "a list",
        Some(Value::Object(_)) => "an object",
    }
}

fn describe(value: Option<&str>) -> String {
    value.map_or_else(|| "<missing>".to_string(), |v| format!("{v:?}"))
}

fn bad_request(message: String) -> Status {
    Status::failure(&message, "BadRequest").with_code(400)
}

fn invalid(message: String, causes: Vec<StatusCause>, owner: Option<(&str, &str)>) -> Status {
    let status = Status::failure(&message, "Invalid").with_code(422);
    if causes.is_empty() {
        status
    } else {
        let (group, kind) = owner.unwrap_or_default();
        status.with_details(StatusDetails {
            name: String::new(),
            group: group.into(),
            kind: kind.into(),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        })
    }
}

fn fail_review(types: TypeMeta, uid: String, status: Status) -> (Reply, Outcome) {
    tracing::warn!(%uid, "conversion failed: {}", status.message);
    let message = status.message.clone();
    let response = ConversionResponse {
        types: Some(types),
        uid,
        result: status,
        converted_objects: Vec::new(),
    };
    (
        encode(StatusCode::OK, &response.into_review()),
        Outcome::Failed { message },
    )
}

/// A 400 with a `Status` body, when there is no review to answer.
fn reject(message: String) -> (Reply, Outcome) {
    tracing::warn!("rejected request: {message}");
    (
        status_reply(StatusCode::BAD_REQUEST, "BadRequest", &message),
        Outcome::Rejected { message },
    )
}

/// A `meta/v1` Status body for an HTTP-level error.
pub fn status_reply(status: StatusCode, reason: &str, message: &str) -> Reply {
    let mut body = Map::new();
    body.insert("apiVersion".into(), json!("v1"));
    body.insert("kind".into(), json!("Status"));
    body.insert("status".into(), json!("Failure"));
    body.insert("message".into(), json!(message));
    body.insert("reason".into(), json!(reason));
    body.insert("code".into(), json!(status.as_u16()));
    encode(status, &Value::Object(body))
}

fn encode(status: StatusCode, body: &impl serde::Serialize) -> Reply {
    match serde_json::to_vec(body) {
        Ok(body) => Reply { status, body },
        // Values built here always encode; answer 500 rather than panic if that ever changes.
        Err(e) => {
            tracing::error!("cannot encode the response: {e}");
            Reply {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                body: br#"{"apiVersion":"v1","kind":"Status","status":"Failure","message":"cannot encode the response","code":500}"#.to_vec(),
            }
        }
    }
}
