//! The objects `run bundle` creates, as JSON (pure): ConfigMaps with the catalog, the registry
//! pod, the CatalogSource, and the run-bundle labels on the OperatorGroup and Subscription.

use super::{
    CATALOG_FILE, CONFIGMAPS_ANNOTATION, CONFIGS_MOUNT, INDEX_IMAGE_ANNOTATION,
    INJECTED_BUNDLES_ANNOTATION, PACKAGE_ANNOTATION, REGISTRY_POD_ANNOTATION, REGISTRY_PORT,
    RUN_BUNDLE_LABEL, SERVING_ANNOTATION, label_value,
};
use crate::olm::MANAGED_BY_LABEL;
use serde_json::{Map, Value, json};
use std::fmt;

/// The catalog server the registry pod runs, chosen from the index image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistryServer {
    /// `opm serve` (operator-framework's opm image, operator-sdk's default index image).
    Opm,
    /// bundle-tool's `catalog-server` (the entrypoint of `bundle-tool image build catalog`
    /// images, at `/bin/catalog-server`).
    CatalogServer,
}

impl RegistryServer {
    /// The server an image runs: `opm` when the image's repository is named `opm`
    /// (`quay.io/operator-framework/opm:latest`), else bundle-tool's `catalog-server`.
    pub fn for_image(image: &str) -> RegistryServer {
        let repo = image.split('@').next().unwrap_or(image);
        let last = repo.rsplit('/').next().unwrap_or(repo);
        let name = last.split(':').next().unwrap_or(last);
        if name == "opm" {
            RegistryServer::Opm
        } else {
            RegistryServer::CatalogServer
        }
    }

    /// The container command serving [`CONFIGS_MOUNT`] on [`REGISTRY_PORT`].
    pub fn command(self) -> Vec<String> {
        let port = REGISTRY_PORT.to_string();
        match self {
            RegistryServer::Opm => vec![
                "opm".into(),
                "serve".into(),
                CONFIGS_MOUNT.into(),
                "--port".into(),
                port,
            ],
            RegistryServer::CatalogServer => vec![
                "/bin/catalog-server".into(),
                CONFIGS_MOUNT.into(),
                "--port".into(),
                port,
            ],
        }
    }
}

impl fmt::Display for RegistryServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegistryServer::Opm => "opm serve",
            RegistryServer::CatalogServer => "catalog-server",
        })
    }
}

/// The run-bundle labels.
pub fn labels(package: &str) -> Value {
    json!({
        MANAGED_BY_LABEL: "bundle-tool",
        RUN_BUNDLE_LABEL: label_value(package),
    })
}

/// Adds the run-bundle labels and package annotation to an object's metadata.
pub fn mark(obj: &mut Value, package: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels_entry = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let (Some(l), Value::Object(add)) = (labels_entry.as_object_mut(), labels(package)) {
        l.extend(add);
    }
    let ann = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(a) = ann.as_object_mut() {
        a.insert(PACKAGE_ANNOTATION.into(), json!(package));
    }
}

/// A ConfigMap holding one catalog file.
pub fn catalog_config_map(name: &str, namespace: &str, package: &str, catalog: &str) -> Value {
    let mut v = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace },
        "data": { CATALOG_FILE: catalog },
    });
    mark(&mut v, package);
    v
}

/// What the registry pod needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryPodParams {
    /// Pod name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Package (labels).
    pub package: String,
    /// The index image.
    pub image: String,
    /// Its catalog server.
    pub server: RegistryServer,
    /// The ConfigMaps with the catalog.
    pub config_maps: Vec<String>,
    /// `spec.serviceAccountName`.
    pub service_account: Option<String>,
    /// An image pull secret for the index image.
    pub pull_secret: Option<String>,
    /// `imagePullPolicy`.
    pub image_pull_policy: String,
    /// Pod security "restricted" settings.
    pub restricted: bool,
}

