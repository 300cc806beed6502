//! A lenient, borrowed, typed view of a ClusterServiceVersion (operator-framework/api
//! `pkg/operators/v1alpha1/clusterserviceversion_types.go`), and of the Deployment pieces it
//! embeds.
//!
//! The raw `serde_json::Value` stays the source of truth: bundles are written back and
//! rendered as they were read (fields this tool does not know included), so the CSV is never
//! round-tripped through structs. [`Csv`] only names the fields: every accessor reads the raw
//! value in place and is lenient, as a validator needs to be on a broken CSV: a missing field or
//! one of the wrong type reads as absent (`None`) or empty, never as a panic or an error. Which
//! of those a caller reports is the validators' business, not the view's.
//!
//! Lists yield every element, wrong-typed ones included (their fields read as absent), each with
//! its index, so that findings can name the element's path (`spec.install.spec.deployments[2]`)
//! exactly as upstream does.
//!
//! The Deployment views ([`DeploymentSpec`], [`PodSpec`], [`Container`]) work as well on an
//! `apps/v1` Deployment object's `spec` as on a CSV deployment's, and [`manager_container`] is
//! the one rule for "the operator's container" on either.

use serde_json::{Map, Value};

/// The string at JSON `pointer` of `value`, or `None` when missing or not a string.
pub fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The `kind` of a CSV.
pub const KIND: &str = "ClusterServiceVersion";
/// The CSV annotation holding example custom resources (a JSON array, as text).
pub const ALM_EXAMPLES: &str = "alm-examples";
/// The CSV annotation holding the range of versions this one replaces.
pub const SKIP_RANGE: &str = "olm.skipRange";
/// The pod-template annotation kubectl (and kubebuilder's scaffold) uses to name a pod's main
/// container.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

static NULL: Value = Value::Null;

/// The array at `pointer` of `value`, or an empty slice when missing or not an array.
fn list_at<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The string-only elements of the array at `pointer`.
fn strs_at<'a>(value: &'a Value, pointer: &str) -> impl Iterator<Item = &'a str> + use<'a> {
    list_at(value, pointer).iter().filter_map(Value::as_str)
}

/// Defines a view of one element of a CSV list: its index in the list and the raw element.
macro_rules! element {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name<'a> {
            /// Index of the element in its list.
            pub index: usize,
            /// The raw element (any JSON type).
            pub raw: &'a Value,
        }

        impl<'a> $name<'a> {
            /// Every element of `list` (none when it is not an array), for a list held apart
            /// from its CSV (one being built, say).
            pub fn list(list: &'a Value) -> impl Iterator<Item = Self> + use<'a> {
                let items = list.as_array().map(Vec::as_slice).unwrap_or(&[]);
                elements(items, |index, raw| Self { index, raw })
            }
            /// The string field `key` of the element.
            fn str(&self, key: &str) -> Option<&'a str> {
                self.raw.get(key).and_then(Value::as_str)
            }
        }
    };
}

/// Every element of `list`, as the view `make` builds from its index and value.
fn elements<'a, T>(
    list: &'a [Value],
    make: fn(usize, &'a Value) -> T,
) -> impl Iterator<Item = T> + use<'a, T> {
    list.iter().enumerate().map(move |(i, v)| make(i, v))
}

/// A borrowed view of a ClusterServiceVersion object.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Csv<'a> {
    raw: &'a Value,
}

