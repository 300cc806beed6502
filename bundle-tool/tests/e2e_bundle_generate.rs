//! `bundle-tool generate crds|bundle` through the real binary: our operator's bundle from
//! `config/manifests` (run through the real `kubectl kustomize`), the fixture project, stdin,
//! byte-identical regeneration, exit codes 0/1/2 with `error:`/`hint:` lines, JSON output, and
//! no partial output when generation or validation fails. Then `generate bundle` as a drop-in
//! for `operator-sdk generate bundle` in an operator-sdk go/v4 project
//! (`tests/fixtures/sdk-project`): both forms of `make bundle` against the committed expected
//! trees (with bundle-tool's improvements and with `--upstream-compat`), files kept on
//! regeneration, `--overwrite=false`, package and base CSV from `PROJECT` and
//! `config/manifests/bases`, `--input-dir`/`--deploy-dir`/`--crds-dir`, every kind
//! operator-registry accepts, `--extra-service-accounts`, `--stdout`, `--use-image-digests`
//! against a local registry, and every error path.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn project() -> PathBuf {
    root().join("tests/fixtures/bundle/memcached-project")
}

fn bt() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bundle-tool"));
    c.env("SOURCE_DATE_EPOCH", "1700000000")
        .env_remove("RUST_LOG");
    c
}

fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    olmkit_core::fsio::read_tree(dir).unwrap()
}

#[test]
fn generate_crds_writes_what_operator_crd_prints() {
    let dir = tempfile::tempdir().unwrap();
    bt().args(["generate", "crds", "--output-dir"])
        .arg(dir.path())
        .assert()
        .success();
    let written =
        std::fs::read_to_string(dir.path().join("cache.example.com_memcacheds.yaml")).unwrap();
    // `operator crd` prints serde_saphyr::to_string(&memcached_api::crd()).
    let operator_crd = serde_saphyr::to_string(&memcached_api::crd()).unwrap();
    assert_eq!(written, operator_crd);
    let v: Value = serde_saphyr::from_str(&written).unwrap();
    let versions: Vec<&str> = v["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v1alpha1", "v1beta1", "v1"]);
}

