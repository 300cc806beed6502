//! Prints the validation report of a catalog directory (a debugging aid: `cargo run --example validate_dir -- DIR`).
fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: validate_dir DIR");
        std::process::exit(2);
    };
    match olmkit_catalog::declcfg::load::load_dir_with_files(
        std::path::Path::new(&dir),
        &olmkit_catalog::declcfg::LoadOptions::graph_only(),
    ) {
        Ok((cfg, origins)) => {
            print!(
                "{}",
                olmkit_catalog::validate::validate(&cfg, Some(&origins)).render_text()
            )
        }
        Err(e) => println!("load error: {e}"),
    }
}
