//! The permission rows `create api` adds to a project's `src/rbac.rs`, and the roles generated
//! from them in-process (what `manager rbac --output-dir config/rbac` writes after the next
//! build: the same rows, the same generator).

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use olmkit_runtime::rbac::{self as runtime, Request};

use crate::ScaffoldError;
use crate::project::Project;
use crate::rust;

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// API group.
    pub group: String,
    /// Resource (or `resource/subresource`).
    pub resource: String,
    /// Requests.
    pub requests: Vec<Request>,
    /// Why.
    pub purpose: String,
    /// Checked by an admission plugin only.
    pub admission_only: bool,
}

fn request_name(r: Request) -> &'static str {
    match r {
        Request::Get => "Get",
        Request::List => "List",
        Request::Watch => "Watch",
        Request::Create => "Create",
        Request::Patch => "Patch",
        Request::ApplyMayCreate => "ApplyMayCreate",
        Request::Update => "Update",
        Request::Delete => "Delete",
    }
}

impl Row {
    /// The row as Rust, for the `+olmkit:scaffold:permissions` marker (indented by it).
    pub fn to_rust(&self) -> String {
        let requests: Vec<String> = self
            .requests
            .iter()
            .map(|r| format!("rbac::Request::{}", request_name(*r)))
            .collect();
        format!(
            "Permission {{\n    group: {},\n    resource: {},\n    requests: {},\n    scope: rbac::RoleScope::Manager,\n    purpose: {},\n    admission_only: {},\n}},\n",
            rust::string(&self.group),
            rust::string(&self.resource),
            rust::list("    ", "&", &requests),
            rust::string(&self.purpose),
            self.admission_only,
        )
    }

    /// Whether the table text already has a row for this group and resource.
    pub fn listed_in(&self, rbac_rs: &str) -> bool {
        let group = format!("group: {},", rust::string(&self.group));
        let resource = format!("resource: {},", rust::string(&self.resource));
        let lines: Vec<&str> = rbac_rs.lines().map(str::trim).collect();
        lines.windows(2).any(|w| w[0] == group && w[1] == resource)
    }
}

/// The rows of a kind's controller.
pub fn controller_rows(full_group: &str, plural: &str, kind: &str, deploy_image: bool) -> Vec<Row> {
    let mut rows = vec![
        Row {
            group: full_group.into(),
            resource: plural.into(),
            requests: if deploy_image {
                vec![Request::List, Request::Watch, Request::Patch]
            } else {
                vec![Request::List, Request::Watch]
            },
            purpose: if deploy_image {
                format!("{kind} controller: watch {kind} objects, add and remove its finalizer")
            } else {
                format!("{kind} controller: watch {kind} objects")
            },
            admission_only: false,
        },
        Row {
            group: full_group.into(),
            resource: format!("{plural}/status"),
            requests: vec![Request::Patch],
            purpose: format!("{kind} controller: server-side apply the status"),
            admission_only: false,
        },
    ];
    if deploy_image {
        rows.push(Row {
            group: full_group.into(),
            resource: format!("{plural}/finalizers"),
            requests: vec![Request::Update],
            purpose: format!(
                "{kind} controller: owner references with blockOwnerDeletion on its Deployments (OwnerReferencesPermissionEnforcement checks update on the owner's finalizers)"
            ),
            admission_only: true,
        });
        rows.push(deployments_row());
    }
    rows
}

/// The row every deploy-image controller shares.
pub fn deployments_row() -> Row {
    Row {
        group: "apps".into(),
        resource: "deployments".into(),
        requests: vec![Request::List, Request::Watch, Request::ApplyMayCreate],
        purpose: "deploy-image controllers: watch and server-side apply the Deployments they own"
            .into(),
        admission_only: false,
    }
}

