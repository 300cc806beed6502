//! The OwnerReferencesPermissionEnforcement admission plugin (`gcPermissionsEnforcement.Validate`
//! in plugin/pkg/admission/gc/gc_admission.go; documented at
//! <https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#ownerreferencespermissionenforcement>).
//! Off by default upstream, on in OpenShift; here on by default when RBAC is on
//! (`StandInOptions::owner_references_permission_enforcement`).
//!
//! - A write that does not change `metadata.ownerReferences` passes (so does `pods/status`).
//! - An update or patch that changes them needs `delete` on the object itself.
//! - Each owner reference that newly gets `blockOwnerDeletion: true` needs `update` on the
//!   owner's `<resource>/finalizers` (named, in the object's namespace).

use serde_json::Value;

use super::Attributes;
use super::rbac::Decision;
use crate::error::ApiError;

/// (resource, subresource) pairs the plugin never checks.
const WHITELIST: &[(&str, &str, &str)] = &[("", "pods", "status")];

/// The write being admitted.
#[derive(Clone, Debug)]
pub struct OwnerRefWrite<'a> {
    /// The request's attributes (resource, subresource, namespace, name).
    pub attributes: &'a Attributes,
    pub create: bool,
    pub old: Option<&'a Value>,
    pub new: &'a Value,
}

fn owner_refs(obj: Option<&Value>) -> Vec<Value> {
    obj.and_then(|o| o.pointer("/metadata/ownerReferences"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn blocks(r: &Value) -> bool {
    r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
}

/// `newBlockingOwnerDeletionRefs`: references of `new` with blockOwnerDeletion that the old
/// object did not have blocking (matched by uid).
fn new_blocking_refs(old: Option<&Value>, new: &Value) -> Vec<Value> {
    let old_refs = owner_refs(old);
    owner_refs(Some(new))
        .into_iter()
        .filter(blocks)
        .filter(|r| {
            !old_refs
                .iter()
                .any(|o| o.get("uid") == r.get("uid") && blocks(o))
        })
        .collect()
}

/// Runs the plugin. `mapper` turns an owner's apiVersion and kind into its (group, resource)s
/// (the RESTMapper), `authorize` asks the authorizer (and records the check).
pub fn enforce(
    w: &OwnerRefWrite<'_>,
    mapper: impl Fn(&str, &str) -> Result<Vec<(String, String)>, String>,
    mut authorize: impl FnMut(&Attributes) -> Decision,
) -> Result<(), ApiError> {
    let a = w.attributes;
    if WHITELIST
        .iter()
        .any(|(g, r, s)| *g == a.group && *r == a.resource && *s == a.subresource)
    {
        return Ok(());
    }
    if owner_refs(w.old) == owner_refs(Some(w.new)) {
        return Ok(());
    }
    let name = crate::meta::name(w.new).to_string();
    let forbidden = |why: String| super::forbidden_status(&a.group, &a.resource, &name, &why);
    if !w.create {
        let d = authorize(&a.with_verb("delete"));
        if !d.allowed {
            return Err(forbidden(format!(
                "cannot set an ownerRef on a resource you can't delete: {}, <nil>",
                d.reason
            )));
        }
    }
    for r in new_blocking_refs(w.old, w.new) {
        let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        let resources = mapper(api_version, kind).map_err(|e| {
            forbidden(format!(
                "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion {api_version} Kind {kind}: {e}"
            ))
        })?;
        for (group, resource) in resources {
            let check = Attributes {
                verb: "update".into(),
                group,
                resource,
                subresource: "finalizers".into(),
                namespace: a.namespace.clone(),
                name: field("name").to_string(),
                resource_request: true,
                path: String::new(),
            };
            let d = authorize(&check);
            if !d.allowed {
                return Err(forbidden(format!(
                    "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: {}, <nil>",
                    d.reason
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn child(block: bool) -> Value {
        json!({"metadata": {"name": "web", "ownerReferences": [{"apiVersion": "cache.example.com/v1",
            "kind": "Memcached", "name": "web", "uid": "u1", "blockOwnerDeletion": block}]}})
    }

    #[test]
    fn blocking_refs_need_update_on_the_owners_finalizers() {
        let attrs = Attributes {
            verb: "create".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "ns".into(),
            resource_request: true,
            ..Default::default()
        };
        let new = child(true);
        let w = OwnerRefWrite {
            attributes: &attrs,
            create: true,
            old: None,
            new: &new,
        };
        let mapper = |_: &str, _: &str| Ok(vec![("cache.example.com".into(), "memcacheds".into())]);
        let mut asked = Vec::new();
        let e = enforce(&w, mapper, |c| {
            asked.push(format!(
                "{} {}/{} {}",
                c.verb, c.resource, c.subresource, c.name
            ));
            Decision::default()
        })
        .expect_err("denied");
        assert_eq!(asked, ["update memcacheds/finalizers web"]);
        assert_eq!(e.code, 403);
        assert!(e.message.starts_with("deployments.apps \"web\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"), "{}", e.message);
        // Unchanged references are not checked at all.
        let w2 = OwnerRefWrite {
            create: false,
            old: Some(&new),
            ..w.clone()
        };
        assert!(enforce(&w2, mapper, |_| Decision::default()).is_ok());
        // Not blocking: nothing to check on create.
        let plain = child(false);
        let w3 = OwnerRefWrite { new: &plain, ..w };
        assert!(enforce(&w3, mapper, |_| Decision::default()).is_ok());
    }
}
