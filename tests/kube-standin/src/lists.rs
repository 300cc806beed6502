//! How lists and maps merge: the list-type knowledge shared by strategic merge patch and
//! server-side apply. Custom resources take it from their schema (`x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`); built-in kinds use a table of the
//! merge keys Kubernetes declares for its well-known list fields (containers, env, ports, ...).

use serde_json::Value;

/// How one list merges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole.
    Atomic,
    /// A set of scalars, merged by value.
    Set,
    /// A list of objects merged by these key fields.
    Map(Vec<String>),
}

/// A position in an object's shape: what is known about merging the value found there.
#[derive(Clone, Copy, Debug)]
pub struct Hints<'a> {
    schema: Option<&'a Value>,
    builtin: bool,
    root: bool,
}

impl<'a> Hints<'a> {
    /// Hints for a whole object of a kind: built-in kinds have no schema here.
    pub fn root(schema: Option<&'a Value>, builtin: bool) -> Self {
        Hints {
            schema,
            builtin,
            root: true,
        }
    }

    fn builtin_at() -> Self {
        Hints {
            schema: None,
            builtin: true,
            root: false,
        }
    }

    /// The hints of property `name` of the object at this position.
    pub fn field(&self, name: &str) -> Hints<'a> {
        if self.root && name == "metadata" {
            return Self::builtin_at();
        }
        if self.builtin {
            return Self::builtin_at();
        }
        let child = self.schema.and_then(|s| {
            s.get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
        });
        Hints {
            schema: child,
            builtin: false,
            root: false,
        }
    }

    /// The hints of the elements of the list at this position.
    pub fn items(&self) -> Hints<'a> {
        if self.builtin {
            return Self::builtin_at();
        }
        Hints {
            schema: self.schema.and_then(|s| s.get("items")),
            builtin: false,
            root: false,
        }
    }

    /// Whether the map at this position is replaced as a whole.
    pub fn is_atomic_map(&self) -> bool {
        self.schema
            .and_then(|s| s.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            == Some("atomic")
    }

    /// How the list found under property `name` at this position merges.
    pub fn list_kind(&self, name: &str, items: &[Value]) -> ListKind {
        let kind = if self.builtin {
            builtin_list_kind(name, items)
        } else {
            self.schema_list_kind()
        };
        // A keyed merge needs every element to be an object carrying the keys.
        if let ListKind::Map(keys) = &kind {
            let ok = items.iter().all(|it| {
                it.as_object()
                    .is_some_and(|o| keys.iter().any(|k| o.contains_key(k)))
            });
            if !ok {
                return ListKind::Atomic;
            }
        }
        if kind == ListKind::Set && !items.iter().all(|i| !i.is_object() && !i.is_array()) {
            return ListKind::Atomic;
        }
        kind
    }

    fn schema_list_kind(&self) -> ListKind {
        let Some(s) = self.schema else {
            return ListKind::Atomic;
        };
        match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys: Vec<String> = s
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }
}

/// The patch merge keys of Kubernetes' own types, by field name.
fn builtin_list_kind(name: &str, items: &[Value]) -> ListKind {
    let key = |k: &str| ListKind::Map(vec![k.to_string()]);
    match name {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => key("name"),
        "volumeMounts" => key("mountPath"),
        "volumeDevices" => key("devicePath"),
        "conditions" => key("type"),
        "ownerReferences" => key("uid"),
        "hostAliases" => key("ip"),
        "finalizers" => ListKind::Set,
        "ports" => {
            let first = items.first().and_then(Value::as_object);
            if first.is_some_and(|o| o.contains_key("containerPort")) {
                key("containerPort")
            } else if first.is_some_and(|o| o.contains_key("port")) {
                key("port")
            } else {
                ListKind::Atomic
            }
        }
        _ => ListKind::Atomic,
    }
}

/// Whether `item` is the element of a keyed list that `keys` select in `probe`.
pub fn same_key(item: &Value, probe: &Value, keys: &[String]) -> bool {
    keys.iter().all(|k| item.get(k) == probe.get(k))
}
