//! The object store: every object of every kind in its storage version, the global
//! resourceVersion counter, the uid and owner indexes, and the write paths (create, update,
//! delete) with their API semantics: system metadata, generation, status isolation, finalizers,
//! managed fields, no-op detection, namespace and CRD lifecycle and owner-reference garbage
//! collection. One lock guards it all; it is never held across an await, and watchers are fed
//! through broadcast channels so they never slow a writer.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch as tokio_watch};

use crate::builtin;
use crate::error::{ApiError, FieldCause};
use crate::lists::Hints;
use crate::managed::{self, Scope, Writer};
use crate::meta;
use crate::registry::{GroupResource, Registry, ResourceType, parse_crd};
use crate::schema;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::watch::{EventType, Hub, StoredEvent};

pub const CRD_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
const GC_MANAGER: &str = "kube-controller-manager";

pub fn crd_key() -> GroupResource {
    GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}

pub fn namespace_key() -> GroupResource {
    GroupResource::new("", "namespaces")
}

/// Where one object lives.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjRef {
    pub key: GroupResource,
    pub namespace: String,
    pub name: String,
}

/// Which part of the object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sub {
    Main,
    Status,
}

/// How managedFields are handled by a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Managed {
    /// Record the write as an Update by the writer.
    Track,
    /// The caller (server-side apply) computed managedFields already.
    Given,
}

/// Who writes and how.
#[derive(Clone, Debug)]
pub struct WriteCtx {
    pub manager: String,
    pub api_version: String,
    pub sub: Sub,
    pub managed: Managed,
    pub dry_run: bool,
    /// Internal controllers may create objects with their status (pods made by the simulation).
    pub keep_status: bool,
}

impl WriteCtx {
    pub fn new(manager: &str, api_version: &str) -> Self {
        WriteCtx {
            manager: manager.to_string(),
            api_version: api_version.to_string(),
            sub: Sub::Main,
            managed: Managed::Track,
            dry_run: false,
            keep_status: false,
        }
    }
}

/// `propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

/// DeleteOptions that matter here.
#[derive(Clone, Debug, Default)]
pub struct DeleteOpts {
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<u64>,
    pub dry_run: bool,
}

/// A page of a list.
#[derive(Debug)]
pub struct ListPage {
    pub items: Vec<Arc<Value>>,
    pub rv: u64,
    pub cont: Option<String>,
    pub remaining: Option<u64>,
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug)]
pub enum WatchFrom {
    /// After this resourceVersion (events replayed from the history).
    After(u64),
    /// Current state as synthetic ADDED events, then changes.
    Snapshot,
}

/// What a new watch starts with.
pub struct WatchStart {
    pub initial: Vec<Arc<StoredEvent>>,
    pub rx: broadcast::Receiver<Arc<StoredEvent>>,
    pub rv: u64,
    pub disconnect: tokio_watch::Receiver<u64>,
}

struct ResourceStore {
    objects: BTreeMap<(String, String), Arc<Value>>,
    hub: Hub,
}

enum Gc {
    OwnerGone(String),
    Dangling(ObjRef),
    Foreground(String),
    Orphan(String),
    Namespace(String),
    Crd(GroupResource),
}

type Entries<'a> = Box<dyn Iterator<Item = (&'a (String, String), &'a Arc<Value>)> + 'a>;

/// Everything under the store lock.
pub struct State {
    rv: u64,
    pub registry: Registry,
    resources: HashMap<GroupResource, ResourceStore>,
    uids: HashMap<String, ObjRef>,
    dependents: HashMap<String, BTreeSet<ObjRef>>,
    history: usize,
}

/// The shared store.
pub struct Store {
    state: RwLock<State>,
    disconnect: tokio_watch::Sender<u64>,
}