/// The registry pod: the index image's catalog server on [`REGISTRY_PORT`], serving the
/// catalog ConfigMaps mounted under [`CONFIGS_MOUNT`]. Each ConfigMap's file is mounted
/// through `subPath`, so the server sees plain files, not the `..data` links of a ConfigMap
/// volume (which `opm serve` would read twice). The image's own catalog, if any, is not served.
/// A gRPC readiness probe (the health service both servers implement) tells when it serves.
pub fn registry_pod(p: &RegistryPodParams) -> Value {
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    for (i, cm) in p.config_maps.iter().enumerate() {
        let part = format!("part-{i}");
        volumes.push(json!({
            "name": format!("catalog-{i}"),
            "configMap": { "name": cm, "items": [{ "key": CATALOG_FILE, "path": format!("{part}/{CATALOG_FILE}") }] },
        }));
        mounts.push(json!({
            "name": format!("catalog-{i}"),
            "mountPath": format!("{CONFIGS_MOUNT}/{part}"),
            "subPath": part,
        }));
    }
    let mut container = json!({
        "name": "registry-grpc",
        "image": p.image,
        "imagePullPolicy": p.image_pull_policy,
        "command": p.server.command(),
        "ports": [{ "name": "grpc", "containerPort": REGISTRY_PORT }],
        "readinessProbe": { "grpc": { "port": REGISTRY_PORT }, "periodSeconds": 2 },
        "volumeMounts": mounts,
    });
    let mut spec = json!({ "containers": [], "volumes": volumes });
    if p.restricted {
        container["securityContext"] = json!({
            "privileged": false,
            "readOnlyRootFilesystem": false,
            "allowPrivilegeEscalation": false,
            "capabilities": { "drop": ["ALL"] },
        });
        spec["securityContext"] = json!({ "seccompProfile": { "type": "RuntimeDefault" } });
    }
    spec["containers"] = json!([container]);
    if let Some(sa) = &p.service_account {
        spec["serviceAccountName"] = json!(sa);
    }
    if let Some(s) = &p.pull_secret {
        spec["imagePullSecrets"] = json!([{ "name": s }]);
    }
    let mut v = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": p.name, "namespace": p.namespace },
        "spec": spec,
    });
    mark(&mut v, &p.package);
    v
}

/// How the catalog is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServedBy {
    /// A registry pod running this image.
    RegistryPod {
        /// The pod.
        pod: String,
        /// Its image.
        image: String,
    },
    /// bundle-tool, outside the cluster.
    Local,
}

/// One bundle of the catalog, for the `injected-bundles` annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectedBundle {
    /// Where it came from (operator-sdk's `imageTag`).
    pub source: String,
    /// Its CSV.
    pub csv: String,
}

/// What the CatalogSource says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCatalogSourceParams {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Package.
    pub package: String,
    /// `host:port` OLM connects to.
    pub address: String,
    /// `spec.displayName`.
    pub display_name: String,
    /// `spec.grpcPodConfig.securityContextConfig`.
    pub security_context_config: Option<String>,
    /// `spec.secrets` (image pull secrets).
    pub secrets: Vec<String>,
    /// Who serves the catalog.
    pub served_by: ServedBy,
    /// The ConfigMaps holding the catalog.
    pub config_maps: Vec<String>,
    /// The bundles in the catalog, oldest first.
    pub bundles: Vec<InjectedBundle>,
}

/// The CatalogSource: `sourceType: grpc` with `spec.address`, as operator-sdk makes it.
pub fn catalog_source(p: &RunCatalogSourceParams) -> Value {
    let mut spec = Map::new();
    spec.insert("sourceType".into(), json!("grpc"));
    spec.insert("address".into(), json!(p.address));
    spec.insert("displayName".into(), json!(p.display_name));
    spec.insert("publisher".into(), json!("bundle-tool run bundle"));
    if let Some(sc) = &p.security_context_config {
        spec.insert(
            "grpcPodConfig".into(),
            json!({ "securityContextConfig": sc }),
        );
    }
    if !p.secrets.is_empty() {
        spec.insert("secrets".into(), json!(p.secrets));
    }
    let injected: Vec<Value> = p
        .bundles
        .iter()
        .map(|b| json!({ "imageTag": b.source, "mode": "replaces", "csv": b.csv }))
        .collect();
    let mut annotations = Map::new();
    annotations.insert(
        INJECTED_BUNDLES_ANNOTATION.into(),
        json!(Value::Array(injected).to_string()),
    );
    annotations.insert(CONFIGMAPS_ANNOTATION.into(), json!(p.config_maps.join(",")));
    match &p.served_by {
        ServedBy::RegistryPod { pod, image } => {
            annotations.insert(SERVING_ANNOTATION.into(), json!("registry-pod"));
            annotations.insert(INDEX_IMAGE_ANNOTATION.into(), json!(image));
            annotations.insert(REGISTRY_POD_ANNOTATION.into(), json!(pod));
        }
        ServedBy::Local => {
            annotations.insert(SERVING_ANNOTATION.into(), json!("local"));
        }
    }
    let mut v = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": { "name": p.name, "namespace": p.namespace, "annotations": annotations },
        "spec": spec,
    });
    mark(&mut v, &p.package);
    v
}

