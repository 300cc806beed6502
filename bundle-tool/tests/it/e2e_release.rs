//! End to end: `bundle-tool release` on a copy of this repository's own `config/`, through the
//! real binary. Three releases over alpha and stable (replaces, a new channel bridged from the
//! other, a skipRange), the catalog they produce checked by `catalog validate`, `catalog
//! verify` and `validate`; a re-run is a no-op and a changed re-release is refused; `--plan`
//! writes nothing; failures at every stage (bad version, broken inputs, a broken catalog, a
//! bad binary, an unreachable registry) leave `bundle/` and `catalog/` byte-for-byte as they
//! were; images land in an OCI layout that skopeo reads, reproducibly; `--push
//! --use-image-digests` against a real registry records digests that skopeo confirms.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::image_harness as harness;

use e2e_support::registry::{Registry, free_port, require_tool, skopeo};
use harness::*;
use std::collections::BTreeMap;
use std::path::Path;

const PKG: &str = "memcached-operator";

/// The third release: both channels, every older version may jump to it.
const RELEASE_0_3_0: &[&str] = &[
    "--version",
    "0.3.0",
    "--channel",
    "alpha",
    "--channel",
    "stable",
    "--skip-range",
    "--no-images",
];

/// A scratch project: this repository's `config/`, nothing released yet.
struct Project {
    tmp: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let tmp = tempfile::tempdir().unwrap();
        copy_dir(&root().join("config"), &tmp.path().join("config"));
        Project { tmp }
    }
    fn dir(&self) -> &Path {
        self.tmp.path()
    }
    fn release(&self, args: &[&str]) -> (i32, String, String) {
        run(bundle_tool()
            .current_dir(self.dir())
            .arg("release")
            .args(args))
    }
    fn release_ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.release(args);
        assert_eq!(code, 0, "release {args:?} failed:\n{out}\n{err}");
        out
    }
    /// Runs a release that must be refused: exit 1, and stderr naming each of `needles`.
    fn refused(&self, args: &[&str], needles: &[&str]) -> String {
        let (code, out, err) = self.release(args);
        assert_eq!(code, 1, "release {args:?} should be refused:\n{out}\n{err}");
        for n in needles {
            assert!(
                err.contains(n),
                "stderr of release {args:?} lacks {n:?}:\n{err}"
            );
        }
        err
    }
    /// Every file under bundle/ and catalog/ (and whether images/ exists).
    fn state(&self) -> (BTreeMap<String, Vec<u8>>, bool) {
        let mut all = BTreeMap::new();
        for top in ["bundle", "catalog"] {
            let d = self.dir().join(top);
            if d.exists() {
                for (k, v) in files(&d) {
                    all.insert(format!("{top}/{k}"), v);
                }
            }
        }
        (all, self.dir().join("images").exists())
    }
    fn catalog(&self) -> String {
        std::fs::read_to_string(self.dir().join("catalog").join(PKG).join("catalog.yaml")).unwrap()
    }
    fn csv(&self, version: &str) -> String {
        std::fs::read_to_string(
            self.dir()
                .join("bundle")
                .join(PKG)
                .join(version)
                .join("manifests")
                .join(format!("{PKG}.clusterserviceversion.yaml")),
        )
        .unwrap()
    }
    /// Releases 0.1.0 (alpha), 0.2.0 (alpha + new stable, default stable), 0.3.0 (both, skipRange).
    fn three_releases(&self) {
        self.release_ok(&["--version", "0.1.0", "--no-images"]);
        self.release_ok(&[
            "--version",
            "0.2.0",
            "--channel",
            "alpha",
            "--channel",
            "stable",
            "--default-channel",
            "stable",
            "--no-images",
        ]);
        self.release_ok(&[
            "--version",
            "v0.3.0",
            "--channel",
            "alpha",
            "--channel",
            "stable",
            "--skip-range",
            "--no-images",
        ]);
    }
    fn bundle_tool_in(&self, args: &[&str]) -> (i32, String, String) {
        run(bundle_tool().current_dir(self.dir()).args(args))
    }
}