impl Store {
    pub fn new(history: usize) -> Self {
        let registry = Registry::with_builtins();
        let mut resources = HashMap::new();
        for t in registry.all() {
            resources.insert(
                t.key(),
                ResourceStore {
                    objects: BTreeMap::new(),
                    hub: Hub::new(history, 0),
                },
            );
        }
        let (disconnect, _) = tokio_watch::channel(0);
        let store = Store {
            state: RwLock::new(State {
                rv: 0,
                registry,
                resources,
                uids: HashMap::new(),
                dependents: HashMap::new(),
                history,
            }),
            disconnect,
        };
        {
            let mut st = store.write();
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                let _ = st.create(
                    &namespace_key(),
                    "",
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    &WriteCtx::new("kube-apiserver", "v1"),
                );
            }
        }
        store
    }

    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends every open watch (clients see the stream close and re-watch).
    pub fn disconnect_watches(&self) {
        self.disconnect.send_modify(|v| *v += 1);
    }

    pub fn watch(
        &self,
        key: &GroupResource,
        ns: Option<&str>,
        from: WatchFrom,
    ) -> Result<WatchStart, ApiError> {
        let st = self.read();
        let rs = st.resources.get(key).ok_or_else(ApiError::no_route)?;
        let rx = rs.hub.subscribe();
        let initial = match from {
            WatchFrom::After(rv) => match rs.hub.since(rv) {
                Ok(evs) => evs
                    .into_iter()
                    .filter(|e| ns.is_none_or(|n| meta::namespace(&e.object) == n))
                    .collect(),
                Err(oldest) => {
                    return Err(ApiError::gone(format!(
                        "too old resource version: {rv} ({oldest})"
                    )));
                }
            },
            WatchFrom::Snapshot => st
                .scan(rs, ns)
                .map(|o| {
                    Arc::new(StoredEvent {
                        kind: EventType::Added,
                        rv: meta::resource_version(o),
                        object: o.clone(),
                        prev: None,
                    })
                })
                .collect(),
        };
        Ok(WatchStart {
            initial,
            rx,
            rv: st.rv,
            disconnect: self.disconnect.subscribe(),
        })
    }
}

impl State {
    pub fn rv(&self) -> u64 {
        self.rv
    }

    pub fn rt(&self, key: &GroupResource) -> Result<Arc<ResourceType>, ApiError> {
        self.registry
            .get(key)
            .cloned()
            .ok_or_else(ApiError::no_route)
    }

    /// Drops every watch history: later watches from an older resourceVersion get 410 Gone.
    pub fn compact(&mut self) {
        let rv = self.rv;
        for rs in self.resources.values_mut() {
            rs.hub.compact(rv);
        }
    }

    pub fn subscribe(&self, key: &GroupResource) -> Option<broadcast::Receiver<Arc<StoredEvent>>> {
        self.resources.get(key).map(|r| r.hub.subscribe())
    }

