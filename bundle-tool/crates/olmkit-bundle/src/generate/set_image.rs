//! `generate bundle --image`: what `make bundle`'s `kustomize edit set image controller=$(IMG)`
//! does to the manifests, applied to the manifests generation reads.
//!
//! An operator-sdk project's `make bundle` runs `cd config/manager && kustomize edit set image
//! controller=$(IMG)` before `operator-sdk generate bundle`; kustomize's `images` transformer
//! (sigs.k8s.io/kustomize `api/filters/imagetag`, `updater.go`) then rewrites every container
//! and init container whose image *name* (the reference without `:tag` or `@digest`,
//! `image.IsImageMatched`) is `controller`: the new name replaces the name, the new tag or digest
//! replaces the tag and digest (the old ones are kept when the edit gives none). Here:
//! - `NAME=IMAGE` (kustomize's `<image>=<newimage>[:<newtag>|@<digest>]`) does exactly that to
//!   every pod template of the manifests;
//! - a bare `IMAGE` (what `$(IMG)` is) sets the operator's manager container, found by the one
//!   rule ([`olmkit_core::csv::manager_container`]), whatever its current image is called.
//!
//! The CSV's `containerImage` annotation, which kustomize never touches and operator-sdk keeps
//! from the base (so it goes stale), is set to the manager's new image when the base has one;
//! with bundle-tool's `csv-defaults` the generated CSV derives it from the manager anyway.
//! Nothing is written back to `config/manager/kustomization.yaml`.

use super::{GenerateBundleError, GenerateInputs};
use olmkit_core::image_ref::repository_as_written;
use serde_json::Value;

/// One `--image` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageEdit {
    /// `IMAGE`: the manager container's image.
    Manager(String),
    /// `NAME=IMAGE`: kustomize's images transformer for images named `NAME`.
    Named {
        /// The image name matched (`controller`).
        name: String,
        /// The new reference: a name, `name:tag` or `name@digest`.
        new: String,
    },
}

impl ImageEdit {
    /// Parses `[NAME=]IMAGE`.
    pub fn parse(s: &str) -> Result<Self, GenerateBundleError> {
        let bad = |message: &str| GenerateBundleError::Option {
            flag: "image",
            value: s.to_string(),
            message: message.to_string(),
        };
        let check = |r: &str| {
            olmkit_core::image_ref::ImageRef::parse(r)
                .map(|_| ())
                .map_err(|e| bad(&format!("not an image reference: {e}")))
        };
        match s.split_once('=') {
            Some((name, new)) => {
                if name.is_empty() || new.is_empty() {
                    return Err(bad(
                        "expected NAME=IMAGE (e.g. controller=quay.io/example/op:v1.0.0)",
                    ));
                }
                check(new)?;
                Ok(ImageEdit::Named {
                    name: name.to_string(),
                    new: new.to_string(),
                })
            }
            None => {
                check(s)?;
                Ok(ImageEdit::Manager(s.to_string()))
            }
        }
    }
}

/// `(name, ":tag" or "", "@digest" or "")` of a reference as written.
fn split(reference: &str) -> (&str, &str, &str) {
    let name = repository_as_written(reference);
    let rest = &reference[name.len()..];
    match rest.find('@') {
        Some(i) => (name, &rest[..i], &rest[i..]),
        None => (name, rest, ""),
    }
}

/// kustomize's rewrite of `old` by an edit whose new reference is `new`.
fn rewrite(old: &str, new: &str) -> String {
    let (_, old_tag, old_digest) = split(old);
    let (new_name, new_tag, new_digest) = split(new);
    if new_tag.is_empty() && new_digest.is_empty() {
        format!("{new_name}{old_tag}{old_digest}")
    } else {
        format!("{new_name}{new_tag}{new_digest}")
    }
}

/// The pod template of a workload object (Deployment, StatefulSet, DaemonSet, Job, ReplicaSet,
/// Pod; a CronJob's job template), as kustomize's `images` field specs find it.
fn pod_spec_mut(object: &mut Value) -> Option<&mut Value> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let pointer = match kind {
        "Pod" => "/spec",
        "CronJob" => "/spec/jobTemplate/spec/template/spec",
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "Job"
        | "ReplicationController" => "/spec/template/spec",
        _ => return None,
    };
    object.pointer_mut(pointer)
}

