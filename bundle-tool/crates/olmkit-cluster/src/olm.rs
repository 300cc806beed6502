//! OLM v0 and v1 API identities and lenient read models of the objects this crate watches.
//!
//! The read models hold only the fields install, status, upgrade and approve reason about, and
//! every field defaults, so a Subscription or CSV written by any OLM release (older ones lack
//! conditions, newer ones add fields) deserialises. Writes never go through these types: the
//! manifests are built as JSON in [`crate::manifests`] and [`crate::olmv1`] and applied as they
//! are, so no field of ours is ever dropped or defaulted on the way to the API server.

use kube::core::{ApiResource, DynamicObject};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// API group of OLM v0.
pub const OLM_V0_GROUP: &str = "operators.coreos.com";
/// API group of OLM v1.
pub const OLM_V1_GROUP: &str = "olm.operatorframework.io";
/// The field manager of every write this tool makes.
pub const FIELD_MANAGER: &str = "bundle-tool";
/// Label set on every object this tool creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Label OLM sets on copied CSVs (one per target namespace of an AllNamespaces operator).
pub const COPIED_FROM_LABEL: &str = "olm.copiedFrom";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// `operators.coreos.com/v1alpha1` Subscription.
pub fn subscription_resource() -> ApiResource {
    resource(OLM_V0_GROUP, "v1alpha1", "Subscription", "subscriptions")
}
/// `operators.coreos.com/v1alpha1` InstallPlan.
pub fn install_plan_resource() -> ApiResource {
    resource(OLM_V0_GROUP, "v1alpha1", "InstallPlan", "installplans")
}
/// `operators.coreos.com/v1alpha1` ClusterServiceVersion.
pub fn csv_resource() -> ApiResource {
    resource(
        OLM_V0_GROUP,
        "v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
    )
}
/// `operators.coreos.com/v1alpha1` CatalogSource.
pub fn catalog_source_resource() -> ApiResource {
    resource(OLM_V0_GROUP, "v1alpha1", "CatalogSource", "catalogsources")
}
/// `operators.coreos.com/v1` OperatorGroup.
pub fn operator_group_resource() -> ApiResource {
    resource(OLM_V0_GROUP, "v1", "OperatorGroup", "operatorgroups")
}
/// `olm.operatorframework.io/v1` ClusterCatalog (cluster-scoped).
pub fn cluster_catalog_resource() -> ApiResource {
    resource(OLM_V1_GROUP, "v1", "ClusterCatalog", "clustercatalogs")
}
/// `olm.operatorframework.io/v1` ClusterExtension (cluster-scoped).
pub fn cluster_extension_resource() -> ApiResource {
    resource(OLM_V1_GROUP, "v1", "ClusterExtension", "clusterextensions")
}

/// The metadata fields the read models use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Meta {
    /// Name.
    pub name: String,
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Generation.
    pub generation: Option<i64>,
    /// Resource version.
    pub resource_version: String,
    /// Creation time (RFC 3339).
    pub creation_timestamp: Option<String>,
    /// UID (to point owner references at the object).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Owner references (an InstallPlan's point at its Subscriptions).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
    /// Set once deletion started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
}

/// An entry of `metadata.ownerReferences`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OwnerReference {
    /// Kind of the owner.
    pub kind: String,
    /// Name of the owner.
    pub name: String,
    /// UID of the owner.
    pub uid: String,
}

/// A status condition as OLM writes them (Subscription, InstallPlan, CatalogSource, v1 kinds).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `ResolutionFailed`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// When the condition last changed.
    pub last_transition_time: Option<String>,
}

impl Condition {
    /// True when the condition's status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Finds a condition by type.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// An object reference as in `status.installPlanRef`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectRef {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
}

/// `spec` of a Subscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// CatalogSource name.
    pub source: String,
    /// CatalogSource namespace.
    pub source_namespace: String,
    /// Package name.
    pub name: String,
    /// Channel ("" = the package's default channel).
    pub channel: String,
    /// First CSV to install.
    #[serde(rename = "startingCSV")]
    pub starting_csv: String,
    /// `Automatic` or `Manual` ("" = Automatic).
    pub install_plan_approval: String,
}

/// `status.catalogHealth[]` of a Subscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CatalogHealth {
    /// The CatalogSource.
    pub catalog_source_ref: ObjectRef,
    /// Whether OLM can reach it.
    pub healthy: bool,
}

