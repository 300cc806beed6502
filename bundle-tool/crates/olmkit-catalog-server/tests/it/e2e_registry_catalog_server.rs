//! End to end: the `catalog-server` binary (the catalog image's entrypoint) — the same server
//! as `bundle-tool serve`, checked by the independent Python grpcio client, plus what only the
//! image entrypoint relies on: an index written by the library, the termination log, exit codes
//! and a shutdown that a stuck client cannot hold up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::registry_harness as harness;

use harness::{Server, assert_ok, check_registry, copy_dir, own_proto, run_python};
use olmkit_catalog_server::build::{BuildOptions, build_index};
use olmkit_catalog_server::index::write_index;
use olmkit_catalog_server::pb;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_catalog-server"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .canonicalize()
        .unwrap()
}

fn edge_catalog() -> PathBuf {
    root().join("tests/fixtures/registry/edge-catalog")
}

#[test]
fn serves_a_catalog_and_exits_cleanly_on_sigterm() {
    let root = root();
    let cat = edge_catalog();
    let server = Server::start(
        &bin(),
        &[cat.to_str().unwrap(), "--debug-load-delay-ms", "1500"],
    );
    let out = run_python(
        &root,
        "check_health.py",
        &[
            "--addr",
            &server.addr,
            "--expect",
            "loading-then-serving",
            "--proto",
            own_proto(&root).to_str().unwrap(),
        ],
    );
    assert_ok(&out, &server.log());
    check_registry(&root, &server, &own_proto(&root), &cat);
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
    assert!(
        log.contains("catalog loaded; serving") && log.contains("packages=2"),
        "{log}"
    );
}

#[test]
fn starts_from_an_index_written_by_the_library() {
    let root = root();
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    copy_dir(&edge_catalog(), &cat);
    let built = build_index(&cat, &BuildOptions::default()).unwrap();
    let index = tmp.path().join("catalog.index");
    write_index(&index, &built.index).unwrap();
    let server = Server::start(
        &bin(),
        &[cat.to_str().unwrap(), "--index", index.to_str().unwrap()],
    );
    server.wait_log("catalog loaded", Duration::from_secs(30));
    assert!(server.log().contains("from=index"), "{}", server.log());
    check_registry(&root, &server, &own_proto(&root), &cat);
    server.stop();

    // A file that is not an index is reported and the catalog scanned instead.
    std::fs::write(&index, b"not an index").unwrap();
    let server = Server::start(
        &bin(),
        &[cat.to_str().unwrap(), "--index", index.to_str().unwrap()],
    );
    server.wait_log("catalog loaded", Duration::from_secs(30));
    let log = server.log();
    assert!(
        log.contains("is not a catalog index") && log.contains("from=FBC scan"),
        "{log}"
    );
    server.stop();
}

#[test]
fn load_errors_exit_1_and_fill_the_termination_log() {
    let tmp = tempfile::tempdir().unwrap();
    let term = tmp.path().join("termination-log");
    let cat = root().join("tests/fixtures/fbc-examples/invalid/model-replaces-cycle");
    let out = Command::new(bin())
        .arg(&cat)
        .args([
            "--address",
            "127.0.0.1",
            "--port",
            &harness::free_port().to_string(),
        ])
        .args(["--exit-on-load-error", "--termination-log"])
        .arg(&term)
        .output()
        .unwrap();
    let err = harness::strip_ansi(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("detected cycle in replaces chain"), "{err}");
    let written = std::fs::read_to_string(&term).unwrap();
    assert!(
        written.contains("detected cycle in replaces chain"),
        "{written}"
    );

    // Without the flag the server stays up, NOT_SERVING, and says why over gRPC.
    let root = root();
    let server = Server::start(&bin(), &[cat.to_str().unwrap()]);
    let out = run_python(
        &root,
        "check_health.py",
        &[
            "--addr",
            &server.addr,
            "--expect",
            "never-serving",
            "--for",
            "1",
            "--proto",
            own_proto(&root).to_str().unwrap(),
            "--reason",
            "cycle",
        ],
    );
    assert_ok(&out, &server.log());
    assert!(server.stop().0.success());
}

#[test]
fn a_port_in_use_exits_2() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = Command::new(bin())
        .arg(edge_catalog())
        .args(["--address", "127.0.0.1", "--port", &port])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
}

#[test]
fn a_client_that_never_hangs_up_does_not_block_shutdown() {
    let server = Server::start(&bin(), &[edge_catalog().to_str().unwrap()]);
    server.wait_log("catalog loaded", Duration::from_secs(30));
    // A connected client whose runtime is never polled again: it cannot answer GOAWAY.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = format!("http://{}", server.addr);
    let packages = rt.block_on(async {
        let channel = olmkit_catalog_server::tonic::transport::Endpoint::from_shared(addr)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = pb::registry_client::RegistryClient::new(channel.clone());
        let pkg = client
            .get_package(pb::GetPackageRequest {
                name: "alpha-op".into(),
            })
            .await
            .unwrap()
            .into_inner();
        (pkg, channel)
    });
    assert_eq!(packages.0.default_channel_name, "stable");
    let started = Instant::now();
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
    assert!(started.elapsed() < Duration::from_secs(25), "{log}");
    drop(packages);
    drop(rt);
}

/// Runs the server binary under the name OLM's catalog pod probes exec (catalog images link
/// `/bin/grpc_health_probe` to it); returns (exit code, stdout, stderr).
fn health_probe(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let link = dir.join("grpc_health_probe");
    if !link.exists() {
        std::os::unix::fs::symlink(bin(), &link).unwrap();
    }
    let out = Command::new(&link).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn acts_as_grpc_health_probe_with_its_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    // Loading (NOT_SERVING) then serving, as OLM's readiness probe sees it.
    let server = Server::start(
        &bin(),
        &[
            edge_catalog().to_str().unwrap(),
            "--debug-load-delay-ms",
            "2000",
        ],
    );
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let (code, _, err) = health_probe(tmp.path(), &[&format!("-addr=:{port}")]);
    assert_eq!(code, 4, "NOT_SERVING while loading: {err}");
    assert!(err.contains("NOT_SERVING"), "{err}");
    server.wait_log("catalog loaded", Duration::from_secs(30));
    let (code, out, err) = health_probe(tmp.path(), &[&format!("-addr=:{port}")]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "status: SERVING");
    let (code, out, _) = health_probe(
        tmp.path(),
        &[
            "--addr",
            &server.addr,
            "-service=api.Registry",
            "-rpc-timeout=2s",
            "-quiet",
        ],
    );
    assert_eq!(code, 0);
    assert!(out.is_empty());
    // An unknown service is an RPC failure (NOT_FOUND), like grpc_health_probe reports it.
    let (code, _, err) = health_probe(tmp.path(), &[&format!("-addr=:{port}"), "-service=nope"]);
    assert_eq!(code, 3, "{err}");
    // Bad flags.
    let (code, _, err) = health_probe(tmp.path(), &["-addr=:1", "-tls"]);
    assert_eq!(code, 1, "{err}");
    server.stop();
    // Nobody listening: connection failure.
    let (code, _, err) = health_probe(
        tmp.path(),
        &[&format!("-addr=127.0.0.1:{port}"), "-connect-timeout=300ms"],
    );
    assert_eq!(code, 2, "{err}");
}
