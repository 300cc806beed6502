//! `operator` binary: all behaviour lives in the `memcached_operator` library.

fn main() -> std::process::ExitCode {
    memcached_operator::cli::main()
}