impl<'a> Csv<'a> {
    /// Views `raw` as a CSV (whatever it holds: every accessor is lenient).
    pub fn new(raw: &'a Value) -> Self {
        Self { raw }
    }
    /// The raw object.
    pub fn raw(&self) -> &'a Value {
        self.raw
    }
    /// The string at `pointer` of the CSV.
    fn str(&self, pointer: &str) -> Option<&'a str> {
        str_at(self.raw, pointer)
    }
    /// The field `key` of `metadata`, any type.
    pub fn metadata_field(&self, key: &str) -> Option<&'a Value> {
        self.raw.get("metadata")?.get(key)
    }
    /// The field `key` of `spec`, any type.
    pub fn spec_field(&self, key: &str) -> Option<&'a Value> {
        self.raw.get("spec")?.get(key)
    }

    // --- metadata ------------------------------------------------------------------------------

    /// `metadata.name`.
    pub fn name(&self) -> Option<&'a str> {
        self.str("/metadata/name")
    }
    /// `metadata.namespace`.
    pub fn namespace(&self) -> Option<&'a str> {
        self.str("/metadata/namespace")
    }
    /// `metadata.annotations`, when it is a mapping (values of any type).
    pub fn annotations(&self) -> Option<&'a Map<String, Value>> {
        self.raw.pointer("/metadata/annotations")?.as_object()
    }
    /// The annotation `key`, when it is a string.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.annotations()?.get(key)?.as_str()
    }
    /// `metadata.labels`, when it is a mapping (values of any type).
    pub fn labels(&self) -> Option<&'a Map<String, Value>> {
        self.raw.pointer("/metadata/labels")?.as_object()
    }
    /// The `olm.skipRange` annotation.
    pub fn skip_range(&self) -> Option<&'a str> {
        self.annotation(SKIP_RANGE)
    }
    /// The `alm-examples` annotation (JSON text, not parsed).
    pub fn alm_examples(&self) -> Option<&'a str> {
        self.annotation(ALM_EXAMPLES)
    }

    // --- spec scalars --------------------------------------------------------------------------

    /// `spec.version`.
    pub fn version(&self) -> Option<&'a str> {
        self.str("/spec/version")
    }
    /// `spec.replaces`.
    pub fn replaces(&self) -> Option<&'a str> {
        self.str("/spec/replaces")
    }
    /// `spec.skips`, string entries only.
    pub fn skips(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        strs_at(self.raw, "/spec/skips")
    }
    /// `spec.minKubeVersion`.
    pub fn min_kube_version(&self) -> Option<&'a str> {
        self.str("/spec/minKubeVersion")
    }
    /// `spec.displayName`.
    pub fn display_name(&self) -> Option<&'a str> {
        self.str("/spec/displayName")
    }
    /// `spec.release` (newer CSVs: a build of one version, shown by `kubectl get csv`).
    pub fn release(&self) -> Option<&'a str> {
        self.str("/spec/release")
    }
    /// `spec.provider.name`.
    pub fn provider_name(&self) -> Option<&'a str> {
        self.str("/spec/provider/name")
    }
    /// `spec.maintainers` (raw `{name, email}` entries), empty when missing or not a list.
    pub fn maintainers(&self) -> &'a [Value] {
        list_at(self.raw, "/spec/maintainers")
    }
    /// `spec.links` (raw `{name, url}` entries), empty when missing or not a list.
    pub fn links(&self) -> &'a [Value] {
        list_at(self.raw, "/spec/links")
    }
    /// `spec.icon` (raw `{base64data, mediatype}` entries); `None` when missing or not a list
    /// (OperatorHub's check tells "not specified" from "empty").
    pub fn icons(&self) -> Option<&'a [Value]> {
        self.raw
            .pointer("/spec/icon")?
            .as_array()
            .map(Vec::as_slice)
    }
    /// `spec.description`.
    pub fn description(&self) -> Option<&'a str> {
        self.str("/spec/description")
    }
    /// `spec.install.strategy` (`deployment` is the only one OLM knows).
    pub fn install_strategy(&self) -> Option<&'a str> {
        self.str("/spec/install/strategy")
    }
    /// `spec.install.spec`, any type.
    pub fn install_spec(&self) -> Option<&'a Value> {
        self.raw.pointer("/spec/install/spec")
    }

    // --- spec lists ----------------------------------------------------------------------------

    /// `spec.install.spec.deployments`.
    pub fn deployments(&self) -> impl Iterator<Item = CsvDeployment<'a>> + use<'a> {
        elements(
            list_at(self.raw, "/spec/install/spec/deployments"),
            |index, raw| CsvDeployment { index, raw },
        )
    }
    /// `spec.install.spec.permissions` (namespaced).
    pub fn permissions(&self) -> impl Iterator<Item = Permission<'a>> + use<'a> {
        elements(
            list_at(self.raw, "/spec/install/spec/permissions"),
            |index, raw| Permission { index, raw },
        )
    }
    /// `spec.install.spec.clusterPermissions`.
    pub fn cluster_permissions(&self) -> impl Iterator<Item = Permission<'a>> + use<'a> {
        elements(
            list_at(self.raw, "/spec/install/spec/clusterPermissions"),
            |index, raw| Permission { index, raw },
        )
    }
    /// `spec.customresourcedefinitions.owned`.
    pub fn owned_crds(&self) -> impl Iterator<Item = CrdDescription<'a>> + use<'a> {
        elements(
            list_at(self.raw, "/spec/customresourcedefinitions/owned"),
            |index, raw| CrdDescription { index, raw },
        )
    }
    /// `spec.customresourcedefinitions.required`.
    pub fn required_crds(&self) -> impl Iterator<Item = CrdDescription<'a>> + use<'a> {
        elements(
            list_at(self.raw, "/spec/customresourcedefinitions/required"),
            |index, raw| CrdDescription { index, raw },
        )
    }
    /// `spec.apiservicedefinitions.owned`.
    pub fn owned_api_services(&self) -> impl Iterator<Item = ApiServiceDescription<'a>> + use<'a> {
        elements(
            list_at(self.raw, "/spec/apiservicedefinitions/owned"),
            |index, raw| ApiServiceDescription { index, raw },
        )
    }
    /// `spec.apiservicedefinitions.required`.
    pub fn required_api_services(
        &self,
    ) -> impl Iterator<Item = ApiServiceDescription<'a>> + use<'a> {
        elements(
            list_at(self.raw, "/spec/apiservicedefinitions/required"),
            |index, raw| ApiServiceDescription { index, raw },
        )
    }
    /// `spec.webhookdefinitions`.
    pub fn webhook_definitions(&self) -> impl Iterator<Item = WebhookDefinition<'a>> + use<'a> {
        elements(
            list_at(self.raw, "/spec/webhookdefinitions"),
            |index, raw| WebhookDefinition { index, raw },
        )
    }
    /// `spec.installModes`.
    pub fn install_modes(&self) -> impl Iterator<Item = InstallMode<'a>> + use<'a> {
        elements(list_at(self.raw, "/spec/installModes"), |index, raw| {
            InstallMode { index, raw }
        })
    }
    /// `spec.relatedImages`.
    pub fn related_images(&self) -> impl Iterator<Item = RelatedImage<'a>> + use<'a> {
        elements(list_at(self.raw, "/spec/relatedImages"), |index, raw| {
            RelatedImage { index, raw }
        })
    }
    /// Whether `spec.installModes` has `mode` with `supported: true`.
    pub fn supports_install_mode(&self, mode: &str) -> bool {
        self.install_modes()
            .any(|m| m.mode_type() == Some(mode) && m.supported() == Some(true))
    }

    /// The operator's manager container among the install deployments ([`manager_container`]).
    pub fn manager_container(&self) -> Option<ManagerContainer<'a>> {
        manager_container(self.deployments().map(|d| d.raw))
    }
}