    fn scan<'a>(
        &'a self,
        rs: &'a ResourceStore,
        ns: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<Value>> + 'a> {
        match ns {
            None => Box::new(rs.objects.values()),
            Some(ns) => Box::new(
                rs.objects
                    .range((ns.to_string(), String::new())..)
                    .take_while(move |((n, _), _)| n == ns)
                    .map(|(_, v)| v),
            ),
        }
    }

    pub fn get(&self, key: &GroupResource, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        let rt = self.rt(key)?;
        self.resources
            .get(key)
            .and_then(|rs| rs.objects.get(&(ns.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| ApiError::not_found_in(&rt, name))
    }

    /// Every stored object of a kind, in `ns` (every namespace when None), in name order; an
    /// unknown kind has none. For readers that need no selectors (the RBAC authorizer).
    pub fn objects(&self, key: &GroupResource, ns: Option<&str>) -> Vec<Arc<Value>> {
        let Some(rs) = self.resources.get(key) else {
            return Vec::new();
        };
        rs.objects
            .iter()
            .filter(|((n, _), _)| ns.is_none_or(|want| n == want))
            .map(|(_, o)| o.clone())
            .collect()
    }

    pub fn get_opt(&self, key: &GroupResource, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.resources
            .get(key)
            .and_then(|rs| rs.objects.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Objects owned (by ownerReference uid) by `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<(ObjRef, Arc<Value>)> {
        self.dependents
            .get(uid)
            .map(|set| {
                set.iter()
                    .filter_map(|r| {
                        self.get_opt(&r.key, &r.namespace, &r.name)
                            .map(|o| (r.clone(), o))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn list(
        &self,
        key: &GroupResource,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        limit: Option<usize>,
        cont: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let rs = self.resources.get(key).ok_or_else(ApiError::no_route)?;
        let start = match cont {
            Some(c) if !c.is_empty() => Some(decode_continue(c)?),
            _ => None,
        };
        let list_rv = start.as_ref().map(|(rv, _)| *rv).unwrap_or(self.rv);
        let matches = |o: &&Arc<Value>| labels.matches(o) && fields.matches(o);
        if let (Some(name), None) = (fields.pinned_name(), &start)
            && let Some(ns) = ns
        {
            let items = rs
                .objects
                .get(&(ns.to_string(), name.to_string()))
                .filter(|o| matches(o))
                .cloned()
                .into_iter()
                .collect();
            return Ok(ListPage {
                items,
                rv: self.rv,
                cont: None,
                remaining: None,
            });
        }
        let iter: Entries<'_> = match (&start, ns) {
            (Some((_, after)), _) => Box::new(
                rs.objects
                    .range::<(String, String), _>((
                        std::ops::Bound::Excluded(after.clone()),
                        std::ops::Bound::Unbounded,
                    ))
                    .take_while(move |((n, _), _)| ns.is_none_or(|ns| n == ns)),
            ),
            (None, Some(ns)) => Box::new(
                rs.objects
                    .range((ns.to_string(), String::new())..)
                    .take_while(move |((n, _), _)| n == ns),
            ),
            (None, None) => Box::new(rs.objects.iter()),
        };
        let mut items = Vec::new();
        let mut last = None;
        let mut more = false;
        for (k, o) in iter {
            if !matches(&o) {
                continue;
            }
            if limit.is_some_and(|l| l > 0 && items.len() >= l) {
                more = true;
                break;
            }
            items.push(o.clone());
            last = Some(k.clone());
        }
        let cont = match (more, last) {
            (true, Some(k)) => Some(encode_continue(list_rv, &k)),
            _ => None,
        };
        Ok(ListPage {
            items,
            rv: list_rv,
            cont,
            remaining: None,
        })
    }

    fn hints<'a>(rt: &'a ResourceType) -> Hints<'a> {
        Hints::root(
            rt.storage().and_then(|v| v.schema.as_ref()),
            rt.is_builtin(),
        )
    }

    fn scope(rt: &ResourceType, sub: Sub) -> Scope {
        match (rt.has_status(), sub) {
            (false, _) => Scope::All,
            (true, Sub::Main) => Scope::Main,
            (true, Sub::Status) => Scope::Status,
        }
    }

    /// Defaulting and checks every stored write of a kind gets (storage version).
    fn admit(
        &self,
        rt: &ResourceType,
        old: Option<&Value>,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let key = rt.key();
        if rt.is_builtin() {
            builtin::apply_defaults(&key, obj, old);
        } else if let Some(s) = rt.storage().and_then(|v| v.schema.as_ref()) {
            schema::apply_defaults(obj, s);
            schema::prune(obj, s);
        }
        if key == crd_key() {
            let parsed = parse_crd(obj).map_err(|c| ApiError::invalid(rt, meta::name(obj), c))?;
            if let Some(existing) = self.registry.get(&parsed.key())
                && existing.is_builtin()
            {
                return Err(ApiError::invalid(
                    rt,
                    meta::name(obj),
                    vec![FieldCause::invalid(
                        "spec.group",
                        &json!(parsed.group),
                        "is served by a built-in API",
                    )],
                ));
            }
            builtin::crd_status(obj, old, &parsed);
        }
        Ok(())
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn crd_terminating(&self, rt: &ResourceType) -> bool {
        rt.crd_name.as_ref().is_some_and(|n| {
            self.get_opt(&crd_key(), "", n)
                .is_some_and(|c| meta::is_terminating(&c))
        })
    }

    pub fn create(
        &mut self,
        key: &GroupResource,
        ns: &str,
        mut obj: Value,
        ctx: &WriteCtx,
    ) -> Result<Arc<Value>, ApiError> {
        let rt = self.rt(key)?;
        if self.crd_terminating(&rt) {
            return Err(ApiError::method_not_allowed(
                "create not allowed while custom resource definition is terminating",
            ));
        }
        let now = meta::now();
        let m = meta::meta_mut(&mut obj);
        let mut name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            match m.get("generateName").and_then(Value::as_str) {
                Some(g) if !g.is_empty() => name = format!("{g}{}", meta::name_suffix()),
                _ => {
                    return Err(ApiError::invalid(
                        &rt,
                        "",
                        vec![FieldCause::required(
                            "metadata.name",
                            "name or generateName is required",
                        )],
                    ));
                }
            }
        }
        let why = if key.group == "rbac.authorization.k8s.io" {
            meta::invalid_path_segment_name(&name)
        } else {
            meta::invalid_name(&name, *key == namespace_key())
        };
        if let Some(why) = why {
            return Err(ApiError::invalid(
                &rt,
                &name,
                vec![FieldCause::invalid("metadata.name", &json!(name), &why)],
            ));
        }
        m.insert("name".into(), json!(name));
        if rt.namespaced {
            m.insert("namespace".into(), json!(ns));
        } else {
            m.shift_remove("namespace");
        }
        for k in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            m.shift_remove(k);
        }
        m.insert("uid".into(), json!(meta::new_uid()));
        m.insert("creationTimestamp".into(), json!(now));
        if has_generation(&rt) {
            m.insert("generation".into(), json!(1));
        } else {
            m.shift_remove("generation");
        }
        if rt.namespaced {
            match self.get_opt(&namespace_key(), "", ns) {
                None => return Err(ApiError::not_found("", "namespaces", ns)),
                Some(n) if meta::is_terminating(&n) => {
                    return Err(ApiError::forbidden(
                        &rt,
                        &name,
                        &format!(
                            "unable to create new content in namespace {ns} because it is being terminated"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        if self
            .get_opt(key, if rt.namespaced { ns } else { "" }, &name)
            .is_some()
        {
            return Err(ApiError::already_exists(&rt, &name));
        }
        if rt.has_status()
            && !ctx.keep_status
            && let Some(o) = obj.as_object_mut()
        {
            o.shift_remove("status");
        }
        builtin::prepare_create(key, &mut obj, ctx.keep_status);
        self.admit(&rt, None, &mut obj)?;
        if ctx.managed == Managed::Track {
            managed::track_update(
                None,
                &mut obj,
                Self::hints(&rt),
                Self::scope(&rt, Sub::Main),
                &Writer {
                    manager: &ctx.manager,
                    api_version: &ctx.api_version,
                    subresource: "",
                    now: &now,
                },
            );
        }
        if ctx.dry_run {
            return Ok(Arc::new(obj));
        }
        let r = ObjRef {
            key: key.clone(),
            namespace: if rt.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name,
        };
        let stored = self.put(&r, obj, None, EventType::Added);
        self.after_write(&r, &stored)?;
        let mut q = VecDeque::new();
        if !meta::owner_uids(&stored).is_empty() {
            q.push_back(Gc::Dangling(r));
        }
        self.run_gc(q);
        Ok(stored)
    }

    /// Stores `obj` under a new resourceVersion and tells the watchers.
    fn put(
        &mut self,
        r: &ObjRef,
        mut obj: Value,
        old: Option<&Value>,
        kind: EventType,
    ) -> Arc<Value> {
        let rv = self.next_rv();
        meta::meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let uid = meta::uid(&obj).to_string();
        let old_owners: BTreeSet<String> = old
            .map(meta::owner_uids)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let new_owners: BTreeSet<String> = meta::owner_uids(&obj).into_iter().collect();
        for gone in old_owners.difference(&new_owners) {
            if let Some(s) = self.dependents.get_mut(gone) {
                s.remove(r);
                if s.is_empty() {
                    self.dependents.remove(gone);
                }
            }
        }
        for added in new_owners.difference(&old_owners) {
            self.dependents
                .entry(added.clone())
                .or_default()
                .insert(r.clone());
        }
        self.uids.insert(uid, r.clone());
        let obj = Arc::new(obj);
        if let Some(rs) = self.resources.get_mut(&r.key) {
            let prev = rs
                .objects
                .insert((r.namespace.clone(), r.name.clone()), obj.clone());
            rs.hub.publish(StoredEvent {
                kind,
                rv,
                object: obj.clone(),
                prev,
            });
        }
        obj
    }

    /// Registers kinds when CRDs change.
    fn after_write(&mut self, r: &ObjRef, stored: &Value) -> Result<(), ApiError> {
        if r.key == crd_key()
            && let Ok(t) = parse_crd(stored)
        {
            let key = t.key();
            self.registry.insert(t);
            let (history, rv) = (self.history, self.rv);
            self.resources.entry(key).or_insert_with(|| ResourceStore {
                objects: BTreeMap::new(),
                hub: Hub::new(history, rv),
            });
        }
        Ok(())
    }

    /// Replaces an object (PUT semantics; patches arrive here as their result).
    pub fn update(
        &mut self,
        key: &GroupResource,
        ns: &str,
        name: &str,
        mut new: Value,
        ctx: &WriteCtx,
        precondition_rv: Option<u64>,
    ) -> Result<Arc<Value>, ApiError> {
        let rt = self.rt(key)?;
        let old = self.get(key, ns, name)?;
        if let Some(p) = precondition_rv
            && p != meta::resource_version(&old)
        {
            return Err(ApiError::stale(&rt, name));
        }
        if !new.is_object() {
            return Err(ApiError::bad_request("the object is not a JSON object"));
        }
        let now = meta::now();
        match ctx.sub {
            Sub::Status => {
                let status = new.get("status").cloned();
                let mut n = (*old).clone();
                if let Some(o) = n.as_object_mut() {
                    match status {
                        Some(s) => {
                            o.insert("status".into(), s);
                        }
                        None => {
                            o.shift_remove("status");
                        }
                    }
                }
                if ctx.managed == Managed::Given
                    && let Some(mf) = new.pointer("/metadata/managedFields").cloned()
                {
                    meta::meta_mut(&mut n).insert("managedFields".into(), mf);
                }
                new = n;
            }
            Sub::Main => {
                if rt.has_status()
                    && let Some(o) = new.as_object_mut()
                {
                    match old.get("status") {
                        Some(s) => {
                            o.insert("status".into(), s.clone());
                        }
                        None => {
                            o.shift_remove("status");
                        }
                    }
                }
                let m = meta::meta_mut(&mut new);
                let om = meta::meta(&old).cloned().unwrap_or_default();
                for k in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "namespace",
                    "name",
                ] {
                    match om.get(k) {
                        Some(v) => {
                            m.insert(k.into(), v.clone());
                        }
                        None => {
                            m.shift_remove(k);
                        }
                    }
                }
                m.shift_remove("selfLink");
                if meta::is_terminating(&old) {
                    let before: BTreeSet<String> = meta::finalizers(&old).into_iter().collect();
                    let added: Vec<String> = meta::finalizers(&new)
                        .into_iter()
                        .filter(|f| !before.contains(f))
                        .collect();
                    if !added.is_empty() {
                        return Err(ApiError::invalid(
                            &rt,
                            name,
                            vec![FieldCause::forbidden(
                                "metadata.finalizers",
                                &format!(
                                    "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                                ),
                            )],
                        ));
                    }
                }
            }
        }
        meta::meta_mut(&mut new).shift_remove("resourceVersion");
        builtin::prepare_update(key, &mut new, &old);
        self.admit(&rt, Some(&old), &mut new)?;
        if ctx.managed == Managed::Track {
            let given = new.pointer("/metadata/managedFields").cloned();
            let live = old.pointer("/metadata/managedFields").cloned();
            let keep_given = matches!(&given, Some(g) if Some(g) != live.as_ref());
            if !keep_given {
                if let Some(l) = live {
                    meta::meta_mut(&mut new).insert("managedFields".into(), l);
                }
                let sub = if ctx.sub == Sub::Status { "status" } else { "" };
                managed::track_update(
                    Some(&old),
                    &mut new,
                    Self::hints(&rt),
                    Self::scope(&rt, ctx.sub),
                    &Writer {
                        manager: &ctx.manager,
                        api_version: &ctx.api_version,
                        subresource: sub,
                        now: &now,
                    },
                );
            }
        }
        if has_generation(&rt) && spec_changed(&old, &new, rt.has_status()) {
            let g = meta::generation(&old) + 1;
            meta::meta_mut(&mut new).insert("generation".into(), json!(g));
        }
        // A write that changes nothing is not a write: no new resourceVersion, no event.
        meta::meta_mut(&mut new).insert(
            "resourceVersion".into(),
            json!(meta::resource_version(&old).to_string()),
        );
        if new == *old {
            return Ok(old);
        }
        if ctx.dry_run {
            return Ok(Arc::new(new));
        }
        let r = ObjRef {
            key: key.clone(),
            namespace: ns.to_string(),
            name: name.to_string(),
        };
        let mut q = VecDeque::new();
        if meta::is_terminating(&new) && !held(&r.key, &new) {
            let removed = self.remove(&r, Some(new), &mut q);
            self.run_gc(q);
            return removed.ok_or_else(|| ApiError::not_found_in(&rt, name));
        }
        let stored = self.put(&r, new, Some(&old), EventType::Modified);
        self.after_write(&r, &stored)?;
        if meta::owner_uids(&stored) != meta::owner_uids(&old)
            && !meta::owner_uids(&stored).is_empty()
        {
            q.push_back(Gc::Dangling(r));
        }
        self.run_gc(q);
        Ok(stored)
    }

    /// Removes an object now; `last` is its final state when a write released it.
    fn remove(
        &mut self,
        r: &ObjRef,
        last: Option<Value>,
        q: &mut VecDeque<Gc>,
    ) -> Option<Arc<Value>> {
        let rs = self.resources.get_mut(&r.key)?;
        let current = rs.objects.remove(&(r.namespace.clone(), r.name.clone()))?;
        let mut obj = last.unwrap_or_else(|| (*current).clone());
        self.rv += 1;
        let rv = self.rv;
        meta::meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let obj = Arc::new(obj);
        if let Some(rs) = self.resources.get_mut(&r.key) {
            rs.hub.publish(StoredEvent {
                kind: EventType::Deleted,
                rv,
                object: obj.clone(),
                prev: Some(current),
            });
        }
        let uid = meta::uid(&obj).to_string();
        self.uids.remove(&uid);
        for owner in meta::owner_uids(&obj) {
            if let Some(s) = self.dependents.get_mut(&owner) {
                s.remove(r);
                if s.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
            if let Some(o) = self.uids.get(&owner).cloned()
                && let Some(owner_obj) = self.get_opt(&o.key, &o.namespace, &o.name)
                && meta::finalizers(&owner_obj)
                    .iter()
                    .any(|f| f == "foregroundDeletion")
            {
                q.push_back(Gc::Foreground(owner.clone()));
            }
        }
        q.push_back(Gc::OwnerGone(uid));
        if !r.namespace.is_empty()
            && self
                .get_opt(&namespace_key(), "", &r.namespace)
                .is_some_and(|n| meta::is_terminating(&n))
        {
            q.push_back(Gc::Namespace(r.namespace.clone()));
        }
        if let Some(rt) = self.registry.get(&r.key).cloned()
            && self.crd_terminating(&rt)
        {
            q.push_back(Gc::Crd(r.key.clone()));
        }
        if r.key == crd_key()
            && let Ok(t) = parse_crd(&obj)
        {
            self.registry.remove(&t.key());
            if let Some(gone) = self.resources.remove(&t.key()) {
                for o in gone.objects.values() {
                    self.uids.remove(meta::uid(o));
                }
            }
        }
        Some(obj)
    }

    /// DELETE of one object: immediate, or graceful when finalizers hold it.
    /// Returns the object and whether it is gone.
    pub fn delete(
        &mut self,
        key: &GroupResource,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let rt = self.rt(key)?;
        let old = self.get(key, ns, name)?;
        if let Some(u) = &opts.precondition_uid
            && u != meta::uid(&old)
        {
            return Err(ApiError::conflict(
                &rt,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {u}, UID in object meta: {}",
                    meta::uid(&old)
                ),
            ));
        }
        if let Some(p) = opts.precondition_rv
            && p != meta::resource_version(&old)
        {
            return Err(ApiError::conflict(
                &rt,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {p}, ResourceVersion in object meta: {}",
                    meta::resource_version(&old)
                ),
            ));
        }
        if opts.dry_run {
            return Ok((old, true));
        }
        let r = ObjRef {
            key: key.clone(),
            namespace: ns.to_string(),
            name: name.to_string(),
        };
        let mut q = VecDeque::new();
        let result = self.delete_ref(&r, opts.propagation.unwrap_or_default(), &mut q);
        self.run_gc(q);
        result.ok_or_else(|| ApiError::not_found_in(&rt, name))
    }

    fn delete_ref(
        &mut self,
        r: &ObjRef,
        prop: Propagation,
        q: &mut VecDeque<Gc>,
    ) -> Option<(Arc<Value>, bool)> {
        let old = self.get_opt(&r.key, &r.namespace, &r.name)?;
        if meta::is_terminating(&old) {
            return Some((old, false));
        }
        let mut fins = meta::finalizers(&old);
        let uid = meta::uid(&old).to_string();
        let has_dependents = self.dependents.get(&uid).is_some_and(|s| !s.is_empty());
        match prop {
            Propagation::Orphan if has_dependents => fins.push("orphan".into()),
            Propagation::Foreground if has_dependents => fins.push("foregroundDeletion".into()),
            _ => {}
        }
        let is_crd = r.key == crd_key();
        if is_crd {
            fins.push(CRD_FINALIZER.into());
        }
        let is_ns = r.key == namespace_key();
        if fins.is_empty() && !is_ns {
            return self.remove(r, None, q).map(|o| (o, true));
        }
        let mut new = (*old).clone();
        meta::set_finalizers(&mut new, &fins);
        let m = meta::meta_mut(&mut new);
        m.insert("deletionTimestamp".into(), json!(meta::now()));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        if self.registry.get(&r.key).is_some_and(|t| has_generation(t)) {
            m.insert("generation".into(), json!(meta::generation(&old) + 1));
        }
        if is_ns && let Some(o) = new.as_object_mut() {
            o.insert("status".into(), json!({"phase": "Terminating"}));
        }
        let stored = self.put(r, new, Some(&old), EventType::Modified);
        if fins.iter().any(|f| f == "orphan") {
            q.push_back(Gc::Orphan(uid.clone()));
        }
        if fins.iter().any(|f| f == "foregroundDeletion") {
            q.push_back(Gc::Foreground(uid.clone()));
        }
        if is_ns {
            q.push_back(Gc::Namespace(r.name.clone()));
        }
        if is_crd && let Ok(t) = parse_crd(&stored) {
            q.push_back(Gc::Crd(t.key()));
        }
        Some((stored, false))
    }

    /// An internal controller's edit of an object (GC, namespace and CRD cleanup).
    fn edit(&mut self, r: &ObjRef, q: &mut VecDeque<Gc>, f: impl FnOnce(&mut Value)) {
        let Some(old) = self.get_opt(&r.key, &r.namespace, &r.name) else {
            return;
        };
        let Some(rt) = self.registry.get(&r.key).cloned() else {
            return;
        };
        let mut new = (*old).clone();
        f(&mut new);
        managed::track_update(
            Some(&old),
            &mut new,
            Self::hints(&rt),
            Self::scope(&rt, Sub::Main),
            &Writer {
                manager: GC_MANAGER,
                api_version: &rt.storage_api_version(),
                subresource: "",
                now: &meta::now(),
            },
        );
        if new == *old {
            return;
        }
        if meta::is_terminating(&new) && !held(&r.key, &new) {
            self.remove(r, Some(new), q);
        } else {
            self.put(r, new, Some(&old), EventType::Modified);
        }
    }

    fn run_gc(&mut self, mut q: VecDeque<Gc>) {
        let mut budget = 100_000usize;
        while let Some(job) = q.pop_front() {
            budget = budget.saturating_sub(1);
            if budget == 0 {
                tracing::warn!("garbage collection stopped after too many steps");
                break;
            }
            match job {
                Gc::OwnerGone(uid) => {
                    let deps: Vec<ObjRef> = self
                        .dependents
                        .remove(&uid)
                        .map(|s| s.into_iter().collect())
                        .unwrap_or_default();
                    for d in deps {
                        q.push_back(Gc::Dangling(d));
                    }
                }
                Gc::Dangling(r) => {
                    let Some(o) = self.get_opt(&r.key, &r.namespace, &r.name) else {
                        continue;
                    };
                    let owners = meta::owner_uids(&o);
                    if !owners.is_empty() && owners.iter().all(|u| !self.uids.contains_key(u)) {
                        self.delete_ref(&r, Propagation::Background, &mut q);
                    }
                }
                Gc::Foreground(uid) => {
                    let Some(owner) = self.uids.get(&uid).cloned() else {
                        continue;
                    };
                    let deps = self.dependents_of(&uid);
                    for (d, obj) in &deps {
                        if !meta::is_terminating(obj) {
                            self.delete_ref(d, Propagation::Foreground, &mut q);
                        }
                    }
                    if self.dependents_of(&uid).is_empty() {
                        self.edit(&owner, &mut q, |o| {
                            let f: Vec<String> = meta::finalizers(o)
                                .into_iter()
                                .filter(|f| f != "foregroundDeletion")
                                .collect();
                            meta::set_finalizers(o, &f);
                        });
                    }
                }
                Gc::Orphan(uid) => {
                    for (d, _) in self.dependents_of(&uid) {
                        let u = uid.clone();
                        self.edit(&d, &mut q, |o| {
                            if let Some(refs) = o
                                .pointer_mut("/metadata/ownerReferences")
                                .and_then(Value::as_array_mut)
                            {
                                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&u));
                            }
                            if o.pointer("/metadata/ownerReferences")
                                .and_then(Value::as_array)
                                .is_some_and(Vec::is_empty)
                            {
                                meta::meta_mut(o).shift_remove("ownerReferences");
                            }
                        });
                    }
                    if let Some(owner) = self.uids.get(&uid).cloned() {
                        self.edit(&owner, &mut q, |o| {
                            let f: Vec<String> = meta::finalizers(o)
                                .into_iter()
                                .filter(|f| f != "orphan")
                                .collect();
                            meta::set_finalizers(o, &f);
                        });
                    }
                }
                Gc::Namespace(ns) => {
                    let Some(nsobj) = self.get_opt(&namespace_key(), "", &ns) else {
                        continue;
                    };
                    if !meta::is_terminating(&nsobj) {
                        continue;
                    }
                    let mut remaining = 0usize;
                    let keys: Vec<GroupResource> = self
                        .registry
                        .all()
                        .filter(|t| t.namespaced)
                        .map(|t| t.key())
                        .collect();
                    for key in keys {
                        let refs: Vec<(ObjRef, bool)> = self
                            .resources
                            .get(&key)
                            .map(|rs| {
                                self.scan(rs, Some(&ns))
                                    .map(|o| {
                                        (
                                            ObjRef {
                                                key: key.clone(),
                                                namespace: ns.clone(),
                                                name: meta::name(o).to_string(),
                                            },
                                            meta::is_terminating(o),
                                        )
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        for (r, terminating) in refs {
                            if !terminating {
                                self.delete_ref(&r, Propagation::Background, &mut q);
                            }
                            if self.get_opt(&r.key, &r.namespace, &r.name).is_some() {
                                remaining += 1;
                            }
                        }
                    }
                    if remaining == 0 {
                        let r = ObjRef {
                            key: namespace_key(),
                            namespace: String::new(),
                            name: ns.clone(),
                        };
                        self.edit(&r, &mut q, |o| {
                            if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                                spec.insert("finalizers".into(), json!([]));
                            }
                        });
                        // Namespaces are held by spec.finalizers, which the edit just emptied.
                        if let Some(o) = self.get_opt(&r.key, "", &ns)
                            && meta::finalizers(&o).is_empty()
                        {
                            self.remove(&r, None, &mut q);
                        }
                    }
                }
                Gc::Crd(key) => {
                    let Some(rt) = self.registry.get(&key).cloned() else {
                        continue;
                    };
                    let Some(crd_name) = rt.crd_name.clone() else {
                        continue;
                    };
                    let refs: Vec<(ObjRef, bool)> = self
                        .resources
                        .get(&key)
                        .map(|rs| {
                            rs.objects
                                .iter()
                                .map(|((n, name), o)| {
                                    (
                                        ObjRef {
                                            key: key.clone(),
                                            namespace: n.clone(),
                                            name: name.clone(),
                                        },
                                        meta::is_terminating(o),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    for (r, terminating) in &refs {
                        if !terminating {
                            self.delete_ref(r, Propagation::Background, &mut q);
                        }
                    }
                    let empty = self
                        .resources
                        .get(&key)
                        .is_none_or(|rs| rs.objects.is_empty());
                    if empty {
                        let r = ObjRef {
                            key: crd_key(),
                            namespace: String::new(),
                            name: crd_name,
                        };
                        self.edit(&r, &mut q, |o| {
                            let f: Vec<String> = meta::finalizers(o)
                                .into_iter()
                                .filter(|f| f != CRD_FINALIZER)
                                .collect();
                            meta::set_finalizers(o, &f);
                        });
                    }
                }
            }
        }
    }

    /// DELETE of a collection: every matching object, as single deletes.
    pub fn delete_collection(
        &mut self,
        key: &GroupResource,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        opts: &DeleteOpts,
    ) -> Result<Vec<Arc<Value>>, ApiError> {
        let page = self.list(key, ns, labels, fields, None, None)?;
        let mut out = Vec::new();
        for o in page.items {
            if opts.dry_run {
                out.push(o);
                continue;
            }
            let r = ObjRef {
                key: key.clone(),
                namespace: meta::namespace(&o).to_string(),
                name: meta::name(&o).to_string(),
            };
            let mut q = VecDeque::new();
            if let Some((obj, _)) =
                self.delete_ref(&r, opts.propagation.unwrap_or_default(), &mut q)
            {
                out.push(obj);
            }
            self.run_gc(q);
        }
        Ok(out)
    }
}

/// Whether objects of a kind carry `metadata.generation` (custom resources and the built-in
/// kinds whose strategy sets it; ConfigMaps, Secrets, Leases... have none on a real server).
fn has_generation(rt: &ResourceType) -> bool {
    !rt.is_builtin()
        || matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("apps", "deployments" | "replicasets" | "statefulsets")
                | ("", "pods")
                | ("apiextensions.k8s.io", "customresourcedefinitions")
                | ("admissionregistration.k8s.io", _)
        )
}

/// Whether finalizers still keep a terminating object.
fn held(key: &GroupResource, obj: &Value) -> bool {
    if !meta::finalizers(obj).is_empty() {
        return true;
    }
    *key == namespace_key()
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
}

/// Whether anything outside metadata (and status, when status is a subresource) differs.
fn spec_changed(old: &Value, new: &Value, has_status: bool) -> bool {
    let skip =
        |k: &str| matches!(k, "metadata" | "apiVersion" | "kind") || (has_status && k == "status");
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    o.iter()
        .filter(|(k, _)| !skip(k))
        .any(|(k, v)| n.get(k) != Some(v))
        || n.iter()
            .filter(|(k, _)| !skip(k))
            .any(|(k, _)| !o.contains_key(k))
}

fn encode_continue(rv: u64, after: &(String, String)) -> String {
    let raw = json!({"rv": rv, "ns": after.0, "name": after.1}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(u64, (String, String)), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v.get("ns").and_then(Value::as_str).ok_or_else(bad)?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}
