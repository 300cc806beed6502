//! Pinning a bundle's images by digest (`--use-image-digests`).
//!
//! A tag can move; a digest cannot. Given the digests of the images a release just built
//! (name → digest), [`pin_csv_images`] rewrites every reference to those images in a
//! ClusterServiceVersion to `name@sha256:...`: `spec.relatedImages[].image`, the
//! `containerImage` annotation, the install strategy's Deployment containers and init
//! containers, and their `RELATED_IMAGE_*` environment variables (the operator-sdk convention
//! for images an operator deploys). References are matched after normalization (so `foo:1` and
//! `docker.io/library/foo:1` are the same image); the written form keeps the original spelling
//! of the repository and drops the tag, as `operator-sdk --use-image-digests` does. References
//! not in the map are reported, not touched.

use crate::digest::Digest;
use oci_client::Reference;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use thiserror::Error;

/// Images could not be pinned.
#[derive(Debug, Error)]
pub enum PinImagesError {
    /// A key of the digest map is not an image reference.
    #[error("invalid image reference {name:?} in the digest map: {message}")]
    InvalidName {
        /// The key.
        name: String,
        /// Why.
        message: String,
    },
    /// The document is not a ClusterServiceVersion.
    #[error("not a ClusterServiceVersion: {0}")]
    NotACsv(String),
}

/// One rewritten reference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PinnedRef {
    /// Where in the CSV (`spec.relatedImages[0].image`).
    pub path: String,
    /// The reference before.
    pub from: String,
    /// The reference after.
    pub to: String,
}

/// What [`pin_csv_images`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PinReport {
    /// References rewritten.
    pub pinned: Vec<PinnedRef>,
    /// References left as they are (not in the map, and not already pinned): `(path, image)`.
    pub unpinned: Vec<(String, String)>,
}

fn normalized(r: &Reference) -> String {
    format!(
        "{}/{}:{}",
        r.resolve_registry(),
        r.repository(),
        r.tag().unwrap_or("latest")
    )
}

/// `reference` without its tag (and digest), in the spelling it was written.
fn strip_tag(reference: &str) -> &str {
    olmkit_core::image_ref::repository_as_written(reference)
}

struct Pinner<'a> {
    map: &'a BTreeMap<String, Digest>,
    report: PinReport,
}

impl Pinner<'_> {
    fn visit(&mut self, path: String, slot: &mut Value) {
        let Some(image) = slot.as_str() else { return };
        let Ok(r) = image.parse::<Reference>() else {
            self.report.unpinned.push((path, image.to_string()));
            return;
        };
        if r.digest().is_some() {
            return; // already immutable
        }
        match self.map.get(&normalized(&r)) {
            Some(d) => {
                let to = format!("{}@{d}", strip_tag(image));
                self.report.pinned.push(PinnedRef {
                    path,
                    from: image.to_string(),
                    to: to.clone(),
                });
                *slot = Value::String(to);
            }
            None => self.report.unpinned.push((path, image.to_string())),
        }
    }

    fn containers(&mut self, base: &str, list: Option<&mut Value>) {
        let Some(list) = list.and_then(Value::as_array_mut) else {
            return;
        };
        for (j, c) in list.iter_mut().enumerate() {
            if let Some(img) = c.get_mut("image") {
                self.visit(format!("{base}[{j}].image"), img);
            }
            let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) else {
                continue;
            };
            for (k, e) in env.iter_mut().enumerate() {
                let related = e
                    .get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.starts_with("RELATED_IMAGE_"));
                if related && let Some(v) = e.get_mut("value") {
                    self.visit(format!("{base}[{j}].env[{k}].value"), v);
                }
            }
        }
    }
}