element!(
    /// One of `spec.install.spec.deployments` (`StrategyDeploymentSpec`).
    CsvDeployment
);

impl<'a> CsvDeployment<'a> {
    /// `name`.
    pub fn name(&self) -> Option<&'a str> {
        self.str("name")
    }
    /// `spec`: the Deployment's spec.
    pub fn spec(&self) -> DeploymentSpec<'a> {
        DeploymentSpec::new(self.raw.get("spec").unwrap_or(&NULL))
    }
    /// `label`, when it is a mapping.
    pub fn label(&self) -> Option<&'a Map<String, Value>> {
        self.raw.get("label")?.as_object()
    }
}

element!(
    /// One of `spec.install.spec.permissions` or `.clusterPermissions`
    /// (`StrategyDeploymentPermissions`).
    Permission
);

impl<'a> Permission<'a> {
    /// `serviceAccountName`.
    pub fn service_account_name(&self) -> Option<&'a str> {
        self.str("serviceAccountName")
    }
    /// `rules` (RBAC PolicyRules, raw), empty when missing or not a list.
    pub fn rules(&self) -> &'a [Value] {
        list_at(self.raw, "/rules")
    }
}

element!(
    /// One of `spec.customresourcedefinitions.owned` or `.required` (`CRDDescription`).
    CrdDescription
);

impl<'a> CrdDescription<'a> {
    /// `name` (`<plural>.<group>`).
    pub fn name(&self) -> Option<&'a str> {
        self.str("name")
    }
    /// `version`.
    pub fn version(&self) -> Option<&'a str> {
        self.str("version")
    }
    /// `kind`.
    pub fn kind(&self) -> Option<&'a str> {
        self.str("kind")
    }
    /// `displayName`.
    pub fn display_name(&self) -> Option<&'a str> {
        self.str("displayName")
    }
    /// `description`.
    pub fn description(&self) -> Option<&'a str> {
        self.str("description")
    }
}

element!(
    /// One of `spec.apiservicedefinitions.owned` or `.required` (`APIServiceDescription`).
    ApiServiceDescription
);

impl<'a> ApiServiceDescription<'a> {
    /// `name`.
    pub fn name(&self) -> Option<&'a str> {
        self.str("name")
    }
    /// `group`.
    pub fn group(&self) -> Option<&'a str> {
        self.str("group")
    }
    /// `version`.
    pub fn version(&self) -> Option<&'a str> {
        self.str("version")
    }
    /// `kind`.
    pub fn kind(&self) -> Option<&'a str> {
        self.str("kind")
    }
    /// `deploymentName`.
    pub fn deployment_name(&self) -> Option<&'a str> {
        self.str("deploymentName")
    }
}

