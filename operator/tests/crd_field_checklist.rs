//! The CRD-field checklist: every field of the v1 `Memcached` spec and status has a row in
//! [`FIELDS`], and each row is checked against the code, not just listed.
//!
//! Adding a field to `operator/memcached-api/src/v1.rs` touches several places that nothing else ties
//! together; forgetting the proptest strategy, for one, makes the conversion round-trip property
//! skip the field without a failure. This test enumerates the fields from the generated CRD
//! schema (the same bytes `operator crd` prints) and, per field, checks:
//!
//! - (a) conversion: the strategies the round-trip properties draw from
//!   (`operator/memcached-api/src/conversion/strategies.rs`) give the field at least two different values;
//! - (b) validation: a row's invalid example is refused by `memcached_api::validation::
//!   validate_spec` or by the CRD schema, or the row says why no validation is needed;
//! - (c) desired state: changing a spec field changes the Deployment or Service the reconciler
//!   builds (`operator/src/controller/desired.rs`), and a status field is written by
//!   `operator/src/controller/status.rs::desired_status`, or the row is exempt with a reason.
//!
//! Adding a field = adding a row here (and whatever the failure messages point to).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DeploymentStatus;
use k8s_openapi::jiff::Timestamp;
use memcached_api::v1::{Memcached, MemcachedSpec};
use operator::controller::cache::{CachedDeployment, CachedPod, PodStatus};
use operator::controller::{desired, status};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

// The strategies are a private, test-only module of `memcached-api`; they are compiled into this
// test as they are, so the checklist looks at exactly what the round-trip properties generate.
// The module reaches its crate through `crate::` and `super::`: these imports stand in for it.
#[allow(dead_code, unused_imports)]
#[path = "../memcached-api/src/conversion/strategies.rs"]
mod strategies;
#[allow(unused_imports)]
use memcached_api::conversion::{AnyMemcached, Version};
#[allow(unused_imports)]
use memcached_api::{
    CONVERSION_ANNOTATION, FINALIZER, MAX_MEMORY_LIMIT_MIB, MAX_REPLICAS, MIN_MEMORY_LIMIT_MIB, v1,
    v1alpha1, v1beta1,
};

