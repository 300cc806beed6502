//! End-to-end tests of the catalog commands through the real `bundle-tool` binary:
//! render, catalog validate/check/verify/from-bundles, graph, explain upgrade, promote.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn bt() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bundle-tool"));
    c.env("NO_COLOR", "1").arg("--no-progress");
    c
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

const TEMPLATE: &str = "quay.io/community/{package}-bundle:v{version}";

#[test]
fn render_a_bundle_directory_like_opm() {
    let dir = fixtures().join("real-bundles/authorino-operator/0.13.0");
    let out = bt()
        .args(["render", "--image-ref-template", TEMPLATE])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "{\n    \"schema\": \"olm.bundle\",\n    \"name\": \"authorino-operator.v0.13.0\""
        ),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["image"],
        "quay.io/community/authorino-operator-bundle:v0.13.0"
    );
    assert!(
        v["properties"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "olm.csv.metadata")
    );
    // --bundle-object embeds every manifest
    let out = bt()
        .args([
            "render",
            "--bundle-object",
            "-o",
            "yaml",
            "--image-ref-template",
            TEMPLATE,
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("---\n") && stdout(&out).contains("olm.bundle.object"));
}

#[test]
fn render_without_an_image_is_a_user_error_with_a_hint() {
    let out = bt()
        .arg("render")
        .arg(fixtures().join("real-bundles/authorino-operator/0.13.0"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("error: ") && err.contains("hint: pass --image-ref-template"),
        "{err}"
    );
    assert!(stdout(&out).is_empty(), "no partial output");
}

#[test]
fn validate_reports_every_problem_and_sets_the_exit_code() {
    let ok = bt()
        .args(["catalog", "validate"])
        .arg(fixtures().join("fbc-examples/valid/opm-index-declcfgs-latest"))
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", stdout(&ok));
    let bad = bt()
        .args(["catalog", "validate", "-o", "json"])
        .arg(fixtures().join("fbc-examples/invalid/model-multiple-channel-heads"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&bad)).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["findings"][0]["rule"], "channel-head");
    assert_eq!(v["findings"][0]["file"], "catalog.yaml");
    let parse = bt()
        .args(["catalog", "validate"])
        .arg(fixtures().join("fbc-examples/invalid/parse-no-schema"))
        .output()
        .unwrap();
    assert_eq!(parse.status.code(), Some(1));
    assert!(
        stdout(&parse).contains("no-schema.yaml")
            && stdout(&parse).contains("missing root schema field")
    );
    let missing = bt()
        .args(["catalog", "validate", "/nonexistent/catalog"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("not a catalog directory"));
}

#[test]
fn from_bundles_then_validate_verify_graph_explain() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("catalog");
    std::fs::create_dir_all(cat.join("node-healthcheck-operator")).unwrap();
    let bundles = fixtures().join("real-bundles/node-healthcheck-operator");
    let out = bt()
        .args(["catalog", "from-bundles", "--image-ref-template", TEMPLATE])
        .arg(&bundles)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(
        cat.join("node-healthcheck-operator/catalog.yaml"),
        out.stdout,
    )
    .unwrap();
    // ci.yaml says semver-mode: the graph is valid with head 0.7.0
    let v = bt()
        .args(["catalog", "validate"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", stdout(&v));
    let verify = bt()
        .args(["catalog", "verify", "--catalog-dir"])
        .arg(&cat)
        .arg("--bundles")
        .arg(&bundles)
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", stdout(&verify));
    // replaces-mode is the classic skipRange-only mistake: several heads, and the hint says why
    let rm = bt()
        .args([
            "catalog",
            "from-bundles",
            "--update-graph",
            "replaces-mode",
            "--image-ref-template",
            TEMPLATE,
        ])
        .arg(&bundles)
        .output()
        .unwrap();
    let bad = tmp.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("catalog.yaml"), rm.stdout).unwrap();
    let v = bt()
        .args(["catalog", "validate"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(1));
    assert!(
        stdout(&v).contains("multiple channel heads") && stdout(&v).contains("only by skipRange"),
        "{}",
        stdout(&v)
    );

    for (format, start) in [
        ("text", "package node-healthcheck-operator"),
        ("mermaid", "---\ntitle:"),
        ("dot", "digraph"),
        ("svg", "<svg "),
    ] {
        let g = bt()
            .args(["graph", "--format", format, "--catalog-dir"])
            .arg(&cat)
            .output()
            .unwrap();
        assert!(g.status.success(), "{format}: {}", stderr(&g));
        assert!(stdout(&g).starts_with(start), "{format}: {}", stdout(&g));
    }
    let e = bt()
        .args([
            "explain",
            "upgrade",
            "--channel",
            "stable",
            "--from",
            "node-healthcheck-operator.v0.4.2",
            "--catalog-dir",
        ])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(e.status.success(), "{}", stderr(&e));
    let text = stdout(&e);
    assert!(
        text.contains("NAME") && text.contains("REPLACES") && text.contains("PHASE"),
        "{text}"
    );
    assert!(
        text.contains("reaches the channel head node-healthcheck-operator.v0.7.0"),
        "{text}"
    );
    let j = bt()
        .args([
            "explain",
            "upgrade",
            "-o",
            "json",
            "--olm",
            "v1",
            "--channel",
            "stable",
            "--from",
            "node-healthcheck-operator.v0.3.2",
            "--catalog-dir",
        ])
        .arg(&cat)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&j)).unwrap();
    // OLM v1 jumps to the highest successor: 0.3.2 is in 0.6.1's skipRange
    assert_eq!(
        v["paths"][0]["steps"][0]["to"],
        "node-healthcheck-operator.v0.6.1"
    );
    let unknown = bt()
        .args([
            "explain",
            "upgrade",
            "--channel",
            "stable",
            "--from",
            "nope.v1.0.0",
            "--catalog-dir",
        ])
        .arg(&cat)
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(1));
}