/// The deprecated `status.installplan` reference (still the only one older OLM sets).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LegacyInstallPlanRef {
    /// InstallPlan name.
    pub name: String,
}

/// `status` of a Subscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The CSV the Subscription is progressing to.
    #[serde(rename = "currentCSV")]
    pub current_csv: String,
    /// The CSV currently installed.
    #[serde(rename = "installedCSV")]
    pub installed_csv: String,
    /// `UpgradePending`, `AtLatestKnown`, `UpgradeAvailable`, `UpgradeFailed` or "".
    pub state: String,
    /// Why the state was last changed.
    pub reason: String,
    /// The latest InstallPlan.
    pub install_plan_ref: Option<ObjectRef>,
    /// Deprecated InstallPlan reference.
    pub installplan: Option<LegacyInstallPlanRef>,
    /// What OLM knows of the catalogs used for resolution.
    pub catalog_health: Vec<CatalogHealth>,
    /// Conditions (abnormal-true polarity: `ResolutionFailed=True` is bad).
    pub conditions: Vec<Condition>,
    /// Last status update.
    pub last_updated: Option<String>,
}

impl SubscriptionStatus {
    /// Name of the latest InstallPlan, from either reference.
    pub fn install_plan_name(&self) -> Option<&str> {
        self.install_plan_ref
            .as_ref()
            .map(|r| r.name.as_str())
            .or(self.installplan.as_ref().map(|r| r.name.as_str()))
            .filter(|n| !n.is_empty())
    }
}

/// A Subscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Subscription {
    /// Metadata.
    pub metadata: Meta,
    /// Spec.
    pub spec: SubscriptionSpec,
    /// Status.
    pub status: SubscriptionStatus,
}

impl Subscription {
    /// The approval mode, with OLM's default.
    pub fn approval(&self) -> &str {
        if self.spec.install_plan_approval == "Manual" {
            "Manual"
        } else {
            "Automatic"
        }
    }
}

/// `spec` of an InstallPlan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InstallPlanSpec {
    /// CSVs the plan installs.
    pub cluster_service_version_names: Vec<String>,
    /// `Automatic` or `Manual`.
    pub approval: String,
    /// Whether the plan may run.
    pub approved: bool,
}

/// `status.bundleLookups[]` of an InstallPlan: bundles being unpacked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BundleLookup {
    /// Bundle image.
    pub path: String,
    /// Unpack conditions (`BundleLookupPending`, `BundleLookupFailed`...).
    pub conditions: Vec<Condition>,
}

/// `status` of an InstallPlan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InstallPlanStatus {
    /// `Planning`, `RequiresApproval`, `Installing`, `Complete` or `Failed`.
    pub phase: String,
    /// Conditions (`Installed` with reason `InstallComponentFailed`...).
    pub conditions: Vec<Condition>,
    /// A failure message (newer OLM).
    pub message: String,
    /// Bundle unpacking.
    pub bundle_lookups: Vec<BundleLookup>,
}

/// An InstallPlan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InstallPlan {
    /// Metadata.
    pub metadata: Meta,
    /// Spec.
    pub spec: InstallPlanSpec,
    /// Status.
    pub status: InstallPlanStatus,
}

impl InstallPlan {
    /// True when the plan waits for someone to approve it.
    pub fn awaits_approval(&self) -> bool {
        self.status.phase == "RequiresApproval" && !self.spec.approved
    }
}

/// An install mode of a CSV.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct InstallMode {
    /// `OwnNamespace`, `SingleNamespace`, `MultiNamespace` or `AllNamespaces`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether the CSV supports it.
    pub supported: bool,
}

/// One entry of `status.requirementStatus` of a CSV.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RequirementStatus {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// `Present`, `NotPresent`, `PresentNotSatisfied`.
    pub status: String,
    /// Details.
    pub message: String,
}

/// `status` of a ClusterServiceVersion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CsvStatus {
    /// `Pending`, `InstallReady`, `Installing`, `Succeeded`, `Failed`, `Replacing`, `Deleting`...
    pub phase: String,
    /// CamelCase reason of the phase.
    pub reason: String,
    /// Details.
    pub message: String,
    /// Which requirements are met.
    pub requirement_status: Vec<RequirementStatus>,
}