/// How a field is validated.
enum Validation {
    /// This value (set on an otherwise default spec) is refused by `validate_spec` with a
    /// problem on the field, or by the CRD schema at the field.
    Refuses(fn() -> Value),
    /// Nothing to validate, and why.
    NotNeeded(&'static str),
}

/// How a field reaches the reconciler's desired state.
enum Desired {
    /// Setting the spec field to this value changes the desired Deployment or Service.
    Spec(fn() -> Value),
    /// `controller/status.rs::desired_status` writes the status field.
    Status,
    /// Deliberately not part of the desired state, and why.
    #[allow(dead_code)]
    Exempt(&'static str),
}

/// One v1 field: its path in the object, how it is validated, how it reaches desired state.
struct Field {
    path: &'static str,
    validation: Validation,
    desired: Desired,
}

/// Why status fields need no validation: only the operator writes them.
const STATUS_IS_OURS: &str =
    "status is written only by the operator (status subresource) and never read as input";
/// Why pod-template overrides need no own validation beyond their types.
const POD_TEMPLATE_CHECKED_BY_SERVER: &str = "passed through to the Deployment's pod template, \
     which the API server validates when the operator applies it (a refusal is reported as \
     DeploymentRejected)";

/// Objects of our own types, described field by field below (other objects, such as the
/// Kubernetes `resources` or `affinity`, are one field each).
const GROUPS: &[&str] = &["spec.memcached", "spec.podTemplate"];

/// The checklist: one row per v1 field.
const FIELDS: &[Field] = &[
    Field {
        path: "spec.replicas",
        validation: Validation::Refuses(|| json!(-1)),
        desired: Desired::Spec(|| json!(3)),
    },
    Field {
        path: "spec.image",
        validation: Validation::Refuses(|| json!("")),
        desired: Desired::Spec(|| json!("quay.io/example/memcached:1.6.40")),
    },
    Field {
        path: "spec.memcached.memoryLimitMiB",
        validation: Validation::Refuses(|| json!(1)),
        desired: Desired::Spec(|| json!(256)),
    },
    Field {
        path: "spec.memcached.maxConnections",
        validation: Validation::Refuses(|| json!(0)),
        desired: Desired::Spec(|| json!(4096)),
    },
    Field {
        path: "spec.memcached.threads",
        validation: Validation::Refuses(|| json!(0)),
        desired: Desired::Spec(|| json!(8)),
    },
    Field {
        path: "spec.memcached.extraArgs",
        validation: Validation::Refuses(|| json!(["-p", "1"])),
        desired: Desired::Spec(|| json!(["-v"])),
    },
    Field {
        path: "spec.resources",
        validation: Validation::Refuses(|| json!({"limits": {"memory": "1Mi"}})),
        desired: Desired::Spec(|| json!({"requests": {"cpu": "250m"}})),
    },
    Field {
        path: "spec.port",
        validation: Validation::Refuses(|| json!(0)),
        desired: Desired::Spec(|| json!(11311)),
    },
    Field {
        path: "spec.podTemplate.nodeSelector",
        validation: Validation::NotNeeded(POD_TEMPLATE_CHECKED_BY_SERVER),
        desired: Desired::Spec(|| json!({"disk": "ssd"})),
    },
    Field {
        path: "spec.podTemplate.tolerations",
        validation: Validation::NotNeeded(POD_TEMPLATE_CHECKED_BY_SERVER),
        desired: Desired::Spec(|| json!([{"key": "dedicated", "operator": "Exists"}])),
    },
    Field {
        path: "spec.podTemplate.affinity",
        validation: Validation::NotNeeded(POD_TEMPLATE_CHECKED_BY_SERVER),
        desired: Desired::Spec(|| {
            json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 10,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}
            }]}})
        }),
    },
    Field {
        path: "spec.podTemplate.priorityClassName",
        validation: Validation::Refuses(|| json!("p".repeat(254))),
        desired: Desired::Spec(|| json!("high")),
    },
    Field {
        path: "spec.podTemplate.labels",
        validation: Validation::NotNeeded(POD_TEMPLATE_CHECKED_BY_SERVER),
        desired: Desired::Spec(|| json!({"team": "cache"})),
    },
    Field {
        path: "spec.podTemplate.annotations",
        validation: Validation::NotNeeded(POD_TEMPLATE_CHECKED_BY_SERVER),
        desired: Desired::Spec(|| json!({"example.org/owner": "cache"})),
    },
    Field {
        path: "status.observedGeneration",
        validation: Validation::NotNeeded(STATUS_IS_OURS),
        desired: Desired::Status,
    },
    Field {
        path: "status.replicas",
        validation: Validation::NotNeeded(STATUS_IS_OURS),
        desired: Desired::Status,
    },
    Field {
        path: "status.readyReplicas",
        validation: Validation::NotNeeded(STATUS_IS_OURS),
        desired: Desired::Status,
    },
    Field {
        path: "status.nodes",
        validation: Validation::NotNeeded(STATUS_IS_OURS),
        desired: Desired::Status,
    },
    Field {
        path: "status.selector",
        validation: Validation::NotNeeded(STATUS_IS_OURS),
        desired: Desired::Status,
    },
    Field {
        path: "status.conditions",
        validation: Validation::NotNeeded(STATUS_IS_OURS),
        desired: Desired::Status,
    },
];

const THIS_FILE: &str = "operator/tests/crd_field_checklist.rs";

// ---------------------------------------------------------------------------------------------
// Paths in JSON
// ---------------------------------------------------------------------------------------------

