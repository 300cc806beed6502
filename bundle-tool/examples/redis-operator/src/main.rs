//! The `manager` binary: `run`, `webhook`, `crd`, `rbac` (see `redis_operator::operator`).

fn main() -> std::process::ExitCode {
    redis_operator::operator().main()
}