#[test]
fn our_operator_bundle_from_config_manifests_validates() {
    let out = tempfile::tempdir().unwrap();
    let bundle = out.path().join("bundle/memcached-operator/0.1.0");
    bt().current_dir(root())
        .args([
            "generate",
            "bundle",
            "--layout",
            "versioned",
            "--version",
            "0.1.0",
            "--kustomize",
            "config/manifests",
            "--output-dir",
        ])
        .arg(&bundle)
        .assert()
        .success();
    bt().arg("validate").arg(&bundle).assert().success();
    let csv: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            bundle.join("manifests/memcached-operator.clusterserviceversion.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let hooks = csv["spec"]["webhookdefinitions"].as_array().unwrap();
    let conv = hooks
        .iter()
        .find(|w| w["type"] == "ConversionWebhook")
        .expect("conversion webhook");
    assert_eq!(conv["conversionCRDs"][0], "memcacheds.cache.example.com");
    assert_eq!(conv["webhookPath"], "/convert");
    let supported: Vec<&str> = csv["spec"]["installModes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["supported"] == true)
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(supported, ["AllNamespaces"]);
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .unwrap();
    assert_eq!(owned.len(), memcached_api::SERVED_VERSIONS.len());
}

#[test]
fn fixture_project_kustomize_and_stdin_give_identical_bytes_twice() {
    let out = tempfile::tempdir().unwrap();
    let a = out.path().join("a");
    let b = out.path().join("b");
    bt().args([
        "generate",
        "bundle",
        "--layout",
        "versioned",
        "--version",
        "0.1.0",
        "--channels",
        "stable,fast",
        "--default-channel",
        "stable",
        "--kustomize",
    ])
    .arg(project().join("config/manifests"))
    .arg("--output-dir")
    .arg(&a)
    .assert()
    .success()
    .stderr(predicates::str::contains(
        "note: install modes: only AllNamespaces",
    ))
    .stderr(predicates::str::contains("wrote memcached-operator.v0.1.0"));
    let first = tree(&a);
    // Again over the existing output: replaced with the same bytes.
    bt().args([
        "generate",
        "bundle",
        "--layout",
        "versioned",
        "--version",
        "0.1.0",
        "--channels",
        "stable,fast",
        "--default-channel",
        "stable",
        "--kustomize",
    ])
    .arg(project().join("config/manifests"))
    .arg("--output-dir")
    .arg(&a)
    .assert()
    .success();
    assert_eq!(tree(&a), first);
    // The same manifests on stdin.
    let stream = std::fs::read(project().join("kustomized.yaml")).unwrap();
    let assert = bt()
        .args([
            "generate",
            "bundle",
            "--layout",
            "versioned",
            "--version",
            "0.1.0",
            "--channels",
            "stable,fast",
            "--default-channel",
            "stable",
            "--manifests",
            "-",
            "-o",
            "json",
            "--output-dir",
        ])
        .arg(&b)
        .write_stdin(stream)
        .assert()
        .success();
    assert_eq!(tree(&b), first);
    let summary: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    assert_eq!(summary["csvName"], "memcached-operator.v0.1.0");
    assert_eq!(summary["validation"]["valid"], true);
    assert!(
        summary["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "bundle.Dockerfile")
    );
    let created = String::from_utf8(
        first[&PathBuf::from("manifests/memcached-operator.clusterserviceversion.yaml")].clone(),
    )
    .unwrap();
    assert!(
        created.contains("createdAt: \"2023-11-14T22:13:20Z\""),
        "SOURCE_DATE_EPOCH drives createdAt"
    );
}

#[test]
fn default_output_dir_is_bundle_package_version() {
    let cwd = tempfile::tempdir().unwrap();
    bt().current_dir(cwd.path())
        .args([
            "generate",
            "bundle",
            "--layout",
            "versioned",
            "--version",
            "0.2.0",
            "--kustomize",
        ])
        .arg(project().join("config/manifests"))
        .assert()
        .success();
    assert!(cwd.path().join("bundle/memcached-operator/0.2.0/manifests/memcached-operator.clusterserviceversion.yaml").is_file());
}

fn stream_text() -> String {
    std::fs::read_to_string(project().join("kustomized.yaml")).unwrap()
}

#[test]
fn bad_input_names_the_document_and_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("bundle");
    let broken = stream_text().replace(
        "image: quay.io/example/memcached-operator:0.1.0",
        "imagex: oops",
    );
    bt().args(["generate", "bundle", "--layout", "versioned", "--version", "0.1.0", "--manifests", "-", "--output-dir"])
        .arg(&target)
        .write_stdin(broken)
        .assert()
        .code(1)
        .stderr(predicates::str::is_match(r"error: <stdin> document \d+ \(Deployment memcached-operator-controller-manager\): spec\.template\.spec\.containers\[0\]\.image: is required").unwrap());
    assert!(!target.exists());

    bt().args([
        "generate",
        "bundle",
        "--layout",
        "versioned",
        "--version",
        "one",
        "--manifests",
        "-",
    ])
    .write_stdin(stream_text())
    .assert()
    .code(1)
    .stderr(predicates::str::contains(
        "error: --version \"one\": not a semantic version",
    ));

    bt().args([
        "generate",
        "bundle",
        "--layout",
        "versioned",
        "--version",
        "0.1.0",
        "--manifests",
        "-",
    ])
    .write_stdin("not: [valid\n")
    .assert()
    .code(1)
    .stderr(predicates::str::contains(
        "error: <stdin> document 1: invalid YAML",
    ))
    .stderr(predicates::str::contains("hint: "));

    bt().args([
        "generate",
        "bundle",
        "--layout",
        "versioned",
        "--version",
        "0.1.0",
        "--manifests",
        "-",
    ])
    .write_stdin("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: only}\n")
    .assert()
    .code(1)
    .stderr(predicates::str::contains(
        "error: no Deployment in the input manifests",
    ))
    .stderr(predicates::str::contains(
        "hint: feed the operator's full manifests",
    ));
}

#[test]
fn a_bundle_that_does_not_validate_is_not_written() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("bundle");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("previous.txt"), "kept").unwrap();
    // Generation succeeds, but the CRD has no storage version, which the API server refuses.
    let broken = stream_text().replace("storage: true", "storage: false");
    assert_ne!(broken, stream_text());
    bt().args([
        "generate",
        "bundle",
        "--layout",
        "versioned",
        "--version",
        "0.1.0",
        "--manifests",
        "-",
        "--output-dir",
    ])
    .arg(&target)
    .write_stdin(broken)
    .assert()
    .code(1)
    .stderr(predicates::str::contains("error[crd-versions]"))
    .stderr(predicates::str::contains("nothing was written"))
    .stderr(predicates::str::contains("hint:"));
    assert_eq!(tree(&target).len(), 1);
    assert_eq!(
        std::fs::read_to_string(target.join("previous.txt")).unwrap(),
        "kept"
    );
}

