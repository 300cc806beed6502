//! Where the operator binary goes: the command of the manifests' manager container
//! ([`olmkit_core::csv::manager_container`]), as plain data for olmkit-image
//! ([`ManagerCommand`]). Planning records it from the manifests; the build stage and `image
//! build` read it from a CSV.

use olmkit_core::csv::{Csv, ManagerContainer};
use olmkit_image::images::ManagerCommand;

/// The manager container's command in a ClusterServiceVersion `csv` (read from `file`), by
/// the one manager-container rule ([`olmkit_core::csv::manager_container`]); `None` when it has no command (the pod runs the
/// image's entrypoint) or no Deployment.
pub fn manager_command_of_csv(
    csv: &serde_json::Value,
    file: impl Into<String>,
) -> Option<ManagerCommand> {
    let c = Csv::new(csv).manager_container()?;
    manager_command_of_container(
        &c,
        &format!(
            "spec.install.spec.deployments[{}].spec.template.spec.containers[{}]",
            c.deployment, c.index
        ),
        file,
    )
}

/// The command of a manager container found at `prefix` (a field path) in `file`; `None`
/// when it has none.
pub(crate) fn manager_command_of_container(
    c: &ManagerContainer<'_>,
    prefix: &str,
    file: impl Into<String>,
) -> Option<ManagerCommand> {
    let program = c.command()?.first()?.to_string();
    Some(ManagerCommand {
        program,
        working_dir: c.working_dir().map(str::to_string),
        field: format!("{prefix}.command[0]"),
        file: file.into(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_manager_command_of_a_csv_names_its_field() {
        let csv = |containers: serde_json::Value| {
            serde_json::json!({"kind": "ClusterServiceVersion", "spec": {"install": {"spec": {
                "deployments": [{"name": "controller-manager", "spec": {"template": {
                    "spec": {"containers": containers}
                }}}]
            }}}})
        };
        let with_command = csv(serde_json::json!([
            {"name": "proxy", "image": "p:1", "command": ["/proxy"]},
            {"name": "manager", "image": "m:1", "command": ["/manager"], "args": ["--leader-elect"]}
        ]));
        let cmd = manager_command_of_csv(&with_command, "bundle/x.csv.yaml").unwrap();
        assert_eq!(cmd.program, "/manager");
        assert_eq!(
            cmd.what(),
            "bundle/x.csv.yaml: field spec.install.spec.deployments[0].spec.template.spec.containers[1].command[0]"
        );
        let plain = csv(serde_json::json!([{"name": "manager", "image": "m:1"}]));
        assert_eq!(manager_command_of_csv(&plain, "x"), None);
    }
}