element!(
    /// One of `spec.webhookdefinitions` (`WebhookDescription`).
    WebhookDefinition
);

impl<'a> WebhookDefinition<'a> {
    /// `type`: `ValidatingAdmissionWebhook`, `MutatingAdmissionWebhook` or `ConversionWebhook`.
    pub fn webhook_type(&self) -> Option<&'a str> {
        self.str("type")
    }
    /// `generateName`.
    pub fn generate_name(&self) -> Option<&'a str> {
        self.str("generateName")
    }
    /// `deploymentName`.
    pub fn deployment_name(&self) -> Option<&'a str> {
        self.str("deploymentName")
    }
    /// `webhookPath`.
    pub fn webhook_path(&self) -> Option<&'a str> {
        self.str("webhookPath")
    }
    /// `containerPort`, when it is an integer.
    pub fn container_port(&self) -> Option<i64> {
        self.raw.get("containerPort")?.as_i64()
    }
    /// `conversionCRDs`, string entries only.
    pub fn conversion_crds(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        strs_at(self.raw, "/conversionCRDs")
    }
    /// `admissionReviewVersions`, string entries only.
    pub fn admission_review_versions(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        strs_at(self.raw, "/admissionReviewVersions")
    }
    /// `rules` (admissionregistration RuleWithOperations, raw).
    pub fn rules(&self) -> &'a [Value] {
        list_at(self.raw, "/rules")
    }
}

element!(
    /// One of `spec.installModes` (`InstallMode`).
    InstallMode
);

impl<'a> InstallMode<'a> {
    /// `type`: `OwnNamespace`, `SingleNamespace`, `MultiNamespace` or `AllNamespaces`.
    pub fn mode_type(&self) -> Option<&'a str> {
        self.str("type")
    }
    /// `supported`, when it is a boolean.
    pub fn supported(&self) -> Option<bool> {
        self.raw.get("supported")?.as_bool()
    }
}

element!(
    /// One of `spec.relatedImages` (`RelatedImage`).
    RelatedImage
);

impl<'a> RelatedImage<'a> {
    /// `name`.
    pub fn name(&self) -> Option<&'a str> {
        self.str("name")
    }
    /// `image`.
    pub fn image(&self) -> Option<&'a str> {
        self.str("image")
    }
}

// --- Deployment pieces ---------------------------------------------------------------------------

/// A view of an `apps/v1` DeploymentSpec: a CSV deployment's `spec`, or a Deployment object's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeploymentSpec<'a> {
    /// The raw spec (any JSON type).
    pub raw: &'a Value,
}

impl<'a> DeploymentSpec<'a> {
    /// Views `raw` as a DeploymentSpec.
    pub fn new(raw: &'a Value) -> Self {
        Self { raw }
    }
    /// The spec of a Deployment object (its `spec`; absent reads as empty).
    pub fn of_object(object: &'a Value) -> Self {
        Self::new(object.get("spec").unwrap_or(&NULL))
    }
    /// `template.metadata.annotations`, when it is a mapping.
    pub fn template_annotations(&self) -> Option<&'a Map<String, Value>> {
        self.raw
            .pointer("/template/metadata/annotations")?
            .as_object()
    }
    /// `template.spec`: the pod spec.
    pub fn pod_spec(&self) -> PodSpec<'a> {
        PodSpec {
            raw: self.raw.pointer("/template/spec").unwrap_or(&NULL),
        }
    }
    /// `selector`, any type.
    pub fn selector(&self) -> Option<&'a Value> {
        self.raw.get("selector")
    }
}

/// A view of a core/v1 PodSpec.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PodSpec<'a> {
    /// The raw pod spec (any JSON type).
    pub raw: &'a Value,
}

impl<'a> PodSpec<'a> {
    /// `containers`.
    pub fn containers(&self) -> impl Iterator<Item = Container<'a>> + use<'a> {
        elements(list_at(self.raw, "/containers"), |index, raw| Container {
            index,
            raw,
        })
    }
    /// `initContainers`.
    pub fn init_containers(&self) -> impl Iterator<Item = Container<'a>> + use<'a> {
        elements(list_at(self.raw, "/initContainers"), |index, raw| {
            Container { index, raw }
        })
    }
    /// `containers` then `initContainers`.
    pub fn all_containers(&self) -> impl Iterator<Item = Container<'a>> + use<'a> {
        self.containers().chain(self.init_containers())
    }
    /// `serviceAccountName`, else the deprecated `serviceAccount` (as the API server defaults
    /// one from the other); a present `serviceAccountName` wins even when empty.
    pub fn service_account(&self) -> Option<&'a str> {
        str_at(self.raw, "/serviceAccountName").or_else(|| str_at(self.raw, "/serviceAccount"))
    }
    /// `volumes` (raw), empty when missing or not a list.
    pub fn volumes(&self) -> &'a [Value] {
        list_at(self.raw, "/volumes")
    }
}