#[test]
fn verify_reports_a_catalog_that_drifted_from_its_bundles() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("catalog");
    std::fs::create_dir_all(&cat).unwrap();
    let bundles = fixtures().join("real-bundles/authorino-operator");
    let out = bt()
        .args(["catalog", "from-bundles", "--image-ref-template", TEMPLATE])
        .arg(&bundles)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap().replace(
        "displayName: Authorino Operator",
        "displayName: Edited By Hand",
    );
    std::fs::write(cat.join("catalog.yaml"), text).unwrap();
    let verify = bt()
        .args(["catalog", "verify", "--catalog-dir"])
        .arg(&cat)
        .arg("--bundles")
        .arg(&bundles)
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(1));
    assert!(
        stdout(&verify).contains("-    displayName: Edited By Hand"),
        "{}",
        stdout(&verify)
    );
}

#[test]
fn promote_plans_writes_and_refuses_atomically() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("catalog");
    std::fs::create_dir_all(cat.join("memcached-operator")).unwrap();
    std::fs::copy(
        fixtures().join("catalog/graph-demo/memcached-operator/catalog.yaml"),
        cat.join("memcached-operator/catalog.yaml"),
    )
    .unwrap();
    let snapshot = || olmkit_core::fsio::read_tree(&cat).unwrap();
    let before = snapshot();
    let plan = bt()
        .args([
            "promote",
            "0.4.0",
            "--to",
            "alpha",
            "--plan",
            "--catalog-dir",
        ])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(plan.status.success(), "{}", stderr(&plan));
    assert!(
        stdout(&plan).contains(
            "~ channel alpha: memcached-operator.v0.4.0 replaces memcached-operator.v0.3.0-rc.1"
        ),
        "{}",
        stdout(&plan)
    );
    assert_eq!(snapshot(), before, "--plan writes nothing");
    let refused = bt()
        .args(["promote", "0.2.0", "--to", "stable", "--catalog-dir"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(refused.status.success(), "already in stable: a no-op");
    let fork = bt()
        .args(["promote", "0.3.0-rc.1", "--to", "stable", "--catalog-dir"])
        .arg(&cat)
        .output()
        .unwrap();
    assert_eq!(fork.status.code(), Some(1));
    assert!(stderr(&fork).contains("older than"), "{}", stderr(&fork));
    assert_eq!(snapshot(), before);
    let done = bt()
        .args(["promote", "0.4.0", "--to", "alpha", "--catalog-dir"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    assert_ne!(snapshot(), before);
    let v = bt()
        .args(["catalog", "validate"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", stdout(&v));
    let again = bt()
        .args(["promote", "0.4.0", "--to", "alpha", "--catalog-dir"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(again.status.success() && stdout(&again).contains("nothing to do"));
}

#[test]
fn render_a_semver_template_from_local_bundles() {
    let tmp = tempfile::tempdir().unwrap();
    let bundles = fixtures().join("real-bundles/skupper-operator");
    let images: Vec<String> = ["1.5.0", "1.5.1", "1.6.0"]
        .iter()
        .map(|v| format!("  - image: quay.io/community/skupper-operator-bundle:v{v}"))
        .collect();
    let t = tmp.path().join("semver.yaml");
    std::fs::write(
        &t,
        format!(
            "schema: olm.semver\ngenerateMajorChannels: true\nstable:\n  bundles:\n{}\n",
            images.join("\n")
        ),
    )
    .unwrap();
    let out = bt()
        .args([
            "render",
            "-o",
            "yaml",
            "--image-ref-template",
            TEMPLATE,
            "--bundles",
        ])
        .arg(&bundles)
        .arg(&t)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("name: stable-v1\n") && text.contains("defaultChannel: stable-v1\n"),
        "{text}"
    );
    let cat = tmp.path().join("cat");
    std::fs::create_dir_all(&cat).unwrap();
    std::fs::write(cat.join("c.yaml"), text).unwrap();
    let v = bt()
        .args(["catalog", "validate"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", stdout(&v));
    // an image the bundles do not provide is named in the error
    std::fs::write(
        &t,
        "schema: olm.semver\nstable:\n  bundles:\n  - image: quay.io/nope/x:v1\n",
    )
    .unwrap();
    let out = bt()
        .args(["render", "--image-ref-template", TEMPLATE, "--bundles"])
        .arg(&bundles)
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("quay.io/nope/x:v1"));
}

#[test]
fn catalog_check_warns_about_dead_end_channel_switches() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("catalog");
    std::fs::create_dir_all(&cat).unwrap();
    let out = bt()
        .args(["catalog", "from-bundles", "--image-ref-template", TEMPLATE])
        .arg(fixtures().join("real-bundles/authorino-operator"))
        .output()
        .unwrap();
    std::fs::write(cat.join("catalog.yaml"), out.stdout).unwrap();
    let c = bt().args(["catalog", "check"]).arg(&cat).output().unwrap();
    assert!(c.status.success(), "warnings do not fail: {}", stdout(&c));
    let text = stdout(&c);
    assert!(
        text.contains("warning[channel-switch]") && text.contains("switched to channel stable"),
        "{text}"
    );
}
