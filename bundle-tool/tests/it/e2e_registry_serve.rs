//! End to end: `bundle-tool serve` as a drop-in for `opm serve`, checked by an independent
//! gRPC client (Python grpcio with stubs generated at test time) against expectations computed
//! in Python from the FBC files. Also `bundle-tool catalog index`, health during and after the
//! load, broken catalogs, and — when `../shared` is present — conformance with operator-registry's
//! own `registry.proto` (stubs and a descriptor-level contract check).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::registry_harness as harness;

use e2e_support::paths;
use harness::{Server, assert_ok, check_registry, copy_dir, own_proto, run_python};
use olmkit_catalog_server::pb;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bundle-tool"))
}

fn root() -> PathBuf {
    paths::workspace_root()
}

fn serve(args: &[&str]) -> Server {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    Server::start(&bin(), &all)
}

fn edge_catalog() -> PathBuf {
    paths::fixtures().join("registry/edge-catalog")
}

fn valid_examples() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(paths::fixtures().join("fbc-examples/valid"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.push(edge_catalog());
    // This repository's own released catalog (`bundle-tool release` wrote it).
    dirs.push(paths::workspace_root().join("catalog"));
    dirs
}

/// Renders the three real community operators (every version, manifests embedded) into one
/// catalog with `bundle-tool catalog from-bundles`.
fn real_operator_catalog(dir: &Path) -> PathBuf {
    let cat = dir.join("real-catalog");
    for op in [
        "authorino-operator",
        "skupper-operator",
        "node-healthcheck-operator",
    ] {
        let out = Command::new(bin())
            .args(["catalog", "from-bundles"])
            .arg(paths::fixtures().join("real-bundles").join(op))
            .args([
                "--image-ref-template",
                "quay.io/community-operator-pipeline-prod/{package}:{version}",
                "--bundle-object",
                "-o",
                "json",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "render {op}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::create_dir_all(cat.join(op)).unwrap();
        std::fs::write(cat.join(op).join("catalog.json"), &out.stdout).unwrap();
    }
    cat
}

#[test]
fn serves_every_example_catalog_like_opm() {
    let root = root();
    for cat in valid_examples() {
        let server = serve(&[cat.to_str().unwrap()]);
        let out = check_registry(&root, &server, &own_proto(&root), &cat);
        assert!(out.starts_with("OK:"), "{out}");
        let (status, log) = server.stop();
        assert!(status.success(), "{status}: {log}");
        assert!(log.contains("catalog loaded; serving"), "{log}");
        assert!(log.contains("received SIGTERM"), "{log}");
    }
}

#[test]
fn serves_real_operator_catalogs() {
    let root = root();
    let tmp = tempfile::tempdir().unwrap();
    let cat = real_operator_catalog(tmp.path());
    let server = serve(&[cat.to_str().unwrap()]);
    let out = check_registry(&root, &server, &own_proto(&root), &cat);
    assert!(out.contains("48 bundles listed"), "{out}");
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn health_is_not_serving_until_the_catalog_is_loaded() {
    let root = root();
    let cat = edge_catalog();
    let server = serve(&[cat.to_str().unwrap(), "--debug-load-delay-ms", "2500"]);
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
    let (status, _) = server.stop();
    assert!(status.success());
}

#[test]
fn a_broken_catalog_stays_not_serving_and_says_why() {
    let root = root();
    let cat = paths::fixtures().join("fbc-examples/invalid/model-multiple-channel-heads");
    let server = serve(&[cat.to_str().unwrap()]);
    server.wait_log("cannot serve the catalog", Duration::from_secs(30));
    let out = run_python(
        &root,
        "check_health.py",
        &[
            "--addr",
            &server.addr,
            "--expect",
            "never-serving",
            "--for",
            "1.5",
            "--proto",
            own_proto(&root).to_str().unwrap(),
            "--reason",
            "multiple channel heads",
        ],
    );
    assert_ok(&out, &server.log());
    let (status, log) = server.stop();
    assert!(
        status.success(),
        "a NOT_SERVING server still shuts down cleanly: {log}"
    );
    assert!(
        log.contains("example-operator.v0.1.0, example-operator.v0.2.0"),
        "{log}"
    );
}

#[test]
fn exit_on_load_error_exits_1_with_every_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let term = tmp.path().join("termination-log");
    for (dir, want) in [
        ("model-multiple-channel-heads", "multiple channel heads"),
        ("parse-no-schema", "missing root schema field"),
        ("convert-invalid-version", "v0.1.0"),
    ] {
        let cat = paths::fixtures().join("fbc-examples/invalid").join(dir);
        let out = Command::new(bin())
            .arg("serve")
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
        let log = harness::strip_ansi(&String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{dir}: {log}");
        assert!(log.contains(want), "{dir}: {log}");
        assert!(log.contains("hint:"), "{dir}: {log}");
        let written = std::fs::read_to_string(&term).unwrap();
        assert!(written.contains(want), "{dir}: termination log {written:?}");
    }
    // A missing directory is a load error too.
    let out = Command::new(bin())
        .args([
            "serve",
            "/no/such/catalog",
            "--exit-on-load-error",
            "--address",
            "127.0.0.1",
        ])
        .args(["--port", &harness::free_port().to_string()])
        .output()
        .unwrap();
    let log = harness::strip_ansi(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("not a catalog directory"), "{log}");
}

#[test]
fn a_busy_port_is_a_user_error() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = Command::new(bin())
        .args(["serve"])
        .arg(edge_catalog())
        .args(["--address", "127.0.0.1", "--port", &port])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot listen") && err.contains("hint:"),
        "{err}"
    );
}

fn index(catalog: &Path, out: &Path) -> std::process::Output {
    Command::new(bin())
        .args(["catalog", "index"])
        .arg(catalog)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn catalog_index_is_deterministic_and_used_by_the_server() {
    let root = root();
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    copy_dir(&edge_catalog(), &cat);

    // Default location: next to the catalog, where the server looks.
    let out = Command::new(bin())
        .args(["catalog", "index"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = std::fs::read(tmp.path().join("index")).unwrap();
    let again = tmp.path().join("index-again");
    assert!(index(&cat, &again).status.success());
    assert_eq!(
        first,
        std::fs::read(&again).unwrap(),
        "same catalog, same bytes"
    );

    let server = serve(&[cat.to_str().unwrap()]);
    server.wait_log("catalog loaded", Duration::from_secs(30));
    assert!(server.log().contains("from=index"), "{}", server.log());
    check_registry(&root, &server, &own_proto(&root), &cat);
    server.stop();

    // A catalog edited after indexing (a file changed size): the index is ignored.
    let json = cat.join("alpha-op/catalog.json");
    let mut text = std::fs::read_to_string(&json).unwrap();
    text.push('\n');
    std::fs::write(&json, text).unwrap();
    let server = serve(&[cat.to_str().unwrap()]);
    server.wait_log("catalog loaded", Duration::from_secs(30));
    let log = server.log();
    assert!(
        log.contains("is stale") && log.contains("from=FBC scan"),
        "{log}"
    );
    check_registry(&root, &server, &own_proto(&root), &cat);
    server.stop();

    // --no-index and an explicit --index.
    assert!(index(&cat, &again).status.success());
    let server = serve(&[cat.to_str().unwrap(), "--no-index"]);
    server.wait_log("catalog loaded", Duration::from_secs(30));
    assert!(server.log().contains("from=FBC scan"));
    server.stop();
    let server = serve(&[cat.to_str().unwrap(), "--index", again.to_str().unwrap()]);
    server.wait_log("catalog loaded", Duration::from_secs(30));
    assert!(server.log().contains("from=index"), "{}", server.log());
    server.stop();
}

#[test]
fn an_index_refuses_to_serve_bytes_that_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("configs");
    copy_dir(&edge_catalog(), &cat);
    assert!(index(&cat, &tmp.path().join("index")).status.success());
    // Same size, different bytes: only the per-blob checksum can notice.
    let json = cat.join("alpha-op/catalog.json");
    let text = std::fs::read_to_string(&json).unwrap();
    let edited = text.replacen(
        "\"image\": \"quay.io/example/alpha-op-bundle:v1.0.0\"",
        "\"image\": \"quay.io/example/alpha-op-bundle:v1.0.1\"",
        1,
    );
    assert_ne!(text, edited);
    std::fs::write(&json, edited).unwrap();

    let server = serve(&[cat.to_str().unwrap()]);
    server.wait_log("catalog loaded", Duration::from_secs(30));
    assert!(server.log().contains("from=index"), "{}", server.log());
    let addr = format!("http://{}", server.addr);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = rt.block_on(async {
        let channel = olmkit_catalog_server::tonic::transport::Endpoint::from_shared(addr)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = pb::registry_client::RegistryClient::new(channel);
        // Another bundle still reads fine...
        let ok = client
            .get_bundle(pb::GetBundleRequest {
                pkg_name: "beta-op".into(),
                channel_name: "fast".into(),
                csv_name: "beta-op.v1.1.0".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(ok.csv_json.contains("beta-op.v1.1.0"));
        // ...the edited one is refused rather than served wrong.
        client
            .get_bundle(pb::GetBundleRequest {
                pkg_name: "alpha-op".into(),
                channel_name: "stable".into(),
                csv_name: "alpha-op.v1.0.0".into(),
            })
            .await
            .unwrap_err()
    });
    drop(rt);
    assert_eq!(
        status.code(),
        olmkit_catalog_server::tonic::Code::Internal,
        "{status:?}"
    );
    assert!(status.message().contains("no longer match"), "{status:?}");
    let (exit, log) = server.stop();
    assert!(exit.success(), "{log}");
}

#[test]
fn conformance_with_upstream_registry_proto() {
    let Some(reference) = paths::upstream_reference() else {
        paths::announce_skip(
            "registry upstream-proto conformance",
            "../shared/reference is absent: operator-registry's registry.proto is not available",
        );
        return;
    };
    let root = root();
    let tmp = tempfile::tempdir().unwrap();
    let catalogs = [edge_catalog(), real_operator_catalog(tmp.path())];
    for proto in [
        reference.join("registry-api/registry.proto"),
        reference.join("registry-api/pre-experimental/registry.proto"),
    ] {
        for cat in &catalogs {
            let server = serve(&[cat.to_str().unwrap()]);
            let out = check_registry(&root, &server, &proto, cat);
            assert!(out.starts_with("OK:"), "{out}");
            server.stop();
        }
    }
}

/// Every message, field, service and method of a proto package, as comparable text.
fn describe(fds: &prost_types::FileDescriptorSet, package: &str) -> Vec<String> {
    let mut out = Vec::new();
    for f in fds.file.iter().filter(|f| f.package() == package) {
        for m in &f.message_type {
            out.push(format!("message {}", m.name()));
            for fd in &m.field {
                out.push(format!(
                    "  {}.{} = {} {:?} {:?} {}",
                    m.name(),
                    fd.name(),
                    fd.number(),
                    fd.r#type(),
                    fd.label(),
                    fd.type_name()
                ));
            }
        }
        for s in &f.service {
            out.push(format!("service {}", s.name()));
            for m in &s.method {
                out.push(format!(
                    "  {}.{}({}{}) returns ({}{}) deprecated={}",
                    s.name(),
                    m.name(),
                    if m.client_streaming() { "stream " } else { "" },
                    m.input_type(),
                    if m.server_streaming() { "stream " } else { "" },
                    m.output_type(),
                    m.options.as_ref().is_some_and(|o| o.deprecated())
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn contract_field_numbers_match_upstream() {
    let Some(reference) = paths::upstream_reference() else {
        paths::announce_skip(
            "registry proto contract",
            "../shared/reference is absent: cannot compare field numbers with operator-registry",
        );
        return;
    };
    let ours = protox::compile(
        [own_proto(&root())],
        [root().join("bundle-tool/crates/olmkit-catalog-server/proto")],
    )
    .unwrap();
    let upstream_file = reference.join("registry-api/registry.proto");
    let theirs = protox::compile([&upstream_file], [reference.join("registry-api")]).unwrap();
    let (ours, theirs) = (describe(&ours, "api"), describe(&theirs, "api"));
    assert!(
        theirs.len() > 50,
        "parsed too little of the upstream proto: {theirs:?}"
    );
    let missing: Vec<&String> = theirs.iter().filter(|l| !ours.contains(l)).collect();
    let extra: Vec<&String> = ours.iter().filter(|l| !theirs.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "wire contract differs from operator-registry\nmissing: {missing:#?}\nextra: {extra:#?}"
    );
}
