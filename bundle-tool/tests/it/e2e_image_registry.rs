//! End to end against a real registry (Debian's `docker-registry`, CNCF distribution):
//! `bundle-tool image build ... --push` and `image push`, checked with skopeo (inspect for
//! digests and labels, copy to `oci:`/`dir:` to compare every layer byte and tar entry),
//! `image inspect` from the registry, basic auth from env and from a Docker config file, and
//! failures: unreachable registry, HTTPS against a plain-HTTP registry, wrong password, unknown
//! repository/tag, connections dropped or cut mid-upload by a proxy (retried and recovered),
//! a registry that stays down (bounded retries, exit codes 1 vs 2), and a layout that stays
//! whole through all of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::image_harness as harness;

use e2e_support::registry::{
    Flakiness, FlakyProxy, Registry, gnu_tar_listing, require_tool, skopeo,
};
use harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Retry options that keep failing tests fast.
const FAST: [&str; 4] = ["--retries", "3", "--retry-backoff", "20ms"];

struct Built {
    _tmp: tempfile::TempDir,
    layout: PathBuf,
    bin: PathBuf,
}

fn layout_with_operator() -> Built {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let bin = static_binary(tmp.path(), "operator");
    ok(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(&bin)
        .args(["--arg", "run", "--tag", "op:v1", "--layout"])
        .arg(&layout));
    Built {
        _tmp: tmp,
        layout,
        bin,
    }
}

fn push(layout: &Path, name: &str, to: &str, extra: &[&str]) -> (i32, String, String) {
    run(bundle_tool()
        .args([
            "image",
            "push",
            "--insecure",
            "--tag",
            name,
            "--to",
            to,
            "--output",
            "json",
        ])
        .args(extra)
        .arg("--layout")
        .arg(layout))
}

fn skopeo_remote(args: &[&str], reference: &str) -> String {
    let target = format!("docker://{reference}");
    let mut all = args.to_vec();
    all.push("--tls-verify=false");
    all.push(&target);
    skopeo(&all)
}