element!(
    /// One of a pod spec's `containers` or `initContainers`.
    Container
);

impl<'a> Container<'a> {
    /// `name`.
    pub fn name(&self) -> Option<&'a str> {
        self.str("name")
    }
    /// `image`.
    pub fn image(&self) -> Option<&'a str> {
        self.str("image")
    }
    /// `workingDir`.
    pub fn working_dir(&self) -> Option<&'a str> {
        self.str("workingDir")
    }
    /// `command`, when it is a list of strings only.
    pub fn command(&self) -> Option<Vec<&'a str>> {
        let list = self.raw.get("command")?.as_array()?;
        list.iter().map(Value::as_str).collect()
    }
    /// `env` as (name, value) pairs; a missing or non-string field reads as `None`.
    pub fn env(&self) -> impl Iterator<Item = (Option<&'a str>, Option<&'a str>)> + use<'a> {
        list_at(self.raw, "/env")
            .iter()
            .map(|e| (str_at(e, "/name"), str_at(e, "/value")))
    }
    /// `ports` (raw), empty when missing or not a list.
    pub fn ports(&self) -> &'a [Value] {
        list_at(self.raw, "/ports")
    }
    /// `volumeMounts` (raw), empty when missing or not a list.
    pub fn volume_mounts(&self) -> &'a [Value] {
        list_at(self.raw, "/volumeMounts")
    }
}

/// The operator's manager container: which one it is and what it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ManagerContainer<'a> {
    /// Index of its Deployment among those given (always 0: the first one).
    pub deployment: usize,
    /// Index in the pod template's `containers`.
    pub index: usize,
    /// The container object.
    pub container: &'a Value,
}

impl<'a> ManagerContainer<'a> {
    /// The container's view.
    pub fn view(&self) -> Container<'a> {
        Container {
            index: self.index,
            raw: self.container,
        }
    }
    /// Its `image`.
    pub fn image(&self) -> Option<&'a str> {
        self.view().image()
    }
    /// Its `command`, when it has one (strings only).
    pub fn command(&self) -> Option<Vec<&'a str>> {
        self.view().command()
    }
    /// Its `workingDir`.
    pub fn working_dir(&self) -> Option<&'a str> {
        self.view().working_dir()
    }
}

