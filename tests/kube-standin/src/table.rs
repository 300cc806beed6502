//! Server-side printing: `meta.k8s.io/v1` Table responses for `kubectl get`, with a CRD's
//! `additionalPrinterColumns` (evaluated with a small JSONPath subset: `.a.b`, `.a[0]`,
//! `.a[*].b`, `.a[?(@.type=="X")].b`) and NAME/AGE-style columns for built-in kinds.

use serde_json::{Value, json};

use crate::registry::{PrinterColumn, ResourceType, VersionInfo};

/// What a Table row carries besides its cells (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter(Vec<String>, Value),
}

fn parse_path(path: &str) -> Option<Vec<Step>> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut steps = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let (name, tail) = r.split_at(end);
            if name.is_empty() {
                return None;
            }
            steps.push(Step::Field(name.to_string()));
            rest = tail;
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let (inner, tail) = r.split_at(end);
            rest = &tail[1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse::<usize>() {
                steps.push(Step::Index(i));
            } else if let Some(f) = inner.strip_prefix("?(@").and_then(|f| f.strip_suffix(')')) {
                let (lhs, rhs) = f.split_once("==")?;
                let fields: Vec<String> = lhs
                    .trim()
                    .trim_start_matches('.')
                    .split('.')
                    .map(str::to_string)
                    .collect();
                let rhs = rhs.trim();
                let want = if let Some(s) = rhs
                    .strip_prefix('"')
                    .and_then(|s| s.strip_suffix('"'))
                    .or_else(|| rhs.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
                {
                    Value::String(s.to_string())
                } else {
                    serde_json::from_str(rhs).ok()?
                };
                steps.push(Step::Filter(fields, want));
            } else if let Some(name) = inner.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
                steps.push(Step::Field(name.to_string()));
            } else {
                return None;
            }
        } else {
            return None;
        }
    }
    Some(steps)
}

