//! The example operators of `bundle-tool/examples/` (the tutorials' WhaleSay, RedisCluster and
//! PulsarConsumer), each made by `bundle-tool init` + `bundle-tool create api` (its
//! `SCAFFOLD.sh`) and the edits a user makes (its `.scaffold-edits`), end to end:
//!
//! - the committed example is its scaffold plus the listed edits: rerunning `SCAFFOLD.sh` with
//!   this bundle-tool gives every other file byte for byte (a template change that is not
//!   carried into the examples fails here);
//! - each passes its own `make test` (its manager against the API-server stand-in) and
//!   `make verify` (config/ is what its code generates; its OLM bundle generates and validates);
//! - each is installed through OLM from this repository's catalog (`catalog/`, one package per
//!   operator, served by `bundle-tool serve`; the fake OLM dials it over operator-registry's
//!   gRPC API and creates the CSV and CRDs from the served bundle; `bundle-tool install` applies
//!   the OperatorGroup and Subscription); its manager then runs as OLM's pod would (the CSV's
//!   command line and environment, the ServiceAccount bound to exactly the RBAC OLM derives from
//!   the CSV) and reconciles the CSV's first `alm-examples` sample until it is `Available`, and
//!   deleting the sample releases its finalizer. No request of the manager may be denied.
//!
//! The examples build in this repository's target directory (`CARGO_TARGET_DIR`), sharing its
//! compiled dependencies; they all name their binary `manager`, so builds take turns.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::cluster_harness as harness;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use e2e_support::olm::{
    TargetNamespaces, alm_examples, bundle_csv, bundle_manifests, deployment_service_account,
    install_olm_rbac, olm_rbac,
};
use harness::{Env, FakeOlm, Scenario, olm_crds, text, workspace};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube_standin::{AuthorizationMode, StandIn, StandInOptions};
use olmkit_cluster::olm::{catalog_source_resource, csv_resource};
use serde_json::{Value, json};

/// The namespace OLM installs the operators into (one AllNamespaces OperatorGroup).
const OPERATORS: &str = "operators";
/// The namespace of the samples.
const SAMPLES: &str = "e2e";
/// The CatalogSource serving this repository's catalog.
const CATALOG_SOURCE: &str = "olmkit-examples";
const TIMEOUT: Duration = Duration::from_secs(90);

/// The example projects: (name, directory), those with a `SCAFFOLD.sh`.
fn examples() -> Vec<(String, PathBuf)> {
    let dir = workspace().join("bundle-tool/examples");
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("SCAFFOLD.sh").is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    out.sort();
    assert!(
        out.len() >= 3,
        "the three tutorial operators in {}",
        dir.display()
    );
    out
}

use crate::shared_target::{
    one_project_at_a_time as one_build_at_a_time, project_command, target_dir,
};

/// Runs `program args` in `dir` with the shared target directory and this bundle-tool; panics
/// with its output when it fails.
fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let started = Instant::now();
    let out = project_command(dir, program)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "`{program} {}` in {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        dir.display(),
        out.status
    );
    eprintln!(
        "{}: {program} {} ({:.0?})",
        dir.display(),
        args.join(" "),
        started.elapsed()
    );
    stdout
}