/// The operator's manager container: in the first of `deployments` (Deployment objects, or a
/// CSV's `spec.install.spec.deployments` entries: both keep the pod template at
/// `/spec/template`), the container the pod template's `kubectl.kubernetes.io/default-container`
/// annotation names (kubebuilder's scaffold sets it to `manager`), else the one named `manager`
/// (kubebuilder's name), else the first. The one rule for "the operator's container": the CSV's
/// `containerImage` annotation, the containers a release points at the new operator image and
/// the command the operator image must hold are all found with it, so they can never name
/// different containers.
pub fn manager_container<'a>(
    mut deployments: impl Iterator<Item = &'a Value>,
) -> Option<ManagerContainer<'a>> {
    let spec = DeploymentSpec::of_object(deployments.next()?);
    let containers = list_at(spec.pod_spec().raw, "/containers");
    let named = |name: &str| {
        containers
            .iter()
            .position(|c| str_at(c, "/name") == Some(name))
    };
    let annotated = spec
        .template_annotations()
        .and_then(|a| a.get(DEFAULT_CONTAINER_ANNOTATION))
        .and_then(Value::as_str);
    let index = annotated
        .and_then(named)
        .or_else(|| named("manager"))
        .or_else(|| (!containers.is_empty()).then_some(0))?;
    Some(ManagerContainer {
        deployment: 0,
        index,
        container: &containers[index],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "kind": "ClusterServiceVersion",
            "metadata": {
                "name": "op.v0.2.0",
                "namespace": "placeholder",
                "labels": {"a": "b"},
                "annotations": {
                    "olm.skipRange": "<0.2.0",
                    "alm-examples": "[]",
                    "n": 3
                }
            },
            "spec": {
                "version": "0.2.0",
                "replaces": "op.v0.1.0",
                "skips": ["op.v0.1.1", 7, "op.v0.1.2"],
                "minKubeVersion": "1.25.0",
                "displayName": "Op",
                "description": "Does things",
                "install": {"strategy": "deployment", "spec": {
                    "deployments": [{"name": "op", "label": {"x": "y"}, "spec": {
                        "selector": {},
                        "template": {
                            "metadata": {"annotations": {
                                "kubectl.kubernetes.io/default-container": "mgr"}},
                            "spec": {
                                "serviceAccountName": "op-sa",
                                "containers": [
                                    {"name": "proxy", "image": "p"},
                                    {"name": "mgr", "image": "m", "command": ["/manager"],
                                     "workingDir": "/w",
                                     "env": [{"name": "A", "value": "1"}, {"name": "B"}],
                                     "ports": [{"containerPort": 1}],
                                     "volumeMounts": [{"name": "v"}]}
                                ],
                                "initContainers": [{"name": "init", "image": "i"}],
                                "volumes": [{"name": "v"}]
                            }
                        }
                    }}, "junk"],
                    "permissions": [{"serviceAccountName": "op-sa", "rules": [{"verbs": ["get"]}]}],
                    "clusterPermissions": [{"serviceAccountName": "op-sa", "rules": "bad"}]
                }},
                "customresourcedefinitions": {
                    "owned": [{"name": "ms.example.com", "version": "v1", "kind": "M",
                               "displayName": "M", "description": "d"}],
                    "required": [{"name": "others.example.com", "version": "v2", "kind": "O"}]
                },
                "apiservicedefinitions": {
                    "owned": [{"name": "a", "group": "g", "version": "v", "kind": "K",
                               "deploymentName": "op"}],
                    "required": [1]
                },
                "webhookdefinitions": [{
                    "type": "ConversionWebhook", "generateName": "c.example.com",
                    "deploymentName": "op", "webhookPath": "/convert", "containerPort": 443,
                    "conversionCRDs": ["ms.example.com"], "admissionReviewVersions": ["v1"],
                    "rules": []
                }],
                "installModes": [
                    {"type": "OwnNamespace", "supported": true},
                    {"type": "AllNamespaces", "supported": "yes"}
                ],
                "relatedImages": [{"name": "m", "image": "m@sha256:1"}]
            }
        })
    }

    #[test]
    fn metadata_and_scalars() {
        let v = sample();
        let c = Csv::new(&v);
        assert_eq!(c.name(), Some("op.v0.2.0"));
        assert_eq!(c.namespace(), Some("placeholder"));
        assert_eq!(c.skip_range(), Some("<0.2.0"));
        assert_eq!(c.alm_examples(), Some("[]"));
        assert_eq!(
            c.annotation("n"),
            None,
            "a non-string annotation reads as absent"
        );
        assert_eq!(c.labels().map(Map::len), Some(1));
        assert_eq!(c.version(), Some("0.2.0"));
        assert_eq!(c.replaces(), Some("op.v0.1.0"));
        assert_eq!(c.skips().collect::<Vec<_>>(), ["op.v0.1.1", "op.v0.1.2"]);
        assert_eq!(c.min_kube_version(), Some("1.25.0"));
        assert_eq!(c.display_name(), Some("Op"));
        assert_eq!(c.description(), Some("Does things"));
        assert_eq!(c.install_strategy(), Some("deployment"));
        assert!(c.install_spec().is_some_and(Value::is_object));
        assert_eq!(c.spec_field("displayName"), Some(&json!("Op")));
        assert_eq!(c.metadata_field("namespace"), Some(&json!("placeholder")));
    }

    #[test]
    fn deployments_and_containers() {
        let v = sample();
        let c = Csv::new(&v);
        let ds: Vec<_> = c.deployments().collect();
        assert_eq!(ds.len(), 2, "a non-object entry is still listed");
        assert_eq!((ds[1].index, ds[1].name()), (1, None));
        assert_eq!(ds[1].spec().pod_spec().containers().count(), 0);
        let d = ds[0];
        assert_eq!(d.name(), Some("op"));
        assert!(d.label().is_some());
        assert!(d.spec().selector().is_some());
        let pod = d.spec().pod_spec();
        assert_eq!(pod.service_account(), Some("op-sa"));
        assert_eq!(pod.volumes().len(), 1);
        let names: Vec<_> = pod.all_containers().map(|c| c.name().unwrap()).collect();
        assert_eq!(names, ["proxy", "mgr", "init"]);
        let mgr = pod.containers().nth(1).unwrap();
        assert_eq!((mgr.index, mgr.image()), (1, Some("m")));
        assert_eq!(mgr.command(), Some(vec!["/manager"]));
        assert_eq!(mgr.working_dir(), Some("/w"));
        assert_eq!(
            mgr.env().collect::<Vec<_>>(),
            [(Some("A"), Some("1")), (Some("B"), None)]
        );
        assert_eq!((mgr.ports().len(), mgr.volume_mounts().len()), (1, 1));
        let m = c.manager_container().unwrap();
        assert_eq!((m.deployment, m.index, m.image()), (0, 1, Some("m")));
        assert_eq!(m.command(), Some(vec!["/manager"]));
        assert_eq!(m.working_dir(), Some("/w"));
    }

    #[test]
    fn service_account_falls_back_to_the_deprecated_field() {
        let pod = |v: Value| PodSpec { raw: &v }.service_account().map(String::from);
        assert_eq!(pod(json!({"serviceAccount": "old"})), Some("old".into()));
        assert_eq!(
            pod(json!({"serviceAccountName": "", "serviceAccount": "old"})),
            Some(String::new())
        );
        assert_eq!(pod(json!({"serviceAccountName": 1})), None);
    }

    #[test]
    fn permissions_apis_webhooks_modes_images() {
        let v = sample();
        let c = Csv::new(&v);
        let p: Vec<_> = c.permissions().collect();
        assert_eq!(
            (p[0].service_account_name(), p[0].rules().len()),
            (Some("op-sa"), 1)
        );
        let cp: Vec<_> = c.cluster_permissions().collect();
        assert_eq!(
            cp[0].rules().len(),
            0,
            "rules that are not a list read as none"
        );
        let owned: Vec<_> = c.owned_crds().collect();
        assert_eq!(
            (owned[0].name(), owned[0].version(), owned[0].kind()),
            (Some("ms.example.com"), Some("v1"), Some("M"))
        );
        assert_eq!(
            (owned[0].display_name(), owned[0].description()),
            (Some("M"), Some("d"))
        );
        assert_eq!(c.required_crds().next().unwrap().kind(), Some("O"));
        let api = c.owned_api_services().next().unwrap();
        assert_eq!(
            (
                api.name(),
                api.group(),
                api.version(),
                api.kind(),
                api.deployment_name()
            ),
            (Some("a"), Some("g"), Some("v"), Some("K"), Some("op"))
        );
        let req: Vec<_> = c.required_api_services().collect();
        assert_eq!((req.len(), req[0].group()), (1, None));
        let w = c.webhook_definitions().next().unwrap();
        assert_eq!(w.webhook_type(), Some("ConversionWebhook"));
        assert_eq!(w.generate_name(), Some("c.example.com"));
        assert_eq!(w.deployment_name(), Some("op"));
        assert_eq!(w.webhook_path(), Some("/convert"));
        assert_eq!(w.container_port(), Some(443));
        assert_eq!(w.conversion_crds().collect::<Vec<_>>(), ["ms.example.com"]);
        assert_eq!(w.admission_review_versions().collect::<Vec<_>>(), ["v1"]);
        assert!(w.rules().is_empty());
        let modes: Vec<_> = c.install_modes().collect();
        let listed = InstallMode::list(&v["spec"]["installModes"]).collect::<Vec<_>>();
        assert_eq!(listed, modes);
        assert_eq!(InstallMode::list(&json!({"a": 1})).count(), 0);
        assert_eq!(
            (modes[0].mode_type(), modes[0].supported()),
            (Some("OwnNamespace"), Some(true))
        );
        assert_eq!(modes[1].supported(), None);
        assert!(c.supports_install_mode("OwnNamespace"));
        assert!(!c.supports_install_mode("AllNamespaces"));
        let r = c.related_images().next().unwrap();
        assert_eq!((r.name(), r.image()), (Some("m"), Some("m@sha256:1")));
    }

    #[test]
    fn wrong_types_read_as_absent() {
        for v in [
            json!(null),
            json!([1, 2]),
            json!("csv"),
            json!({"metadata": 1, "spec": []}),
            json!({"metadata": {"annotations": []}, "spec": {"install": "x", "skips": "a"}}),
        ] {
            let c = Csv::new(&v);
            assert_eq!((c.name(), c.version(), c.skip_range()), (None, None, None));
            assert_eq!(c.skips().count(), 0);
            assert_eq!(c.deployments().count(), 0);
            assert!(c.manager_container().is_none());
            assert_eq!(c.install_modes().count(), 0);
        }
    }

    #[test]
    fn the_manager_is_the_annotated_container_else_manager_else_the_first() {
        let deployment = |annotated: Option<&str>, names: &[&str]| {
            let containers: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
            let mut d = json!({"spec": {"template": {"spec": {"containers": containers}}}});
            if let Some(a) = annotated {
                d["spec"]["template"]["metadata"] =
                    json!({"annotations": {DEFAULT_CONTAINER_ANNOTATION: a}});
            }
            d
        };
        let pick = |d: &Value| manager_container(std::iter::once(d)).map(|c| c.index);
        assert_eq!(pick(&deployment(None, &["proxy", "manager"])), Some(1));
        assert_eq!(pick(&deployment(Some("op"), &["manager", "op"])), Some(1));
        assert_eq!(pick(&deployment(Some("gone"), &["a", "manager"])), Some(1));
        assert_eq!(pick(&deployment(None, &["a", "b"])), Some(0));
        assert_eq!(pick(&deployment(None, &[])), None);
    }

    #[test]
    fn str_at_reads_strings_only() {
        let v = json!({"a": {"b": "c", "n": 1}});
        assert_eq!(str_at(&v, "/a/b"), Some("c"));
        assert_eq!(str_at(&v, "/a/n"), None);
        assert_eq!(str_at(&v, "/x"), None);
    }

    /// Arbitrary JSON, biased towards the CSV's own keys so that accessors reach deep fields.
    fn arb_json() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just("metadata".to_string()),
            Just("spec".to_string()),
            Just("install".to_string()),
            Just("deployments".to_string()),
            Just("template".to_string()),
            Just("containers".to_string()),
            Just("name".to_string()),
            Just("annotations".to_string()),
            Just("customresourcedefinitions".to_string()),
            Just("owned".to_string()),
            Just("installModes".to_string()),
            Just("command".to_string()),
            "[a-z]{1,3}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Reads every field of the view; returns how many were present (so nothing is optimized
    /// away and the test exercises the accessors' results).
    fn read_all(c: &Csv<'_>) -> usize {
        let mut n = [
            c.name(),
            c.namespace(),
            c.skip_range(),
            c.alm_examples(),
            c.version(),
            c.replaces(),
            c.min_kube_version(),
            c.display_name(),
            c.description(),
            c.install_strategy(),
        ]
        .iter()
        .flatten()
        .count();
        n += c.skips().count() + c.annotations().map_or(0, Map::len);
        n += c.labels().map_or(0, Map::len);
        for d in c.deployments() {
            let pod = d.spec().pod_spec();
            n += usize::from(d.name().is_some()) + pod.volumes().len();
            n += usize::from(pod.service_account().is_some());
            for ctr in pod.all_containers() {
                n += [ctr.name(), ctr.image(), ctr.working_dir()]
                    .iter()
                    .flatten()
                    .count();
                n += ctr.command().map_or(0, |c| c.len()) + ctr.env().count();
                n += ctr.ports().len() + ctr.volume_mounts().len();
            }
        }
        for p in c.permissions().chain(c.cluster_permissions()) {
            n += p.rules().len() + usize::from(p.service_account_name().is_some());
        }
        for d in c.owned_crds().chain(c.required_crds()) {
            n += [
                d.name(),
                d.version(),
                d.kind(),
                d.display_name(),
                d.description(),
            ]
            .iter()
            .flatten()
            .count();
        }
        for a in c.owned_api_services().chain(c.required_api_services()) {
            n += [
                a.name(),
                a.group(),
                a.version(),
                a.kind(),
                a.deployment_name(),
            ]
            .iter()
            .flatten()
            .count();
        }
        for w in c.webhook_definitions() {
            n += [
                w.webhook_type(),
                w.generate_name(),
                w.deployment_name(),
                w.webhook_path(),
            ]
            .iter()
            .flatten()
            .count();
            n += w.conversion_crds().count() + w.admission_review_versions().count();
            n += w.rules().len() + usize::from(w.container_port().is_some());
        }
        for m in c.install_modes() {
            n += usize::from(m.mode_type().is_some()) + usize::from(m.supported().is_some());
        }
        for r in c.related_images() {
            n += usize::from(r.name().is_some()) + usize::from(r.image().is_some());
        }
        if let Some(m) = c.manager_container() {
            n += usize::from(m.image().is_some()) + m.command().map_or(0, |c| c.len());
        }
        n
    }

    proptest! {
        #[test]
        fn no_accessor_panics_on_arbitrary_json(v in arb_json()) {
            let c = Csv::new(&v);
            let _ = read_all(&c);
            prop_assert_eq!(c.raw(), &v);
        }
    }

    #[test]
    fn read_all_sees_the_sample() {
        let v = sample();
        assert!(read_all(&Csv::new(&v)) > 50);
        assert_eq!(read_all(&Csv::new(&json!({}))), 0);
    }
}
