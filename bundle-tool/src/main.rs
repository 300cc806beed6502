//! `bundle-tool` binary: all behaviour lives in the `bundle_tool` library.

fn main() -> std::process::ExitCode {
    bundle_tool::main()
}