/// Applies the edits to the manifests, then updates the base CSV's `containerImage`; returns a
/// note per change.
pub fn apply(
    inputs: &mut GenerateInputs,
    edits: &[ImageEdit],
) -> Result<Vec<String>, GenerateBundleError> {
    let mut notes = Vec::new();
    for edit in edits {
        match edit {
            ImageEdit::Named { name, new } => {
                let mut changed = 0;
                for doc in &mut inputs.manifests {
                    let Some(spec) = pod_spec_mut(&mut doc.object) else {
                        continue;
                    };
                    for list in ["containers", "initContainers"] {
                        let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) else {
                            continue;
                        };
                        for c in cs {
                            let Some(old) = c.get("image").and_then(Value::as_str) else {
                                continue;
                            };
                            if repository_as_written(old) == name {
                                let img = rewrite(old, new);
                                c["image"] = Value::from(img);
                                changed += 1;
                            }
                        }
                    }
                }
                if changed == 0 {
                    notes.push(format!(
                        "--image {name}={new}: no container image is named {name} (as with kustomize, nothing changed)"
                    ));
                } else {
                    notes.push(format!(
                        "--image {name}={new}: set {changed} container image(s)"
                    ));
                }
            }
            ImageEdit::Manager(new) => {
                let Some(m) = inputs.manager_container() else {
                    return Err(GenerateBundleError::Option {
                        flag: "image",
                        value: new.clone(),
                        message: "the manifests have no Deployment with a container to set".into(),
                    });
                };
                let index = m.index;
                let old = m.image().unwrap_or("").to_string();
                let Some(doc) = inputs
                    .manifests
                    .iter_mut()
                    .find(|d| d.kind() == "Deployment")
                else {
                    continue;
                };
                if let Some(c) = doc
                    .object
                    .pointer_mut("/spec/template/spec/containers")
                    .and_then(Value::as_array_mut)
                    .and_then(|cs| cs.get_mut(index))
                {
                    c["image"] = Value::from(new.clone());
                }
                notes.push(format!("--image: manager image {old} -> {new}"));
            }
        }
    }
    // The base's `containerImage`, which no kustomize edit reaches.
    let manager = inputs.manager_image().map(str::to_string);
    if let Some(img) = manager {
        let csvs = inputs
            .manifests
            .iter_mut()
            .filter(|d| d.kind() == crate::kinds::CSV)
            .chain(inputs.base_csv.as_mut());
        for csv in csvs {
            if let Some(a) = csv
                .object
                .pointer_mut("/metadata/annotations")
                .and_then(Value::as_object_mut)
                && a.contains_key("containerImage")
                && a.get("containerImage").and_then(Value::as_str) != Some(img.as_str())
            {
                a.insert("containerImage".into(), Value::from(img.clone()));
                notes.push(format!(
                    "--image: the base CSV's containerImage is now {img}"
                ));
            }
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Manifest;
    use serde_json::json;

    fn doc(object: Value) -> Manifest {
        Manifest::new("t", 0, object)
    }

    fn deployment(images: &[(&str, &str)]) -> Value {
        json!({"kind": "Deployment", "metadata": {"name": "controller-manager"},
            "spec": {"template": {"spec": {"containers": images.iter()
                .map(|(n, i)| json!({"name": n, "image": i})).collect::<Vec<_>>()}}}})
    }

    fn images(inputs: &GenerateInputs) -> Vec<String> {
        inputs.manifests[0].object["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["image"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn named_edits_rewrite_like_kustomize() {
        assert_eq!(
            rewrite("controller:latest", "quay.io/x/op:v1"),
            "quay.io/x/op:v1"
        );
        assert_eq!(
            rewrite("controller:latest", "quay.io/x/op"),
            "quay.io/x/op:latest"
        );
        assert_eq!(
            rewrite("controller", "quay.io/x/op@sha256:abc"),
            "quay.io/x/op@sha256:abc"
        );
        assert_eq!(
            rewrite("localhost:5000/op:1", "localhost:5000/op:2"),
            "localhost:5000/op:2"
        );
        let mut inputs = GenerateInputs {
            manifests: vec![doc(deployment(&[
                ("kube-rbac-proxy", "gcr.io/proxy:v0.1"),
                ("manager", "controller:latest"),
            ]))],
            ..Default::default()
        };
        let edit = ImageEdit::parse("controller=quay.io/example/op:v0.0.2").unwrap();
        apply(&mut inputs, &[edit]).unwrap();
        assert_eq!(
            images(&inputs),
            ["gcr.io/proxy:v0.1", "quay.io/example/op:v0.0.2"]
        );
    }

    #[test]
    fn a_bare_image_sets_the_manager_and_a_stale_container_image() {
        let mut inputs = GenerateInputs {
            manifests: vec![doc(deployment(&[
                ("proxy", "gcr.io/proxy:v0.1"),
                ("manager", "quay.io/example/op:v0.0.1"),
            ]))],
            base_csv: Some(doc(json!({"kind": "ClusterServiceVersion",
                "metadata": {"annotations": {"containerImage": "quay.io/example/op:v0.0.1"}}}))),
            ..Default::default()
        };
        let notes = apply(
            &mut inputs,
            &[ImageEdit::parse("quay.io/example/op:v0.0.2").unwrap()],
        )
        .unwrap();
        assert_eq!(
            images(&inputs),
            ["gcr.io/proxy:v0.1", "quay.io/example/op:v0.0.2"]
        );
        assert_eq!(
            inputs.base_csv.unwrap().object["metadata"]["annotations"]["containerImage"],
            "quay.io/example/op:v0.0.2"
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(ImageEdit::parse("=x").is_err());
        assert!(ImageEdit::parse("Not An Image").is_err());
    }
}
