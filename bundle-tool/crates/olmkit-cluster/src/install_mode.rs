//! Choosing the OperatorGroup a CSV can be installed under, from its install modes.
//!
//! OLM v0 installs a CSV only when the OperatorGroup of its namespace targets namespaces in a
//! way one of the CSV's supported install modes allows: no target namespaces (all namespaces)
//! needs `AllNamespaces`; exactly the install namespace needs `OwnNamespace`; exactly one other
//! namespace needs `SingleNamespace`; several need `MultiNamespace`. Otherwise the CSV fails
//! with `UnsupportedOperatorGroup`. OLM also allows only one OperatorGroup per namespace
//! (`TooManyOperatorGroups`). This module makes that choice before anything is applied and
//! explains it, so the user never meets those failures on the cluster.

use crate::olm::{InstallMode, OperatorGroup};
use std::fmt;
use thiserror::Error;

/// The four OLM install modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum InstallModeType {
    /// The operator watches its own namespace.
    OwnNamespace,
    /// The operator watches one other namespace.
    SingleNamespace,
    /// The operator watches several namespaces.
    MultiNamespace,
    /// The operator watches every namespace.
    AllNamespaces,
}

impl InstallModeType {
    /// Parses OLM's spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "OwnNamespace" => Some(Self::OwnNamespace),
            "SingleNamespace" => Some(Self::SingleNamespace),
            "MultiNamespace" => Some(Self::MultiNamespace),
            "AllNamespaces" => Some(Self::AllNamespaces),
            _ => None,
        }
    }
    /// OLM's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OwnNamespace => "OwnNamespace",
            Self::SingleNamespace => "SingleNamespace",
            Self::MultiNamespace => "MultiNamespace",
            Self::AllNamespaces => "AllNamespaces",
        }
    }
}

impl fmt::Display for InstallModeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The install modes a CSV supports, in OLM's order of preference for an installer.
pub fn supported_modes(modes: &[InstallMode]) -> Vec<InstallModeType> {
    let mut out: Vec<InstallModeType> = modes
        .iter()
        .filter(|m| m.supported)
        .filter_map(|m| InstallModeType::parse(&m.type_))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Which namespaces an OperatorGroup targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targets {
    /// Every namespace (`spec: {}`).
    AllNamespaces,
    /// These namespaces, sorted.
    Namespaces(Vec<String>),
    /// A label selector: what it selects is only known on the cluster.
    Selector,
}

impl Targets {
    /// The install mode these targets need, seen from `install_namespace`.
    pub fn required_mode(&self, install_namespace: &str) -> Option<InstallModeType> {
        match self {
            Targets::AllNamespaces => Some(InstallModeType::AllNamespaces),
            Targets::Namespaces(ns) if ns.len() == 1 && ns[0] == install_namespace => {
                Some(InstallModeType::OwnNamespace)
            }
            Targets::Namespaces(ns) if ns.len() == 1 => Some(InstallModeType::SingleNamespace),
            Targets::Namespaces(_) => Some(InstallModeType::MultiNamespace),
            Targets::Selector => None,
        }
    }
    /// The targets of an existing OperatorGroup.
    pub fn of(group: &OperatorGroup) -> Targets {
        match &group.spec.target_namespaces {
            Some(ns) if !ns.is_empty() => {
                let mut ns = ns.clone();
                ns.sort();
                ns.dedup();
                Targets::Namespaces(ns)
            }
            _ if group.spec.selector.is_some() => Targets::Selector,
            _ => Targets::AllNamespaces,
        }
    }
}

impl fmt::Display for Targets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Targets::AllNamespaces => f.write_str("all namespaces"),
            Targets::Namespaces(ns) => write!(f, "namespaces [{}]", ns.join(", ")),
            Targets::Selector => f.write_str("namespaces chosen by a label selector"),
        }
    }
}

/// What to do about the OperatorGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperatorGroupAction {
    /// Create (or re-apply) ours.
    Create {
        /// Name of the OperatorGroup.
        name: String,
        /// Its targets.
        targets: Targets,
    },
    /// Use the one already in the namespace.
    Reuse {
        /// Its name.
        name: String,
        /// Its targets.
        targets: Targets,
    },
}

impl OperatorGroupAction {
    /// The targets of the group that will govern the install.
    pub fn targets(&self) -> &Targets {
        match self {
            OperatorGroupAction::Create { targets, .. }
            | OperatorGroupAction::Reuse { targets, .. } => targets,
        }
    }
}

