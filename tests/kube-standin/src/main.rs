//! `kube-standin` binary: starts the stand-in API server, prints `listening on URL` on stdout,
//! optionally writes a kubeconfig, logs to stderr and serves until SIGTERM/SIGINT.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use kube_standin::{AuthorizationMode, StandIn, StandInOptions, load_crd_files};

/// An in-memory Kubernetes API server stand-in for tests.
#[derive(Debug, Parser)]
#[command(name = "kube-standin", version)]
struct Args {
    /// Port on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Write a kubeconfig pointing at the stand-in to this file.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the kubeconfig's context (created if missing).
    #[arg(long, default_value = "default")]
    namespace: String,
    /// CRD file (YAML or JSON, multi-document allowed) to preload; repeatable.
    #[arg(long = "crd")]
    crds: Vec<PathBuf>,
    /// Simulate the Deployment controller and kubelet.
    #[arg(long)]
    simulate_workloads: bool,
    /// Conversion webhook service mapping `namespace/name=https://127.0.0.1:9443`; repeatable.
    #[arg(long = "service-endpoint", value_parser = parse_endpoint)]
    service_endpoints: Vec<(String, String)>,
    /// `AlwaysAllow` or `RBAC` (kube-apiserver's `--authorization-mode`); the kubeconfig's
    /// user is a cluster admin either way.
    #[arg(long, default_value = "AlwaysAllow", value_parser = parse_mode)]
    authorization_mode: AuthorizationMode,
}

fn parse_mode(s: &str) -> Result<AuthorizationMode, String> {
    match s {
        "AlwaysAllow" => Ok(AuthorizationMode::AlwaysAllow),
        "RBAC" => Ok(AuthorizationMode::Rbac),
        other => Err(format!("expected AlwaysAllow or RBAC, got {other:?}")),
    }
}

fn parse_endpoint(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected namespace/name=URL, got {s:?}"))?;
    if !k.contains('/') {
        return Err(format!("expected namespace/name before '=', got {k:?}"));
    }
    Ok((k.to_string(), v.to_string()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let crds = load_crd_files(&args.crds).context("loading --crd files")?;
    let opts = StandInOptions {
        port: args.port,
        simulate_workloads: args.simulate_workloads,
        crds,
        service_endpoints: args
            .service_endpoints
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        namespaces: vec![args.namespace.clone()],
        authorization: args.authorization_mode,
        ..Default::default()
    };
    let standin = StandIn::start(opts)
        .await
        .context("starting the stand-in")?;
    if let Some(path) = &args.kubeconfig {
        standin
            .write_kubeconfig(path, &args.namespace)
            .with_context(|| format!("writing kubeconfig {}", path.display()))?;
        tracing::info!(path = %path.display(), "kubeconfig written");
    }
    // The handlers exist before "listening" is printed: a caller that stops us as soon as we
    // are up must get a clean shutdown, not the default SIGTERM death.
    let signals = wait_for_signal();
    let mut signals = std::pin::pin!(signals);
    // Polled once so that the handlers are registered now.
    let signalled = futures::poll!(signals.as_mut()).is_ready();
    println!("listening on {}", standin.url());
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    if !signalled {
        signals.await;
    }
    tracing::info!("shutting down");
    standin.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