#[test]
fn kubectl_problems_map_to_exit_codes() {
    let empty = tempfile::tempdir().unwrap();
    // No kubectl on PATH: the user's environment, with a hint (exit 1).
    bt().env("PATH", empty.path())
        .args([
            "generate",
            "bundle",
            "--layout",
            "versioned",
            "--version",
            "0.1.0",
            "--kustomize",
            "config/manifests",
        ])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("kubectl is not installed"))
        .stderr(predicates::str::contains("hint: install kubectl"));
    // A kubectl that cannot be executed: unexpected (exit 2).
    std::fs::write(empty.path().join("kubectl"), "not a program").unwrap();
    bt().env("PATH", empty.path())
        .args([
            "generate",
            "bundle",
            "--layout",
            "versioned",
            "--version",
            "0.1.0",
            "--kustomize",
            "config/manifests",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "error (unexpected): cannot run kubectl",
        ));
    // A kustomization that kustomize rejects.
    bt().args([
        "generate",
        "bundle",
        "--layout",
        "versioned",
        "--version",
        "0.1.0",
        "--kustomize",
    ])
    .arg(empty.path())
    .assert()
    .code(1)
    .stderr(predicates::str::contains("failed"));
    // A bad SOURCE_DATE_EPOCH.
    bt().env("SOURCE_DATE_EPOCH", "yesterday")
        .args([
            "generate",
            "bundle",
            "--layout",
            "versioned",
            "--version",
            "0.1.0",
            "--manifests",
            "-",
        ])
        .write_stdin(stream_text())
        .assert()
        .code(1)
        .stderr(predicates::str::contains("SOURCE_DATE_EPOCH"));
}

// --- operator-sdk projects: `make bundle` with bundle-tool in place of operator-sdk ---

fn sdk_fixture() -> PathBuf {
    root().join("tests/fixtures/sdk-project")
}

/// A scratch copy of the fixture go/v4 project (kept alive by the returned TempDir).
fn sdk_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    for (rel, bytes) in tree(&sdk_fixture().join("memcached-operator")) {
        let target = dir.join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
    (tmp, dir)
}

/// The files a run added to or changed in the project copy.
fn new_files(project: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let before = tree(&sdk_fixture().join("memcached-operator"));
    tree(project)
        .into_iter()
        .filter(|(p, b)| before.get(p) != Some(b))
        .collect()
}

fn expected(which: &str) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    tree(&sdk_fixture().join("expected").join(which))
}

