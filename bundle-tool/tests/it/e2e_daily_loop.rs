//! The daily loop of an operator author coming from operator-sdk and opm (issue #26), through
//! the real binary:
//!
//! - operator-sdk's and opm's spellings: `bundle validate`, `opm validate|render|init`,
//!   `alpha render-template [TYPE] FILE` give what the bundle-tool commands give;
//! - `render` of bundle and catalog images from an OCI layout (`oci:DIR:REF`, built with
//!   `image build`) and from a registry (Debian's docker-registry, with and without
//!   credentials): opm's bytes (the golden suite in `tests/fixtures/opm/bundle-render`), and
//!   refusals for images that are neither, corrupt blobs and links out of the image;
//! - `catalog init` against opm's golden (`tests/fixtures/opm/init`);
//! - `catalog query` against `bundle-tool serve` of this repository's catalog, every method's
//!   JSON byte-identical to what Python's grpcio client gets (`MessageToJson`);
//! - `generate kustomize manifests` on the operator-sdk go/v4 fixture (the base CSV
//!   byte-identical to operator-sdk's, hand edits kept) and `generate bundle --image` giving
//!   the bytes `kustomize edit set image controller=IMG` then `generate bundle` give;
//! - `generate bundle` (operator-sdk layout) and `release` (versioned layout) sharing
//!   `bundle/`: `catalog verify` and `validate bundle/*/*/` still pass;
//! - no stray `bundle.Dockerfile` at the repository root, and a warning where operator-sdk's
//!   layout writes one that cannot build.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::registry_harness as harness;

use assert_cmd::Command;
use e2e_support::paths;
use e2e_support::registry::Registry;
use olmkit_image::digest::Digest;
use std::path::{Path, PathBuf};
use std::process::Output;

fn bt() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bundle-tool"));
    c.env("SOURCE_DATE_EPOCH", "1700000000")
        .env_remove("RUST_LOG")
        .env_remove("BUNDLE_TOOL_REGISTRY_USERNAME")
        .env_remove("BUNDLE_TOOL_REGISTRY_PASSWORD");
    c
}

fn root() -> PathBuf {
    paths::workspace_root()
}

fn fixtures() -> PathBuf {
    paths::fixtures()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

fn ok(c: &mut Command) -> Output {
    let o = run(c);
    assert!(o.status.success(), "failed: {}\n{}", out(&o), err(&o));
    o
}

// ---------------------------------------------------------------------------------------------
// Spellings users bring

#[test]
fn operator_sdk_and_opm_spellings_run_the_same_commands() {
    let bundle = root().join("bundle/memcached-operator/0.4.0");
    let a = ok(bt().arg("validate").arg(&bundle));
    let b = ok(bt().args(["bundle", "validate"]).arg(&bundle));
    assert_eq!(out(&a), out(&b));
    assert_eq!(err(&a), err(&b));

    let catalog = root().join("catalog");
    let a = ok(bt().args(["catalog", "validate"]).arg(&catalog));
    let b = ok(bt().args(["opm", "validate"]).arg(&catalog));
    assert_eq!(out(&a), out(&b));

    let a = ok(bt().arg("render").arg(&catalog));
    let b = ok(bt().args(["opm", "render"]).arg(&catalog));
    assert_eq!(out(&a), out(&b));

    // `opm alpha render-template [TYPE] FILE` against opm's golden.
    let case = fixtures().join("opm/templates/basic/local-no-bundles");
    let golden = std::fs::read_to_string(case.join("opm.json")).unwrap();
    for args in [
        vec!["alpha", "render-template", "basic", "input/template.yaml"],
        vec!["alpha", "render-template", "input/template.yaml"],
        vec!["opm", "alpha", "render-template", "input/template.yaml"],
    ] {
        let o = ok(bt().current_dir(&case).args(&args));
        assert_eq!(out(&o), golden, "{args:?}");
    }
    let o = run(bt().current_dir(&case).args([
        "alpha",
        "render-template",
        "semver",
        "input/template.yaml",
    ]));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("is not a semver template"), "{}", err(&o));

    // The aliases stay out of --help.
    let help = out(&ok(bt().arg("--help")));
    for hidden in ["  bundle ", "  alpha ", "  opm "] {
        assert!(!help.contains(hidden), "{help}");
    }

    // `opm validate DIR` typed as `validate DIR`: the finding says which command was meant.
    let o = run(bt().arg("validate").arg(&catalog));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        out(&o).contains("is `bundle-tool catalog validate"),
        "{}",
        out(&o)
    );
}