/// Every row of a project's table as scaffolded: the runtime's events row, then each
/// controller's, each (group, resource) once.
pub fn project_rows(project: &Project) -> Result<Vec<Row>, ScaffoldError> {
    let mut rows = vec![Row {
        group: runtime::EVENTS.group.into(),
        resource: runtime::EVENTS.resource.into(),
        requests: runtime::EVENTS.requests.to_vec(),
        purpose: runtime::EVENTS.purpose.into(),
        admission_only: false,
    }];
    for r in project.resources.iter().filter(|r| r.controller) {
        let deploy_image = project
            .deploy_image_of(&r.group, &r.domain, &r.kind)?
            .is_some();
        for row in controller_rows(&r.qualified_group(), &r.plural(), &r.kind, deploy_image) {
            if !rows
                .iter()
                .any(|x| x.group == row.group && x.resource == row.resource)
            {
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// `config/rbac/role.yaml` for these rows: `olmkit_runtime::rbac::rules` over the same table.
pub fn manager_role_yaml(rows: &[Row]) -> Result<String, ScaffoldError> {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| (&a.group, &a.resource).cmp(&(&b.group, &b.resource)));
    let rules = sorted
        .into_iter()
        .map(|r| {
            let mut verbs: Vec<&str> = r
                .requests
                .iter()
                .flat_map(|q| q.verbs().iter().copied())
                .collect();
            verbs.sort_unstable();
            verbs.dedup();
            PolicyRule {
                api_groups: Some(vec![r.group.clone()]),
                resources: Some(vec![r.resource.clone()]),
                verbs: verbs.into_iter().map(String::from).collect(),
                ..Default::default()
            }
        })
        .collect();
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(runtime::MANAGER_ROLE.to_string()),
            ..Default::default()
        },
        rules: Some(rules),
        aggregation_rule: None,
    };
    yaml(&role)
}

fn yaml<T: serde::Serialize>(role: &T) -> Result<String, ScaffoldError> {
    runtime::to_yaml(role, "manager rbac").map_err(|e| ScaffoldError::Internal(e.to_string()))
}

/// The three generated roles: (file in `config/rbac`, content).
pub fn generated_roles(rows: &[Row]) -> Result<Vec<(&'static str, String)>, ScaffoldError> {
    Ok(vec![
        ("role.yaml", manager_role_yaml(rows)?),
        (
            "leader_election_role.yaml",
            yaml(&runtime::leader_election_role())?,
        ),
        (
            "metrics_auth_role.yaml",
            yaml(&runtime::metrics_auth_role())?,
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use olmkit_runtime::rbac::{Permission, RoleScope};

    /// The in-process role is byte for byte what the runtime generates from the same table.
    #[test]
    fn same_role_as_the_runtime() {
        const TABLE: &[Permission] = &[
            runtime::EVENTS,
            Permission {
                group: "demo.example.com",
                resource: "whalesays",
                requests: &[Request::List, Request::Watch, Request::Patch],
                scope: RoleScope::Manager,
                purpose: "x",
                admission_only: false,
            },
            Permission {
                group: "apps",
                resource: "deployments",
                requests: &[Request::List, Request::Watch, Request::ApplyMayCreate],
                scope: RoleScope::Manager,
                purpose: "x",
                admission_only: false,
            },
        ];
        let rows: Vec<Row> = TABLE
            .iter()
            .map(|p| Row {
                group: p.group.into(),
                resource: p.resource.into(),
                requests: p.requests.to_vec(),
                purpose: p.purpose.into(),
                admission_only: p.admission_only,
            })
            .collect();
        let expected = runtime::to_yaml(&runtime::manager_role(TABLE), "manager rbac").unwrap();
        assert_eq!(manager_role_yaml(&rows).unwrap(), expected);
    }

    #[test]
    fn rows_as_rust_and_their_detection() {
        let rows = controller_rows("demo.example.com", "whalesays", "Whalesay", true);
        let text = rows[0].to_rust();
        assert!(
            text.contains("    requests: &[\n        rbac::Request::List,"),
            "{text}"
        );
        assert!(rows[0].listed_in(&text));
        assert!(!rows[1].listed_in(&text));
        let plain = controller_rows("demo.example.com", "notes", "Note", false);
        assert!(
            plain[0]
                .to_rust()
                .contains("requests: &[rbac::Request::List, rbac::Request::Watch],")
        );
        assert_eq!(plain.len(), 2);
    }
}