#[test]
fn pushes_three_images_that_skopeo_reads_back_identically() {
    require_tool("skopeo");
    let registry = Registry::start();
    let host = registry.host();
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let bin = static_binary(tmp.path(), "operator");
    let server = static_binary(tmp.path(), "catalog-server");
    let op_ref = format!("{host}/example/memcached-operator:v0.1.0");
    let bundle_ref = format!("{host}/example/memcached-operator-bundle:v0.1.0");
    let cat_ref = format!("{host}/example/memcached-operator-catalog:latest");

    let op = json(&ok(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(&bin)
        .args([
            "--arg",
            "run",
            "--title",
            "memcached-operator",
            "--push",
            "--insecure",
        ])
        .args(["--output", "json", "--tag", &op_ref, "--layout"])
        .arg(&layout)));
    let bundle = json(&ok(bundle_tool()
        .args(["image", "build", "bundle"])
        .arg(fixture_bundle())
        .args([
            "--push",
            "--insecure",
            "--output",
            "json",
            "--tag",
            &bundle_ref,
            "--layout",
        ])
        .arg(&layout)));
    let catalog = json(&ok(bundle_tool()
        .args(["image", "build", "catalog"])
        .arg(fixture_catalog())
        .arg("--server")
        .arg(&server)
        .args([
            "--health-probe-symlink",
            "--push",
            "--insecure",
            "--output",
            "json",
        ])
        .args(["--tag", &cat_ref, "--layout"])
        .arg(&layout)));
    // The catalog shares its base layer with the operator: the registry had it already.
    assert_eq!(
        catalog["pushed"]["blobsExisting"], 0,
        "different repository, no mount"
    );
    for (r, built) in [(&op_ref, &op), (&bundle_ref, &bundle), (&cat_ref, &catalog)] {
        assert_eq!(built["pushed"]["digest"], built["digest"]);
        let info = json(&skopeo_remote(&["inspect"], r));
        assert_eq!(info["Digest"], built["digest"], "{r}");
        let layers: Vec<&str> = built["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["digest"].as_str().unwrap())
            .collect();
        let remote_layers: Vec<&str> = info["Layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert_eq!(remote_layers, layers, "{r}");
    }
    let annotations = olmkit_bundle::load_bundle_dir(&fixture_bundle())
        .unwrap()
        .annotations;
    let bundle_info = json(&skopeo_remote(&["inspect"], &bundle_ref));
    for (k, v) in &annotations {
        assert_eq!(bundle_info["Labels"][k], serde_json::json!(v), "{k}");
    }
    let cat_cfg = json(&skopeo_remote(&["inspect", "--config"], &cat_ref));
    assert_eq!(
        cat_cfg["config"]["Labels"]["operators.operatorframework.io.index.configs.v1"],
        "/configs"
    );

    // skopeo copies the images out of the registry: same blobs, byte for byte, and the same
    // tar entries (paths, modes, owners) as the layout we built.
    for (i, r) in [&op_ref, &cat_ref, &bundle_ref].into_iter().enumerate() {
        let name = r;
        let copy = tmp.path().join(format!("copy-{i}"));
        skopeo(&[
            "copy",
            "--src-tls-verify=false",
            &format!("docker://{r}"),
            &format!("dir:{}", copy.display()),
        ]);
        for ours in layer_blobs(&layout, name) {
            let theirs = copy.join(ours.file_name().unwrap());
            assert_eq!(
                std::fs::read(&theirs).unwrap(),
                std::fs::read(&ours).unwrap()
            );
            assert_eq!(gnu_tar_listing(&theirs), gnu_tar_listing(&ours));
        }
        let manifest = std::fs::read(copy.join("manifest.json")).unwrap();
        assert_eq!(
            format!("sha256:{}", olmkit_image::Digest::of(&manifest).hex()),
            olmkit_image::layout::read_from_layout(&layout, Some(name))
                .unwrap()
                .digest()
                .to_string()
        );
    }
    let oci_copy = tmp.path().join("oci-copy");
    skopeo(&[
        "copy",
        "--src-tls-verify=false",
        &format!("docker://{op_ref}"),
        &format!("oci:{}:op", oci_copy.display()),
    ]);
    let reread = olmkit_image::layout::read_from_layout(&oci_copy, Some("op")).unwrap();
    assert_eq!(reread.digest().to_string(), op["digest"].as_str().unwrap());

    // `image inspect` from the registry reports what the layout reports.
    let remote = json(&ok(bundle_tool().args([
        "image",
        "inspect",
        "--insecure",
        "--output",
        "json",
        &cat_ref,
    ])));
    let local = json(&ok(bundle_tool()
        .args(["image", "inspect", "--output", "json"])
        .arg(format!("{}:{cat_ref}", layout.display()))));
    for k in [
        "digest",
        "configDigest",
        "layers",
        "labels",
        "entrypoint",
        "cmd",
        "user",
        "platform",
    ] {
        assert_eq!(remote[k], local[k], "{k}");
    }
    assert_eq!(remote["source"], "registry");

    // Pushing again uploads nothing; pushing under another tag reuses every blob.
    let again = json(&push(&layout, &op_ref, &op_ref, &[]).1);
    assert_eq!(again["blobsUploaded"], 0);
    let retag = format!("{host}/example/memcached-operator:latest");
    let (code, out, err) = push(&layout, &op_ref, &retag, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["blobsUploaded"], 0);
    assert_eq!(
        json(&skopeo_remote(&["inspect"], &retag))["Digest"],
        op["digest"]
    );
}

#[test]
fn credentials_from_env_and_docker_config_and_wrong_password() {
    let registry = Registry::start_with_auth("alice", "s3cret-pw");
    let host = registry.host();
    let b = layout_with_operator();
    let target = format!("{host}/team/op:v1");

    // Anonymous: refused, exit 1, with a hint about logging in.
    let (code, _, err) = push(&b.layout, "op:v1", &target, &FAST);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("rejected the credentials (anonymous)"),
        "{err}"
    );
    assert!(err.contains("hint: log in with `docker login`"), "{err}");

    // Wrong password: exit 1, not retried (one 401 is final).
    let (code, _, err) = run(bundle_tool()
        .env("BUNDLE_TOOL_REGISTRY_USERNAME", "alice")
        .env("BUNDLE_TOOL_REGISTRY_PASSWORD", "wrong")
        .args([
            "image",
            "push",
            "--insecure",
            "--tag",
            "op:v1",
            "--to",
            &target,
            "--layout",
        ])
        .arg(&b.layout));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("rejected the credentials"), "{err}");
    assert!(
        !err.contains("retrying"),
        "a 401 must not be retried: {err}"
    );

    // Half the pair: a clear error before any network traffic.
    let (code, _, err) = run(bundle_tool()
        .env("BUNDLE_TOOL_REGISTRY_USERNAME", "alice")
        .args([
            "image",
            "push",
            "--insecure",
            "--tag",
            "op:v1",
            "--to",
            &target,
            "--layout",
        ])
        .arg(&b.layout));
    assert_eq!(code, 1);
    assert!(err.contains("BUNDLE_TOOL_REGISTRY_PASSWORD"), "{err}");

    // Env credentials work.
    ok(bundle_tool()
        .env("BUNDLE_TOOL_REGISTRY_USERNAME", "alice")
        .env("BUNDLE_TOOL_REGISTRY_PASSWORD", "s3cret-pw")
        .args([
            "image",
            "push",
            "--insecure",
            "--tag",
            "op:v1",
            "--to",
            &target,
            "--layout",
        ])
        .arg(&b.layout));
    // --password-stdin works.
    let mut child = bundle_tool()
        .args([
            "image",
            "push",
            "--insecure",
            "--username",
            "alice",
            "--password-stdin",
        ])
        .args([
            "--tag",
            "op:v1",
            "--to",
            &format!("{host}/team/op:stdin"),
            "--layout",
        ])
        .arg(&b.layout)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"s3cret-pw\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A Docker config.json (DOCKER_CONFIG) works, for push and inspect.
    let docker = registry.docker_config_dir("alice", "s3cret-pw");
    ok(bundle_tool()
        .env("DOCKER_CONFIG", docker.path())
        .args([
            "image",
            "push",
            "--insecure",
            "--tag",
            "op:v1",
            "--to",
            &format!("{host}/team/op:v2"),
            "--layout",
        ])
        .arg(&b.layout));
    let info = json(&ok(bundle_tool().env("DOCKER_CONFIG", docker.path()).args(
        [
            "image",
            "inspect",
            "--insecure",
            "--output",
            "json",
            &format!("{host}/team/op:v2"),
        ],
    )));
    assert_eq!(info["entrypoint"][0], "/usr/local/bin/operator");
    // ... and so does REGISTRY_AUTH_FILE (podman/skopeo), which takes precedence.
    let bad = registry.docker_config_dir("alice", "nope");
    let (code, _, err) = run(bundle_tool()
        .env("DOCKER_CONFIG", docker.path())
        .env("REGISTRY_AUTH_FILE", bad.path().join("config.json"))
        .args([
            "image",
            "inspect",
            "--insecure",
            &format!("{host}/team/op:v2"),
        ]));
    assert_eq!(code, 1);
    assert!(
        err.contains("config.json"),
        "the error names the credential source: {err}"
    );
}

