//! `bundle-tool serve` (a drop-in for `opm serve`) and `bundle-tool catalog index` (the
//! precomputed index that makes the server start instantly on big catalogs). Both are thin:
//! the server, the scanner and the index format live in `olmkit-registry`.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, spinner};
use olmkit_registry::build::{BuildIndexError, BuildOptions, build_index};
use olmkit_registry::index::{default_index_path, encode_index};
use olmkit_registry::server::{ServeArgs, ServeError, serve, shutdown_signal};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `bundle-tool serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    serve: ServeArgs,
}

/// Runs the command.
pub async fn run(args: Args, _g: &GlobalArgs) -> Result<(), CmdError> {
    let port = args.serve.port;
    let configs = args.serve.configs.clone();
    match serve(args.serve.into_options(), shutdown_signal()).await {
        Ok(()) => Ok(()),
        Err(e @ ServeError::Load { .. }) => Err(CmdError::user(e)
            .hint(format!(
                "`bundle-tool catalog validate {}` lists every problem",
                configs.display()
            ))
            .hint("without --exit-on-load-error the server stays up and reports NOT_SERVING")),
        Err(e @ ServeError::Bind { .. }) => Err(CmdError::user(e).hint(format!(
            "is another server using port {port}? choose another with --port"
        ))),
        Err(e) => Err(CmdError::unexpected(e)),
    }
}

/// Arguments of `bundle-tool catalog index`.
#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    /// The catalog directory (File-Based Catalog).
    #[arg(value_name = "CONFIGS_DIR", default_value = "catalog")]
    pub configs: PathBuf,
    /// Where to write the index. Default: `<CONFIGS_DIR>/../index`, where `bundle-tool serve`
    /// and `catalog-server` look for it.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Threads used to scan the catalog (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// Runs `bundle-tool catalog index`.
pub async fn run_index(args: IndexArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_index_path(&args.configs));
    if out.starts_with(&args.configs) {
        return Err(CmdError::msg(format!(
            "the index {} would be inside the catalog {} and be read as part of it",
            out.display(),
            args.configs.display()
        ))
        .hint(
            "write it next to the catalog (the default) or list it in the catalog's .indexignore",
        ));
    }
    let bar = spinner(g, &format!("indexing {}", args.configs.display()));
    let started = Instant::now();
    let configs = args.configs.clone();
    let threads = args.threads;
    let built = tokio::task::spawn_blocking(move || {
        build_index(
            &configs,
            &BuildOptions {
                threads,
                checksums: true,
            },
        )
    })
    .await
    .unexpected_err()?;
    bar.finish_and_clear();
    let built = match built {
        Ok(b) => b,
        Err(BuildIndexError::Invalid { report, .. }) => {
            eprint!("{}", report.render_text());
            eprintln!(
                "error: {} cannot be served, so it was not indexed",
                args.configs.display()
            );
            return Err(CmdError::Reported);
        }
        Err(e) => {
            return Err(CmdError::user(e).hint(format!(
                "`bundle-tool catalog validate {}` shows what is wrong",
                args.configs.display()
            )));
        }
    };
    for f in &built.report.findings {
        eprintln!("warning: {}", f.message);
    }
    let bytes = encode_index(&built.index);
    olmkit_core::fsio::write_file_atomic(&out, &bytes)
        .user_hint("check that the output directory exists and is writable")?;
    // Catalog images often run the server as another user than the one that built them.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644))
            .user_hint("check the output file's permissions")?;
    }
    let bundles = built.index.bundles.len();
    eprintln!(
        "indexed {}: {} packages, {} bundles, {} files -> {} ({} KiB) in {:.1}s",
        args.configs.display(),
        built.index.packages.len(),
        bundles,
        built.index.files.len(),
        out.display(),
        bytes.len().div_ceil(1024),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
