//! End-to-end tests: the real `manager` binary against kube-standin, the olmkit toolkit's
//! in-memory Kubernetes API server (its workload simulation gives Deployments and StatefulSets
//! pods and a status; its limits are in the toolkit's `tests/kube-standin/README.md`).
//!
//! [`Env::start`] starts the stand-in with the project's CRDs (kinds with several versions
//! converted by the manager's webhook, on a test CA) and the manager against it. The stand-in
//! authorizes like kube-apiserver with RBAC, and the manager runs as a ServiceAccount bound to
//! the role generated from `src/rbac.rs` and nothing else: a call missing from that table fails
//! here as it would on a cluster. Each kind's tests are a module in `tests/e2e/`, added by
//! `bundle-tool create api` at the marker below.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, Resource};
use kube_standin::{AuthorizationMode, StandIn, StandInOptions};
use olmkit_runtime::cli::RbacRole;
use olmkit_runtime::crd::{ConversionWiring, with_webhook_conversion};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The tests of each kind, in `tests/e2e/<kind>.rs`.
mod e2e {
    mod whale_say;
    // +olmkit:scaffold:e2e-modules
}

/// The namespace the tests' objects live in.
pub const NAMESPACE: &str = "e2e";
/// The operator's namespace (kustomize's `whalesay-operator-system`).
pub const OPERATOR_NAMESPACE: &str = "whalesay-operator-system";
/// How long anything may take to happen.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// The field manager of the tests' own writes.
pub const TEST_MANAGER: &str = "e2e-test";
/// The manager's ServiceAccount (in [`OPERATOR_NAMESPACE`], as config/rbac has it).
pub const SERVICE_ACCOUNT: &str = "controller-manager";

/// The stand-in, a client for it (a cluster admin) and the manager running against it.
pub struct Env {
    pub standin: StandIn,
    pub client: Client,
    manager: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Env {
    /// Starts the stand-in and the manager, and waits until the manager is ready.
    pub async fn start() -> Env {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let webhook_port = free_port();
        let certs = Certs::new(dir.path());
        let wiring = ConversionWiring {
            ca_bundle: Some(certs.ca_pem.clone().into_bytes()),
            ..ConversionWiring::for_project("whalesay-operator")
        };
        let mut converted = false;
        let crds = whalesay_api::crds()
            .into_iter()
            .map(|crd| {
                let crd = if crd.spec.versions.len() > 1 {
                    converted = true;
                    with_webhook_conversion(crd, &wiring)
                } else {
                    crd
                };
                serde_json::to_value(crd).unwrap()
            })
            .collect();
        let standin = StandIn::start(StandInOptions {
            simulate_workloads: true,
            crds,
            namespaces: vec![NAMESPACE.into(), OPERATOR_NAMESPACE.into()],
            service_endpoints: BTreeMap::from([(
                format!("{}/{}", wiring.service_namespace, wiring.service_name),
                format!("https://127.0.0.1:{webhook_port}"),
            )]),
            authorization: AuthorizationMode::Rbac,
            ..Default::default()
        })
        .await
        .unwrap();
        // The test is a cluster admin; the manager has the generated role only.
        let client = client(&standin.kubeconfig_yaml(NAMESPACE)).await;
        grant_manager_role(&client).await;
        let kubeconfig = dir.path().join("kubeconfig");
        let manager_kubeconfig = standin
            .kubeconfig_for_service_account(OPERATOR_NAMESPACE, SERVICE_ACCOUNT)
            .unwrap();
        std::fs::write(&kubeconfig, manager_kubeconfig).unwrap();
        let health = free_port();
        let log = dir.path().join("manager.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_manager"));
        command
            .arg("run")
            .arg("--metrics-secure=false")
            .arg("--metrics-bind-address=0")
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health}"))
            .arg("--backoff-base=100ms")
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("WATCH_NAMESPACE")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if converted {
            command
                .arg("--webhook-bind-address=127.0.0.1")
                .arg(format!("--webhook-port={webhook_port}"))
                .arg(format!("--webhook-cert-path={}", certs.dir.display()));
        } else {
            command.arg("--disable-webhook");
        }
        let manager = command.spawn().unwrap();
        let mut env = Env {
            standin,
            client,
            manager,
            log,
            _dir: dir,
        };
        env.wait_ready(health);
        env
    }

    /// Waits for the manager's `/readyz`.
    fn wait_ready(&mut self, port: u16) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.manager.try_wait() {
                panic!("the manager exited ({status}):\n{}", self.log());
            }
            if http_status(port, "/readyz") == Some(200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the manager did not become ready:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The manager's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An API of `K` in [`NAMESPACE`].
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = self.manager.kill();
        let _ = self.manager.wait();
        if std::thread::panicking() {
            eprintln!("--- manager log ---\n{}", self.log());
            let denied: BTreeSet<String> = self
                .standin
                .requests()
                .iter()
                .filter(|r| r.denied())
                .map(|r| format!("{} {} {}/{}", r.user, r.verb, r.group, r.resource))
                .collect();
            for d in denied {
                eprintln!("denied: {d} (a row missing in src/rbac.rs?)");
            }
        }
    }
}