#[test]
fn unreachable_wrong_protocol_and_not_found_are_user_errors() {
    let registry = Registry::start();
    let host = registry.host();
    let b = layout_with_operator();

    // Nothing listens: retried (bounded), then exit 1 with hints.
    let port = e2e_support::registry::free_port();
    let started = std::time::Instant::now();
    let (code, out, err) = push(&b.layout, "op:v1", &format!("127.0.0.1:{port}/x:v1"), &FAST);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert!(
        err.contains("cannot reach registry") && err.contains("3 attempt(s)"),
        "{err}"
    );
    assert!(err.contains("hint: check that"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));

    // HTTPS against a plain-HTTP registry: the hint says --insecure.
    let (code, _, err) = run(bundle_tool()
        .args(["image", "inspect"])
        .args(FAST)
        .arg(format!("{host}/x:v1")));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("add --insecure"), "{err}");

    // Unknown repository and unknown tag: not found, exit 1, no retries.
    let (code, _, err) = run(bundle_tool().args([
        "image",
        "inspect",
        "--insecure",
        &format!("{host}/nothing/here:v1"),
    ]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not found in the registry"), "{err}");
    assert!(!err.contains("retrying"), "{err}");
    let (code, ..) = push(&b.layout, "op:v1", &format!("{host}/x:v1"), &[]);
    assert_eq!(code, 0);
    let (code, _, err) =
        run(bundle_tool().args(["image", "inspect", "--insecure", &format!("{host}/x:v404")]));
    assert_eq!(code, 1);
    assert!(err.contains("manifest unknown"), "{err}");

    // A malformed reference.
    let (code, _, err) = push(&b.layout, "op:v1", "UPPER/Case:v1", &[]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid image reference"), "{err}");
    // A name the layout does not hold.
    let (code, _, err) = push(&b.layout, "op:v9", &format!("{host}/x:v9"), &[]);
    assert_eq!(code, 1);
    assert!(err.contains("no image named"), "{err}");
}

#[test]
fn interrupted_pushes_are_retried_and_a_dead_registry_is_exit_2() {
    let mut registry = Registry::start();
    let b = layout_with_operator();
    let layout_before = files(&b.layout);

    // The first connections are dropped outright: retries recover.
    let proxy = FlakyProxy::start(registry.addr(), Flakiness::DropFirst(2));
    let target = format!("{}/flaky/op:v1", proxy.host());
    let (code, out, err) = push(
        &b.layout,
        "op:v1",
        &target,
        &["--retries", "5", "--retry-backoff", "20ms"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("retrying"), "{err}");
    let digest = json(&out)["digest"].as_str().unwrap().to_string();
    drop(proxy);

    // Uploads cut mid-body (100 KB into a ~550 KB layer): retried from scratch, the registry
    // ends up with the exact image.
    let proxy = FlakyProxy::start(
        registry.addr(),
        Flakiness::CutFirst {
            n: 3,
            bytes: 100_000,
        },
    );
    let target = format!("{}/cut/op:v1", proxy.host());
    let (code, out, err) = push(
        &b.layout,
        "op:v1",
        &target,
        &["--retries", "6", "--retry-backoff", "20ms"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["digest"], digest.as_str());
    assert!(proxy.connections() > 3);
    drop(proxy);
    let served = json(&skopeo_remote(
        &["inspect"],
        &format!("{}/cut/op:v1", registry.host()),
    ));
    assert_eq!(served["Digest"], digest.as_str());

    // Every connection dies: bounded retries, then exit 2 (not the user's fault), and the
    // tag was never created.
    let proxy = FlakyProxy::start(registry.addr(), Flakiness::DropAll);
    let target = format!("{}/dead/op:v1", proxy.host());
    let (code, _, err) = push(&b.layout, "op:v1", &target, &FAST);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("failed after 3 attempt(s)"), "{err}");
    drop(proxy);
    let out = Command::new("skopeo")
        .args(["inspect", "--tls-verify=false"])
        .arg(format!("docker://{}/dead/op:v1", registry.host()))
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a failed push must not create the tag"
    );

    // The registry stops: exit 1 (cannot reach it); after a restart the push completes and
    // reuses what was uploaded before.
    let host = registry.host();
    registry.kill();
    let (code, _, err) = push(&b.layout, "op:v1", &format!("{host}/restart/op:v1"), &FAST);
    assert_eq!(code, 1, "{err}");
    registry.restart();
    let (code, out, err) = push(&b.layout, "op:v1", &format!("{host}/restart/op:v1"), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["digest"], digest.as_str());

    // --push during a build that cannot reach the registry: the layout still holds the
    // complete image (the build succeeded; only the upload failed).
    let layout2 = b.layout.with_file_name("images2");
    let port = e2e_support::registry::free_port();
    let (code, _, err) = run(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(&b.bin)
        .args([
            "--arg",
            "run",
            "--tag",
            &format!("127.0.0.1:{port}/op:v1"),
            "--push",
            "--insecure",
        ])
        .args(FAST)
        .arg("--layout")
        .arg(&layout2));
    assert_eq!(code, 1, "{err}");
    let img =
        olmkit_image::layout::read_from_layout(&layout2, Some(&format!("127.0.0.1:{port}/op:v1")))
            .unwrap();
    assert_eq!(img.digest().to_string(), digest);
    assert_eq!(
        files(&b.layout),
        layout_before,
        "pushing never writes the layout"
    );
}

#[test]
fn image_push_never_moves_a_tag_to_other_content_without_force() {
    require_tool("skopeo");
    let registry = Registry::start();
    let host = registry.host();
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let bin = static_binary(tmp.path(), "operator");
    // Two builds of the same binary at different times: two digests for one tag.
    for (tag, created) in [("op:old", "1700000000"), ("op:new", "1800000000")] {
        ok(bundle_tool()
            .args(["image", "build", "operator", "--binary"])
            .arg(&bin)
            .args(["--tag", tag, "--created", created, "--layout"])
            .arg(&layout));
    }
    let target = format!("{host}/team/op:v1");
    let digest_of = |out: &str| json(out)["digest"].as_str().unwrap().to_string();
    let (code, out, err) = push(&layout, "op:old", &target, &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let old = digest_of(&out);
    // Pushing the same image again is fine: the tag already names it.
    let (code, out, err) = push(&layout, "op:old", &target, &[]);
    assert_eq!(code, 0, "{out}\n{err}");

    let (code, out, err) = push(&layout, "op:new", &target, &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!(
            "{target} already exists in the registry with digest {old}"
        )),
        "{err}"
    );
    assert!(
        err.contains("hint: publish the change under a new tag"),
        "{err}"
    );
    let served = json(&skopeo_remote(&["inspect"], &target));
    assert_eq!(served["Digest"], old.as_str(), "the tag did not move");

    let (code, out, err) = push(&layout, "op:new", &target, &["--force"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let new = digest_of(&out);
    assert_ne!(new, old);
    let served = json(&skopeo_remote(&["inspect"], &target));
    assert_eq!(served["Digest"], new.as_str());

    // `image build --push` refuses the same way.
    let (code, out, err) = run(bundle_tool()
        .args(["image", "build", "operator", "--binary"])
        .arg(&bin)
        .args([
            "--tag",
            "op:older",
            "--created",
            "1600000000",
            "--push",
            "--to",
            &target,
            "--insecure",
            "--layout",
        ])
        .arg(&layout));
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("refusing to overwrite a published tag"),
        "{err}"
    );
}