fn kustomized(project: &Path) -> Vec<u8> {
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(project.join("config/manifests"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `make bundle`'s invocation (BUNDLE_GEN_FLAGS of the go/v4 Makefile).
const MAKE_BUNDLE: [&str; 7] = [
    "generate",
    "bundle",
    "-q",
    "--overwrite",
    "--version",
    "0.0.1",
    "--kustomize-dir",
];

fn assert_same_tree(
    got: &std::collections::BTreeMap<PathBuf, Vec<u8>>,
    want: &std::collections::BTreeMap<PathBuf, Vec<u8>>,
) {
    let names = |t: &std::collections::BTreeMap<PathBuf, Vec<u8>>| -> Vec<PathBuf> {
        t.keys().cloned().collect()
    };
    assert_eq!(names(got), names(want));
    for (p, b) in want {
        assert_eq!(
            String::from_utf8_lossy(&got[p]),
            String::from_utf8_lossy(b),
            "{}",
            p.display()
        );
    }
}

#[test]
fn sdk_project_make_bundle_writes_the_expected_tree_and_it_validates() {
    let (_tmp, p) = sdk_copy();
    bt().current_dir(&p)
        .args(MAKE_BUNDLE)
        .arg("config/manifests")
        .assert()
        .success()
        .stderr("");
    assert_same_tree(&new_files(&p), &expected("default"));
    bt().arg("validate")
        .arg(p.join("bundle"))
        .assert()
        .success();

    // The piped form of the Makefile, on a fresh copy: the same bytes.
    let (_tmp2, q) = sdk_copy();
    bt().current_dir(&q)
        .args([
            "generate",
            "bundle",
            "-q",
            "--overwrite",
            "--version",
            "0.0.1",
        ])
        .write_stdin(kustomized(&q))
        .assert()
        .success();
    assert_same_tree(&new_files(&q), &expected("default"));

    // Regenerating in place changes nothing.
    let first = tree(&p);
    bt().current_dir(&p)
        .args(MAKE_BUNDLE)
        .arg("config/manifests")
        .assert()
        .success();
    assert_eq!(tree(&p), first);
}

#[test]
fn sdk_project_upstream_compat_writes_operator_sdk_shapes() {
    let (_tmp, p) = sdk_copy();
    bt().current_dir(&p)
        .args(MAKE_BUNDLE)
        .args(["config/manifests", "--upstream-compat"])
        .assert()
        .success();
    assert_same_tree(&new_files(&p), &expected("upstream-compat"));
    bt().arg("validate")
        .arg(p.join("bundle"))
        .assert()
        .success();
    // Each improvement can also be turned off alone.
    let (_tmp2, q) = sdk_copy();
    bt().current_dir(&q)
        .args(MAKE_BUNDLE)
        .args([
            "config/manifests",
            "--without",
            "min-kube-version,related-images",
        ])
        .assert()
        .success();
    let csv = String::from_utf8(
        tree(&q)[&PathBuf::from("bundle/manifests/memcached-operator.clusterserviceversion.yaml")]
            .clone(),
    )
    .unwrap();
    assert!(!csv.contains("minKubeVersion"));
    assert!(!csv.contains("relatedImages"));
    assert!(csv.contains("containerImage"), "other improvements stay on");
}

#[test]
fn sdk_regeneration_keeps_foreign_files_and_overwrite_false_keeps_metadata() {
    let (_tmp, p) = sdk_copy();
    bt().current_dir(&p)
        .args(MAKE_BUNDLE)
        .arg("config/manifests")
        .assert()
        .success();
    let props = p.join("bundle/metadata/properties.yaml");
    std::fs::write(
        &props,
        "properties:\n- type: olm.maxOpenShiftVersion\n  value: \"4.16\"\n",
    )
    .unwrap();
    let extra = p.join("bundle/manifests/extra-config_v1_configmap.yaml");
    std::fs::write(
        &extra,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra-config\ndata:\n  a: b\n",
    )
    .unwrap();
    let annotations = p.join("bundle/metadata/annotations.yaml");
    let custom = format!(
        "{}  # Custom annotations\n  com.redhat.openshift.versions: v4.12\n",
        std::fs::read_to_string(&annotations).unwrap()
    );
    std::fs::write(&annotations, &custom).unwrap();
    let dockerfile = p.join("bundle.Dockerfile");
    let custom_df = format!(
        "{}LABEL com.redhat.openshift.versions=v4.12\n",
        std::fs::read_to_string(&dockerfile).unwrap()
    );
    std::fs::write(&dockerfile, &custom_df).unwrap();
    let csv = p.join("bundle/manifests/memcached-operator.clusterserviceversion.yaml");

    // --overwrite=false: a new version's manifests, the hand-edited metadata kept.
    bt().current_dir(&p)
        .args([
            "generate",
            "bundle",
            "-q",
            "--overwrite=false",
            "--version",
            "0.0.2",
        ])
        .assert()
        .success();
    assert!(
        std::fs::read_to_string(&csv)
            .unwrap()
            .contains("name: memcached-operator.v0.0.2")
    );
    assert_eq!(std::fs::read_to_string(&annotations).unwrap(), custom);
    assert_eq!(std::fs::read_to_string(&dockerfile).unwrap(), custom_df);
    assert!(props.is_file() && extra.is_file());

    // --overwrite (the Makefile's): metadata regenerated, foreign files still kept.
    bt().current_dir(&p)
        .args(MAKE_BUNDLE)
        .arg("config/manifests")
        .assert()
        .success();
    let d = expected("default");
    assert_eq!(
        std::fs::read(&annotations).unwrap(),
        d[&PathBuf::from("bundle/metadata/annotations.yaml")]
    );
    assert_eq!(
        std::fs::read(&dockerfile).unwrap(),
        d[&PathBuf::from("bundle.Dockerfile")]
    );
    assert!(props.is_file() && extra.is_file());
    bt().arg("validate")
        .arg(p.join("bundle"))
        .assert()
        .success();

    // --overwrite=false with no metadata yet writes it.
    let (_tmp2, q) = sdk_copy();
    bt().current_dir(&q)
        .args([
            "generate",
            "bundle",
            "--overwrite=false",
            "--version",
            "0.0.1",
        ])
        .assert()
        .success();
    assert!(q.join("bundle/metadata/annotations.yaml").is_file());
    assert!(q.join("bundle.Dockerfile").is_file());
}

#[test]
fn sdk_package_and_base_csv_come_from_project_and_kustomize_dir() {
    let (tmp, p) = sdk_copy();
    // Cluster-ready manifests without the CSV: the base comes from
    // config/manifests/bases/<projectName>.clusterserviceversion.yaml.
    let stream = String::from_utf8(kustomized(&p)).unwrap();
    let no_csv: Vec<&str> = stream
        .split("\n---\n")
        .filter(|d| !d.contains("kind: ClusterServiceVersion"))
        .collect();
    let deploy = tmp.path().join("deploy");
    std::fs::create_dir_all(&deploy).unwrap();
    std::fs::write(deploy.join("all.yaml"), no_csv.join("\n---\n")).unwrap();
    let out = tmp.path().join("out");
    bt().current_dir(&p)
        .args([
            "generate",
            "bundle",
            "-q",
            "--version",
            "0.0.1",
            "--input-dir",
        ])
        .arg(&deploy)
        .arg("--output-dir")
        .arg(&out)
        .assert()
        .success();
    let csv = std::fs::read_to_string(
        out.join("manifests/memcached-operator.clusterserviceversion.yaml"),
    )
    .unwrap();
    assert!(csv.contains("description: Memcached Operator description. TODO."));
    assert!(csv.contains("project_layout: go.kubebuilder.io/v4"));
    // The Dockerfile at the project root copies from where the bundle went.
    let df = std::fs::read_to_string(p.join("bundle.Dockerfile")).unwrap();
    assert!(
        df.contains(&format!("COPY {}/manifests /manifests/", out.display())),
        "{df}"
    );

    // --deploy-dir with --crds-dir: the CRDs come from --crds-dir.
    let crds = tmp.path().join("crds");
    std::fs::create_dir_all(&crds).unwrap();
    let crd = no_csv
        .iter()
        .find(|d| d.contains("kind: CustomResourceDefinition"))
        .unwrap()
        .replace(
            "name: memcacheds.cache.example.com",
            "name: memcacheds.cache.example.com\n  labels: {from: crds-dir}",
        );
    std::fs::write(crds.join("crd.yaml"), crd).unwrap();
    let out2 = tmp.path().join("out2");
    bt().current_dir(&p)
        .args([
            "generate",
            "bundle",
            "-q",
            "--version",
            "0.0.1",
            "--deploy-dir",
        ])
        .arg(&deploy)
        .arg("--crds-dir")
        .arg(&crds)
        .arg("--output-dir")
        .arg(&out2)
        .assert()
        .success();
    let crd_out =
        std::fs::read_to_string(out2.join("manifests/cache.example.com_memcacheds.yaml")).unwrap();
    assert!(crd_out.contains("from: crds-dir"));
}

#[test]
fn sdk_keeps_console_kinds_and_extra_service_accounts() {
    let (_tmp, p) = sdk_copy();
    let mut stream = kustomized(&p);
    stream.extend_from_slice(
        b"---\napiVersion: console.openshift.io/v1\nkind: ConsoleLink\nmetadata:\n  name: memcached-docs\nspec:\n  href: https://example.com\n  location: HelpMenu\n  text: Memcached docs\n\
---\napiVersion: console.openshift.io/v1\nkind: ConsoleQuickStart\nmetadata:\n  name: memcached-start\nspec:\n  displayName: Start\n  durationMinutes: 5\n  description: d\n  introduction: i\n  tasks: []\n\
---\napiVersion: console.openshift.io/v1\nkind: ConsoleCLIDownload\nmetadata:\n  name: memcached-cli\nspec:\n  displayName: cli\n  description: d\n  links: [{href: 'https://example.com/cli'}]\n\
---\napiVersion: console.openshift.io/v1\nkind: ConsoleYAMLSample\nmetadata:\n  name: memcached-sample-yaml\nspec:\n  targetResource: {apiVersion: cache.example.com/v1alpha1, kind: Memcached}\n  title: t\n  description: d\n  yaml: 'kind: Memcached'\n\
---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: helper\n  namespace: memcached-operator-system\n\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: helper-role\n  namespace: memcached-operator-system\nrules:\n- apiGroups: ['']\n  resources: [secrets]\n  verbs: [get]\n\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: helper-rolebinding\n  namespace: memcached-operator-system\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: helper-role}\nsubjects:\n- {kind: ServiceAccount, name: helper, namespace: memcached-operator-system}\n",
    );
    // The validator's table may not list every kind operator-registry accepts yet, so this
    // checks generation alone.
    bt().current_dir(&p)
        .args([
            "generate",
            "bundle",
            "-q",
            "--version",
            "0.0.1",
            "--no-validate",
            "--extra-service-accounts",
            "helper",
        ])
        .write_stdin(stream)
        .assert()
        .success();
    let files = tree(&p.join("bundle/manifests"));
    for f in [
        "memcached-docs_console.openshift.io_v1_consolelink.yaml",
        "memcached-start_console.openshift.io_v1_consolequickstart.yaml",
        "memcached-cli_console.openshift.io_v1_consoleclidownload.yaml",
        "memcached-sample-yaml_console.openshift.io_v1_consoleyamlsample.yaml",
    ] {
        assert!(
            files.contains_key(Path::new(f)),
            "{f} missing: {:?}",
            files.keys()
        );
    }
    // The extra account's role went into the CSV; neither it nor its binding is shipped.
    assert!(
        !files
            .keys()
            .any(|k| k.to_string_lossy().starts_with("helper"))
    );
    let csv = String::from_utf8(
        files[Path::new("memcached-operator.clusterserviceversion.yaml")].clone(),
    )
    .unwrap();
    assert!(csv.contains("serviceAccountName: helper"));
}

#[test]
fn sdk_stdout_prints_the_manifests_and_writes_nothing() {
    let (_tmp, p) = sdk_copy();
    let assert = bt()
        .current_dir(&p)
        .args(["generate", "bundle", "--stdout", "--version", "0.0.1"])
        .assert()
        .success();
    let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(out.starts_with(
        "\n---\napiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\n"
    ));
    assert_eq!(out.matches("\n---\n").count(), 6);
    assert!(new_files(&p).is_empty());
    bt().current_dir(&p)
        .args([
            "generate",
            "bundle",
            "--stdout",
            "--output-dir",
            "x",
            "--version",
            "0.0.1",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--output-dir"));
}

#[test]
fn sdk_errors_name_file_and_field_and_write_nothing() {
    let (_tmp, p) = sdk_copy();
    let run = |args: &[&str]| {
        let mut c = bt();
        c.current_dir(&p).args(["generate", "bundle"]).args(args);
        if !args.contains(&"--version") {
            c.args(["--version", "0.0.1"]);
        }
        c.assert().code(1)
    };
    // A PROJECT file generation cannot use.
    let project = std::fs::read_to_string(p.join("PROJECT")).unwrap();
    std::fs::write(
        p.join("PROJECT"),
        project.replace(
            "projectName: memcached-operator",
            "projectName: [memcached]",
        ),
    )
    .unwrap();
    run(&[]).stderr(predicates::str::contains(
        "error: PROJECT: projectName: must be a string",
    ));
    std::fs::write(p.join("PROJECT"), &project).unwrap();
    // A base CSV file that holds no CSV.
    let base = p.join("config/manifests/bases/memcached-operator.clusterserviceversion.yaml");
    let base_text = std::fs::read_to_string(&base).unwrap();
    std::fs::write(
        &base,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )
    .unwrap();
    let deploy = p.join("../deploy");
    std::fs::create_dir_all(&deploy).unwrap();
    let stream = String::from_utf8(kustomized(&p)).unwrap();
    std::fs::write(
        deploy.join("all.yaml"),
        stream
            .split("\n---\n")
            .filter(|d| !d.contains("kind: ConfigMap"))
            .collect::<Vec<_>>()
            .join("\n---\n"),
    )
    .unwrap();
    run(&["--input-dir", "../deploy"]).stderr(predicates::str::contains(
        "config/manifests/bases/memcached-operator.clusterserviceversion.yaml: no ClusterServiceVersion manifest in the file",
    ));
    std::fs::write(&base, base_text).unwrap();
    // A bad version, a bad channel, a broken Deployment on stdin.
    run(&["--version", "1.0"]).stderr(predicates::str::contains("--version \"1.0\""));
    run(&["--channels", "a b"]).stderr(predicates::str::contains("--channels"));
    let broken = stream.replace(
        "image: quay.io/example/memcached-operator:v0.0.1",
        "image: \"\"",
    );
    bt().current_dir(&p)
        .args(["generate", "bundle", "--version", "0.0.1"])
        .write_stdin(broken)
        .assert()
        .code(1)
        .stderr(predicates::str::is_match(
            r"error: <stdin> document \d+ \(Deployment memcached-operator-controller-manager\): spec\.template\.spec\.containers\[0\]\.image: is required",
        )
        .unwrap());
    // A bundle that does not validate (a CRD with no storage version): nothing written,
    // neither the bundle directory nor the Dockerfile at the root.
    bt().current_dir(&p)
        .args(["generate", "bundle", "--version", "0.0.1"])
        .write_stdin(stream.replace("storage: true", "storage: false"))
        .assert()
        .code(1)
        .stderr(predicates::str::contains("error[crd-versions]"))
        .stderr(predicates::str::contains("nothing was written to bundle"));
    assert!(!p.join("bundle").exists() && !p.join("bundle.Dockerfile").exists());
    // Existing metadata that is not bundle metadata, with --overwrite=false.
    std::fs::create_dir_all(p.join("bundle/metadata")).unwrap();
    std::fs::write(
        p.join("bundle/metadata/annotations.yaml"),
        "annotations: [x]\n",
    )
    .unwrap();
    run(&["--overwrite=false"]).stderr(predicates::str::contains(
        "bundle/metadata/annotations.yaml: annotations: must be a mapping",
    ));
    std::fs::remove_dir_all(p.join("bundle")).unwrap();
    // No kustomization and nothing piped.
    std::fs::remove_file(p.join("config/manifests/kustomization.yaml")).unwrap();
    run(&[]).stderr(predicates::str::contains(
        "one of stdin, --input-dir, or --deploy-dir",
    ));
    assert!(new_files(&p).is_empty(), "{:?}", new_files(&p).keys());
}

#[test]
fn sdk_use_image_digests_pins_what_the_registry_serves() {
    let registry = e2e_support::registry::Registry::start();
    let host = registry.host();
    let tag = format!("{host}/example/memcached-operator:v0.0.1");
    // Any image will do: push the expected bundle as one.
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("images");
    let assert = bt()
        .args(["image", "build", "bundle"])
        .arg(sdk_fixture().join("expected/default/bundle"))
        .arg("--layout")
        .arg(&layout)
        .args(["--tag", &tag, "--push", "--insecure", "-o", "json"])
        .assert()
        .success();
    let built: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    let digest = built["digest"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:"), "{built}");

    let (_tmp, p) = sdk_copy();
    let k = p.join("config/manager/kustomization.yaml");
    let text = std::fs::read_to_string(&k).unwrap().replace(
        "newName: quay.io/example/memcached-operator",
        &format!("newName: {host}/example/memcached-operator"),
    );
    std::fs::write(&k, text).unwrap();
    bt().current_dir(&p)
        .args(MAKE_BUNDLE)
        .args(["config/manifests", "--use-image-digests"])
        .assert()
        .success();
    let csv = std::fs::read_to_string(
        p.join("bundle/manifests/memcached-operator.clusterserviceversion.yaml"),
    )
    .unwrap();
    let pinned = format!("{host}/example/memcached-operator@{digest}");
    let v: Value = serde_saphyr::from_str(&csv).unwrap();
    assert_eq!(
        v["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
            ["image"],
        pinned.as_str()
    );
    assert_eq!(
        v["metadata"]["annotations"]["containerImage"],
        pinned.as_str()
    );
    assert_eq!(v["spec"]["relatedImages"][0]["image"], pinned.as_str());
    assert!(!csv.contains(":v0.0.1"), "{csv}");
}
