//! The `manager` binary: `run`, `webhook`, `crd`, `rbac` (see `{{project_crate}}::operator`).

fn main() -> std::process::ExitCode {
    {{project_crate}}::operator().main()
}
