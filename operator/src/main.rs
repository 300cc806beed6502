//! `operator` binary: all behaviour lives in the `memcached_operator` library.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(2)
}