#[test]
fn three_releases_make_a_valid_catalog_that_matches_the_bundles() {
    let p = Project::new();
    p.three_releases();
    for v in ["0.1.0", "0.2.0", "0.3.0"] {
        assert!(
            p.dir()
                .join("bundle")
                .join(PKG)
                .join(v)
                .join("metadata/annotations.yaml")
                .is_file()
        );
    }
    // replaces chain in the CSVs, skipRange on the last one, operator image tagged per version.
    assert!(!p.csv("0.1.0").contains("replaces:"));
    assert!(
        p.csv("0.2.0")
            .contains("replaces: memcached-operator.v0.1.0")
    );
    assert!(
        p.csv("0.3.0")
            .contains("replaces: memcached-operator.v0.2.0")
    );
    assert!(p.csv("0.3.0").contains("olm.skipRange: <0.3.0"));
    assert!(
        p.csv("0.2.0")
            .contains("image: quay.io/example/memcached-operator:0.2.0")
    );
    assert!(
        p.csv("0.2.0")
            .contains("containerImage: quay.io/example/memcached-operator:0.2.0")
    );

    let cat = p.catalog();
    assert!(cat.contains("defaultChannel: stable"), "{cat}");
    assert!(cat.contains("image: quay.io/example/memcached-operator-bundle:v0.3.0"));
    // stable's first entry bridges from the highest older release, so alpha users can switch.
    let stable = cat
        .split("name: stable")
        .next()
        .unwrap()
        .rsplit("---")
        .next()
        .unwrap();
    assert!(
        stable.contains("- name: memcached-operator.v0.2.0\n  replaces: memcached-operator.v0.1.0"),
        "{stable}"
    );

    let (code, out, err) = p.bundle_tool_in(&["catalog", "validate", "catalog"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = p.bundle_tool_in(&["catalog", "verify", "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v = json(&out);
    assert_eq!(v["clean"], true, "{v}");
    // A hand edit of a released bundle is caught (the catalog no longer renders from it)...
    let csv_path = p
        .dir()
        .join("bundle")
        .join(PKG)
        .join("0.2.0/manifests/memcached-operator.clusterserviceversion.yaml");
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    std::fs::write(
        &csv_path,
        csv.replacen(
            "displayName: Memcached Operator",
            "displayName: Hand Edited",
            1,
        ),
    )
    .unwrap();
    let (code, out, err) = p.bundle_tool_in(&["catalog", "verify"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("memcached-operator.v0.2.0") && out.contains("Hand Edited"),
        "{out}"
    );
    std::fs::write(&csv_path, csv).unwrap();
    // ...and so is a folder with no bundles at all (verifying nothing is not a pass).
    std::fs::create_dir_all(p.dir().join("empty/memcached-operator")).unwrap();
    let (code, _, err) = p.bundle_tool_in(&["catalog", "verify", "--bundles", "empty"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no bundle directories"), "{err}");
    let (code, out, err) = p.bundle_tool_in(&[
        "validate",
        "bundle/memcached-operator/0.1.0",
        "bundle/memcached-operator/0.2.0",
        "bundle/memcached-operator/0.3.0",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    // explain: from 0.1.0 on stable, OLM v0 goes straight to the head through the skipRange.
    let (code, out, err) = p.bundle_tool_in(&[
        "explain",
        "upgrade",
        "--package",
        PKG,
        "--channel",
        "stable",
        "--from",
        "memcached-operator.v0.1.0",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("memcached-operator.v0.3.0"), "{out}");
}

#[test]
fn rerun_is_a_no_op_and_a_changed_rerelease_is_refused() {
    let p = Project::new();
    p.three_releases();
    let before = p.state();
    // Same version, same inputs, another clock: nothing changes (createdAt is the recorded one).
    let out = run(bundle_tool()
        .current_dir(p.dir())
        .env("SOURCE_DATE_EPOCH", "1800000000")
        .arg("release")
        .args(RELEASE_0_3_0));
    assert_eq!(out.0, 0, "{}{}", out.1, out.2);
    assert!(out.1.contains("already released"), "{}", out.1);
    assert_eq!(p.state(), before);
    // Without flags too: a released version's channels and default are the recorded ones.
    for v in ["0.1.0", "0.2.0", "0.3.0"] {
        let out = p.release_ok(&["--version", v, "--no-images"]);
        assert!(out.contains("already released"), "{v}: {out}");
    }
    assert_eq!(p.state(), before);

    // A changed input for a released version: refused, exit 1, nothing written.
    let base = p
        .dir()
        .join("config/manifests/bases/memcached-operator.clusterserviceversion.yaml");
    let text = std::fs::read_to_string(&base).unwrap();
    std::fs::write(
        &base,
        text.replacen(
            "displayName: Memcached Operator",
            "displayName: Memcached Operator (edited)",
            1,
        ),
    )
    .unwrap();
    let err = p.refused(RELEASE_0_3_0, &["never overwritten"]);
    assert!(err.contains("hint:"), "{err}");
    assert_eq!(p.state(), before);

    // Versions not above the channel head: refused.
    p.refused(&["--version", "0.2.5", "--no-images"], &["0.2.5", "0.3.0"]);
    assert_eq!(p.state(), before);

    // The edited CSV goes out as the next version.
    let out = p.release_ok(&["--version", "0.4.0", "--no-images"]);
    assert!(
        out.contains(
            "channel stable: memcached-operator.v0.4.0 replaces memcached-operator.v0.3.0"
        ),
        "{out}"
    );
    assert!(p.csv("0.4.0").contains("(edited)"));
}

#[test]
fn plan_writes_nothing_and_says_what_would_change() {
    let p = Project::new();
    p.three_releases();
    let before = p.state();
    let out = p.release_ok(&["--version", "0.4.0", "--channel", "candidate", "--plan"]);
    assert!(out.contains("+ channel candidate (new): memcached-operator.v0.4.0 replaces memcached-operator.v0.3.0"), "{out}");
    assert!(
        out.contains("would write bundle/memcached-operator/0.4.0"),
        "{out}"
    );
    assert_eq!(p.state(), before);
    let (code, json_out, err) = p.release(&["--version", "0.4.0", "--plan", "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&json_out);
    assert_eq!(v["planOnly"], true);
    assert_eq!(v["bundleWritten"], false);
    assert_eq!(v["csvName"], "memcached-operator.v0.4.0");
    let ops: Vec<&str> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["addBundle", "addEntry"], "{v}");
    assert_eq!(
        v["changes"][1]["entry"]["replaces"],
        "memcached-operator.v0.3.0"
    );
    assert_eq!(p.state(), before);
}

#[test]
fn failures_at_every_stage_leave_the_tree_unchanged() {
    let p = Project::new();
    p.three_releases();
    let before = p.state();
    let tmp = tempfile::tempdir().unwrap();

    // Bad version.
    p.refused(
        &["--version", "next", "--no-images"],
        &["not a semver version"],
    );

    // Inputs that do not generate (a sample of a kind the bundle does not own).
    let samples = tmp.path().join("samples");
    std::fs::create_dir_all(&samples).unwrap();
    std::fs::write(
        samples.join("foreign.yaml"),
        "apiVersion: other.example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec: {}\n",
    )
    .unwrap();
    p.refused(
        &[
            "--version",
            "0.4.0",
            "--no-images",
            "--samples",
            samples.to_str().unwrap(),
        ],
        &["foreign.yaml", "Widget"],
    );

    // A bundle that generates but does not validate.
    let base = p
        .dir()
        .join("config/manifests/bases/memcached-operator.clusterserviceversion.yaml");
    let original = std::fs::read_to_string(&base).unwrap();
    let broken = original.replacen(
        "minKubeVersion: 1.25.0",
        "minKubeVersion: one-point-twenty",
        1,
    );
    assert_ne!(broken, original, "fixture edit applies");
    std::fs::write(&base, broken).unwrap();
    let err = p.refused(
        &["--version", "0.4.0", "--no-images"],
        &["csv-min-kube-version", "spec.minKubeVersion"],
    );
    assert!(err.contains("nothing was released"), "{err}");
    std::fs::write(&base, original).unwrap();
    assert_eq!(p.state(), before);

    // CRD upgrade safety against the release it replaces: the new CRD drops a served version.
    let crd = p
        .dir()
        .join("config/crd/bases/cache.example.com_memcacheds.yaml");
    let original = std::fs::read_to_string(&crd).unwrap();
    let mut doc: serde_json::Value = serde_saphyr::from_str(&original).unwrap();
    let versions = doc["spec"]["versions"].as_array_mut().unwrap();
    let before_len = versions.len();
    versions.retain(|v| v["name"] != "v1beta1");
    assert_eq!(versions.len(), before_len - 1, "fixture edit applies");
    std::fs::write(&crd, serde_saphyr::to_string(&doc).unwrap()).unwrap();
    // (and its sample, or generation itself refuses an example of a version nobody serves)
    let samples_k = p.dir().join("config/samples/kustomization.yaml");
    let samples_orig = std::fs::read_to_string(&samples_k).unwrap();
    std::fs::write(
        &samples_k,
        samples_orig.replace("- cache_v1beta1_memcached.yaml\n", ""),
    )
    .unwrap();
    let err = p.refused(
        &["--version", "0.4.0", "--no-images"],
        &["crd-upgrade", "v1beta1"],
    );
    assert!(err.contains("nothing was released"), "{err}");
    std::fs::write(&crd, original).unwrap();
    std::fs::write(&samples_k, samples_orig).unwrap();
    assert_eq!(p.state(), before);

    // An image build that fails after the bundle and catalog were planned (not a static binary).
    let script = tmp.path().join("operator");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    p.refused(
        &[
            "--version",
            "0.4.0",
            "--operator-binary",
            script.to_str().unwrap(),
        ],
        &["not an ELF executable", "hint:"],
    );
    assert_eq!(p.state(), before);

    // A push to a registry that is not there: exit 1, and no half-recorded release.
    let bin = static_binary(tmp.path(), "op");
    let port = free_port();
    p.refused(
        &[
            "--version",
            "0.4.0",
            "--operator-binary",
            bin.to_str().unwrap(),
            "--operator-repo",
            &format!("127.0.0.1:{port}/memcached-operator"),
            "--push",
            "--insecure",
            "--retries",
            "2",
            "--retry-backoff",
            "10ms",
        ],
        &["nothing under bundle/ or catalog/ was changed"],
    );
    assert_eq!(p.state().0, before.0, "bundle/ and catalog/ unchanged");

    // A broken catalog (two heads in stable): refused before anything is generated.
    std::fs::remove_dir_all(p.dir().join("images")).ok();
    let cat = p.dir().join("catalog").join(PKG).join("catalog.yaml");
    let text = std::fs::read_to_string(&cat).unwrap();
    let broken = text.replacen(
        "- name: memcached-operator.v0.3.0\n  replaces: memcached-operator.v0.2.0\n  skipRange: <0.3.0\nname: stable",
        "- name: memcached-operator.v0.3.0\n  skipRange: <0.3.0\nname: stable",
        1,
    );
    assert_ne!(broken, text, "fixture edit applies");
    std::fs::write(&cat, &broken).unwrap();
    let mid = p.state();
    p.refused(&["--version", "0.4.0", "--no-images"], &["heads"]);
    assert_eq!(p.state(), mid);
}

fn layout_digest(layout: &Path, name: &str) -> String {
    let out = skopeo(&["inspect", &format!("oci:{}:{name}", layout.display())]);
    json(&out)["Digest"].as_str().unwrap().to_string()
}

#[test]
fn images_go_to_an_oci_layout_that_skopeo_reads_and_are_reproducible() {
    require_tool("skopeo");
    let tmp = tempfile::tempdir().unwrap();
    let op = static_binary(tmp.path(), "operator");
    let server = static_binary(tmp.path(), "catalog-server");
    let mut digests = Vec::new();
    for _ in 0..2 {
        let p = Project::new();
        p.release_ok(&["--version", "0.1.0", "--no-images"]);
        let out = p.release_ok(&[
            "--version",
            "0.2.0",
            "--operator-binary",
            op.to_str().unwrap(),
            "--catalog-server",
            server.to_str().unwrap(),
        ]);
        assert!(
            out.contains("images written to the OCI layout images"),
            "{out}"
        );
        let layout = p.dir().join("images");
        let refs = [
            "quay.io/example/memcached-operator:0.2.0",
            "quay.io/example/memcached-operator-bundle:v0.2.0",
            "quay.io/example/memcached-operator-catalog:v0.2.0",
        ];
        let d: Vec<String> = refs.iter().map(|r| layout_digest(&layout, r)).collect();
        for (r, dig) in refs.iter().zip(&d) {
            assert!(out.contains(&format!("{r} {dig}")), "{r} {dig} in {out}");
        }
        // Bundle labels are the bundle's annotations; the catalog says where its configs are.
        let bundle = json(&skopeo(&[
            "inspect",
            &format!("oci:{}:{}", layout.display(), refs[1]),
        ]));
        assert_eq!(
            bundle["Labels"]["operators.operatorframework.io.bundle.package.v1"],
            PKG
        );
        assert_eq!(
            bundle["Labels"]["operators.operatorframework.io.bundle.channels.v1"],
            "alpha"
        );
        let catalog = json(&skopeo(&[
            "inspect",
            &format!("oci:{}:{}", layout.display(), refs[2]),
        ]));
        assert_eq!(
            catalog["Labels"]["operators.operatorframework.io.index.configs.v1"],
            "/configs"
        );
        // The catalog image holds the catalog as released (both bundles).
        let mut found = false;
        for blob in layer_blobs(&layout, refs[2]) {
            let listing = std::process::Command::new("tar")
                .arg("-xzOf")
                .arg(&blob)
                .arg("configs/memcached-operator/catalog.yaml")
                .output()
                .unwrap();
            if listing.status.success() {
                let text = String::from_utf8_lossy(&listing.stdout);
                assert!(
                    text.contains("memcached-operator.v0.2.0")
                        && text.contains("memcached-operator.v0.1.0")
                );
                assert_eq!(
                    text.as_bytes(),
                    p.catalog().as_bytes(),
                    "image catalog == released catalog"
                );
                found = true;
            }
        }
        assert!(
            found,
            "the catalog image has /configs/memcached-operator/catalog.yaml"
        );
        // The grpc_health_probe OLM's catalog pods exec is there (linked to the server).
        let paths: Vec<String> = layer_blobs(&layout, refs[2])
            .iter()
            .flat_map(|b| gnu_listing(b))
            .collect();
        assert!(
            paths
                .iter()
                .any(|p| p.contains("bin/grpc_health_probe -> catalog-server")),
            "{paths:?}"
        );
        digests.push(d);
    }
    assert_eq!(digests[0], digests[1], "same inputs, same digests");
}

fn gnu_listing(blob: &Path) -> Vec<String> {
    let out = std::process::Command::new("tar")
        .arg("-tvzf")
        .arg(blob)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn push_with_image_digests_records_what_the_registry_serves() {
    require_tool("skopeo");
    let registry = Registry::start();
    let host = registry.host();
    let tmp = tempfile::tempdir().unwrap();
    let op = static_binary(tmp.path(), "operator");
    let p = Project::new();
    let repo = format!("{host}/example/memcached-operator");
    let out = p.release_ok(&[
        "--version",
        "0.1.0",
        "--operator-repo",
        &repo,
        "--operator-binary",
        op.to_str().unwrap(),
        "--push",
        "--insecure",
        "--use-image-digests",
        "--output",
        "json",
    ]);
    let v = json(&out);
    let images = v["images"].as_array().unwrap();
    assert_eq!(images.len(), 3, "{v}");
    let mut by_kind = BTreeMap::new();
    for i in images {
        assert_eq!(i["pushed"], true);
        let reference = i["reference"].as_str().unwrap();
        let served = json(&skopeo(&[
            "inspect",
            "--tls-verify=false",
            &format!("docker://{reference}"),
        ]));
        assert_eq!(served["Digest"], i["digest"], "{reference}");
        by_kind.insert(
            i["kind"].as_str().unwrap().to_string(),
            i["digest"].as_str().unwrap().to_string(),
        );
    }
    // The CSV runs the operator by digest; the catalog names the bundle by digest.
    let csv: serde_json::Value = serde_saphyr::from_str(&p.csv("0.1.0")).unwrap();
    let pinned = format!("{repo}@{}", by_kind["operator"]);
    assert_eq!(
        csv["metadata"]["annotations"]["containerImage"],
        pinned.as_str()
    );
    assert_eq!(
        csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"]
            [0]["image"],
        pinned.as_str()
    );
    assert!(
        csv["spec"]["relatedImages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["image"] == pinned.as_str())
    );
    let cat: Vec<serde_json::Value> = p
        .catalog()
        .split("\n---\n")
        .map(|d| serde_saphyr::from_str(d.trim_start_matches("---\n")).unwrap())
        .collect();
    let bundle = cat.iter().find(|b| b["schema"] == "olm.bundle").unwrap();
    assert_eq!(
        bundle["image"],
        format!("{repo}-bundle@{}", by_kind["bundle"]).as_str()
    );
    // And a registry that serves it can be read back by digest.
    skopeo(&[
        "inspect",
        "--tls-verify=false",
        &format!("docker://{repo}-bundle@{}", by_kind["bundle"]),
    ]);
}

/// Top-level entries of a project that only an interrupted run leaves behind.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for top in [dir.to_path_buf(), dir.join("catalog"), dir.join("bundle")] {
        let Ok(rd) = std::fs::read_dir(&top) else {
            continue;
        };
        for e in rd {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if name.starts_with(".bundle-tool") || name.starts_with(".oci-layout-") {
                out.push(format!("{}/{name}", top.display()));
            }
        }
    }
    out
}

/// `kubectl kustomize config/manifests` of this repository, rendered once into `dir`: the
/// crash suites run a release per crash point, and rendering is most of a debug release's time
/// (the default `--kustomize config/manifests` of every run, which the other suites cover).
fn rendered_manifests(dir: &Path) -> String {
    let file = dir.join("manifests.yaml");
    std::fs::write(&file, kustomized(&root())).unwrap();
    file.to_str().unwrap().to_string()
}

/// Crash safety: `release` is aborted (no cleanup, as `kill -9` leaves it) at every durability
/// step in turn — each file write, fsync and rename of the changeset and of the OCI layout
/// writer, counted by the `OLMKIT_CRASH_AT` hook — until a run gets through. After each crash,
/// recovery gives the old tree or the new one, never a mix; a re-run of the release (which
/// recovers first by itself) succeeds with the same bytes as an uninterrupted release, and no
/// staging, journal or half-written layout is left behind.
#[test]
fn a_release_killed_at_any_write_fsync_or_rename_recovers_to_old_or_new() {
    let tmp = tempfile::tempdir().unwrap();
    let op = static_binary(tmp.path(), "operator");
    let server = static_binary(tmp.path(), "catalog-server");
    let manifests = rendered_manifests(tmp.path());
    let second: Vec<&str> = vec![
        "--version",
        "0.2.0",
        "--channel",
        "alpha",
        "--channel",
        "stable",
        "--default-channel",
        "stable",
        "--operator-binary",
        op.to_str().unwrap(),
        "--catalog-server",
        server.to_str().unwrap(),
        "--manifests",
        &manifests,
    ];
    let base = Project::new();
    base.release_ok(&[
        "--version",
        "0.1.0",
        "--no-images",
        "--manifests",
        &manifests,
    ]);
    let old = base.state().0;
    let reference = Project::new();
    copy_dir(base.dir(), reference.dir());
    reference.release_ok(&second);
    let new = reference.state().0;
    assert_ne!(old, new);

    let mut crashed = 0;
    for step in 1.. {
        assert!(step < 2000, "the release never got through");
        let p = Project::new();
        copy_dir(base.dir(), p.dir());
        let (code, out, err) = run(bundle_tool()
            .current_dir(p.dir())
            .env(olmkit_core::fsio::CRASH_AT_ENV, step.to_string())
            .arg("release")
            .args(&second));
        if code == 0 {
            assert_eq!(p.state().0, new, "uninterrupted run at step {step}");
            break;
        }
        assert!(
            err.contains("aborting at durability step"),
            "step {step}: not the crash hook ({code}):\n{out}\n{err}"
        );
        crashed += 1;
        if step % 2 == 1 {
            // The recovery every changeset and every release starts with, on its own: the tree
            // is then old or new, never a mix.
            olmkit_core::fsio::recover(p.dir()).unwrap();
            let state = p.state().0;
            assert!(
                state == old || state == new,
                "step {step}: after recovery the tree is neither the old nor the new one"
            );
        }
        // On even steps the re-run itself must find and finish the interrupted commit before
        // it reads anything (otherwise it would refuse: "already holds a release of 0.2.0").
        p.release_ok(&second);
        assert_eq!(p.state().0, new, "step {step}: re-run after the crash");
        assert_eq!(leftovers(p.dir()), Vec::<String>::new(), "step {step}");
        let (code, out, err) = p.bundle_tool_in(&["catalog", "validate", "catalog"]);
        assert_eq!(code, 0, "step {step}:\n{out}\n{err}");
    }
    // The commit alone has a journal, several renames and fsyncs: many crash points were hit.
    assert!(crashed > 20, "only {crashed} crash points");
}

/// The environment variable that keeps readers from completing an interrupted commit, as if
/// the tree were not writable (`olmkit_core::fsio::NO_REPAIR_ENV`; spelled out so that this
/// test also runs against builds without it).
const NO_REPAIR: &str = "OLMKIT_NO_REPAIR";

/// What one reader saw: its exit code and what it said about the tree (stdout, or for the
/// index and the server the counts they log).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    code: i32,
    saw: String,
}

/// The paths whose content differs between two trees (for messages; the bytes are too long).
fn tree_diff(want: &BTreeMap<String, Vec<u8>>, got: &BTreeMap<String, Vec<u8>>) -> String {
    let mut out = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => out.push(format!("missing {k}")),
            Some(g) if g != v => out.push(format!("differs {k}")),
            Some(_) => {}
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        out.push(format!("extra {k}"));
    }
    out.join(", ")
}

/// `bundle-tool serve catalog` until it says it serves (or exits): the counts it serves.
fn serve_counts(dir: &Path, no_repair: bool) -> (Seen, String) {
    use std::io::BufRead;
    let port = free_port().to_string();
    let mut cmd = bundle_tool();
    cmd.current_dir(dir)
        .args([
            "serve",
            "catalog",
            "--no-index",
            "--exit-on-load-error",
            "--port",
        ])
        .arg(&port)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    if no_repair {
        cmd.env(NO_REPAIR, "1");
    }
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let seen = loop {
        match rx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(line) => {
                log.push_str(&line);
                log.push('\n');
                if line.contains("catalog loaded; serving") {
                    let field = |name: &str| {
                        line.split_whitespace()
                            .find_map(|w| w.strip_prefix(&format!("{name}=")))
                            .unwrap_or("?")
                            .to_string()
                    };
                    break Seen {
                        code: 0,
                        saw: format!(
                            "packages={} bundles={}",
                            field("packages"),
                            field("bundles")
                        ),
                    };
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Some(status) = child.try_wait().unwrap() {
                    // Drain what it said before exiting.
                    while let Ok(line) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
                        log.push_str(&line);
                        log.push('\n');
                    }
                    break Seen {
                        code: status.code().unwrap_or(-1),
                        saw: String::new(),
                    };
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "serve neither served nor exited:\n{log}"
                );
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().unwrap();
                break Seen {
                    code: status.code().unwrap_or(-1),
                    saw: String::new(),
                };
            }
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    (seen, log)
}

/// Runs every reader of `bundle/` and `catalog/` on the project: (name, what it saw, stderr).
fn run_readers(dir: &Path, no_repair: bool) -> Vec<(&'static str, Seen, String)> {
    let index_out = tempfile::tempdir().unwrap();
    let index = index_out.path().join("index");
    let index_arg = index.to_str().unwrap().to_string();
    let bundle_02 = format!("bundle/{PKG}/0.2.0");
    let readers: Vec<(&'static str, Vec<&str>)> = vec![
        ("catalog validate", vec!["catalog", "validate", "catalog"]),
        ("render", vec!["render", "catalog"]),
        ("graph", vec!["graph", "--format", "json"]),
        (
            "catalog index",
            vec!["catalog", "index", "catalog", "-o", &index_arg],
        ),
        ("validate", vec!["validate", &bundle_02]),
    ];
    let mut out = Vec::new();
    for (name, args) in readers {
        let mut cmd = bundle_tool();
        cmd.current_dir(dir).args(&args);
        if no_repair {
            cmd.env(NO_REPAIR, "1");
        }
        let (code, stdout, stderr) = run(&mut cmd);
        let saw = if name == "catalog index" {
            // "indexed catalog: 1 packages, 2 bundles, ..." (the timing and size vary).
            stderr
                .lines()
                .find_map(|l| l.strip_prefix("indexed catalog: "))
                .and_then(|l| l.split(" files").next())
                .unwrap_or("")
                .to_string()
        } else {
            stdout
        };
        out.push((name, Seen { code, saw }, stderr));
    }
    let (seen, log) = serve_counts(dir, no_repair);
    out.push(("serve", seen, log));
    out
}

/// Issue #24 item 10: a `release` killed at every durability step (each staged write, fsync,
/// rename, link, exchange and unlink of its commit, counted by the `OLMKIT_CRASH_AT` hook),
/// then every reader of `bundle/` and `catalog/` run on what it left: `catalog validate`,
/// `render`, `graph`, `catalog index` (the scan the server loads), `validate` of the new bundle
/// and `serve` (what it serves once it says SERVING). Each must see the complete old tree or
/// the complete new one, or refuse with a hint: never a half state accepted as valid. First
/// with repairs off (as for a user who cannot write the tree: an interrupted commit must be
/// refused, and the tree left alone), then as the owner (the first reader completes the commit).
#[test]
fn readers_after_a_release_killed_at_any_step_see_old_or_new_or_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    let manifests = rendered_manifests(tmp.path());
    let second: &[&str] = &[
        "--version",
        "0.2.0",
        "--channel",
        "alpha",
        "--channel",
        "stable",
        "--default-channel",
        "stable",
        "--no-images",
        "--manifests",
        &manifests,
    ];
    let base = Project::new();
    base.release_ok(&[
        "--version",
        "0.1.0",
        "--no-images",
        "--manifests",
        &manifests,
    ]);
    let old = base.state().0;
    let reference = Project::new();
    copy_dir(base.dir(), reference.dir());
    reference.release_ok(second);
    let new = reference.state().0;
    let seen_old: Vec<Seen> = run_readers(base.dir(), false)
        .into_iter()
        .map(|r| r.1)
        .collect();
    let seen_new: Vec<Seen> = run_readers(reference.dir(), false)
        .into_iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(seen_old[0].code, 0, "{seen_old:?}");
    assert_eq!(seen_new[0].code, 0, "{seen_new:?}");
    assert!(seen_new[5].saw.contains("bundles=2"), "{seen_new:?}");
    assert!(seen_old[5].saw.contains("bundles=1"), "{seen_old:?}");

    let mut with_journal = 0;
    for step in 1.. {
        assert!(step < 2000, "the release never got through");
        let p = Project::new();
        copy_dir(base.dir(), p.dir());
        let (code, out, err) = run(bundle_tool()
            .current_dir(p.dir())
            .env("OLMKIT_CRASH_AT", step.to_string())
            .arg("release")
            .args(second));
        if code == 0 {
            assert_eq!(p.state().0, new, "uninterrupted run at step {step}");
            break;
        }
        assert!(
            err.contains("aborting at durability step"),
            "step {step}: not the crash hook ({code}):\n{out}\n{err}"
        );
        let journal = p.dir().join(".bundle-tool-journal").exists();
        with_journal += usize::from(journal);
        let before = p.state().0;
        if !journal {
            assert!(
                before == old || before == new,
                "step {step}: no journal, yet the tree is neither old nor new"
            );
        }
        for no_repair in [true, false] {
            let mode = if no_repair {
                "repairs off"
            } else {
                "as the owner"
            };
            let readers = run_readers(p.dir(), no_repair);
            for (i, (name, seen, stderr)) in readers.iter().enumerate() {
                if journal && no_repair {
                    assert_eq!(
                        seen.code, 1,
                        "step {step} ({mode}): {name} did not refuse a half-committed tree: {seen:?}\n{stderr}"
                    );
                    assert!(
                        stderr.contains("hint:") && stderr.contains("interrupted"),
                        "step {step} ({mode}): {name} refused without the hint:\n{stderr}"
                    );
                } else {
                    assert!(
                        *seen == seen_old[i] || *seen == seen_new[i],
                        "step {step} ({mode}, journal: {journal}): {name} saw neither the old nor the new tree:\n{seen:?}\nold: {:?}\nnew: {:?}\n{stderr}",
                        seen_old[i],
                        seen_new[i]
                    );
                }
            }
            let now = p.state().0;
            if no_repair {
                assert!(
                    now == before,
                    "step {step}: readers with repairs off changed the tree: {}",
                    tree_diff(&before, &now)
                );
            } else if journal {
                // The first reader completed the commit; everyone after saw the new tree.
                assert!(
                    now == new,
                    "step {step}: the readers did not complete the commit: {}",
                    tree_diff(&new, &now)
                );
                for (i, (name, seen, _)) in readers.iter().enumerate() {
                    assert_eq!(*seen, seen_new[i], "step {step}: {name} after the repair");
                }
            } else {
                assert!(now == old || now == new, "step {step}");
            }
        }
    }
    assert!(
        with_journal > 5,
        "only {with_journal} crash points inside the commit"
    );
}

/// `catalog validate catalog` and `render catalog` in `dir`: what each saw (exit code and stdout).
fn catalog_readers(dir: &Path, no_repair: bool) -> Vec<(Seen, String)> {
    [
        vec!["catalog", "validate", "catalog"],
        vec!["render", "catalog"],
    ]
    .iter()
    .map(|args| {
        let mut cmd = bundle_tool();
        cmd.current_dir(dir).args(args);
        if no_repair {
            cmd.env(NO_REPAIR, "1");
        }
        let (code, saw, stderr) = run(&mut cmd);
        (Seen { code, saw }, stderr)
    })
    .collect()
}

/// The same for `promote`, whose changeset is rooted in the catalog directory itself: its stage
/// (with the old and new package files) and its journal live inside the catalog while it
/// commits. Killed at every step, the catalog readers still see the old catalog, the new one,
/// or refuse: the stage is never read as part of the catalog (its `.indexignore`).
#[test]
fn readers_after_a_promote_killed_at_any_step_see_old_or_new_or_refuse() {
    let fixture = root().join("tests/fixtures/catalog/graph-demo/memcached-operator/catalog.yaml");
    let fresh = || {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("catalog/memcached-operator")).unwrap();
        std::fs::copy(
            &fixture,
            tmp.path().join("catalog/memcached-operator/catalog.yaml"),
        )
        .unwrap();
        tmp
    };
    let promote = ["promote", "0.4.0", "--to", "alpha"];
    let old_dir = fresh();
    let old: Vec<Seen> = catalog_readers(old_dir.path(), false)
        .into_iter()
        .map(|r| r.0)
        .collect();
    let new_dir = fresh();
    ok(bundle_tool().current_dir(new_dir.path()).args(promote));
    let new: Vec<Seen> = catalog_readers(new_dir.path(), false)
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_ne!(old, new);
    assert!(
        old.iter().chain(&new).all(|s| s.code == 0),
        "{old:?} {new:?}"
    );
    let mut with_journal = 0;
    for step in 1.. {
        assert!(step < 500, "promote never got through");
        let p = fresh();
        let (code, out, err) = run(bundle_tool()
            .current_dir(p.path())
            .env("OLMKIT_CRASH_AT", step.to_string())
            .args(promote));
        if code == 0 {
            break;
        }
        assert!(
            err.contains("aborting at durability step"),
            "step {step}: not the crash hook ({code}):\n{out}\n{err}"
        );
        let journal = p.path().join("catalog/.bundle-tool-journal").exists();
        with_journal += usize::from(journal);
        for no_repair in [true, false] {
            for (i, (seen, stderr)) in catalog_readers(p.path(), no_repair).iter().enumerate() {
                if journal && no_repair {
                    assert!(
                        seen.code == 1 && stderr.contains("hint:"),
                        "step {step}: reader {i} did not refuse: {seen:?}\n{stderr}"
                    );
                } else if journal {
                    // The first reader completed the commit.
                    assert_eq!(*seen, new[i], "step {step}: reader {i}\n{stderr}");
                } else {
                    assert!(
                        *seen == old[i] || *seen == new[i],
                        "step {step} (repairs off: {no_repair}): reader {i} saw neither the old nor the new catalog: {seen:?}\n{stderr}"
                    );
                }
            }
        }
    }
    assert!(
        with_journal > 3,
        "only {with_journal} steps inside the commit"
    );
}

/// The digest an OCI layout's index names `name` by (read from `index.json` directly, so the
/// tests below need no skopeo).
fn layout_ref_digest(layout: &Path, name: &str) -> Option<String> {
    let index = json(&std::fs::read_to_string(layout.join("index.json")).ok()?);
    index["manifests"]
        .as_array()?
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == name)
        .and_then(|m| m["digest"].as_str().map(String::from))
}

#[test]
fn a_rerelease_after_later_versions_does_not_rebuild_the_old_catalog_image() {
    let p = Project::new();
    let catalog_ref = "quay.io/example/memcached-operator-catalog:v0.2.0";
    p.release_ok(&["--version", "0.1.0", "--no-images"]);
    // 0.2.0 with its images: the layout holds the catalog image as released.
    let out = p.release_ok(&["--version", "0.2.0"]);
    assert!(
        out.contains(&format!("image catalog  {catalog_ref} sha256:")),
        "{out}"
    );
    let layout = p.dir().join("images");
    let released = layout_ref_digest(&layout, catalog_ref).expect("catalog v0.2.0 in the layout");
    p.release_ok(&["--version", "0.3.0", "--no-images"]);
    let before = p.state();

    // Re-running 0.2.0 now: bundle and catalog unchanged, the bundle image rebuilt, the catalog
    // image not (today's catalog holds 0.3.0), and the layout keeps the released one.
    let (code, out, err) = p.release(&["--version", "0.2.0"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("memcached-operator.v0.2.0 (0.2.0) is already released"),
        "{out}"
    );
    assert!(
        out.contains("image bundle   quay.io/example/memcached-operator-bundle:v0.2.0 sha256:"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "image catalog  {catalog_ref} not rebuilt: catalog holds later releases (0.3.0)"
        )),
        "{out}"
    );
    assert!(
        err.contains(&format!(
            "warning: not rebuilding the catalog image {catalog_ref}: catalog now also holds 0.3.0 released after 0.2.0, which that image never contained; the image stays as it was (images keeps the one it has, {released})"
        )),
        "{err}"
    );
    assert!(
        err.contains("hint: to rebuild it, run this release from a checkout of the 0.2.0 release"),
        "{err}"
    );
    assert_eq!(p.state().0, before.0, "bundle/ and catalog/ unchanged");
    assert_eq!(
        layout_ref_digest(&layout, catalog_ref).as_deref(),
        Some(released.as_str())
    );
    let v = json(&p.release_ok(&["--version", "0.2.0", "--output", "json"]));
    assert_eq!(v["images"].as_array().unwrap().len(), 1, "{v}");
    assert!(
        v["catalogImageSkipped"]
            .as_str()
            .unwrap()
            .contains("not rebuilt"),
        "{v}"
    );

    // The newest version's catalog image is today's catalog: it is rebuilt.
    let out = p.release_ok(&["--version", "0.3.0"]);
    assert!(
        out.contains("image catalog  quay.io/example/memcached-operator-catalog:v0.3.0 sha256:"),
        "{out}"
    );
}

#[test]
fn release_outside_a_project_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    // stdin is not a terminal here (null): the release must not read it for manifests.
    let (code, out, err) = run(bundle_tool()
        .current_dir(tmp.path())
        .args(["release", "--version", "0.5.0"])
        .stdin(std::process::Stdio::null()));
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("error: no config/manifests here ("), "{err}");
    assert!(!err.contains("<stdin>"), "{err}");
    assert!(
        err.contains("hint: run it from the project root (the directory holding config/), or pass --kustomize DIR, or --manifests DIR|FILE|- (- for stdin)"),
        "{err}"
    );
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn a_version_below_the_head_names_the_head_and_the_way_out() {
    let p = Project::new();
    p.three_releases();
    let before = p.state();
    let err = p.refused(
        &["--version", "0.2.5", "--no-images"],
        &[
            "error: --version 0.2.5 is not above the head of channel stable, memcached-operator.v0.3.0 (0.3.0)",
            "hint: release a version above 0.3.0 (e.g. --version 0.3.1)",
            "hint: to add an already released version to channel stable, use `bundle-tool promote VERSION --to stable`",
        ],
    );
    assert!(!err.contains("config/"), "{err}");
    assert_eq!(p.state(), before);
}

#[test]
fn push_never_moves_a_published_tag_to_other_content_without_force() {
    require_tool("skopeo");
    let registry = Registry::start();
    let host = registry.host();
    let tmp = tempfile::tempdir().unwrap();
    let server = static_binary(tmp.path(), "catalog-server");
    let p = Project::new();
    let repo = format!("{host}/example/memcached-operator");
    let push = [
        "--version",
        "0.1.0",
        "--operator-repo",
        &repo,
        "--push",
        "--insecure",
    ];
    p.release_ok(&push);
    let bundle_ref = format!("{repo}-bundle:v0.1.0");
    let catalog_ref = format!("{repo}-catalog:v0.1.0");
    let served = |r: &str| {
        json(&skopeo(&[
            "inspect",
            "--tls-verify=false",
            &format!("docker://{r}"),
        ]))["Digest"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (bundle_digest, catalog_digest) = (served(&bundle_ref), served(&catalog_ref));

    // Re-running the release later (another SOURCE_DATE_EPOCH, as after a new commit) rebuilds
    // the same images, with the release's own time: the tags already name them.
    let rerun = |extra: &[&str]| {
        run(bundle_tool()
            .current_dir(p.dir())
            .env("SOURCE_DATE_EPOCH", "1800000000")
            .arg("release")
            .args(push)
            .args(extra))
    };
    let (code, out, err) = rerun(&[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!("{bundle_ref} {bundle_digest}")),
        "{out}"
    );
    assert_eq!(served(&bundle_ref), bundle_digest);
    assert_eq!(served(&catalog_ref), catalog_digest);

    // Other content under the same tag (a catalog server in the catalog image now): refused
    // before anything is pushed.
    let before = p.state();
    let with_server = ["--catalog-server", server.to_str().unwrap()];
    let (code, out, err) = rerun(&with_server);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "{catalog_ref} already exists in the registry with digest {catalog_digest}"
        )),
        "{err}"
    );
    assert!(
        err.contains("refusing to overwrite a published tag with different content"),
        "{err}"
    );
    assert!(err.contains("pass --force to overwrite the tag"), "{err}");
    assert!(err.contains("nothing was pushed"), "{err}");
    assert_eq!(served(&catalog_ref), catalog_digest, "the tag did not move");
    assert_eq!(p.state().0, before.0);

    // --force moves it.
    let mut forced = with_server.to_vec();
    forced.extend(["--force", "--output", "json"]);
    let (code, out, err) = rerun(&forced);
    assert_eq!(code, 0, "{out}\n{err}");
    let v = json(&out);
    let catalog = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "catalog")
        .unwrap()
        .clone();
    assert_eq!(catalog["pushed"], true);
    assert_ne!(catalog["digest"], catalog_digest.as_str());
    assert_eq!(served(&catalog_ref), catalog["digest"].as_str().unwrap());
    assert_eq!(served(&bundle_ref), bundle_digest);
}