fn get<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(doc, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

/// Sets `path` in `doc`, creating the objects on the way.
fn set(doc: &mut Value, path: &str, value: Value) {
    let mut keys: Vec<&str> = path.split('.').collect();
    let last = keys.pop().unwrap();
    let mut at = doc;
    for key in keys {
        if !at.get(key).is_some_and(Value::is_object) {
            at[key] = json!({});
        }
        at = &mut at[key];
    }
    at[last] = value;
}

/// The field part of a path: `spec.memcached.threads` -> `memcached.threads`.
fn in_spec(path: &str) -> &str {
    path.strip_prefix("spec.").expect("a spec field")
}

// ---------------------------------------------------------------------------------------------
// The fields of the CRD schema
// ---------------------------------------------------------------------------------------------

/// The v1 `openAPIV3Schema` of the generated CRD.
fn v1_schema() -> Value {
    let crd = serde_json::to_value(memcached_api::crd()).unwrap();
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1")
        .expect("the CRD serves v1")["schema"]["openAPIV3Schema"]
        .clone()
}

fn collect_fields(schema: &Value, prefix: &str, out: &mut Vec<String>) {
    let Some(props) = schema["properties"].as_object() else {
        return;
    };
    for (name, sub) in props {
        let path = format!("{prefix}.{name}");
        if GROUPS.contains(&path.as_str()) {
            collect_fields(sub, &path, out);
        } else {
            out.push(path);
        }
    }
}

/// Every v1 spec and status field, as dotted paths, in schema order.
fn schema_fields() -> Vec<String> {
    let schema = v1_schema();
    let mut out = Vec::new();
    for top in ["spec", "status"] {
        collect_fields(&schema["properties"][top], top, &mut out);
    }
    out
}

#[test]
fn every_v1_field_has_a_row_and_every_row_a_field() {
    let fields = schema_fields();
    assert!(fields.len() >= 10, "too few fields found: {fields:?}");
    let rows: BTreeSet<&str> = FIELDS.iter().map(|f| f.path).collect();
    assert_eq!(
        rows.len(),
        FIELDS.len(),
        "a path has two rows in {THIS_FILE}"
    );
    let missing: Vec<&String> = fields
        .iter()
        .filter(|f| !rows.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "v1 fields without a row in FIELDS of {THIS_FILE}: {missing:?}\n\
         add one per field (conversion strategy, validation, desired state); a field that is an \
         object of our own type goes into GROUPS and gets a row per sub-field instead"
    );
    let stale: Vec<&&str> = rows
        .iter()
        .filter(|r| !fields.iter().any(|f| f == *r))
        .collect();
    assert!(
        stale.is_empty(),
        "rows in {THIS_FILE} for fields the v1 schema does not have: {stale:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// (a) conversion: the round-trip strategies vary every field
// ---------------------------------------------------------------------------------------------

#[test]
fn conversion_strategies_vary_every_field() {
    let strategy = strategies::v1_object();
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for _ in 0..512 {
        let object = strategy.new_tree(&mut runner).unwrap().current();
        let doc = serde_json::to_value(&object).unwrap();
        for f in FIELDS {
            let value = get(&doc, f.path).map_or_else(|| "<absent>".into(), Value::to_string);
            seen.entry(f.path).or_default().insert(value);
        }
    }
    let constant: Vec<(&str, &BTreeSet<String>)> = seen
        .iter()
        .filter(|(_, values)| values.len() < 2)
        .map(|(path, values)| (*path, values))
        .collect();
    assert!(
        constant.is_empty(),
        "the conversion round-trip strategies never vary these fields, so the properties in \
         operator/memcached-api/src/conversion/tests.rs cannot catch a conversion that drops them: \
         {constant:?}\ngive each a strategy in operator/memcached-api/src/conversion/strategies.rs \
         (v1_spec / v1_status and their helpers)"
    );
}

// ---------------------------------------------------------------------------------------------
// (b) validation: every field is validated, or says why not
// ---------------------------------------------------------------------------------------------

/// The OpenAPI subset Kubernetes uses, as draft-4 JSON schema (`nullable`, int-or-string).
fn openapi_to_draft4(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let nullable = map.remove("nullable") == Some(Value::Bool(true));
            if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                map.insert("type".into(), json!(["integer", "string"]));
            }
            if nullable && let Some(Value::String(t)) = map.get("type").cloned() {
                map.insert("type".into(), json!([t, "null"]));
            }
            map.values_mut().for_each(openapi_to_draft4);
        }
        Value::Array(items) => items.iter_mut().for_each(openapi_to_draft4),
        _ => {}
    }
}

/// Whether `validate_spec` reports a problem on `path` (or inside it) for `spec`.
fn refused_by_validate_spec(spec: &Value, path: &str) -> bool {
    let Ok(spec) = serde_json::from_value::<MemcachedSpec>(spec.clone()) else {
        return false;
    };
    memcached_api::validation::validate_spec(&spec)
        .iter()
        .any(|p| {
            p.field == path
                || p.field.starts_with(&format!("{path}."))
                || p.field.starts_with(&format!("{path}["))
        })
}

/// Whether the CRD schema refuses `spec` at `path` (or inside it).
fn refused_by_schema(validator: &jsonschema::Validator, spec: &Value, path: &str) -> bool {
    let pointer = format!("/{}", in_spec(path).replace('.', "/"));
    validator
        .iter_errors(spec)
        .any(|e| e.instance_path().to_string().starts_with(&pointer))
}

