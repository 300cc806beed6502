//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! Field sets are sets of paths to the leaves of an object (plus the elements of keyed lists),
//! stored in the `FieldsV1` encoding (`f:`, `k:`, `v:` keys, `.` for a member that also has
//! members below it). Ownership follows structured-merge-diff's rules in a simplified form:
//! - an Update (create, PUT, non-apply PATCH) gives its manager the fields whose value it changed
//!   and takes them from every other manager; fields it removed leave every set;
//! - an Apply gives its manager exactly the fields of the applied configuration; a field owned by
//!   another manager whose value the configuration changes is a conflict (409) unless `force`,
//!   which moves it; fields the manager applied before and omits now are removed from the object
//!   unless another manager also owns them; applying a value equal to the live one shares it;
//! - apiVersion, kind, metadata.name/namespace/uid/... are never owned; on kinds with a status
//!   subresource the main resource owns no status fields and `/status` owns only status.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::lists::{Hints, ListKind, same_key};

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElem {
    Field(String),
    /// Element of a keyed list; the key fields as compact JSON with sorted keys.
    Key(String),
    /// Element of a set, as compact JSON.
    Value(String),
    Index(usize),
}

pub type Path = Vec<PathElem>;
pub type FieldSet = BTreeSet<Path>;

impl PathElem {
    fn encode(&self) -> String {
        match self {
            PathElem::Field(f) => format!("f:{f}"),
            PathElem::Key(k) => format!("k:{k}"),
            PathElem::Value(v) => format!("v:{v}"),
            PathElem::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<PathElem> {
        let (p, rest) = s.split_at_checked(2)?;
        match p {
            "f:" => Some(PathElem::Field(rest.to_string())),
            "k:" => Some(PathElem::Key(rest.to_string())),
            "v:" => Some(PathElem::Value(rest.to_string())),
            "i:" => rest.parse().ok().map(PathElem::Index),
            _ => None,
        }
    }
}

/// `.spec.containers[name="app"].image`: how conflicts name a field.
pub fn render_path(p: &[PathElem]) -> String {
    let mut s = String::new();
    for e in p {
        match e {
            PathElem::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            PathElem::Key(k) => {
                let parts = serde_json::from_str::<Map<String, Value>>(k)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_else(|_| k.clone());
                s.push_str(&format!("[{parts}]"));
            }
            PathElem::Value(v) => s.push_str(&format!("[={v}]")),
            PathElem::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn key_json(item: &Value, keys: &[String]) -> String {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let mut m = Map::new();
    for k in sorted {
        if let Some(v) = item.get(k) {
            m.insert(k.clone(), v.clone());
        }
    }
    Value::Object(m).to_string()
}

/// Every owned path of `value` (nulls are not values and are skipped).
pub fn field_set(value: &Value, hints: Hints) -> FieldSet {
    let mut out = FieldSet::new();
    collect_object(value, hints, &mut Vec::new(), &mut out);
    out
}

fn collect_object(value: &Value, hints: Hints, prefix: &mut Path, out: &mut FieldSet) {
    let Some(map) = value.as_object() else {
        if !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        return;
    };
    for (k, v) in map {
        if v.is_null() {
            continue;
        }
        let h = hints.field(k);
        prefix.push(PathElem::Field(k.clone()));
        collect_value(v, h, k, prefix, out);
        prefix.pop();
    }
}

fn collect_value(v: &Value, h: Hints, name: &str, prefix: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(inner) if !inner.is_empty() && !h.is_atomic_map() => {
            collect_object(v, h, prefix, out)
        }
        Value::Array(items) if !items.is_empty() => match h.list_kind(name, items) {
            ListKind::Map(keys) => {
                for it in items {
                    prefix.push(PathElem::Key(key_json(it, &keys)));
                    out.insert(prefix.clone());
                    collect_object(it, h.items(), prefix, out);
                    prefix.pop();
                }
            }
            ListKind::Set => {
                for it in items {
                    prefix.push(PathElem::Value(it.to_string()));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            }
            ListKind::Atomic => {
                out.insert(prefix.clone());
            }
        },
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The value at `path`, if present.
pub fn value_at<'v>(obj: &'v Value, path: &[PathElem]) -> Option<&'v Value> {
    let mut cur = obj;
    for e in path {
        cur = match e {
            PathElem::Field(f) => cur.get(f)?,
            PathElem::Index(i) => cur.get(*i)?,
            PathElem::Key(k) => {
                let probe: Value = serde_json::from_str(k).ok()?;
                let keys: Vec<String> = probe.as_object()?.keys().cloned().collect();
                cur.as_array()?
                    .iter()
                    .find(|it| same_key(it, &probe, &keys))?
            }
            PathElem::Value(v) => {
                let probe: Value = serde_json::from_str(v).ok()?;
                cur.as_array()?.iter().find(|it| **it == probe)?
            }
        };
    }
    Some(cur)
}

/// Removes the value at `path`; returns whether something was removed.
pub fn remove_at(obj: &mut Value, path: &[PathElem]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let mut cur = obj;
    for e in parent_path {
        let next = match e {
            PathElem::Field(f) => cur.get_mut(f),
            PathElem::Index(i) => cur.get_mut(*i),
            PathElem::Key(k) => {
                let Ok(probe) = serde_json::from_str::<Value>(k) else {
                    return false;
                };
                let keys: Vec<String> = probe
                    .as_object()
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default();
                cur.as_array_mut()
                    .and_then(|a| a.iter_mut().find(|it| same_key(it, &probe, &keys)))
            }
            PathElem::Value(_) => None,
        };
        match next {
            Some(n) => cur = n,
            None => return false,
        }
    }
    match last {
        PathElem::Field(f) => cur
            .as_object_mut()
            .is_some_and(|m| m.shift_remove(f).is_some()),
        PathElem::Index(i) => match cur.as_array_mut() {
            Some(a) if *i < a.len() => {
                a.remove(*i);
                true
            }
            _ => false,
        },
        PathElem::Key(k) => {
            let Ok(probe) = serde_json::from_str::<Value>(k) else {
                return false;
            };
            let keys: Vec<String> = probe
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            match cur.as_array_mut() {
                Some(a) => {
                    let before = a.len();
                    a.retain(|it| !same_key(it, &probe, &keys));
                    a.len() != before
                }
                None => false,
            }
        }
        PathElem::Value(v) => {
            let Ok(probe) = serde_json::from_str::<Value>(v) else {
                return false;
            };
            match cur.as_array_mut() {
                Some(a) => {
                    let before = a.len();
                    a.retain(|it| *it != probe);
                    a.len() != before
                }
                None => false,
            }
        }
    }
}

/// Which part of an object a write may own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Whole object (kinds without a status subresource).
    All,
    /// Main resource of a kind with a status subresource: status is not owned here.
    Main,
    /// The `/status` subresource: only status is owned.
    Status,
}

fn ignored(p: &[PathElem], scope: Scope) -> bool {
    let first = match p.first() {
        Some(PathElem::Field(f)) => f.as_str(),
        _ => return true,
    };
    match first {
        "apiVersion" | "kind" => return true,
        "metadata" => {
            if let Some(PathElem::Field(f)) = p.get(1)
                && matches!(
                    f.as_str(),
                    "name"
                        | "namespace"
                        | "uid"
                        | "resourceVersion"
                        | "generation"
                        | "creationTimestamp"
                        | "deletionTimestamp"
                        | "deletionGracePeriodSeconds"
                        | "managedFields"
                        | "selfLink"
                        | "generateName"
                )
            {
                return true;
            }
            if p.len() == 1 {
                return true;
            }
        }
        _ => {}
    }
    match scope {
        Scope::All => false,
        Scope::Main => first == "status",
        Scope::Status => first != "status",
    }
}

/// The owned fields of `obj` in `scope`.
pub fn owned_set(obj: &Value, hints: Hints, scope: Scope) -> FieldSet {
    let mut s = field_set(obj, hints);
    s.retain(|p| !ignored(p, scope));
    s
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ManagedEntry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub set: FieldSet,
}

impl ManagedEntry {
    fn same_slot(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }
}

/// Reads `metadata.managedFields`; entries it cannot read are dropped.
pub fn read_entries(obj: &Value) -> Vec<ManagedEntry> {
    let Some(list) = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .map(|e| {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let mut set = FieldSet::new();
            if let Some(f) = e.get("fieldsV1") {
                decode_fields(f, &mut Vec::new(), &mut set);
            }
            ManagedEntry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                set,
            }
        })
        .collect()
}

fn decode_fields(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
    let Some(m) = v.as_object() else {
        return;
    };
    if m.is_empty() && !prefix.is_empty() {
        out.insert(prefix.clone());
        return;
    }
    for (k, child) in m {
        if k == "." {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
            continue;
        }
        if let Some(e) = PathElem::decode(k) {
            prefix.push(e);
            decode_fields(child, prefix, out);
            prefix.pop();
        }
    }
}

#[derive(Default)]
struct Node {
    member: bool,
    children: BTreeMap<String, Node>,
}

/// The `FieldsV1` encoding of a set.
pub fn encode_fields(set: &FieldSet) -> Value {
    let mut root = Node::default();
    for p in set {
        let mut n = &mut root;
        for e in p {
            n = n.children.entry(e.encode()).or_default();
        }
        n.member = true;
    }
    fn render(n: &Node) -> Value {
        let mut m = Map::new();
        if n.member && !n.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (k, c) in &n.children {
            m.insert(k.clone(), render(c));
        }
        Value::Object(m)
    }
    render(&root)
}

/// Writes entries back into `metadata.managedFields` (removing it when none remain).
pub fn write_entries(obj: &mut Value, entries: &[ManagedEntry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut m = Map::new();
            m.insert("manager".into(), json!(e.manager));
            m.insert("operation".into(), json!(e.operation));
            m.insert("apiVersion".into(), json!(e.api_version));
            m.insert("time".into(), json!(e.time));
            m.insert("fieldsType".into(), json!("FieldsV1"));
            m.insert("fieldsV1".into(), encode_fields(&e.set));
            if !e.subresource.is_empty() {
                m.insert("subresource".into(), json!(e.subresource));
            }
            Value::Object(m)
        })
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.shift_remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Who writes, and how: the identity recorded in managedFields.
#[derive(Clone, Debug)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub now: &'a str,
}

fn has_children(set: &FieldSet, p: &Path) -> bool {
    set.range(p.clone()..)
        .nth(1)
        .is_some_and(|next| next.len() > p.len() && next.starts_with(p))
}

/// Records a non-apply write of `new` over `old` (None on create) in `new`'s managedFields.
pub fn track_update(old: Option<&Value>, new: &mut Value, hints: Hints, scope: Scope, w: &Writer) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let old_set = old.map(|o| owned_set(o, hints, scope)).unwrap_or_default();
    let new_set = owned_set(new, hints, scope);
    let mut changed = FieldSet::new();
    for p in &new_set {
        let is_new = !old_set.contains(p);
        let differs = !is_new
            && !has_children(&new_set, p)
            && old.and_then(|o| value_at(o, p)) != value_at(new, p);
        if is_new || differs {
            changed.insert(p.clone());
        }
    }
    let removed: FieldSet = old_set.difference(&new_set).cloned().collect();
    for e in entries.iter_mut() {
        e.set
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    if !changed.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.same_slot(w.manager, "Update", w.subresource))
        {
            Some(e) => {
                e.set.extend(changed);
                e.time = w.now.to_string();
                e.api_version = w.api_version.to_string();
            }
            None => entries.push(ManagedEntry {
                manager: w.manager.to_string(),
                operation: "Update".into(),
                api_version: w.api_version.to_string(),
                time: w.now.to_string(),
                subresource: w.subresource.to_string(),
                set: changed,
            }),
        }
    }
    entries.retain(|e| !e.set.is_empty());
    write_entries(new, &entries);
}