// ---------------------------------------------------------------------------------------------
// render IMAGE

const GOLDEN_REPO: &str = "quay.io/community-operator-pipeline-prod";

/// The golden bundles as (package, version).
fn golden_bundles() -> Vec<(String, String)> {
    let mut v = Vec::new();
    for p in std::fs::read_dir(fixtures().join("opm/bundles")).unwrap() {
        let p = p.unwrap().path();
        for ver in std::fs::read_dir(&p).unwrap() {
            let ver = ver.unwrap().path();
            v.push((
                p.file_name().unwrap().to_string_lossy().into_owned(),
                ver.file_name().unwrap().to_string_lossy().into_owned(),
            ));
        }
    }
    v.sort();
    assert!(v.len() >= 8, "{v:?}");
    v
}

fn build_bundle_image(layout: &Path, package: &str, version: &str) -> String {
    let tag = format!("{GOLDEN_REPO}/{package}:{version}");
    ok(bt()
        .args(["image", "build", "bundle", "--tag", &tag, "--layout"])
        .arg(layout)
        .arg(fixtures().join("opm/bundles").join(package).join(version)));
    tag
}

#[test]
fn render_bundle_images_from_an_oci_layout_gives_opms_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    for (package, version) in golden_bundles() {
        let tag = build_bundle_image(&layout, &package, &version);
        let golden = std::fs::read_to_string(
            fixtures().join(format!("opm/bundle-render/{package}-{version}.json")),
        )
        .unwrap();
        let o = ok(bt()
            .arg("render")
            .arg(format!("oci:{}:{tag}", layout.display())));
        assert_eq!(out(&o), golden, "{package} {version}");
    }
    // With several images in the layout, a name is needed, and the error lists them.
    let o = run(bt().arg("render").arg(format!("oci:{}", layout.display())));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("name one as oci:"), "{}", err(&o));
    let o = run(bt()
        .arg("render")
        .arg(format!("oci:{}:nope", layout.display())));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("no image named nope"), "{}", err(&o));
}

#[test]
fn render_a_catalog_image_gives_its_catalog() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    ok(bt()
        .args([
            "image",
            "build",
            "catalog",
            "--configs-only",
            "--tag",
            "quay.io/example/memcached-operator-catalog:v0.4.0",
            "--layout",
        ])
        .arg(&layout)
        .arg(root().join("catalog")));
    let from_image = ok(bt()
        .args(["render", "-o", "yaml"])
        .arg(format!("oci:{}", layout.display())));
    let from_dir = ok(bt()
        .args(["render", "-o", "yaml"])
        .arg(root().join("catalog")));
    assert_eq!(out(&from_image), out(&from_dir));
}