/// A ClusterServiceVersion as read from the cluster.
///
/// Its metadata and status (written by the API server and OLM, never part of a bundle) are read
/// typed; its spec is read through the one CSV view, [`olmkit_core::csv::Csv`], over the object
/// as the API server returned it ([`Csv::view`]), exactly as bundles and catalogs read CSVs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Csv {
    /// Metadata.
    pub metadata: Meta,
    /// Status.
    pub status: CsvStatus,
    /// The whole object, as read.
    pub object: serde_json::Value,
}

impl Csv {
    /// The CSV through the one lenient CSV view (spec fields).
    pub fn view(&self) -> olmkit_core::csv::Csv<'_> {
        olmkit_core::csv::Csv::new(&self.object)
    }

    /// True for the copies OLM makes in every target namespace of an AllNamespaces operator.
    pub fn is_copy(&self) -> bool {
        self.metadata.labels.contains_key(COPIED_FROM_LABEL) || self.status.reason == "Copied"
    }
}

impl<'de> Deserialize<'de> for Csv {
    /// Keeps the object whole and reads metadata and status from it; a missing one defaults,
    /// as with the other read models.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let object = serde_json::Value::deserialize(d)?;
        let part = |key: &str| object.get(key).cloned().unwrap_or_default();
        let metadata = match part("metadata") {
            serde_json::Value::Null => Meta::default(),
            v => serde_json::from_value(v).map_err(D::Error::custom)?,
        };
        let status = match part("status") {
            serde_json::Value::Null => CsvStatus::default(),
            v => serde_json::from_value(v).map_err(D::Error::custom)?,
        };
        Ok(Csv {
            metadata,
            status,
            object,
        })
    }
}

impl InstallMode {
    /// The install modes of a CSV (`spec.installModes`), one per entry; a malformed entry
    /// reads as an unsupported mode of no type.
    pub fn of_csv(csv: olmkit_core::csv::Csv<'_>) -> Vec<InstallMode> {
        csv.install_modes()
            .map(|m| InstallMode {
                type_: m.mode_type().unwrap_or_default().to_string(),
                supported: m.supported().unwrap_or(false),
            })
            .collect()
    }
}

/// `spec.updateStrategy` of a CatalogSource is irrelevant here; its status says if OLM can use it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConnectionState {
    /// gRPC connectivity state: `READY`, `CONNECTING`, `TRANSIENT_FAILURE`, `IDLE`...
    pub last_observed_state: String,
    /// Address OLM connects to.
    pub address: String,
}

/// `spec` of a CatalogSource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// `grpc`, `configmap` or `internal`.
    pub source_type: String,
    /// Catalog image.
    pub image: String,
    /// Address of a catalog served outside the cluster (`host:port`, no image then).
    pub address: String,
    /// Display name.
    pub display_name: String,
}

/// `status` of a CatalogSource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    /// gRPC connection state.
    pub connection_state: Option<ConnectionState>,
    /// Reason of a problem.
    pub reason: String,
    /// Message of a problem.
    pub message: String,
}

/// A CatalogSource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CatalogSource {
    /// Metadata.
    pub metadata: Meta,
    /// Spec.
    pub spec: CatalogSourceSpec,
    /// Status.
    pub status: CatalogSourceStatus,
}

impl CatalogSource {
    /// The observed gRPC state, "" when OLM has not connected yet.
    pub fn connection(&self) -> &str {
        self.status
            .connection_state
            .as_ref()
            .map(|c| c.last_observed_state.as_str())
            .unwrap_or("")
    }
}

/// `spec` of an OperatorGroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OperatorGroupSpec {
    /// Target namespaces (`None` or empty with no selector = all namespaces).
    pub target_namespaces: Option<Vec<String>>,
    /// Label selector of target namespaces.
    pub selector: Option<serde_json::Value>,
}

/// `status` of an OperatorGroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OperatorGroupStatus {
    /// The namespaces OLM resolved the targets to (`[""]` = all namespaces).
    pub namespaces: Vec<String>,
    /// Conditions (`MultipleOperatorGroup` with reason `MultipleOperatorGroupsFound`).
    pub conditions: Vec<Condition>,
}

/// An OperatorGroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OperatorGroup {
    /// Metadata.
    pub metadata: Meta,
    /// Spec.
    pub spec: OperatorGroupSpec,
    /// Status.
    pub status: OperatorGroupStatus,
}