/// A field another manager owns with a different value.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    pub field: String,
}

/// Server-side apply of `config` over `live` (None: the object is created by this apply).
/// Returns the new object with its managedFields, or the conflicts that stop it.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    hints: Hints,
    scope: Scope,
    force: bool,
    w: &Writer,
) -> Result<Value, Vec<Conflict>> {
    let cfg_set = owned_set(config, hints, scope);
    let Some(live) = live else {
        let mut obj = strip_nulls(config);
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.shift_remove("managedFields");
        }
        let entry = ManagedEntry {
            manager: w.manager.to_string(),
            operation: "Apply".into(),
            api_version: w.api_version.to_string(),
            time: w.now.to_string(),
            subresource: w.subresource.to_string(),
            set: cfg_set,
        };
        write_entries(&mut obj, &[entry]);
        return Ok(obj);
    };
    let mut entries = read_entries(live);
    let mut conflicts = Vec::new();
    let mut taken: Vec<(usize, Path)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.manager == w.manager {
            continue;
        }
        for p in e.set.intersection(&cfg_set) {
            if has_children(&cfg_set, p) {
                continue;
            }
            if value_at(live, p) != value_at(config, p) {
                conflicts.push(Conflict {
                    manager: e.manager.clone(),
                    api_version: e.api_version.clone(),
                    field: render_path(p),
                });
                taken.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for (i, p) in taken {
        if let Some(e) = entries.get_mut(i) {
            e.set.remove(&p);
        }
    }
    let slot = entries
        .iter()
        .position(|e| e.same_slot(w.manager, "Apply", w.subresource));
    let previous = slot
        .and_then(|i| entries.get(i))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let mut obj = live.clone();
    // Children sort after their parents, so going backwards removes leaves first.
    let dropped: Vec<&Path> = previous.difference(&cfg_set).collect();
    for p in dropped.into_iter().rev() {
        let owned_elsewhere = entries.iter().any(|e| {
            !e.same_slot(w.manager, "Apply", w.subresource)
                && e.set
                    .range(p.clone()..)
                    .next()
                    .is_some_and(|n| n.starts_with(p))
        });
        if !owned_elsewhere {
            remove_at(&mut obj, p);
        }
    }
    merge_into(&mut obj, config, hints);
    match slot {
        Some(i) => {
            if let Some(e) = entries.get_mut(i)
                && e.set != cfg_set
            {
                e.set = cfg_set;
                e.time = w.now.to_string();
                e.api_version = w.api_version.to_string();
            }
        }
        None => entries.push(ManagedEntry {
            manager: w.manager.to_string(),
            operation: "Apply".into(),
            api_version: w.api_version.to_string(),
            time: w.now.to_string(),
            subresource: w.subresource.to_string(),
            set: cfg_set,
        }),
    }
    entries.retain(|e| !e.set.is_empty());
    write_entries(&mut obj, &entries);
    Ok(obj)
}

/// A copy without null values (a null in an applied configuration removes the field).
pub fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// Merges an applied configuration into an object: maps key by key, keyed lists element by
/// element, sets by value, everything else replaced.
pub fn merge_into(target: &mut Value, patch: &Value, hints: Hints) {
    let (Some(t), Some(p)) = (target.as_object_mut(), patch.as_object()) else {
        *target = strip_nulls(patch);
        return;
    };
    if hints.is_atomic_map() {
        *target = strip_nulls(patch);
        return;
    }
    for (k, pv) in p {
        if pv.is_null() {
            t.shift_remove(k);
            continue;
        }
        let h = hints.field(k);
        match t.get_mut(k) {
            Some(tv) => merge_value(tv, pv, h, k),
            None => {
                t.insert(k.clone(), strip_nulls(pv));
            }
        }
    }
}

fn merge_value(tv: &mut Value, pv: &Value, h: Hints, name: &str) {
    match (tv.as_array_mut(), pv.as_array()) {
        (Some(ta), Some(pa)) => match h.list_kind(name, pa) {
            ListKind::Map(keys) => {
                for pe in pa {
                    match ta.iter_mut().find(|te| same_key(te, pe, &keys)) {
                        Some(te) => merge_into(te, pe, h.items()),
                        None => ta.push(strip_nulls(pe)),
                    }
                }
            }
            ListKind::Set => {
                for pe in pa {
                    if !ta.contains(pe) {
                        ta.push(pe.clone());
                    }
                }
            }
            ListKind::Atomic => *tv = strip_nulls(pv),
        },
        _ => {
            if tv.is_object() && pv.is_object() {
                merge_into(tv, pv, h);
            } else {
                *tv = strip_nulls(pv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w<'a>(m: &'a str) -> Writer<'a> {
        Writer {
            manager: m,
            api_version: "apps/v1",
            subresource: "",
            now: "2024-01-01T00:00:00Z",
        }
    }

    fn deploy(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "x"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
    }

    #[test]
    fn fields_v1_round_trips() {
        let h = Hints::root(None, true);
        let set = owned_set(&deploy(1, "a"), h, Scope::Main);
        let enc = encode_fields(&set);
        assert_eq!(
            enc,
            json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
        );
        let mut back = FieldSet::new();
        decode_fields(&enc, &mut Vec::new(), &mut back);
        assert_eq!(back, set);
    }

    #[test]
    fn apply_conflicts_then_force_moves_ownership() {
        let h = Hints::root(None, true);
        let Ok(first) = apply(None, &deploy(1, "a"), h, Scope::Main, false, &w("one")) else {
            panic!("create by apply failed");
        };
        let conflicts = apply(
            Some(&first),
            &deploy(2, "a"),
            h,
            Scope::Main,
            false,
            &w("two"),
        )
        .err()
        .unwrap_or_default();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].field, ".spec.replicas");
        // Same values are shared, not conflicting.
        assert!(
            apply(
                Some(&first),
                &deploy(1, "a"),
                h,
                Scope::Main,
                false,
                &w("two")
            )
            .is_ok()
        );
        let Ok(forced) = apply(
            Some(&first),
            &deploy(2, "a"),
            h,
            Scope::Main,
            true,
            &w("two"),
        ) else {
            panic!("force failed");
        };
        assert_eq!(forced.pointer("/spec/replicas"), Some(&json!(2)));
        let entries = read_entries(&forced);
        let one = entries
            .iter()
            .find(|e| e.manager == "one")
            .map(|e| e.set.clone())
            .unwrap_or_default();
        assert!(!one.iter().any(|p| render_path(p) == ".spec.replicas"));
    }

    #[test]
    fn reapply_without_a_field_removes_it() {
        let h = Hints::root(None, true);
        let Ok(first) = apply(None, &deploy(1, "a"), h, Scope::Main, false, &w("one")) else {
            panic!("apply failed");
        };
        let mut cfg = deploy(1, "a");
        if let Some(m) = cfg.pointer_mut("/metadata").and_then(Value::as_object_mut) {
            m.shift_remove("labels");
        }
        let Ok(second) = apply(Some(&first), &cfg, h, Scope::Main, false, &w("one")) else {
            panic!("apply failed");
        };
        assert_eq!(second.pointer("/metadata/labels/app"), None);
        // Re-applying the same configuration changes nothing.
        let Ok(third) = apply(Some(&second), &cfg, h, Scope::Main, false, &w("one")) else {
            panic!("apply failed");
        };
        assert_eq!(third, second);
    }

    #[test]
    fn update_takes_changed_fields() {
        let h = Hints::root(None, true);
        let Ok(first) = apply(None, &deploy(1, "a"), h, Scope::Main, false, &w("one")) else {
            panic!("apply failed");
        };
        let mut next = first.clone();
        if let Some(r) = next.pointer_mut("/spec/replicas") {
            *r = json!(3);
        }
        track_update(Some(&first), &mut next, h, Scope::Main, &w("editor"));
        let entries = read_entries(&next);
        let editor = entries
            .iter()
            .find(|e| e.manager == "editor")
            .map(|e| e.set.clone())
            .unwrap_or_default();
        assert_eq!(
            editor.iter().map(|p| render_path(p)).collect::<Vec<_>>(),
            vec![".spec.replicas"]
        );
        // Now "one" re-applying replicas=1 conflicts with "editor".
        let c = apply(
            Some(&next),
            &deploy(1, "a"),
            h,
            Scope::Main,
            false,
            &w("one"),
        )
        .err()
        .unwrap_or_default();
        assert_eq!(c.first().map(|c| c.manager.as_str()), Some("editor"));
    }
}
