//! The `manager` binary: `run`, `webhook`, `crd`, `rbac` (see `whalesay_operator::operator`).

fn main() -> std::process::ExitCode {
    whalesay_operator::operator().main()
}