/// The decision and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorGroupChoice {
    /// Create or reuse.
    pub action: OperatorGroupAction,
    /// The install mode the CSV will run in (None when unknown: selector-based group).
    pub mode: Option<InstallModeType>,
    /// One or two sentences for stderr.
    pub explanation: String,
}

/// No OperatorGroup fits.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ChooseOperatorGroupError {
    /// The CSV declares no supported install mode at all.
    #[error("{csv} supports no install mode (spec.installModes has no supported entry)")]
    NoSupportedMode {
        /// CSV name.
        csv: String,
    },
    /// The user asked for targets the CSV does not support.
    #[error(
        "{csv} does not support the {needed} install mode that {targets} needs (it supports: {supported})"
    )]
    UnsupportedTargets {
        /// CSV name.
        csv: String,
        /// What was asked.
        targets: Targets,
        /// The mode it needs.
        needed: InstallModeType,
        /// What the CSV supports.
        supported: String,
    },
    /// The CSV supports only modes that need target namespaces the user did not give.
    #[error(
        "{csv} supports only {supported}: it must watch namespaces other than {namespace}, and none were given"
    )]
    TargetsNeeded {
        /// CSV name.
        csv: String,
        /// Install namespace.
        namespace: String,
        /// What the CSV supports.
        supported: String,
    },
    /// The namespace has an OperatorGroup whose targets the CSV does not support.
    #[error(
        "namespace {namespace} already has OperatorGroup {group} targeting {targets}, which needs the {needed} install mode; {csv} supports only {supported}"
    )]
    ExistingGroupIncompatible {
        /// Namespace.
        namespace: String,
        /// Existing group.
        group: String,
        /// Its targets.
        targets: Targets,
        /// Mode it needs.
        needed: InstallModeType,
        /// CSV name.
        csv: String,
        /// What the CSV supports.
        supported: String,
    },
    /// The namespace has an OperatorGroup that targets other namespaces than asked.
    #[error(
        "namespace {namespace} already has OperatorGroup {group} targeting {existing}, not {requested}; OLM allows one OperatorGroup per namespace"
    )]
    ExistingGroupDiffers {
        /// Namespace.
        namespace: String,
        /// Existing group.
        group: String,
        /// Its targets.
        existing: Targets,
        /// What was asked.
        requested: Targets,
    },
    /// More than one OperatorGroup: real OLM marks them `MultipleOperatorGroupsFound` and
    /// resolves nothing there (`syncOperatorGroups`); a CSV created there fails with
    /// `TooManyOperatorGroups` (`operatorGroupForCSV`).
    #[error(
        "namespace {namespace} has {count} OperatorGroups ({names}); OLM marks them MultipleOperatorGroupsFound and installs nothing there"
    )]
    TooManyGroups {
        /// Namespace.
        namespace: String,
        /// How many.
        count: usize,
        /// Their names.
        names: String,
    },
}

impl ChooseOperatorGroupError {
    /// A `hint:` line for the user.
    pub fn hint(&self) -> String {
        match self {
            Self::NoSupportedMode { .. } => {
                "fix spec.installModes in the CSV (at least one mode must be supported: true)".into()
            }
            Self::UnsupportedTargets { .. } => {
                "choose --target-namespaces matching a supported install mode, or omit it to let bundle-tool choose".into()
            }
            Self::TargetsNeeded { .. } => {
                "pass --target-namespaces NS[,NS...] with the namespace(s) the operator should watch".into()
            }
            Self::ExistingGroupIncompatible { namespace, .. }
            | Self::ExistingGroupDiffers { namespace, .. } => format!(
                "install into another namespace (--namespace), or change the OperatorGroup in {namespace} if nothing else depends on it"
            ),
            Self::TooManyGroups { namespace, .. } => {
                format!("delete all but one OperatorGroup in {namespace}: kubectl -n {namespace} get operatorgroups, then kubectl -n {namespace} delete operatorgroup NAME")
            }
        }
    }
}