/// The OperatorGroup condition OLM sets on every group of a namespace that has more than one
/// (`syncOperatorGroups` in OLM's `pkg/controller/operators/olm/operatorgroup.go`; the type is
/// spelled `MultipleOperatorGroup` in operator-framework/api).
pub const MULTIPLE_OPERATOR_GROUPS_CONDITION: &str = "MultipleOperatorGroup";
/// Its reason.
pub const MULTIPLE_OPERATOR_GROUPS_REASON: &str = "MultipleOperatorGroupsFound";

impl OperatorGroup {
    /// True when OLM flagged this group as one of several in its namespace.
    pub fn flagged_multiple(&self) -> bool {
        condition(&self.status.conditions, MULTIPLE_OPERATOR_GROUPS_CONDITION)
            .is_some_and(Condition::is_true)
    }
}

/// A ClusterExtension (OLM v1), the fields the wait loop needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterExtension {
    /// Metadata.
    pub metadata: Meta,
    /// Status.
    pub status: ClusterExtensionStatus,
}

/// `status` of a ClusterExtension.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterExtensionStatus {
    /// `Installed`, `Progressing`, deprecation conditions.
    pub conditions: Vec<Condition>,
    /// The installed bundle.
    pub install: Option<ClusterExtensionInstall>,
}

/// `status.install` of a ClusterExtension.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterExtensionInstall {
    /// The installed bundle.
    pub bundle: InstalledBundle,
}

/// `status.install.bundle` of a ClusterExtension.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InstalledBundle {
    /// Bundle name.
    pub name: String,
    /// Bundle version.
    pub version: String,
}

/// A ClusterCatalog (OLM v1), the fields the wait loop needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterCatalog {
    /// Metadata.
    pub metadata: Meta,
    /// Status.
    pub status: ClusterCatalogStatus,
}

/// `status` of a ClusterCatalog.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterCatalogStatus {
    /// `Serving`, `Progressing`.
    pub conditions: Vec<Condition>,
}

/// Reads a read model out of a dynamic object.
pub fn from_dynamic<T: DeserializeOwned>(obj: &DynamicObject) -> Result<T, serde_json::Error> {
    serde_json::to_value(obj).and_then(serde_json::from_value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_status_reads_olm_field_names() {
        let v = serde_json::json!({
            "metadata": {"name": "memcached", "namespace": "operators"},
            "spec": {"name": "memcached-operator", "source": "cat", "sourceNamespace": "operators",
                     "channel": "stable", "startingCSV": "m.v0.1.0", "installPlanApproval": "Manual"},
            "status": {"currentCSV": "m.v0.2.0", "installedCSV": "m.v0.1.0", "state": "UpgradePending",
                       "installPlanRef": {"name": "install-abc", "namespace": "operators"},
                       "conditions": [{"type": "InstallPlanPending", "status": "True", "reason": "RequiresApproval"}],
                       "lastUpdated": "2026-01-01T00:00:00Z", "unknownField": 3}
        });
        let s: Subscription = serde_json::from_value(v).unwrap();
        assert_eq!(s.spec.starting_csv, "m.v0.1.0");
        assert_eq!(s.status.current_csv, "m.v0.2.0");
        assert_eq!(s.status.installed_csv, "m.v0.1.0");
        assert_eq!(s.status.install_plan_name(), Some("install-abc"));
        assert_eq!(s.approval(), "Manual");
        assert!(
            condition(&s.status.conditions, "InstallPlanPending")
                .unwrap()
                .is_true()
        );
    }

    #[test]
    fn legacy_install_plan_reference_is_used_when_the_new_one_is_absent() {
        let v = serde_json::json!({"status": {"installplan": {"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "InstallPlan", "name": "install-old", "uuid": "u"}}});
        let s: Subscription = serde_json::from_value(v).unwrap();
        assert_eq!(s.status.install_plan_name(), Some("install-old"));
    }

    #[test]
    fn copied_csvs_are_recognised() {
        let v = serde_json::json!({"metadata": {"name": "m", "labels": {"olm.copiedFrom": "operators"}},
            "status": {"phase": "Succeeded", "reason": "Copied"}});
        let c: Csv = serde_json::from_value(v).unwrap();
        assert!(c.is_copy());
    }
}