/// Every file under `dir`, relative, without build outputs (`target/`, `images/`).
fn files(dir: &Path) -> BTreeSet<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_entry(|e| {
            e.depth() != 1 || !matches!(e.file_name().to_str(), Some("target" | "images"))
        })
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            e.path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// The paths `.scaffold-edits` lists (one per line, `#` comments).
fn listed_edits(dir: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(dir.join(".scaffold-edits"))
        .unwrap_or_else(|e| panic!("{}/.scaffold-edits: {e}", dir.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// What differs between an example and its regenerated scaffold, beyond the listed edits.
fn drift(example: &Path, scaffold: &Path) -> Vec<String> {
    let (committed, generated, edits) = (files(example), files(scaffold), listed_edits(example));
    let mut problems = Vec::new();
    for f in &generated {
        let ours = example.join(f);
        let same = std::fs::read(&ours).ok() == Some(std::fs::read(scaffold.join(f)).unwrap());
        match (edits.contains(f), committed.contains(f), same) {
            (false, false, _) => problems.push(format!("{f}: generated, but not in the example")),
            (false, true, false) => problems.push(format!(
                "{f}: differs from what the scaffold generates, and is not in .scaffold-edits"
            )),
            (true, true, true) => problems.push(format!(
                "{f}: listed in .scaffold-edits, but identical to the scaffold's"
            )),
            _ => {}
        }
    }
    for f in committed.difference(&generated) {
        if !edits.contains(f) {
            problems.push(format!(
                "{f}: not generated by the scaffold, and not in .scaffold-edits"
            ));
        }
    }
    for f in edits.difference(&committed) {
        problems.push(format!(
            "{f}: listed in .scaffold-edits, but not in the example"
        ));
    }
    problems
}

#[test]
fn each_example_is_its_scaffold_plus_its_listed_edits() {
    // `SCAFFOLD.sh` passes `--toolkit-path ../../..`: the scratch projects sit three levels
    // below the checkout, like the examples.
    let scratch_root = workspace().join("target/examples-drift");
    let mut problems = Vec::new();
    for (name, dir) in examples() {
        let scratch = scratch_root.join(&name);
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch_root).unwrap();
        let script = dir.join("SCAFFOLD.sh").display().to_string();
        let relative = format!("target/examples-drift/{name}");
        run(&workspace(), "sh", &[&script, &relative]);
        problems.extend(
            drift(&dir, &scratch)
                .into_iter()
                .map(|p| format!("{name}/{p}")),
        );
        std::fs::remove_dir_all(&scratch).unwrap();
    }
    assert!(
        problems.is_empty(),
        "the examples drifted from their scaffolds (fix the example, or list the file in its \
         .scaffold-edits):\n  {}",
        problems.join("\n  ")
    );
}

/// Runs the example's own `make test` and `make verify`, then copies the manager they built
/// (with the test targets) out of the shared `target/debug/manager`. One test does this and
/// the OLM installs: two tests taking turns at the shared target directory kept a second test
/// thread waiting on it, with the other suites queued behind.
fn test_verify_and_keep_manager(name: &str, dir: &Path) -> PathBuf {
    let _turn = one_build_at_a_time();
    run(dir, "make", &["--no-print-directory", "test"]);
    run(dir, "make", &["--no-print-directory", "verify"]);
    let out = target_dir().join("tmp/example-managers").join(name);
    std::fs::create_dir_all(&out).unwrap();
    let binary = out.join("manager");
    std::fs::copy(target_dir().join("debug/manager"), &binary).unwrap();
    binary
}

/// The package each example releases: its `PROJECT`'s projectName.
fn package_of(dir: &Path) -> String {
    let project = std::fs::read_to_string(dir.join("PROJECT")).unwrap();
    project
        .lines()
        .find_map(|l| l.strip_prefix("projectName: "))
        .expect("PROJECT has projectName")
        .trim()
        .to_string()
}

async fn admin_client(standin: &StandIn) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&standin.kubeconfig_yaml("default")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when dropped.
struct Running(Child, PathBuf);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

/// `bundle-tool serve` on this repository's catalog, until dropped.
fn serve_catalog(scratch: &Path) -> (Running, String) {
    let port = free_port();
    let log = scratch.join("serve.log");
    let child = Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
        .args([
            "serve",
            "--address",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .arg(workspace().join("catalog"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let running = Running(child, log);
    let deadline = Instant::now() + TIMEOUT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "bundle-tool serve did not listen:\n{}",
            running.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (running, format!("127.0.0.1:{port}"))
}

/// The stand-in, with OLM's CRDs and RBAC authorization, and the fake OLM dialling catalogs.
async fn olm_cluster() -> (Env, FakeOlm) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let standin = StandIn::start(StandInOptions {
        crds: olm_crds(),
        namespaces: vec![OPERATORS.into(), SAMPLES.into()],
        simulate_workloads: true,
        authorization: AuthorizationMode::Rbac,
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    standin.write_kubeconfig(&kubeconfig, OPERATORS).unwrap();
    let client = admin_client(&standin).await;
    let env = Env {
        standin,
        dir,
        kubeconfig,
        client,
    };
    let olm = FakeOlm::start_serving_catalogs(&env, Scenario::default()).await;
    (env, olm)
}

/// A cluster admin's gRPC CatalogSource for a catalog served at `address` (OLM dials an
/// address source directly instead of starting a registry pod from an image). `bundle-tool
/// install --catalog-source` then applies its own fields (image, display name) beside it.
async fn create_catalog_source(env: &Env, address: &str) {
    env.create(
        &catalog_source_resource(),
        Some(OPERATORS),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
               "metadata": {"name": CATALOG_SOURCE, "namespace": OPERATORS},
               "spec": {"sourceType": "grpc", "address": address}}),
    )
    .await;
}

/// `bundle-tool install` of `package` from the served catalog; the CSV OLM installed (in full,
/// from its bundle).
async fn install(env: &Env, package: &str) -> Value {
    let catalog = workspace().join("catalog").display().to_string();
    let out = env
        .bundle_tool(&[
            "install",
            "--catalog-image",
            "quay.io/example/olmkit-examples-catalog:latest",
            "--catalog-source",
            CATALOG_SOURCE,
            "--package",
            package,
            "--namespace",
            OPERATORS,
            "--catalog-dir",
            &catalog,
            "--poll-interval",
            "50ms",
            "--settle",
            "300ms",
            "--timeout",
            "60s",
        ])
        .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "install {package}:\n{stderr}");
    assert!(
        stderr.contains("install complete: "),
        "install {package}:\n{stderr}"
    );
    let name = text(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .map(String::from)
        .expect("kubectl get csv's row");
    let installed = env
        .get(&csv_resource(), Some(OPERATORS), &name)
        .await
        .unwrap_or_else(|| panic!("CSV {name} after install"));
    let version = installed["spec"]["version"].as_str().unwrap();
    unpack_bundle(
        env,
        &workspace().join("bundle").join(package).join(version),
        &name,
    )
    .await
}

/// What OLM's bundle unpack job reads from the bundle image (whose content is the released
/// `bundle/<package>/<version>/`; the catalog carries only the CSV's metadata): the CSV, and
/// its CRDs, which the InstallPlan creates before the CSV's deployment.
async fn unpack_bundle(env: &Env, bundle: &Path, installed: &str) -> Value {
    let csv = bundle_csv(bundle);
    assert_eq!(csv["metadata"]["name"], installed, "{}", bundle.display());
    let crds: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &kube::core::ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    for (_, crd) in bundle_manifests(bundle)
        .into_iter()
        .filter(|(_, o)| o["kind"] == "CustomResourceDefinition")
    {
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        crds.patch(
            &name,
            &PatchParams::apply("olm").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("CRD {name}: {e}"));
    }
    csv
}

/// The CSV's manager container, run as the kubelet would run OLM's Deployment: its command
/// line (ports moved to free loopback ones) and environment (`fieldRef`s resolved as for a pod
/// of an AllNamespaces OperatorGroup), as its ServiceAccount.
fn start_manager(env: &Env, csv: &Value, binary: &Path, health: u16) -> Running {
    let deployment = csv
        .pointer("/spec/install/spec/deployments/0")
        .expect("a deployment in the CSV");
    let container = &deployment
        .pointer("/spec/template/spec/containers")
        .unwrap()[0];
    let mut args: Vec<String> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    for a in &mut args {
        if a.starts_with("--health-probe-bind-address=") {
            *a = format!("--health-probe-bind-address=127.0.0.1:{health}");
        } else if a.starts_with("--metrics-bind-address=") {
            *a = format!("--metrics-bind-address=127.0.0.1:{}", free_port());
        }
    }
    let sa = deployment_service_account(csv);
    let kubeconfig = env.dir.path().join(format!("{sa}.kubeconfig"));
    std::fs::write(
        &kubeconfig,
        env.standin
            .kubeconfig_for_service_account(OPERATORS, &sa)
            .unwrap(),
    )
    .unwrap();
    let log = env.dir.path().join(format!("{sa}.log"));
    let mut command = Command::new(binary);
    command
        .args(&args)
        .env_clear()
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let pod_name = format!("{}-e2e", deployment["name"].as_str().unwrap());
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap();
        let value = match var
            .pointer("/valueFrom/fieldRef/fieldPath")
            .and_then(Value::as_str)
        {
            Some("metadata.namespace") => OPERATORS.to_string(),
            Some("metadata.name") => pod_name.clone(),
            // OLM's annotation on the pods: "" for an AllNamespaces OperatorGroup.
            Some(p) if p.contains("olm.targetNamespaces") => String::new(),
            Some(other) => panic!("env {name}: fieldRef {other} not resolved by this test"),
            None => var["value"].as_str().unwrap_or_default().to_string(),
        };
        command.env(name, value);
    }
    Running(command.spawn().unwrap(), log)
}

fn wait_ready(manager: &mut Running, port: u16) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Ok(Some(status)) = manager.0.try_wait() {
            panic!("the manager exited ({status}):\n{}", manager.log());
        }
        if http_status(port, "/readyz") == Some(200) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the manager did not become ready:\n{}",
            manager.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status code of a plain HTTP GET on 127.0.0.1:`port`.
fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

/// The condition `type_`'s status in an object's `status.conditions`.
fn condition(object: &Value, type_: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(String::from)
}

/// Polls `check` until it gives something, for at most [`TIMEOUT`].
async fn wait_for<T, F, Fut>(what: &str, manager: &Running, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; manager log:\n{}",
            manager.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates the CSV's first sample in [`SAMPLES`], waits until it is `Available`, deletes it and
/// waits until it is gone (its finalizer released).
async fn reconcile_sample(env: &Env, csv: &Value, manager: &Running) -> String {
    let mut sample = alm_examples(csv).into_iter().next().expect("a sample");
    sample["metadata"]["namespace"] = json!(SAMPLES);
    let name = sample["metadata"]["name"].as_str().unwrap().to_string();
    let (group, version) = sample["apiVersion"]
        .as_str()
        .unwrap()
        .split_once('/')
        .unwrap();
    let gvk = GroupVersionKind::gvk(group, version, sample["kind"].as_str().unwrap());
    let (ar, _) = kube::discovery::pinned_kind(&env.client, &gvk)
        .await
        .unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), SAMPLES, &ar);
    api.patch(
        &name,
        &PatchParams::apply("e2e-test").force(),
        &Patch::Apply(&sample),
    )
    .await
    .unwrap();
    let reconciled = wait_for(&format!("{} {name} Available", gvk.kind), manager, || {
        let api = api.clone();
        let name = name.clone();
        async move {
            let o = serde_json::to_value(api.get(&name).await.ok()?).unwrap();
            (condition(&o, "Available").as_deref() == Some("True")).then_some(o)
        }
    })
    .await;
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(&format!("{} {name} deleted", gvk.kind), manager, || {
        let api = api.clone();
        let name = name.clone();
        async move { api.get_opt(&name).await.unwrap().is_none().then_some(()) }
    })
    .await;
    format!("{} {name}: {}", gvk.kind, reconciled["status"])
}

/// The manager's requests the stand-in denied (each a missing RBAC rule in the CSV).
fn denied(env: &Env, service_account: &str) -> BTreeMap<String, usize> {
    let user = format!("system:serviceaccount:{OPERATORS}:{service_account}");
    let mut out = BTreeMap::new();
    for r in env.standin.requests() {
        if r.user == user && r.denied() {
            *out.entry(format!("{} {}", r.method, r.path)).or_default() += 1;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_example_passes_its_own_tests_and_verify_then_installs_through_olm_and_reconciles() {
    let examples = examples();
    let binaries: Vec<PathBuf> = examples
        .iter()
        .map(|(name, dir)| test_verify_and_keep_manager(name, dir))
        .collect();
    let (env, _olm) = olm_cluster().await;
    let (_server, address) = serve_catalog(env.dir.path());
    create_catalog_source(&env, &address).await;
    for ((name, dir), binary) in examples.iter().zip(&binaries) {
        let package = package_of(dir);
        let csv = install(&env, &package).await;
        let objects = olm_rbac(&csv, OPERATORS, &TargetNamespaces::All);
        install_olm_rbac(&env.client, &objects).await;
        let health = free_port();
        let mut manager = start_manager(&env, &csv, binary, health);
        wait_ready(&mut manager, health);
        let outcome = reconcile_sample(&env, &csv, &manager).await;
        eprintln!("{name}: {outcome}");
        let sa = deployment_service_account(&csv);
        assert_eq!(
            denied(&env, &sa),
            BTreeMap::new(),
            "{name}: requests the CSV's RBAC does not allow; manager log:\n{}",
            manager.log()
        );
    }
}
