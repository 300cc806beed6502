//! Kubernetes `Status` errors: the one error type every request path returns, rendered as the
//! `kind: Status` body real API servers send so that kube's `Error::Api` matching, `get_opt` and
//! kubectl's messages behave as against a real cluster.

use serde_json::{Value, json};

use crate::registry::ResourceType;

/// A failed API request, carried as far as the HTTP layer and rendered as a `Status`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<Details>>,
}

/// `Status.details`: what the failure was about.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Details {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub uid: String,
    pub causes: Vec<Value>,
    pub retry_after_seconds: Option<u64>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `memcacheds.cache.example.com`, or `pods` for the core group: how the API server names a
/// resource in messages.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: Details) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    fn resource_details(group: &str, resource: &str, name: &str) -> Details {
        Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: resource.to_string(),
            ..Details::default()
        }
    }

    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(Self::resource_details(group, resource, name))
    }

    pub fn not_found_in(rt: &ResourceType, name: &str) -> Self {
        Self::not_found(&rt.group, &rt.plural, name)
    }

    /// The 404 for a path that names no known resource.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(Details::default())
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!(
                "{} \"{name}\" already exists",
                qualified(&rt.group, &rt.plural)
            ),
        )
        .with_details(Self::resource_details(&rt.group, &rt.plural, name))
    }

    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(&rt.group, &rt.plural)
            ),
        )
        .with_details(Self::resource_details(&rt.group, &rt.plural, name))
    }

    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with one cause per field problem, worded like apimachinery's field errors.
    pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<FieldCause>) -> Self {
        let list = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>();
        let joined = if list.len() == 1 {
            list.join("")
        } else {
            format!("[{}]", list.join(", "))
        };
        let kind_group = if rt.group.is_empty() {
            rt.kind.clone()
        } else {
            format!("{}.{}", rt.kind, rt.group)
        };
        Self::new(
            422,
            "Invalid",
            format!("{kind_group} \"{name}\" is invalid: {joined}"),
        )
        .with_details(Details {
            name: name.to_string(),
            group: rt.group.clone(),
            kind: rt.kind.clone(),
            causes: causes
                .into_iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect(),
            ..Details::default()
        })
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn forbidden(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(&rt.group, &rt.plural)
            ),
        )
        .with_details(Self::resource_details(&rt.group, &rt.plural, name))
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object a real API server sends for this error.
    pub fn status_json(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            let mut details = serde_json::Map::new();
            if !d.name.is_empty() {
                details.insert("name".into(), json!(d.name));
            }
            if !d.group.is_empty() {
                details.insert("group".into(), json!(d.group));
            }
            if !d.kind.is_empty() {
                details.insert("kind".into(), json!(d.kind));
            }
            if !d.uid.is_empty() {
                details.insert("uid".into(), json!(d.uid));
            }
            if !d.causes.is_empty() {
                details.insert("causes".into(), Value::Array(d.causes.clone()));
            }
            if let Some(s) = d.retry_after_seconds {
                details.insert("retryAfterSeconds".into(), json!(s));
            }
            if let Some(obj) = status.as_object_mut() {
                obj.insert("details".into(), Value::Object(details));
            }
        }
        status
    }
}

/// One field problem of a 422.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldCause {
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl FieldCause {
    pub fn invalid(field: impl Into<String>, value: &Value, why: &str) -> Self {
        let field = field.into();
        FieldCause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {}: {why}", render_value(value)),
            field,
        }
    }

    pub fn required(field: impl Into<String>, why: &str) -> Self {
        FieldCause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: if why.is_empty() {
                "Required value".to_string()
            } else {
                format!("Required value: {why}")
            },
        }
    }

    pub fn forbidden(field: impl Into<String>, why: &str) -> Self {
        FieldCause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {why}"),
        }
    }
}

fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}