/// The bundles a CatalogSource's `injected-bundles` annotation lists.
pub fn injected_bundles(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Vec<InjectedBundle> {
    let Some(text) = annotations.get(INJECTED_BUNDLES_ANNOTATION) else {
        return Vec::new();
    };
    let items: Vec<Value> = serde_json::from_str(text).unwrap_or_default();
    items
        .iter()
        .map(|i| InjectedBundle {
            source: i["imageTag"].as_str().unwrap_or("").to_string(),
            csv: i["csv"].as_str().unwrap_or("").to_string(),
        })
        .collect()
}

/// An owner reference to the CatalogSource (so that deleting it by hand removes its pod and
/// ConfigMaps too).
pub fn owned_by_catalog_source(obj: &mut Value, name: &str, uid: &str) {
    obj["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "name": name,
        "uid": uid,
    }]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_follows_the_image() {
        assert_eq!(
            RegistryServer::for_image("quay.io/operator-framework/opm:latest"),
            RegistryServer::Opm
        );
        assert_eq!(
            RegistryServer::for_image("registry.example.com:5000/tools/opm@sha256:abc"),
            RegistryServer::Opm
        );
        assert_eq!(
            RegistryServer::for_image("quay.io/example/memcached-operator-catalog:v0.4.0"),
            RegistryServer::CatalogServer
        );
        assert_eq!(
            RegistryServer::Opm.command(),
            vec!["opm", "serve", "/run-bundle/configs", "--port", "50051"]
        );
    }

    #[test]
    fn the_registry_pod_mounts_each_config_map_through_sub_path() {
        let pod = registry_pod(&RegistryPodParams {
            name: "memcached-operator-catalog-1".into(),
            namespace: "ops".into(),
            package: "memcached-operator".into(),
            image: "quay.io/operator-framework/opm:latest".into(),
            server: RegistryServer::Opm,
            config_maps: vec!["cm-a".into(), "cm-b".into()],
            service_account: Some("sa".into()),
            pull_secret: Some("pull".into()),
            image_pull_policy: "Always".into(),
            restricted: true,
        });
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["volumeMounts"][1]["subPath"], "part-1");
        assert_eq!(
            c["volumeMounts"][1]["mountPath"],
            "/run-bundle/configs/part-1"
        );
        assert_eq!(
            pod["spec"]["volumes"][1]["configMap"]["items"][0]["path"],
            "part-1/catalog.json"
        );
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
        assert_eq!(pod["spec"]["serviceAccountName"], "sa");
        assert_eq!(pod["spec"]["imagePullSecrets"][0]["name"], "pull");
        assert_eq!(
            pod["metadata"]["labels"][RUN_BUNDLE_LABEL],
            "memcached-operator"
        );
        assert_eq!(
            pod["metadata"]["annotations"][PACKAGE_ANNOTATION],
            "memcached-operator"
        );
    }

    #[test]
    fn the_catalog_source_records_what_it_serves() {
        let cs = catalog_source(&RunCatalogSourceParams {
            name: "memcached-operator-catalog".into(),
            namespace: "ops".into(),
            package: "memcached-operator".into(),
            address: "10.0.0.7:50051".into(),
            display_name: "memcached-operator".into(),
            security_context_config: Some("legacy".into()),
            secrets: vec![],
            served_by: ServedBy::RegistryPod {
                pod: "memcached-operator-catalog-1".into(),
                image: "quay.io/operator-framework/opm:latest".into(),
            },
            config_maps: vec!["a".into(), "b".into()],
            bundles: vec![InjectedBundle {
                source: "bundle/memcached-operator/0.3.0".into(),
                csv: "memcached-operator.v0.3.0".into(),
            }],
        });
        assert_eq!(cs["spec"]["address"], "10.0.0.7:50051");
        assert!(cs["spec"].get("image").is_none());
        let ann: std::collections::BTreeMap<String, String> =
            serde_json::from_value(cs["metadata"]["annotations"].clone()).unwrap();
        assert_eq!(ann[CONFIGMAPS_ANNOTATION], "a,b");
        assert_eq!(ann[REGISTRY_POD_ANNOTATION], "memcached-operator-catalog-1");
        assert_eq!(injected_bundles(&ann)[0].csv, "memcached-operator.v0.3.0");
    }
}
