//! What the API server and its built-in admission do to built-in kinds on write: the defaults
//! of Deployments, StatefulSets, Pod specs and Services (so an operator that compares desired with live state
//! sees what it would see on a real cluster), namespace finalizers and phase, ClusterIP
//! allocation, and the status the apiextensions controller gives a CRD.

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Map, Value, json};

use crate::registry::{GroupResource, ResourceType};

static NEXT_IP: AtomicU32 = AtomicU32::new(10);

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let m = v.as_object_mut()?;
    let e = m.entry(key).or_insert_with(|| Value::Object(Map::new()));
    e.as_object_mut()
}

fn default(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.into(), v);
    }
}

/// Status and spec a new object of a built-in kind starts with.
pub fn prepare_create(key: &GroupResource, obj: &mut Value, keep_status: bool) {
    match (key.group.as_str(), key.resource.as_str()) {
        ("", "namespaces") => {
            namespace_name_label(obj);
            if let Some(spec) = obj_mut(obj, "spec") {
                spec.insert("finalizers".into(), json!(["kubernetes"]));
            }
            if let Some(o) = obj.as_object_mut() {
                o.insert("status".into(), json!({"phase": "Active"}));
            }
        }
        ("", "pods") if !keep_status => {
            if let Some(o) = obj.as_object_mut() {
                o.insert(
                    "status".into(),
                    json!({"phase": "Pending", "qosClass": "BestEffort"}),
                );
            }
        }
        ("", "services") => {
            if let Some(o) = obj.as_object_mut() {
                o.insert("status".into(), json!({"loadBalancer": {}}));
            }
        }
        _ => {}
    }
}

/// The label the API server keeps on every namespace (NamespaceDefaultLabelName).
fn namespace_name_label(obj: &mut Value) {
    let name = crate::meta::name(obj).to_string();
    let m = crate::meta::meta_mut(obj);
    let labels = m.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(l) = labels.as_object_mut() {
        l.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
}

/// Fields a write to a built-in kind may not change.
pub fn prepare_update(key: &GroupResource, new: &mut Value, old: &Value) {
    if key.group.is_empty() && key.resource == "namespaces" {
        namespace_name_label(new);
        // spec.finalizers only change through /finalize.
        if let Some(f) = old.pointer("/spec/finalizers").cloned()
            && let Some(spec) = obj_mut(new, "spec")
        {
            spec.insert("finalizers".into(), f);
        }
    }
    if key.group.is_empty() && key.resource == "services" {
        for f in ["clusterIP", "clusterIPs"] {
            if let Some(v) = old.pointer(&format!("/spec/{f}")).cloned()
                && let Some(spec) = obj_mut(new, "spec")
                && spec.get(f).is_none_or(|x| x.is_null() || x == "")
            {
                spec.insert(f.into(), v);
            }
        }
    }
}

/// The defaults the real API server fills in for built-in kinds.
pub fn apply_defaults(key: &GroupResource, obj: &mut Value, _old: Option<&Value>) {
    match (key.group.as_str(), key.resource.as_str()) {
        ("apps", "deployments") => {
            let Some(spec) = obj_mut(obj, "spec") else {
                return;
            };
            default(spec, "replicas", json!(1));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "progressDeadlineSeconds", json!(600));
            default(
                spec,
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
            if let Some(strategy) = spec.get_mut("strategy").and_then(Value::as_object_mut)
                && strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            {
                default(
                    strategy,
                    "rollingUpdate",
                    json!({"maxUnavailable": "25%", "maxSurge": "25%"}),
                );
            }
            if let Some(ps) = spec
                .get_mut("template")
                .and_then(|t| t.get_mut("spec"))
                .and_then(Value::as_object_mut)
            {
                pod_spec_defaults(ps);
            }
        }
        ("apps", "replicasets") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                default(spec, "replicas", json!(1));
                if let Some(ps) = spec
                    .get_mut("template")
                    .and_then(|t| t.get_mut("spec"))
                    .and_then(Value::as_object_mut)
                {
                    pod_spec_defaults(ps);
                }
            }
        }
        ("apps", "statefulsets") => {
            let Some(spec) = obj_mut(obj, "spec") else {
                return;
            };
            default(spec, "replicas", json!(1));
            default(spec, "podManagementPolicy", json!("OrderedReady"));
            default(spec, "revisionHistoryLimit", json!(10));
            default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            if let Some(ps) = spec
                .get_mut("template")
                .and_then(|t| t.get_mut("spec"))
                .and_then(Value::as_object_mut)
            {
                pod_spec_defaults(ps);
            }
        }
        ("", "pods") => {
            if let Some(ps) = obj_mut(obj, "spec") {
                pod_spec_defaults(ps);
                default(ps, "serviceAccountName", json!("default"));
            }
        }
        ("", "services") => {
            let Some(spec) = obj_mut(obj, "spec") else {
                return;
            };
            default(spec, "type", json!("ClusterIP"));
            default(spec, "sessionAffinity", json!("None"));
            default(spec, "internalTrafficPolicy", json!("Cluster"));
            if spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
                if spec.get("clusterIP").is_none_or(|v| v.is_null() || v == "") {
                    let n = NEXT_IP.fetch_add(1, Ordering::Relaxed);
                    let ip = format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff);
                    spec.insert("clusterIP".into(), json!(ip));
                }
                if let Some(ip) = spec.get("clusterIP").cloned() {
                    default(spec, "clusterIPs", json!([ip]));
                }
                default(spec, "ipFamilies", json!(["IPv4"]));
                default(spec, "ipFamilyPolicy", json!("SingleStack"));
            }
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default(p, "protocol", json!("TCP"));
                    if let Some(port) = p.get("port").cloned() {
                        default(p, "targetPort", port);
                    }
                }
            }
        }
        _ => {}
    }
}

