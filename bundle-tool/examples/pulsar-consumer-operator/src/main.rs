//! The `manager` binary: `run`, `webhook`, `crd`, `rbac` (see `pulsar_consumer_operator::operator`).

fn main() -> std::process::ExitCode {
    pulsar_consumer_operator::operator().main()
}
