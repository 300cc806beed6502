//! `bundle-tool serve`, a drop-in for `opm serve`. Thin: the server lives in `olmkit-catalog-server`.

use crate::exit::CmdError;
use crate::output::GlobalArgs;
use olmkit_catalog_server::server::{ServeArgs, ServeError, serve, shutdown_signal};

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
    // Never serve (or report SERVING for) a catalog a bundle-tool commit left half done.
    crate::cmd::common::pending::recover_before_reading([configs.as_path()])?;
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
