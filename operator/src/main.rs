//! `operator` binary: all behaviour lives in the `operator` library and the runtime.

fn main() -> std::process::ExitCode {
    operator::main()
}
