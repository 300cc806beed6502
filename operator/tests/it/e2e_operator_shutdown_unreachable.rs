//! SIGTERM while the API server does not answer: the operator runs against the stand-in through
//! a TCP relay; the relay then drops every connection and from then on accepts connections and
//! never answers (a black hole, like an API server behind a dead load balancer). The operator
//! must still exit 0 within a few seconds, not after the whole `--shutdown-timeout`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::operator_harness as harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use harness::*;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A TCP relay to `target` that can be turned into a black hole.
struct Relay {
    port: u16,
    black_hole: Arc<AtomicBool>,
    /// Cancelled to cut every relayed connection.
    cut: CancellationToken,
    /// Connections accepted while a black hole, kept open and never answered.
    held: Arc<std::sync::Mutex<Vec<TcpStream>>>,
}

impl Relay {
    async fn start(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let black_hole = Arc::new(AtomicBool::new(false));
        let cut = CancellationToken::new();
        let held = Arc::new(std::sync::Mutex::new(Vec::new()));
        {
            let (black_hole, cut, held) = (black_hole.clone(), cut.clone(), held.clone());
            tokio::spawn(async move {
                loop {
                    let Ok((inbound, _)) = listener.accept().await else {
                        continue;
                    };
                    if black_hole.load(Ordering::SeqCst) {
                        held.lock().unwrap().push(inbound);
                        continue;
                    }
                    let cut = cut.clone();
                    tokio::spawn(async move {
                        let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)).await else {
                            return;
                        };
                        let (mut in_read, mut in_write) = inbound.into_split();
                        let (mut out_read, mut out_write) = outbound.into_split();
                        // Answers keep flowing (watch events still arrive); requests stop once
                        // frozen, and both ends stay open.
                        let down = tokio::io::copy(&mut out_read, &mut in_write);
                        let up = async {
                            tokio::select! {
                                _ = tokio::io::copy(&mut in_read, &mut out_write) => {}
                                () = cut.cancelled() => std::future::pending::<()>().await,
                            }
                        };
                        let _ = tokio::join!(down, up);
                    });
                }
            });
        }
        Relay {
            port,
            black_hole,
            cut,
            held,
        }
    }

    /// Stops passing requests on every connection (answers already under way, such as watch
    /// events, still arrive); later connections are accepted and never answered.
    fn go_dark(&self) {
        self.black_hole.store(true, Ordering::SeqCst);
        self.cut.cancel();
    }
}

async fn sigterm_exits_promptly_when_the_api_server_is_gone(leader_elect: bool) {
    let env = Env::start(&["cache"]).await;
    let relay = Relay::start(env.standin.port()).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let yaml = env.standin.kubeconfig_yaml("default").replace(
        &format!("127.0.0.1:{}", env.standin.port()),
        &format!("127.0.0.1:{}", relay.port),
    );
    std::fs::write(&kubeconfig, yaml).unwrap();
    let mut op = Operator::spawn(
        &env,
        OperatorOptions {
            leader_elect,
            kubeconfig: Some(kubeconfig),
            // Converged objects are reconciled again every 300 ms, so reconciles are in flight
            // (and blocked on the API server) when it goes away.
            extra_args: vec!["--resync-period".into(), "300ms".into()],
            ..Default::default()
        },
    );
    op.wait_ready().await;
    if leader_elect {
        eventually("leader", 30, || async {
            op.is_leader().await.then_some(())
        })
        .await;
    }
    // Something to reconcile, so the controllers are busy with the API server.
    let api: kube::Api<memcached_api::v1::Memcached> =
        kube::Api::namespaced(env.client.clone(), "cache");
    let mc: memcached_api::v1::Memcached = serde_json::from_value(serde_json::json!({
        "apiVersion": "cache.example.com/v1", "kind": "Memcached",
        "metadata": {"name": "m1"}, "spec": {"replicas": 1}
    }))
    .unwrap();
    api.create(&Default::default(), &mc).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    relay.go_dark();
    // A change the operator still sees (its watches deliver) and must act on: its requests
    // hang.
    let patch = serde_json::json!({"spec": {"replicas": 2}});
    api.patch(
        "m1",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    op.signal("TERM");
    let status = op.wait_exit(40).await;
    let took = started.elapsed();
    eprintln!(
        "FIGURES: leader_elect={leader_elect}: SIGTERM to exit with the API server gone: {took:?} \
         ({} connections held by the black hole)",
        relay.held.lock().unwrap().len()
    );
    let log = op.log_text();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        took < Duration::from_secs(10),
        "SIGTERM took {took:?} with the API server gone (--shutdown-timeout is 25s)\n{log}"
    );
    assert!(log.contains("shutdown complete"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_the_api_server_gone_exits_promptly_as_leader() {
    sigterm_exits_promptly_when_the_api_server_is_gone(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_the_api_server_gone_exits_promptly_without_leader_election() {
    sigterm_exits_promptly_when_the_api_server_is_gone(false).await;
}