#[test]
fn render_pulls_bundle_images_from_a_registry() {
    let registry = Registry::start();
    let host = registry.host();
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let (package, version) = ("dbaas-operator", "0.5.0");
    let remote = format!("{host}/community-operator-pipeline-prod/{package}:{version}");
    let dir = fixtures().join("opm/bundles").join(package).join(version);
    ok(bt()
        .args(["image", "build", "bundle", "--tag", &remote, "--layout"])
        .arg(&layout)
        .arg(&dir));
    ok(bt()
        .args([
            "image",
            "push",
            "--insecure",
            "--tag",
            &remote,
            "--to",
            &remote,
            "--layout",
        ])
        .arg(&layout));
    let o = ok(bt().args(["render", "--use-http", &remote]));
    // The same bytes as the same image from a layout (opm's bytes, by the golden test above)
    // and as the bundle directory rendered with that image reference: the image field is the
    // reference as given (opm's `bundle.BundleImage`).
    let from_layout = ok(bt()
        .arg("render")
        .arg(format!("oci:{}:{remote}", layout.display())));
    assert!(
        out(&o) == out(&from_layout),
        "registry and layout renders differ"
    );
    let from_dir = ok(bt().arg("render").arg(&dir).args([
        "--image-ref-template",
        &format!("{host}/community-operator-pipeline-prod/{{package}}:{{version}}"),
    ]));
    assert!(
        out(&o) == out(&from_dir),
        "registry and directory renders differ"
    );
    assert!(out(&o).contains(&format!("\"image\": \"{remote}\"")));
    // docker:// as skopeo spells it.
    let o2 = ok(bt().args(["render", "--use-http", &format!("docker://{remote}")]));
    assert_eq!(out(&o2), out(&o));

    // Without --use-http the TLS handshake fails, with the hint.
    let o = run(bt().args(["render", &remote]));
    assert!(!o.status.success());
    assert!(err(&o).contains("--use-http"), "{}", err(&o));
    // A tag that does not exist.
    let o = run(bt().args([
        "render",
        "--use-http",
        &format!("{host}/community-operator-pipeline-prod/{package}:nope"),
    ]));
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
}

#[test]
fn render_pulls_with_the_push_codes_credentials() {
    let registry = Registry::start_with_auth("alice", "s3cret-pw");
    let host = registry.host();
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let tag = build_bundle_image(&layout, "yaks", "0.19.2");
    let remote = format!("{host}/team/yaks-bundle:0.19.2");
    let with_creds = |c: &mut Command| {
        c.env("BUNDLE_TOOL_REGISTRY_USERNAME", "alice")
            .env("BUNDLE_TOOL_REGISTRY_PASSWORD", "s3cret-pw");
    };
    let mut push = bt();
    with_creds(&mut push);
    ok(push
        .args([
            "image",
            "push",
            "--insecure",
            "--tag",
            &tag,
            "--to",
            &remote,
            "--layout",
        ])
        .arg(&layout));
    let o = run(bt().args(["render", "--use-http", &remote]));
    assert_eq!(
        o.status.code(),
        Some(1),
        "anonymous pull must fail: {}",
        err(&o)
    );
    let mut r = bt();
    with_creds(&mut r);
    let o = ok(r.args(["render", "--use-http", &remote]));
    assert!(out(&o).contains("\"name\": \"yaks-operator.v0.19.2\""));
}

/// Writes a one-image OCI layout by hand: config with `labels`, one uncompressed layer made by
/// GNU tar from `stage`; returns the layout directory.
fn hand_layout(dir: &Path, labels: serde_json::Value, stage: &Path) -> PathBuf {
    let layout = dir.join("layout");
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let tar = dir.join("layer.tar");
    let st = std::process::Command::new("tar")
        .arg("-C")
        .arg(stage)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let layer = std::fs::read(&tar).unwrap();
    let put = |bytes: &[u8]| -> (String, usize) {
        let d = Digest::of(bytes);
        std::fs::write(blobs.join(d.hex()), bytes).unwrap();
        (d.to_string(), bytes.len())
    };
    let (ld, ls) = put(&layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [ld]},
    }))
    .unwrap();
    let (cd, cs) = put(&config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": ls}],
    }))
    .unwrap();
    let (md, ms) = put(&manifest);
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": md, "size": ms,
                "annotations": {"org.opencontainers.image.ref.name": "x"}}],
        }))
        .unwrap(),
    )
    .unwrap();
    std::fs::write(
        layout.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    layout
}