fn list(modes: &[InstallModeType]) -> String {
    modes
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The targets an install mode gets by default when the user gives none.
fn default_targets(
    csv: &str,
    supported: &[InstallModeType],
    namespace: &str,
) -> Result<(Targets, InstallModeType, String), ChooseOperatorGroupError> {
    if supported.contains(&InstallModeType::AllNamespaces) {
        return Ok((
            Targets::AllNamespaces,
            InstallModeType::AllNamespaces,
            format!(
                "{csv} supports AllNamespaces, so the OperatorGroup targets every namespace (no spec.targetNamespaces)"
            ),
        ));
    }
    if supported.contains(&InstallModeType::OwnNamespace) {
        return Ok((
            Targets::Namespaces(vec![namespace.to_string()]),
            InstallModeType::OwnNamespace,
            format!(
                "{csv} does not support AllNamespaces but supports OwnNamespace, so the OperatorGroup targets its own namespace {namespace}"
            ),
        ));
    }
    if supported.is_empty() {
        return Err(ChooseOperatorGroupError::NoSupportedMode { csv: csv.into() });
    }
    Err(ChooseOperatorGroupError::TargetsNeeded {
        csv: csv.into(),
        namespace: namespace.into(),
        supported: list(supported),
    })
}

/// Whether a printed install includes an OperatorGroup (`install --operator-group-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OperatorGroupMode {
    /// Decide: from the namespace's OperatorGroups when applying; when printing, none for a
    /// well-known namespace that already has one ([`well_known_operator_group`]), else ours.
    #[default]
    Auto,
    /// When printing, always include ours.
    Create,
    /// Never create one: the namespace must already have one that fits.
    Skip,
}

/// The OperatorGroup a standard OLM installation already puts into `namespace`, and where it
/// comes from: upstream OLM's manifests (`deploy/upstream/quickstart/olm.yaml`) create
/// namespace `operators` with OperatorGroup `global-operators` (all namespaces), and OpenShift
/// ships `openshift-operators` with `global-operators`. A second OperatorGroup there makes OLM
/// flag both `MultipleOperatorGroupsFound` and install nothing.
pub fn well_known_operator_group(namespace: &str) -> Option<(OperatorGroup, &'static str)> {
    let origin = match namespace {
        "operators" => "upstream OLM's default installation",
        "openshift-operators" => "OpenShift",
        _ => return None,
    };
    let group = OperatorGroup {
        metadata: crate::olm::Meta {
            name: "global-operators".into(),
            namespace: namespace.into(),
            ..Default::default()
        },
        ..Default::default()
    };
    Some((group, origin))
}

/// Inputs of [`choose_operator_group`].
#[derive(Clone, Debug)]
pub struct OperatorGroupRequest<'a> {
    /// Name of the CSV that will be installed (for messages).
    pub csv: &'a str,
    /// Its install modes; `None` when they could not be read (no local catalog).
    pub modes: Option<&'a [InstallMode]>,
    /// Install namespace.
    pub namespace: &'a str,
    /// `--target-namespaces`, if given.
    pub requested: Option<&'a [String]>,
    /// Name for an OperatorGroup we create.
    pub group_name: &'a str,
    /// The OperatorGroups already in the namespace (`None` when printing manifests offline).
    pub existing: Option<&'a [OperatorGroup]>,
}