/// Creates the manager's ClusterRole (what `manager rbac` generates from `src/rbac.rs`) and
/// binds it to the manager's ServiceAccount.
async fn grant_manager_role(client: &Client) {
    let yaml = whalesay_operator::operator()
        .role_yaml(RbacRole::Manager)
        .unwrap();
    let role: ClusterRole = serde_saphyr::from_str(&yaml).unwrap();
    let name = role.metadata.name.clone().unwrap();
    let params = PostParams::default();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    roles.create(&params, &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE}],
    }))
    .unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    bindings.create(&params, &binding).await.unwrap();
}

/// Server-side applies `object` (as the test's field manager) and returns what the server has.
pub async fn apply<K>(api: &Api<K>, object: &K) -> K
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().expect("a named object");
    api.patch(
        &name,
        &PatchParams::apply(TEST_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap()
}

/// A sample from `config/samples`, parsed.
pub fn sample<K: DeserializeOwned>(yaml: &str) -> K {
    serde_saphyr::from_str(yaml).expect("a sample that parses")
}

/// Polls `check` until it returns something, for at most [`TIMEOUT`].
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The status (`True`, `False`, `Unknown`) of condition `type_`.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

/// A client from kubeconfig YAML.
pub async fn client(kubeconfig_yaml: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(kubeconfig_yaml).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The status code of a plain HTTP GET on 127.0.0.1:`port`.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

/// A test CA and the conversion webhook's serving certificate, as `tls.crt`/`tls.key`.
pub struct Certs {
    pub dir: PathBuf,
    pub ca_pem: String,
}

impl Certs {
    fn new(root: &Path) -> Certs {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let wiring = ConversionWiring::for_project("whalesay-operator");
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "e2e CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            format!("{}.{}.svc", wiring.service_name, wiring.service_namespace),
        ])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
        let dir = root.join("certs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
        Certs {
            dir,
            ca_pem: ca_cert.pem(),
        }
    }
}

/// The samples in `config/samples` of kinds with several versions, as (file, object).
fn samples_of_converted_kinds() -> Vec<(String, serde_json::Value)> {
    let converted: Vec<(String, String)> = whalesay_api::crds()
        .into_iter()
        .filter(|crd| crd.spec.versions.len() > 1)
        .map(|crd| (crd.spec.group, crd.spec.names.kind))
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/samples");
    let mut samples = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if file == "kustomization.yaml" || !file.ends_with(".yaml") {
            continue;
        }
        let object: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let group = object["apiVersion"]
            .as_str()
            .unwrap_or("")
            .split('/')
            .next();
        let kind = object["kind"].as_str();
        if converted
            .iter()
            .any(|(g, k)| Some(g.as_str()) == group && Some(k.as_str()) == kind)
        {
            samples.push((file, object));
        }
    }
    samples.sort_by(|a, b| a.0.cmp(&b.0));
    samples
}

/// Every sample of a kind with several versions is created in its version and read back in
/// every served version, through the manager's conversion webhook; read in its own version, it
/// is what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_convert_between_served_versions() {
    let samples = samples_of_converted_kinds();
    if samples.is_empty() {
        return;
    }
    let env = Env::start().await;
    let crds = whalesay_api::crds();
    for (file, sample) in samples {
        let (group, version) = sample["apiVersion"]
            .as_str()
            .unwrap()
            .split_once('/')
            .unwrap();
        let crd = crds.iter().find(|c| c.spec.group == group).unwrap();
        let api_for = |version: &str| {
            let resource = ApiResource {
                group: group.to_string(),
                version: version.to_string(),
                api_version: format!("{group}/{version}"),
                kind: crd.spec.names.kind.clone(),
                plural: crd.spec.names.plural.clone(),
            };
            match crd.spec.scope.as_str() {
                "Namespaced" => {
                    Api::<DynamicObject>::namespaced_with(env.client.clone(), NAMESPACE, &resource)
                }
                _ => Api::<DynamicObject>::all_with(env.client.clone(), &resource),
            }
        };
        let mut object: DynamicObject = serde_json::from_value(sample.clone()).unwrap();
        // One object per sample: the samples of one kind share their name.
        let name = format!("{}-{version}", object.metadata.name.clone().unwrap());
        object.metadata.name = Some(name.clone());
        let written = apply(&api_for(version), &object).await;
        for served in crd.spec.versions.iter().map(|v| v.name.as_str()) {
            let read = api_for(served).get(&name).await;
            let read = read.unwrap_or_else(|e| panic!("{file} read as {served}: {e}"));
            assert_eq!(read.types.unwrap().api_version, format!("{group}/{served}"));
        }
        let back = api_for(version).get(&name).await.unwrap();
        assert_eq!(back.data["spec"], written.data["spec"], "{file}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_starts_and_becomes_ready() {
    let env = Env::start().await;
    wait_for("the controllers to start", || async {
        env.log().contains("starting the controllers").then_some(())
    })
    .await;
}