/// The values `path` selects in `obj` (empty when it selects nothing or does not parse).
pub fn eval<'v>(obj: &'v Value, path: &str) -> Vec<&'v Value> {
    let Some(steps) = parse_path(path) else {
        return Vec::new();
    };
    let mut cur = vec![obj];
    for s in &steps {
        let mut next = Vec::new();
        for v in cur {
            match s {
                Step::Field(f) => next.extend(v.get(f)),
                Step::Index(i) => next.extend(v.get(*i)),
                Step::All => {
                    if let Some(a) = v.as_array() {
                        next.extend(a.iter());
                    }
                }
                Step::Filter(fields, want) => {
                    if let Some(a) = v.as_array() {
                        next.extend(a.iter().filter(|e| {
                            let mut x = Some(*e);
                            for f in fields {
                                x = x.and_then(|x| x.get(f));
                            }
                            x == Some(want)
                        }));
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

/// `kubectl`'s age format (HumanDuration).
pub fn human_age(since: &str) -> String {
    let Ok(t) = since.parse::<jiff::Timestamp>() else {
        return "<invalid>".into();
    };
    let secs = jiff::Timestamp::now().as_second() - t.as_second();
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let mins = secs / 60;
    let hours = mins / 60;
    let days = hours / 24;
    let years = days / 365;
    if secs < 120 {
        format!("{secs}s")
    } else if mins < 10 {
        if secs % 60 == 0 {
            format!("{mins}m")
        } else {
            format!("{mins}m{}s", secs % 60)
        }
    } else if mins < 180 {
        format!("{mins}m")
    } else if hours < 8 {
        if mins % 60 == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{}m", mins % 60)
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        if hours % 24 == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{}h", hours % 24)
        }
    } else if days < 365 * 2 {
        format!("{days}d")
    } else if days < 365 * 8 {
        let d = days % 365;
        if d == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{d}d")
        }
    } else {
        format!("{years}y")
    }
}

fn column(name: &str, type_: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

fn name_column() -> Value {
    column(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.",
        0,
    )
}

fn age_column() -> Value {
    column(
        "Age",
        "date",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        0,
    )
}

fn crd_cell(obj: &Value, c: &PrinterColumn) -> Value {
    let Some(v) = eval(obj, &c.json_path).into_iter().next() else {
        return Value::Null;
    };
    match c.type_.as_str() {
        "date" => v
            .as_str()
            .map(|s| json!(human_age(s)))
            .unwrap_or(Value::Null),
        "integer" | "number" | "boolean" => v.clone(),
        _ => match v {
            Value::String(s) => json!(s),
            other => json!(other.to_string()),
        },
    }
}

fn age(obj: &Value) -> Value {
    obj.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .map(|s| json!(human_age(s)))
        .unwrap_or(Value::Null)
}

fn name_of(obj: &Value) -> Value {
    obj.pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null)
}

fn int_at(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// Columns and a row builder for a kind.
#[allow(clippy::type_complexity)]
fn layout<'a>(
    rt: &'a ResourceType,
    v: Option<&'a VersionInfo>,
) -> (Vec<Value>, Box<dyn Fn(&Value) -> Vec<Value> + 'a>) {
    if !rt.is_builtin() {
        let cols = v.map(|v| v.columns.clone()).unwrap_or_default();
        if cols.is_empty() {
            return (
                vec![name_column(), age_column()],
                Box::new(|o| vec![name_of(o), age(o)]),
            );
        }
        let mut defs = vec![name_column()];
        defs.extend(
            cols.iter()
                .map(|c| column(&c.name, &c.type_, &c.format, &c.description, c.priority)),
        );
        return (
            defs,
            Box::new(move |o| {
                let mut cells = vec![name_of(o)];
                cells.extend(cols.iter().map(|c| crd_cell(o, c)));
                cells
            }),
        );
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => (
            vec![
                name_column(),
                column(
                    "Ready",
                    "string",
                    "",
                    "The aggregate readiness state of this pod for accepting traffic.",
                    0,
                ),
                column(
                    "Status",
                    "string",
                    "",
                    "The aggregate status of the containers in this pod.",
                    0,
                ),
                column(
                    "Restarts",
                    "string",
                    "",
                    "The number of times the containers in this pod have been restarted.",
                    0,
                ),
                age_column(),
            ],
            Box::new(|o| {
                let statuses = o
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let total = o
                    .pointer("/spec/containers")
                    .and_then(Value::as_array)
                    .map(Vec::len)
                    .unwrap_or(0);
                let ready = statuses
                    .iter()
                    .filter(|s| s.get("ready").and_then(Value::as_bool) == Some(true))
                    .count();
                let restarts: i64 = statuses
                    .iter()
                    .map(|s| s.get("restartCount").and_then(Value::as_i64).unwrap_or(0))
                    .sum();
                let waiting = statuses
                    .iter()
                    .find_map(|s| s.pointer("/state/waiting/reason").and_then(Value::as_str));
                let phase = o
                    .pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or("Unknown");
                vec![
                    name_of(o),
                    json!(format!("{ready}/{total}")),
                    json!(waiting.unwrap_or(phase)),
                    json!(restarts.to_string()),
                    age(o),
                ]
            }),
        ),
        ("apps", "deployments") => (
            vec![
                name_column(),
                column(
                    "Ready",
                    "string",
                    "",
                    "Number of the pod with ready state",
                    0,
                ),
                column(
                    "Up-to-date",
                    "string",
                    "",
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                    0,
                ),
                column(
                    "Available",
                    "string",
                    "",
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                    0,
                ),
                age_column(),
            ],
            Box::new(|o| {
                vec![
                    name_of(o),
                    json!(format!(
                        "{}/{}",
                        int_at(o, "/status/readyReplicas"),
                        int_at(o, "/spec/replicas")
                    )),
                    json!(int_at(o, "/status/updatedReplicas")),
                    json!(int_at(o, "/status/availableReplicas")),
                    age(o),
                ]
            }),
        ),
        ("", "namespaces") => (
            vec![
                name_column(),
                column("Status", "string", "", "The status of the namespace", 0),
                age_column(),
            ],
            Box::new(|o| {
                vec![
                    name_of(o),
                    o.pointer("/status/phase").cloned().unwrap_or(Value::Null),
                    age(o),
                ]
            }),
        ),
        ("", "services") => (
            vec![
                name_column(),
                column("Type", "string", "", "The type of the service.", 0),
                column(
                    "Cluster-IP",
                    "string",
                    "",
                    "The cluster IP of the service.",
                    0,
                ),
                age_column(),
            ],
            Box::new(|o| {
                vec![
                    name_of(o),
                    o.pointer("/spec/type").cloned().unwrap_or(Value::Null),
                    o.pointer("/spec/clusterIP").cloned().unwrap_or(Value::Null),
                    age(o),
                ]
            }),
        ),
        _ => (
            vec![name_column(), age_column()],
            Box::new(|o| vec![name_of(o), age(o)]),
        ),
    }
}

/// Metadata-only form of an object (`PartialObjectMetadata`).
pub fn partial(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// A Table of `objects` (already in the requested version).
pub fn table(
    rt: &ResourceType,
    version: &str,
    objects: &[Value],
    include: IncludeObject,
    rv: u64,
    cont: Option<&str>,
) -> Value {
    let (columns, row) = layout(rt, rt.version(version));
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut r = json!({"cells": row(o)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    r["object"] = partial(o);
                }
                IncludeObject::Object => {
                    r["object"] = o.clone();
                }
            }
            r
        })
        .collect();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        metadata["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_subset() {
        let o = json!({"spec": {"a": [{"type": "X", "b": 1}, {"type": "Y", "b": 2}], "n": "v"}});
        assert_eq!(eval(&o, ".spec.n"), vec![&json!("v")]);
        assert_eq!(eval(&o, ".spec.a[1].b"), vec![&json!(2)]);
        assert_eq!(eval(&o, ".spec.a[?(@.type==\"Y\")].b"), vec![&json!(2)]);
        assert_eq!(eval(&o, "{.spec.a[*].b}"), vec![&json!(1), &json!(2)]);
        assert!(eval(&o, ".spec.missing").is_empty());
        assert!(eval(&o, "[[bad").is_empty());
    }

    #[test]
    fn ages() {
        let t = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3 * 60 + 5);
        assert_eq!(
            human_age(&t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            "3m5s"
        );
        let t = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(50);
        assert_eq!(
            human_age(&t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            "2d2h"
        );
    }
}
