//! Label and field selectors: parsing the query-string syntax of `labelSelector`/`fieldSelector`
//! and matching objects against them, with the real server's semantics (`!=` and `notin` also
//! match objects that lack the label).

use std::collections::BTreeSet;

use serde_json::Value;

/// One label requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelReq {
    Exists(String),
    NotExists(String),
    Eq(String, String),
    NotEq(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub reqs: Vec<LabelReq>,
}

/// A parsed `fieldSelector`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// (field path, wanted value, equal?)
    pub reqs: Vec<(String, String, bool)>,
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

/// Splits at top-level commas (commas inside `(...)` belong to set values).
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_set(rest: &str, whole: &str) -> Result<BTreeSet<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            format!("unable to parse requirement: found '{rest}', expected: '(' in {whole:?}")
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn check_key(key: &str, whole: &str) -> Result<String, String> {
    let key = key.trim();
    if key.is_empty() || !key.chars().all(is_key_char) {
        return Err(format!(
            "unable to parse requirement: invalid label key {key:?} in {whole:?}"
        ));
    }
    Ok(key.to_string())
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { reqs });
        }
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("found ',', expected: identifier in {s:?}"));
            }
            if let Some(k) = part.strip_prefix('!') {
                reqs.push(LabelReq::NotExists(check_key(k, s)?));
                continue;
            }
            if let Some((k, v)) = part.split_once("!=") {
                reqs.push(LabelReq::NotEq(check_key(k, s)?, v.trim().to_string()));
                continue;
            }
            if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                reqs.push(LabelReq::Eq(check_key(k, s)?, v.trim().to_string()));
                continue;
            }
            let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
            match words.as_slice() {
                [k] => reqs.push(LabelReq::Exists(check_key(k, s)?)),
                [k, rest] => {
                    let rest = rest.trim_start();
                    if let Some(set) = rest.strip_prefix("notin") {
                        reqs.push(LabelReq::NotIn(check_key(k, s)?, parse_set(set, s)?));
                    } else if let Some(set) = rest.strip_prefix("in") {
                        reqs.push(LabelReq::In(check_key(k, s)?, parse_set(set, s)?));
                    } else {
                        return Err(format!("unable to parse requirement: {part:?}"));
                    }
                }
                _ => return Err(format!("unable to parse requirement: {part:?}")),
            }
        }
        Ok(LabelSelector { reqs })
    }

    /// A `metav1.LabelSelector` object (matchLabels + matchExpressions).
    pub fn from_object(sel: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in ml {
                reqs.push(LabelReq::Eq(
                    k.clone(),
                    v.as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let values: BTreeSet<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => reqs.push(LabelReq::In(key, values)),
                    Some("NotIn") => reqs.push(LabelReq::NotIn(key, values)),
                    Some("Exists") => reqs.push(LabelReq::Exists(key)),
                    Some("DoesNotExist") => reqs.push(LabelReq::NotExists(key)),
                    other => {
                        return Err(format!("{other:?} is not a valid label selector operator"));
                    }
                }
            }
        }
        Ok(LabelSelector { reqs })
    }

    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, set) => get(k).is_some_and(|x| set.contains(x)),
            LabelReq::NotIn(k, set) => get(k).is_none_or(|x| !set.contains(x)),
        })
    }

    /// The selector in query-string form (what `Scale.status.selector` carries).
    pub fn to_query(&self) -> String {
        let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
        self.reqs
            .iter()
            .map(|r| match r {
                LabelReq::Exists(k) => k.clone(),
                LabelReq::NotExists(k) => format!("!{k}"),
                LabelReq::Eq(k, v) => format!("{k}={v}"),
                LabelReq::NotEq(k, v) => format!("{k}!={v}"),
                LabelReq::In(k, s) => format!("{k} in ({})", join(s)),
                LabelReq::NotIn(k, s) => format!("{k} notin ({})", join(s)),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Field labels the real API server accepts for a kind, beyond metadata.name and
/// metadata.namespace which every kind supports.
fn extra_fields(group: &str, resource: &str) -> &'static [&'static str] {
    match (group, resource) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "reason",
            "reportingController",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("apps", "replicasets") => &["status.replicas"],
        _ => &[],
    }
}

impl FieldSelector {
    pub fn parse(s: &str, group: &str, resource: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { reqs });
        }
        for part in s.split(',') {
            let part = part.trim();
            let (field, value, eq) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, v, true)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !extra_fields(group, resource).contains(&field)
            {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push((field.to_string(), value.trim().to_string(), eq));
        }
        Ok(FieldSelector { reqs })
    }

    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(field, want, eq)| {
            let mut cur = Some(obj);
            for seg in field.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let have = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            (have == *want) == *eq
        })
    }

    /// The name an `metadata.name=X` requirement pins, letting lists skip the scan.
    pub fn pinned_name(&self) -> Option<&str> {
        self.reqs
            .iter()
            .find(|(f, _, eq)| f == "metadata.name" && *eq)
            .map(|(_, v, _)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn all_label_operators() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        let m = |s: &str| LabelSelector::parse(s).map(|sel| sel.matches(&o));
        assert_eq!(m("app=web"), Ok(true));
        assert_eq!(m("app==web"), Ok(true));
        assert_eq!(m("app!=web"), Ok(false));
        assert_eq!(m("missing!=x"), Ok(true));
        assert_eq!(m("app in (web, db)"), Ok(true));
        assert_eq!(m("app notin (web,db)"), Ok(false));
        assert_eq!(m("missing notin (web)"), Ok(true));
        assert_eq!(m("tier"), Ok(true));
        assert_eq!(m("!tier"), Ok(false));
        assert_eq!(m("!missing,app=web,tier in (front)"), Ok(true));
        assert_eq!(m(""), Ok(true));
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b c").is_err());
        assert!(LabelSelector::parse("app=web,").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let f = FieldSelector::parse(
            "metadata.name=a,metadata.namespace!=other",
            "",
            "configmaps",
        );
        assert_eq!(f.map(|f| f.matches(&o)), Ok(true));
        assert!(FieldSelector::parse("spec.foo=1", "", "configmaps").is_err());
        assert!(FieldSelector::parse("status.phase=Running", "", "pods").is_ok());
    }

    #[test]
    fn label_selector_object_round_trips_to_query() {
        let sel = LabelSelector::from_object(&json!({
            "matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]
        }));
        assert_eq!(
            sel.map(|s| s.to_query()),
            Ok("app=x,t in (a,b)".to_string())
        );
    }
}