/// Rewrites the references of `csv` found in `digests` (image name → digest) to digests.
pub fn pin_csv_images(
    csv: &mut Value,
    digests: &BTreeMap<String, Digest>,
) -> Result<PinReport, PinImagesError> {
    if csv.get("kind").and_then(Value::as_str) != Some("ClusterServiceVersion") {
        return Err(PinImagesError::NotACsv(
            "field kind: expected ClusterServiceVersion".into(),
        ));
    }
    let mut map = BTreeMap::new();
    for (name, d) in digests {
        let r = name
            .parse::<Reference>()
            .map_err(|e| PinImagesError::InvalidName {
                name: name.clone(),
                message: e.to_string(),
            })?;
        map.insert(normalized(&r), d.clone());
    }
    let mut p = Pinner {
        map: &map,
        report: PinReport::default(),
    };
    if let Some(slot) = csv.pointer_mut("/metadata/annotations/containerImage") {
        p.visit("metadata.annotations.containerImage".into(), slot);
    }
    if let Some(list) = csv
        .pointer_mut("/spec/relatedImages")
        .and_then(Value::as_array_mut)
    {
        for (i, entry) in list.iter_mut().enumerate() {
            if let Some(slot) = entry.get_mut("image") {
                p.visit(format!("spec.relatedImages[{i}].image"), slot);
            }
        }
    }
    if let Some(deps) = csv
        .pointer_mut("/spec/install/spec/deployments")
        .and_then(Value::as_array_mut)
    {
        for (i, d) in deps.iter_mut().enumerate() {
            let Some(pod) = d.pointer_mut("/spec/template/spec") else {
                continue;
            };
            let base = format!("spec.install.spec.deployments[{i}].spec.template.spec");
            p.containers(&format!("{base}.containers"), pod.get_mut("containers"));
            p.containers(
                &format!("{base}.initContainers"),
                pod.get_mut("initContainers"),
            );
        }
    }
    Ok(p.report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn d(c: char) -> Digest {
        format!("sha256:{}", c.to_string().repeat(64))
            .parse()
            .unwrap()
    }

    fn csv(images: &[&str]) -> Value {
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "op.v1.0.0", "annotations": {"containerImage": images[0]}},
            "spec": {
                "relatedImages": images.iter().enumerate().map(|(i, im)| json!({"name": format!("img{i}"), "image": im})).collect::<Vec<_>>(),
                "install": {"strategy": "deployment", "spec": {"deployments": [{
                    "name": "op",
                    "spec": {"template": {"spec": {
                        "initContainers": [{"name": "init", "image": images[images.len() - 1]}],
                        "containers": [{"name": "manager", "image": images[0], "env": [
                            {"name": "RELATED_IMAGE_MEMCACHED", "value": images[images.len() - 1]},
                            {"name": "OTHER", "value": images[images.len() - 1]}
                        ]}]
                    }}}
                }]}}
            }
        })
    }

    #[test]
    fn pins_every_place_and_reports_the_rest() {
        let mut c = csv(&[
            "quay.io/example/op:v1.0.0",
            "memcached:1.6",
            "ghcr.io/x/y@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        ]);
        let map = BTreeMap::from([
            ("quay.io/example/op:v1.0.0".to_string(), d('a')),
            ("docker.io/library/memcached:1.6".to_string(), d('b')),
        ]);
        let r = pin_csv_images(&mut c, &map).unwrap();
        let op = format!("quay.io/example/op@{}", d('a'));
        assert_eq!(c["metadata"]["annotations"]["containerImage"], op);
        assert_eq!(
            c["spec"]["relatedImages"][1]["image"],
            format!("memcached@{}", d('b'))
        );
        let pod = &c["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"];
        assert_eq!(pod["containers"][0]["image"], op);
        // The init container and RELATED_IMAGE_ use the last image, already pinned.
        assert!(
            pod["initContainers"][0]["image"]
                .as_str()
                .unwrap()
                .starts_with("ghcr.io/x/y@")
        );
        assert_eq!(
            pod["containers"][0]["env"][1]["value"],
            c["spec"]["relatedImages"][2]["image"]
        );
        assert_eq!(r.pinned.len(), 4);
        assert!(r.unpinned.is_empty(), "{:?}", r.unpinned);

        let mut other = csv(&["quay.io/example/op:v2", "x:1"]);
        let r = pin_csv_images(&mut other, &map).unwrap();
        assert!(r.pinned.is_empty());
        assert_eq!(r.unpinned.len(), 6);
        assert!(pin_csv_images(&mut json!({"kind": "Deployment"}), &map).is_err());
        let bad = BTreeMap::from([("UPPER/Case".to_string(), d('a'))]);
        assert!(pin_csv_images(&mut csv(&["a:1"]), &bad).is_err());
    }

    #[test]
    fn strip_tag_keeps_registry_ports() {
        assert_eq!(strip_tag("localhost:5000/a/b:v1"), "localhost:5000/a/b");
        assert_eq!(strip_tag("localhost:5000/a/b"), "localhost:5000/a/b");
        assert_eq!(strip_tag("b:v1"), "b");
    }

    fn image_name() -> impl Strategy<Value = String> {
        (
            prop::sample::select(vec![
                "",
                "quay.io/",
                "localhost:5000/",
                "docker.io/library/",
            ]),
            "[a-z][a-z0-9]{0,6}(/[a-z][a-z0-9]{0,4})?",
            prop::option::of("[a-z0-9][a-z0-9.-]{0,6}"),
        )
            .prop_map(|(reg, repo, tag)| match tag {
                Some(t) => format!("{reg}{repo}:{t}"),
                None => format!("{reg}{repo}"),
            })
    }

    proptest! {
        #[test]
        fn pinning_is_complete_idempotent_and_local(
            images in prop::collection::vec(image_name(), 1..5),
            chosen in prop::collection::vec(any::<bool>(), 5),
        ) {
            let refs: Vec<&str> = images.iter().map(String::as_str).collect();
            let original = csv(&refs);
            let map: BTreeMap<String, Digest> = images
                .iter()
                .zip(chosen.iter())
                .filter(|(_, c)| **c)
                .map(|(i, _)| (i.clone(), Digest::of(i.as_bytes())))
                .collect();
            let mut once = original.clone();
            let r1 = pin_csv_images(&mut once, &map).unwrap();
            // Every mapped image is pinned to its digest, everything else is untouched.
            for p in &r1.pinned {
                let digest = p.to.split('@').nth(1).unwrap();
                prop_assert!(map.values().any(|d| d.to_string() == digest));
                prop_assert!(p.to.parse::<Reference>().is_ok(), "{}", p.to);
            }
            for (_, img) in &r1.unpinned {
                let normalized_in_map = img
                    .parse::<Reference>()
                    .map(|r| map.keys().any(|k| k.parse::<Reference>().map(|kr| normalized(&kr) == normalized(&r)).unwrap_or(false)))
                    .unwrap_or(false);
                prop_assert!(!normalized_in_map, "{img} was in the map but not pinned");
            }
            let mut twice = once.clone();
            let r2 = pin_csv_images(&mut twice, &map).unwrap();
            prop_assert_eq!(&twice, &once);
            prop_assert!(r2.pinned.is_empty());
            // Only image fields changed: names, env names and the rest are identical.
            prop_assert_eq!(&once["metadata"]["name"], &original["metadata"]["name"]);
            prop_assert_eq!(
                once["spec"]["relatedImages"].as_array().unwrap().len(),
                original["spec"]["relatedImages"].as_array().unwrap().len()
            );
            let pod = "/spec/install/spec/deployments/0/spec/template/spec/containers/0/env/1/value";
            prop_assert_eq!(once.pointer(pod), original.pointer(pod));
        }
    }
}