fn pod_spec_defaults(ps: &mut Map<String, Value>) {
    default(ps, "restartPolicy", json!("Always"));
    default(ps, "terminationGracePeriodSeconds", json!(30));
    default(ps, "dnsPolicy", json!("ClusterFirst"));
    default(ps, "securityContext", json!({}));
    default(ps, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = ps.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                default(c, "terminationMessagePath", json!("/dev/termination-log"));
                default(c, "terminationMessagePolicy", json!("File"));
                default(c, "resources", json!({}));
                let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
                let last = image.rsplit('/').next().unwrap_or_default();
                let policy = if image.contains('@') {
                    "IfNotPresent"
                } else if !last.contains(':') || last.ends_with(":latest") {
                    "Always"
                } else {
                    "IfNotPresent"
                };
                default(c, "imagePullPolicy", json!(policy));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

/// The status the apiextensions controllers give an accepted CRD.
pub fn crd_status(obj: &mut Value, old: Option<&Value>, t: &ResourceType) {
    let old_status = old.and_then(|o| o.get("status"));
    let mut stored: Vec<Value> = old_status
        .and_then(|s| s.get("storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let sv = json!(t.storage_version);
    if !stored.contains(&sv) {
        stored.push(sv);
    }
    let since = |ty: &str| {
        old_status
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
            })
            .and_then(|c| c.get("lastTransitionTime"))
            .cloned()
            .unwrap_or_else(|| json!(crate::meta::now()))
    };
    let mut accepted = Map::new();
    accepted.insert("plural".into(), json!(t.plural));
    accepted.insert("singular".into(), json!(t.singular));
    if !t.short_names.is_empty() {
        accepted.insert("shortNames".into(), json!(t.short_names));
    }
    accepted.insert("kind".into(), json!(t.kind));
    accepted.insert("listKind".into(), json!(t.list_kind));
    if !t.categories.is_empty() {
        accepted.insert("categories".into(), json!(t.categories));
    }
    let status = json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted")},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": since("Established")}
        ],
        "acceptedNames": Value::Object(accepted),
        "storedVersions": stored,
    });
    if let Some(o) = obj.as_object_mut() {
        o.insert("status".into(), status);
    }
}