#[test]
fn render_refuses_images_it_cannot_trust_or_use() {
    // Neither a bundle nor a catalog: opm's message.
    let tmp = tempfile::tempdir().unwrap();
    let stage = tmp.path().join("stage");
    std::fs::create_dir_all(stage.join("usr/bin")).unwrap();
    std::fs::write(stage.join("usr/bin/op"), b"binary").unwrap();
    let layout = hand_layout(tmp.path(), serde_json::json!({}), &stage);
    let o = run(bt()
        .arg("render")
        .arg(format!("oci:{}:x", layout.display())));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("image type could not be determined: image has no labels"),
        "{}",
        err(&o)
    );

    // A bundle image whose manifest links out of the image: refused, naming the entry.
    let tmp = tempfile::tempdir().unwrap();
    let stage = tmp.path().join("stage");
    std::fs::create_dir_all(stage.join("manifests")).unwrap();
    std::fs::create_dir_all(stage.join("metadata")).unwrap();
    std::fs::copy(
        root().join("bundle/memcached-operator/0.4.0/metadata/annotations.yaml"),
        stage.join("metadata/annotations.yaml"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        "../../../../../../../etc/passwd",
        stage.join("manifests/csv.yaml"),
    )
    .unwrap();
    let labels = serde_json::json!({
        "operators.operatorframework.io.bundle.package.v1": "memcached-operator",
    });
    let layout = hand_layout(tmp.path(), labels, &stage);
    let o = run(bt()
        .arg("render")
        .arg(format!("oci:{}:x", layout.display())));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("manifests/csv.yaml"), "{}", err(&o));
    assert!(
        err(&o).contains("leads out of the image root"),
        "{}",
        err(&o)
    );

    // A blob that is not what its digest says.
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let tag = build_bundle_image(&layout, "yaks", "0.19.2");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let mdigest = index["manifests"][0]["digest"].as_str().unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(layout.join("blobs/sha256").join(&mdigest[7..])).unwrap(),
    )
    .unwrap();
    let ldigest = manifest["layers"][0]["digest"].as_str().unwrap();
    let blob = layout.join("blobs/sha256").join(&ldigest[7..]);
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    let o = run(bt()
        .arg("render")
        .arg(format!("oci:{}:{tag}", layout.display())));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains(ldigest), "{}", err(&o));

    // Not a file, not an image reference: the old message, with what INPUT may be.
    let o = run(bt().args(["render", "no-such-dir"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("no such file or directory"), "{}", err(&o));
    assert!(err(&o).contains("oci:DIR[:REF]"), "{}", err(&o));
}

// ---------------------------------------------------------------------------------------------
// catalog init

#[test]
fn catalog_init_prints_opms_package_blob() {
    let case = fixtures().join("opm/init");
    let args = [
        "anakin",
        "--default-channel",
        "dark",
        "--description",
        "description.md",
        "--icon",
        "icon.svg",
    ];
    let o = ok(bt().current_dir(&case).args(["catalog", "init"]).args(args));
    assert_eq!(
        out(&o),
        std::fs::read_to_string(case.join("opm.json")).unwrap()
    );
    let o = ok(bt()
        .current_dir(&case)
        .args(["opm", "init"])
        .args(args)
        .args(["--output", "yaml"]));
    assert_eq!(
        out(&o),
        std::fs::read_to_string(case.join("opm.yaml")).unwrap()
    );
    // Not an image: opm's refusal.
    let o = run(bt().current_dir(&case).args([
        "catalog",
        "init",
        "anakin",
        "--icon",
        "description.md",
    ]));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("detected invalid type \"\": not an image"),
        "{}",
        err(&o)
    );
}

// ---------------------------------------------------------------------------------------------
// catalog query

const PY_QUERY: &str = r#"
import json, sys
root, proto, addr, method, args = sys.argv[1:6]
sys.path.insert(0, root + "/tests/python")
import grpc
import registry_stubs
from google.protobuf.json_format import MessageToJson
pb2, g = registry_stubs.load(proto)
ch = grpc.insecure_channel(addr, options=[("grpc.max_receive_message_length", -1)])
stub = g.RegistryStub(ch)
m = pb2.DESCRIPTOR.services_by_name["Registry"].methods_by_name[method]
req = getattr(pb2, m.input_type.name)(**json.loads(args))
res = getattr(stub, method)(req, timeout=30)
msgs = [res] if hasattr(res, "DESCRIPTOR") else list(res)
sys.stdout.write("".join(MessageToJson(x, ensure_ascii=False) + "\n" for x in msgs))
"#;

