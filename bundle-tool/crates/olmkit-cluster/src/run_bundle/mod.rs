//! `run bundle`, `run bundle-upgrade` and `cleanup`: try a bundle on a cluster before publishing
//! it, as operator-sdk's commands of the same names do.
//!
//! What `run bundle` creates, in order (all labelled [`RUN_BUNDLE_LABEL`] and annotated
//! [`PACKAGE_ANNOTATION`], so that `cleanup` finds exactly these and nothing of the user's):
//! 1. the catalog as File-Based Catalog JSON in ConfigMaps ([`catalog`]): the package, one
//!    channel ([`CHANNEL`]) and the bundle, rendered as `opm render` does (every manifest an
//!    `olm.bundle.object`, so OLM installs from the catalog and pulls no bundle image);
//! 2. what serves it to OLM, which only connects to catalogs from inside the cluster: either a
//!    registry pod running the index image's catalog server on those ConfigMaps
//!    ([`manifests::registry_pod`], like operator-sdk's), or nothing in the cluster when the
//!    caller serves the catalog itself at an address OLM can reach (a kind cluster reaching the
//!    host);
//! 3. a CatalogSource `<package>-catalog` of `sourceType: grpc` with `spec.address` pointing at
//!    the pod (or the caller's address), annotated like operator-sdk's
//!    (`operators.operatorframework.io/index-image`, `injected-bundles`, `registry-pod-name`)
//!    plus the ConfigMaps that hold the current catalog ([`CONFIGMAPS_ANNOTATION`]);
//! 4. an OperatorGroup, only when the namespace has none (an existing one that fits is used);
//! 5. a Subscription with Manual approval starting at the bundle's CSV; `run bundle` approves
//!    the InstallPlan for that CSV and waits like `install` ([`crate::wait`]).
//!
//! `run bundle-upgrade` reads the catalog back from the ConfigMaps the CatalogSource names,
//! adds the new bundle to the channel (its CSV's `replaces`/`skips`/`olm.skipRange`, see
//! [`catalog::add_upgrade`]), serves the new catalog (a new registry pod, then the CatalogSource
//! moves to it and the old pod and ConfigMaps go), approves the InstallPlan OLM makes for the
//! new CSV and waits for the Subscription to reach it. [`crate::cleanup`] removes it all.

pub mod bundle;
pub mod catalog;
pub mod live;
pub mod manifests;

use kube::core::ApiResource;

/// Label on every object `run bundle` creates; its value is the package (cut to 63 characters).
pub const RUN_BUNDLE_LABEL: &str = "bundle-tool.olmkit.io/run-bundle";
/// Annotation with the whole package name on every object `run bundle` creates.
pub const PACKAGE_ANNOTATION: &str = "bundle-tool.olmkit.io/package";
/// CatalogSource annotation: the ConfigMaps holding the catalog it serves, comma-separated.
pub const CONFIGMAPS_ANNOTATION: &str = "bundle-tool.olmkit.io/catalog-configmaps";
/// CatalogSource annotation: `registry-pod` or `local` (served by bundle-tool itself).
pub const SERVING_ANNOTATION: &str = "bundle-tool.olmkit.io/catalog-serving";
/// CatalogSource annotation (operator-sdk's): the image of the registry pod.
pub const INDEX_IMAGE_ANNOTATION: &str = "operators.operatorframework.io/index-image";
/// CatalogSource annotation (operator-sdk's): the bundles in the catalog, as JSON
/// `[{"imageTag": SOURCE, "mode": "replaces", "csv": NAME}]`.
pub const INJECTED_BUNDLES_ANNOTATION: &str = "operators.operatorframework.io/injected-bundles";
/// CatalogSource annotation (operator-sdk's): the registry pod serving the catalog.
pub const REGISTRY_POD_ANNOTATION: &str = "operators.operatorframework.io/registry-pod-name";
/// The one channel of a run-bundle catalog (operator-sdk uses `operator-sdk-run-bundle`).
pub const CHANNEL: &str = "run-bundle";
/// operator-sdk's default index image: opm, with no catalog of its own.
pub const DEFAULT_INDEX_IMAGE: &str = "quay.io/operator-framework/opm:latest";
/// Where the registry pod mounts the catalog.
pub const CONFIGS_MOUNT: &str = "/run-bundle/configs";
/// The catalog file in each ConfigMap.
pub const CATALOG_FILE: &str = "catalog.json";
/// The port the registry pod serves on (OLM's and operator-sdk's).
pub const REGISTRY_PORT: u16 = 50051;

/// The value of [`RUN_BUNDLE_LABEL`] for a package: label values are at most 63 characters
/// and end with an alphanumeric character.
pub fn label_value(package: &str) -> String {
    let mut v: String = package.chars().take(63).collect();
    while v.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        v.pop();
    }
    v
}

/// The label selector of a package's run-bundle objects.
pub fn selector(package: &str) -> String {
    format!("{RUN_BUNDLE_LABEL}={}", label_value(package))
}

/// True when an object's metadata says `run bundle` created it for `package`.
pub fn created_for(meta: &crate::olm::Meta, package: &str) -> bool {
    meta.labels.contains_key(RUN_BUNDLE_LABEL)
        && meta.annotations.get(PACKAGE_ANNOTATION).map(String::as_str) == Some(package)
}

/// The name of the CatalogSource of a package (operator-sdk's `<package>-catalog`).
pub fn catalog_source_name(package: &str) -> String {
    format!("{package}-catalog")
}

fn core(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// `v1` ConfigMap.
pub fn config_map_resource() -> ApiResource {
    core("ConfigMap", "configmaps")
}

/// `v1` Pod.
pub fn pod_resource() -> ApiResource {
    core("Pod", "pods")
}

/// `apiextensions.k8s.io/v1` CustomResourceDefinition (cluster-scoped).
pub fn crd_resource() -> ApiResource {
    ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_fit() {
        assert_eq!(label_value("memcached-operator"), "memcached-operator");
        let long = format!("{}-x", "a".repeat(62));
        assert_eq!(label_value(&long), "a".repeat(62));
        assert!(label_value(&"b".repeat(100)).len() <= 63);
        assert_eq!(
            selector("memcached-operator"),
            "bundle-tool.olmkit.io/run-bundle=memcached-operator"
        );
    }
}