/// Decides which OperatorGroup governs the install, and says why.
pub fn choose_operator_group(
    req: &OperatorGroupRequest<'_>,
) -> Result<OperatorGroupChoice, ChooseOperatorGroupError> {
    let supported = req.modes.map(supported_modes);
    let requested = requested_targets(req.requested);
    let (targets, mode, mut explanation) =
        desired_targets(req, requested.as_ref(), supported.as_deref())?;
    let create = |targets, explanation| OperatorGroupChoice {
        action: OperatorGroupAction::Create {
            name: req.group_name.into(),
            targets,
        },
        mode: Some(mode),
        explanation,
    };
    let Some(existing) = req.existing else {
        return Ok(create(targets, explanation));
    };
    match existing {
        [] => Ok(create(targets, explanation)),
        [group] if group.metadata.name == req.group_name => {
            // Ours from an earlier run: re-applying it with the new targets is fine.
            explanation.push_str(&format!(
                " (OperatorGroup {} from an earlier install is updated)",
                group.metadata.name
            ));
            Ok(create(targets, explanation))
        }
        [group] => reuse_group(
            req,
            group,
            requested.is_some(),
            targets,
            supported.as_deref(),
        ),
        many => Err(ChooseOperatorGroupError::TooManyGroups {
            namespace: req.namespace.into(),
            count: many.len(),
            names: many
                .iter()
                .map(|g| g.metadata.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// `--target-namespaces`, trimmed, sorted and deduplicated; empty means all namespaces.
fn requested_targets(requested: Option<&[String]>) -> Option<Targets> {
    requested.map(|ns| {
        let mut ns: Vec<String> = ns
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        ns.sort();
        ns.dedup();
        if ns.is_empty() {
            Targets::AllNamespaces
        } else {
            Targets::Namespaces(ns)
        }
    })
}

/// Desired targets from the request and the CSV, the install mode they need, and why.
fn desired_targets(
    req: &OperatorGroupRequest<'_>,
    requested: Option<&Targets>,
    supported: Option<&[InstallModeType]>,
) -> Result<(Targets, InstallModeType, String), ChooseOperatorGroupError> {
    Ok(match (requested, supported) {
        (Some(t), Some(sup)) => {
            let needed = t
                .required_mode(req.namespace)
                .unwrap_or(InstallModeType::MultiNamespace);
            if !sup.contains(&needed) {
                return Err(ChooseOperatorGroupError::UnsupportedTargets {
                    csv: req.csv.into(),
                    targets: t.clone(),
                    needed,
                    supported: list(sup),
                });
            }
            (
                t.clone(),
                needed,
                format!("the OperatorGroup targets {t} as asked ({needed} install mode)"),
            )
        }
        (Some(t), None) => {
            let needed = t
                .required_mode(req.namespace)
                .unwrap_or(InstallModeType::MultiNamespace);
            (
                t.clone(),
                needed,
                format!(
                    "the OperatorGroup targets {t} as asked ({needed} install mode; the CSV's install modes are unknown without --catalog-dir)"
                ),
            )
        }
        (None, Some(sup)) => default_targets(req.csv, sup, req.namespace)?,
        (None, None) => (
            Targets::AllNamespaces,
            InstallModeType::AllNamespaces,
            "the CSV's install modes are unknown (no --catalog-dir with its olm.csv.metadata), so the OperatorGroup targets every namespace (AllNamespaces); pass --target-namespaces to choose".to_string(),
        ),
    })
}

/// Reuses the namespace's one OperatorGroup (not ours), if it fits the request and the CSV.
fn reuse_group(
    req: &OperatorGroupRequest<'_>,
    group: &OperatorGroup,
    requested: bool,
    targets: Targets,
    supported: Option<&[InstallModeType]>,
) -> Result<OperatorGroupChoice, ChooseOperatorGroupError> {
    let theirs = Targets::of(group);
    if requested && theirs != targets && theirs != Targets::Selector {
        return Err(ChooseOperatorGroupError::ExistingGroupDiffers {
            namespace: req.namespace.into(),
            group: group.metadata.name.clone(),
            existing: theirs,
            requested: targets,
        });
    }
    let needed = theirs.required_mode(req.namespace);
    if let (Some(needed), Some(sup)) = (needed, supported)
        && !sup.contains(&needed)
    {
        return Err(ChooseOperatorGroupError::ExistingGroupIncompatible {
            namespace: req.namespace.into(),
            group: group.metadata.name.clone(),
            targets: theirs,
            needed,
            csv: req.csv.into(),
            supported: list(sup),
        });
    }
    let explanation = match needed {
        Some(m) => format!(
            "namespace {} already has OperatorGroup {} targeting {theirs}; it is reused ({m} install mode; OLM allows one OperatorGroup per namespace)",
            req.namespace, group.metadata.name
        ),
        None => format!(
            "namespace {} already has OperatorGroup {} ({theirs}); it is reused (OLM allows one OperatorGroup per namespace)",
            req.namespace, group.metadata.name
        ),
    };
    Ok(OperatorGroupChoice {
        action: OperatorGroupAction::Reuse {
            name: group.metadata.name.clone(),
            targets: theirs,
        },
        mode: needed,
        explanation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::olm::{Meta, OperatorGroupSpec};

    fn modes(list: &[(&str, bool)]) -> Vec<InstallMode> {
        list.iter()
            .map(|(t, s)| InstallMode {
                type_: t.to_string(),
                supported: *s,
            })
            .collect()
    }

    fn all_four(all: bool, own: bool, single: bool, multi: bool) -> Vec<InstallMode> {
        modes(&[
            ("OwnNamespace", own),
            ("SingleNamespace", single),
            ("MultiNamespace", multi),
            ("AllNamespaces", all),
        ])
    }

    fn req<'a>(
        m: Option<&'a [InstallMode]>,
        requested: Option<&'a [String]>,
        existing: Option<&'a [OperatorGroup]>,
    ) -> OperatorGroupRequest<'a> {
        OperatorGroupRequest {
            csv: "op.v1.0.0",
            modes: m,
            namespace: "ops",
            requested,
            group_name: "op-og",
            existing,
        }
    }

    fn group(name: &str, targets: Option<Vec<&str>>) -> OperatorGroup {
        OperatorGroup {
            metadata: Meta {
                name: name.into(),
                namespace: "ops".into(),
                ..Default::default()
            },
            spec: OperatorGroupSpec {
                target_namespaces: targets.map(|t| t.into_iter().map(String::from).collect()),
                selector: None,
            },
            ..Default::default()
        }
    }

    #[test]
    fn all_namespaces_is_preferred() {
        let m = all_four(true, true, true, false);
        let c = choose_operator_group(&req(Some(&m), None, None)).unwrap();
        assert_eq!(c.action.targets(), &Targets::AllNamespaces);
        assert_eq!(c.mode, Some(InstallModeType::AllNamespaces));
        assert!(c.explanation.contains("supports AllNamespaces"));
    }

    #[test]
    fn own_namespace_when_all_is_not_supported() {
        let m = all_four(false, true, true, false);
        let c = choose_operator_group(&req(Some(&m), None, None)).unwrap();
        assert_eq!(c.action.targets(), &Targets::Namespaces(vec!["ops".into()]));
        assert_eq!(c.mode, Some(InstallModeType::OwnNamespace));
    }

    #[test]
    fn single_namespace_only_needs_targets() {
        let m = all_four(false, false, true, false);
        let e = choose_operator_group(&req(Some(&m), None, None)).unwrap_err();
        assert!(matches!(e, ChooseOperatorGroupError::TargetsNeeded { .. }));
        let t = vec!["apps".to_string()];
        let c = choose_operator_group(&req(Some(&m), Some(&t), None)).unwrap();
        assert_eq!(c.mode, Some(InstallModeType::SingleNamespace));
        // Targeting its own namespace is OwnNamespace, which this CSV does not support.
        let own = vec!["ops".to_string()];
        let e = choose_operator_group(&req(Some(&m), Some(&own), None)).unwrap_err();
        assert!(matches!(
            e,
            ChooseOperatorGroupError::UnsupportedTargets {
                needed: InstallModeType::OwnNamespace,
                ..
            }
        ));
    }

    #[test]
    fn multi_namespace_targets_need_multi_mode() {
        let m = all_four(true, true, true, false);
        let t = vec!["a".to_string(), "b".to_string()];
        let e = choose_operator_group(&req(Some(&m), Some(&t), None)).unwrap_err();
        assert!(e.to_string().contains("MultiNamespace"), "{e}");
    }

    #[test]
    fn no_supported_mode_is_an_error() {
        let m = all_four(false, false, false, false);
        let e = choose_operator_group(&req(Some(&m), None, None)).unwrap_err();
        assert!(matches!(
            e,
            ChooseOperatorGroupError::NoSupportedMode { .. }
        ));
    }

    #[test]
    fn unknown_modes_default_to_all_namespaces_and_say_so() {
        let c = choose_operator_group(&req(None, None, None)).unwrap();
        assert_eq!(c.action.targets(), &Targets::AllNamespaces);
        assert!(c.explanation.contains("unknown"));
    }

    #[test]
    fn an_existing_compatible_group_is_reused() {
        let m = all_four(true, true, false, false);
        let existing = vec![group("global-operators", None)];
        let c = choose_operator_group(&req(Some(&m), None, Some(&existing))).unwrap();
        assert_eq!(
            c.action,
            OperatorGroupAction::Reuse {
                name: "global-operators".into(),
                targets: Targets::AllNamespaces
            }
        );
    }

    #[test]
    fn an_existing_incompatible_group_is_refused() {
        let m = all_four(false, true, false, false);
        let existing = vec![group("global-operators", None)];
        let e = choose_operator_group(&req(Some(&m), None, Some(&existing))).unwrap_err();
        assert!(matches!(
            e,
            ChooseOperatorGroupError::ExistingGroupIncompatible { .. }
        ));
        assert!(e.hint().contains("--namespace"));
    }

    #[test]
    fn our_own_group_is_reapplied() {
        let m = all_four(true, true, false, false);
        let existing = vec![group("op-og", Some(vec!["ops"]))];
        let c = choose_operator_group(&req(Some(&m), None, Some(&existing))).unwrap();
        assert!(matches!(c.action, OperatorGroupAction::Create { .. }));
    }

    #[test]
    fn two_groups_are_refused() {
        let existing = vec![group("a", None), group("b", None)];
        let e = choose_operator_group(&req(None, None, Some(&existing))).unwrap_err();
        assert!(matches!(
            e,
            ChooseOperatorGroupError::TooManyGroups { count: 2, .. }
        ));
    }

    #[test]
    fn requested_targets_must_match_an_existing_group() {
        let m = all_four(true, true, false, false);
        let existing = vec![group("global-operators", None)];
        let t = vec!["ops".to_string()];
        let e = choose_operator_group(&req(Some(&m), Some(&t), Some(&existing))).unwrap_err();
        assert!(matches!(
            e,
            ChooseOperatorGroupError::ExistingGroupDiffers { .. }
        ));
    }
}