#[test]
fn catalog_query_answers_as_the_python_grpc_client_sees_it() {
    let root = root();
    let python = harness::python(&root);
    let server = harness::Server::start(
        Path::new(env!("CARGO_BIN_EXE_bundle-tool")),
        &["serve", root.join("catalog").to_str().unwrap()],
    );
    let addr = server.addr.clone();
    // Wait until the catalog is loaded.
    let mut serving = false;
    for _ in 0..200 {
        let o = run(bt().args(["catalog", "query", "Health", "--address", &addr]));
        if o.status.success() && out(&o) == "SERVING\n" {
            serving = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(serving, "{}", server.log());
    let o = ok(bt().args(["catalog", "query", "health", "-a", &addr, "-o", "json"]));
    assert_eq!(out(&o), "{\n  \"status\": \"SERVING\"\n}\n");

    let p = "memcached-operator";
    let gvk = r#""group":"cache.example.com","version":"v1","kind":"Memcached""#;
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("ListPackages", "{}".into(), vec![]),
        (
            "GetPackage",
            format!(r#"{{"name":"{p}"}}"#),
            vec!["--name", p],
        ),
        (
            "GetBundle",
            format!(r#"{{"pkgName":"{p}","channelName":"stable","csvName":"{p}.v0.3.0"}}"#),
            vec![
                "--package",
                p,
                "--channel",
                "stable",
                "--csv-name",
                "memcached-operator.v0.3.0",
            ],
        ),
        (
            "GetBundleForChannel",
            format!(r#"{{"pkgName":"{p}","channelName":"alpha"}}"#),
            vec!["--package", p, "--channel", "alpha"],
        ),
        (
            "GetChannelEntriesThatReplace",
            format!(r#"{{"csvName":"{p}.v0.2.0"}}"#),
            vec!["--csv-name", "memcached-operator.v0.2.0"],
        ),
        (
            "GetBundleThatReplaces",
            format!(r#"{{"csvName":"{p}.v0.2.0","pkgName":"{p}","channelName":"alpha"}}"#),
            vec![
                "--csv-name",
                "memcached-operator.v0.2.0",
                "--package",
                p,
                "--channel",
                "alpha",
            ],
        ),
        (
            "GetChannelEntriesThatProvide",
            format!("{{{gvk}}}"),
            vec![
                "--group",
                "cache.example.com",
                "--version",
                "v1",
                "--kind",
                "Memcached",
            ],
        ),
        (
            "GetLatestChannelEntriesThatProvide",
            format!("{{{gvk}}}"),
            vec![
                "--group",
                "cache.example.com",
                "--version",
                "v1",
                "--kind",
                "Memcached",
            ],
        ),
        (
            "GetDefaultBundleThatProvides",
            format!("{{{gvk}}}"),
            vec![
                "--group",
                "cache.example.com",
                "--version",
                "v1",
                "--kind",
                "Memcached",
            ],
        ),
        ("ListBundles", "{}".into(), vec![]),
    ];
    let proto = harness::own_proto(&root);
    for (method, request, flags) in cases {
        let py = std::process::Command::new(&python)
            .arg("-c")
            .arg(PY_QUERY)
            .arg(&root)
            .arg(&proto)
            .arg(&addr)
            .arg(method)
            .arg(&request)
            .output()
            .unwrap();
        assert!(py.status.success(), "{method}: {}", err(&py));
        let o = ok(bt()
            .args(["catalog", "query", method, "--address", &addr, "-o", "json"])
            .args(&flags));
        assert_eq!(out(&o), out(&py), "{method}");
        assert!(!out(&o).is_empty(), "{method}");
        // Text output names the same things.
        let t = ok(bt()
            .args(["catalog", "query", method, "--address", &addr])
            .args(&flags));
        assert!(
            out(&t).contains("memcached-operator"),
            "{method}: {}",
            out(&t)
        );
    }

    // What the server does not have: exit 1 with the server's message.
    let o = run(bt().args([
        "catalog",
        "query",
        "GetPackage",
        "--name",
        "nope",
        "--address",
        &addr,
    ]));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("NotFound"), "{}", err(&o));
    // A missing argument is named before anything is sent.
    let o = run(bt().args(["catalog", "query", "GetBundle", "--package", p, "-a", &addr]));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("GetBundle needs --channel"), "{}", err(&o));
    drop(server);
    // Nobody listening: exit 1 naming the address.
    let o = run(bt().args([
        "catalog",
        "query",
        "ListPackages",
        "-a",
        &addr,
        "--timeout",
        "2",
    ]));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains(&addr), "{}", err(&o));
}

// ---------------------------------------------------------------------------------------------
// generate kustomize manifests, generate bundle --image

fn sdk_project(dir: &Path) -> PathBuf {
    let p = dir.join("memcached-operator");
    harness::copy_dir(&fixtures().join("sdk-project/memcached-operator"), &p);
    p
}

#[test]
fn kustomize_manifests_writes_operator_sdks_base_and_keeps_hand_edits() {
    let tmp = tempfile::tempdir().unwrap();
    let p = sdk_project(tmp.path());
    let base = p.join("config/manifests/bases/memcached-operator.clusterserviceversion.yaml");
    let expected = std::fs::read_to_string(&base).unwrap();
    let kustomization = p.join("config/manifests/kustomization.yaml");
    let kept = std::fs::read_to_string(&kustomization).unwrap();

    // From nothing: operator-sdk's base, byte for byte.
    std::fs::remove_file(&base).unwrap();
    let o = ok(bt().current_dir(&p).args([
        "generate",
        "kustomize",
        "manifests",
        "--interactive=false",
    ]));
    assert_eq!(
        out(&o),
        "Generating kustomize files in config/manifests\nKustomize files generated successfully\n"
    );
    assert_eq!(std::fs::read_to_string(&base).unwrap(), expected);
    // An existing kustomization.yaml is never rewritten (kubebuilder's SkipFile).
    assert_eq!(std::fs::read_to_string(&kustomization).unwrap(), kept);

    // Hand edits survive a regeneration; a new API is added.
    let edited = expected
        .replace("Memcached Operator description. TODO.", "Runs memcached.")
        .replace("name: memcached-operator.v0.0.0", "name: memcached-operator.vX.Y.Z")
        .replace("version: 0.0.0", "version: 0.3.1")
        .replace(
            "      version: v1alpha1\n",
            "      specDescriptors:\n      - displayName: Size\n        path: size\n      version: v1alpha1\n",
        );
    std::fs::write(&base, &edited).unwrap();
    ok(bt()
        .current_dir(&p)
        .args(["generate", "kustomize", "manifests", "-q"]));
    let now = std::fs::read_to_string(&base).unwrap();
    assert!(now.contains("description: Runs memcached."), "{now}");
    assert!(now.contains("name: memcached-operator.v0.3.1"), "{now}");
    assert!(now.contains("path: size"), "{now}");
    // Idempotent.
    ok(bt()
        .current_dir(&p)
        .args(["generate", "kustomize", "manifests", "-q"]));
    assert_eq!(std::fs::read_to_string(&base).unwrap(), now);

    // Without kustomization.yaml: operator-sdk's template for a go/v4 project; and
    // --output-dir elsewhere (the input's kustomization.yaml is left alone).
    std::fs::remove_file(&kustomization).unwrap();
    ok(bt().current_dir(&p).args([
        "generate",
        "kustomize",
        "manifests",
        "-q",
        "--output-dir",
        "out",
    ]));
    let k = std::fs::read_to_string(p.join("out/kustomization.yaml")).unwrap();
    assert!(k.starts_with("# These resources constitute"), "{k}");
    assert!(k.contains("- bases/memcached-operator.clusterserviceversion.yaml\n"));
    assert!(k.contains(
        "#    - op: remove\n\n#      path: /spec/template/spec/containers/0/volumeMounts/0\n"
    ));
    assert!(
        p.join("out/bases/memcached-operator.clusterserviceversion.yaml")
            .is_file()
    );
    std::fs::write(&kustomization, &kept).unwrap();

    // And generate bundle reads the regenerated base.
    ok(bt()
        .current_dir(&p)
        .args(["generate", "bundle", "-q", "--version", "0.0.1"]));
    ok(bt().current_dir(&p).args(["validate", "bundle"]));
}

#[test]
fn generate_bundle_image_is_what_kustomize_edit_set_image_gives() {
    for compat in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let with_flag = sdk_project(&tmp.path().join("a"));
        let edited = sdk_project(&tmp.path().join("b"));
        let mut common = vec![
            "generate",
            "bundle",
            "-q",
            "--overwrite",
            "--version",
            "0.0.2",
        ];
        if compat {
            common.push("--upstream-compat");
        }
        // make bundle IMG=quay.io/example/memcached-operator:v0.0.2, both ways.
        ok(bt()
            .current_dir(&with_flag)
            .args(&common)
            .args(["--image", "quay.io/example/memcached-operator:v0.0.2"]));
        let k = edited.join("config/manager/kustomization.yaml");
        let text = std::fs::read_to_string(&k)
            .unwrap()
            .replace("newTag: v0.0.1", "newTag: v0.0.2");
        std::fs::write(&k, text).unwrap();
        ok(bt().current_dir(&edited).args(&common));
        let a = olmkit_core::fsio::read_tree(&with_flag.join("bundle")).unwrap();
        let b = olmkit_core::fsio::read_tree(&edited.join("bundle")).unwrap();
        assert_eq!(a, b, "upstream-compat: {compat}");
        let csv = String::from_utf8(
            a[Path::new("manifests/memcached-operator.clusterserviceversion.yaml")].clone(),
        )
        .unwrap();
        assert!(csv.contains("image: quay.io/example/memcached-operator:v0.0.2"));
        assert!(!csv.contains("memcached-operator:v0.0.1"), "{csv}");
    }

    // A stale containerImage in the base: --image updates it too (kustomize does not).
    let tmp = tempfile::tempdir().unwrap();
    let p = sdk_project(tmp.path());
    let base = p.join("config/manifests/bases/memcached-operator.clusterserviceversion.yaml");
    let text = std::fs::read_to_string(&base).unwrap().replace(
        "    alm-examples: '[]'\n",
        "    alm-examples: '[]'\n    containerImage: quay.io/example/memcached-operator:v0.0.1\n",
    );
    std::fs::write(&base, text).unwrap();
    ok(bt().current_dir(&p).args([
        "generate",
        "bundle",
        "-q",
        "--upstream-compat",
        "--version",
        "0.0.3",
        "--image",
        "quay.io/example/memcached-operator:v0.0.3",
    ]));
    let csv = std::fs::read_to_string(
        p.join("bundle/manifests/memcached-operator.clusterserviceversion.yaml"),
    )
    .unwrap();
    assert!(
        csv.contains("containerImage: quay.io/example/memcached-operator:v0.0.3"),
        "{csv}"
    );
    assert!(!csv.contains(":v0.0.1"), "{csv}");
}

// ---------------------------------------------------------------------------------------------
// bundle/ shared by generate bundle and release; bundle.Dockerfile where it can build

/// A scratch copy of the repository's released tree and config.
fn scratch_repo(dir: &Path) -> PathBuf {
    let p = dir.join("repo");
    for d in ["bundle", "catalog", "config"] {
        harness::copy_dir(&root().join(d), &p.join(d));
    }
    p
}

#[test]
fn generate_bundle_and_release_share_bundle_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let p = scratch_repo(tmp.path());
    // make bundle in an operator-sdk project: bundle/manifests, bundle/metadata, bundle/tests.
    ok(bt()
        .current_dir(&p)
        .args(["generate", "bundle", "-q", "--version", "0.5.0"]));
    assert!(p.join("bundle/manifests").is_dir());
    assert!(p.join("bundle/memcached-operator/0.4.0/manifests").is_dir());

    let o = ok(bt().current_dir(&p).args(["catalog", "verify"]));
    assert!(
        err(&o).contains("verifying the versioned ones"),
        "{}",
        err(&o)
    );

    // `validate bundle/*/*/`, as the shell expands it.
    let mut dirs = Vec::new();
    for a in std::fs::read_dir(p.join("bundle")).unwrap() {
        let a = a.unwrap().path();
        if a.is_dir() {
            for b in std::fs::read_dir(&a).unwrap() {
                let b = b.unwrap().path();
                if b.is_dir() {
                    dirs.push(b.strip_prefix(&p).unwrap().to_path_buf());
                }
            }
        }
    }
    assert!(
        dirs.iter().any(|d| d.ends_with("tests/scorecard")),
        "{dirs:?}"
    );
    let o = ok(bt().current_dir(&p).arg("validate").args(&dirs));
    assert!(
        err(&o).contains("note: skipped bundle/tests/scorecard"),
        "{}",
        err(&o)
    );
    // Every versioned bundle of every package, not the operator-sdk layout's tests/.
    let versioned = dirs.len() - 1;
    assert!(
        err(&o).contains(&format!("checked {versioned} bundle(s)")),
        "{}",
        err(&o)
    );
    // The operator-sdk bundle itself validates as a bundle.
    ok(bt().current_dir(&p).args(["validate", "bundle"]));
    // release still plans from the versioned bundles.
    ok(bt().current_dir(&p).args([
        "release",
        "--version",
        "0.5.0",
        "--plan",
        "--operator-repo",
        "quay.io/example/memcached-operator",
    ]));
}

#[test]
fn no_stray_bundle_dockerfile() {
    // The stray root bundle.Dockerfile (`COPY /tmp/genb/out/manifests ...`) came from
    // `generate bundle --output-dir /tmp/...` run at the repository root: operator-sdk's layout
    // writes bundle.Dockerfile into the current directory whatever --output-dir is.
    assert!(
        !root().join("bundle.Dockerfile").exists(),
        "the repository root has a bundle.Dockerfile: this project releases with bundle/<package>/<version>/bundle.Dockerfile"
    );
    let tmp = tempfile::tempdir().unwrap();
    let p = sdk_project(&tmp.path().join("project"));
    let outside = tmp.path().join("elsewhere/out");
    let o = ok(bt()
        .current_dir(&p)
        .args(["generate", "bundle", "--version", "0.0.1", "--output-dir"])
        .arg(&outside));
    // operator-sdk's place, with a warning saying why it cannot build.
    assert!(p.join("bundle.Dockerfile").exists());
    assert!(
        err(&o).contains("warning: wrote ./bundle.Dockerfile"),
        "{}",
        err(&o)
    );
    assert!(
        err(&o).contains("outside the current directory"),
        "{}",
        err(&o)
    );
    // Inside the project: no warning.
    let o = ok(bt().current_dir(&p).args([
        "generate",
        "bundle",
        "-q",
        "--version",
        "0.0.1",
        "--output-dir",
        "out/b",
    ]));
    assert!(!err(&o).contains("warning"), "{}", err(&o));
    let df = std::fs::read_to_string(p.join("bundle.Dockerfile")).unwrap();
    assert!(df.contains("COPY out/b/manifests /manifests/"), "{df}");
    // --layout versioned keeps the Dockerfile inside the bundle directory.
    let v = tmp.path().join("v");
    ok(bt()
        .current_dir(&p)
        .args([
            "generate",
            "bundle",
            "-q",
            "--version",
            "0.0.1",
            "--layout",
            "versioned",
            "--output-dir",
        ])
        .arg(&v));
    assert!(v.join("bundle.Dockerfile").is_file());
}