#[test]
fn every_spec_field_is_validated_or_says_why_not() {
    let mut schema = v1_schema()["properties"]["spec"].clone();
    openapi_to_draft4(&mut schema);
    let validator = jsonschema::draft4::new(&schema).unwrap();
    let base = serde_json::to_value(MemcachedSpec::default()).unwrap();
    assert!(
        validator.iter_errors(&base).next().is_none(),
        "the default spec must pass the schema"
    );
    let mut failures = Vec::new();
    for f in FIELDS {
        match &f.validation {
            Validation::NotNeeded(why) => assert!(!why.is_empty(), "{}: say why", f.path),
            Validation::Refuses(invalid) => {
                let mut spec = base.clone();
                set(&mut spec, in_spec(f.path), invalid());
                if !refused_by_validate_spec(&spec, f.path)
                    && !refused_by_schema(&validator, &spec, f.path)
                {
                    failures.push(format!("{}: {}", f.path, invalid()));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "neither memcached_api::validation::validate_spec (operator/memcached-api/src/validation.rs) nor \
         the CRD schema (the #[schemars] attributes in operator/memcached-api/src/v1.rs) refuses these \
         invalid values: {failures:#?}\nadd a rule there, or change the row in {THIS_FILE} to \
         Validation::NotNeeded with the reason"
    );
}

// ---------------------------------------------------------------------------------------------
// (c) desired state: every spec field reaches the Deployment or Service, every status field is
// written by the status computation
// ---------------------------------------------------------------------------------------------

fn memcached(spec: MemcachedSpec) -> Memcached {
    let mut mc = Memcached::new("cache", spec);
    mc.metadata.namespace = Some("ns".into());
    mc.metadata.uid = Some("0b8a6c1e-1111-4222-8333-944455556666".into());
    mc.metadata.generation = Some(2);
    mc
}

/// The Deployment and Service the reconciler builds for `spec`, as JSON.
fn desired_children(spec: &Value) -> Value {
    let mc = memcached(serde_json::from_value(spec.clone()).unwrap());
    json!({
        "deployment": desired::deployment(&mc).unwrap(),
        "service": desired::service(&mc).unwrap(),
    })
}

#[test]
fn every_spec_field_reaches_the_desired_state() {
    let base = serde_json::to_value(MemcachedSpec::default()).unwrap();
    let base_children = desired_children(&base);
    let mut failures = Vec::new();
    for f in FIELDS {
        match &f.desired {
            Desired::Spec(value) => {
                let mut spec = base.clone();
                set(&mut spec, in_spec(f.path), value());
                assert_ne!(spec, base, "{}: the example is the default", f.path);
                if desired_children(&spec) == base_children {
                    failures.push(format!("{}: {}", f.path, value()));
                }
            }
            Desired::Exempt(why) => assert!(!why.is_empty(), "{}: say why", f.path),
            Desired::Status => assert!(f.path.starts_with("status."), "{}", f.path),
        }
    }
    assert!(
        failures.is_empty(),
        "changing these spec fields leaves the desired Deployment and Service unchanged: \
         {failures:#?}\nmap them in operator/src/controller/desired.rs, or make the row in \
         {THIS_FILE} Desired::Exempt with the reason"
    );
}

#[test]
fn every_status_field_is_written_by_the_reconciler() {
    let mc = memcached(MemcachedSpec::default());
    let deployment = CachedDeployment {
        status: Some(DeploymentStatus {
            replicas: Some(2),
            ready_replicas: Some(1),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut pod = CachedPod {
        status: Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    pod.metadata.name = Some("cache-7d9f8-abcde".into());
    let observed = status::Observed {
        deployment: Some(&deployment),
        pods: vec![&pod],
    };
    let written = status::desired_status(&mc, &observed, &[], None, Timestamp::UNIX_EPOCH);
    let doc = json!({ "status": written });
    let missing: Vec<&str> = FIELDS
        .iter()
        .filter(|f| matches!(f.desired, Desired::Status))
        .filter(|f| get(&doc, f.path).is_none())
        .map(|f| f.path)
        .collect();
    assert!(
        missing.is_empty(),
        "controller/status.rs::desired_status never writes {missing:?} (operator/src/controller/\
         status.rs), for a Memcached with a Deployment and a running pod: set them there, or make \
         the rows in {THIS_FILE} Desired::Exempt with the reason"
    );
}
