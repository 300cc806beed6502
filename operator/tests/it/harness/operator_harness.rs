//! Shared harness of the operator's end-to-end tests (included with `#[path]` by each
//! `operator_*.rs` test): an in-process Kubernetes API stand-in with the Memcached CRD (conversion
//! through the operator's webhook, on a test CA), the real `operator` binary started against it,
//! a kube client for the test (a cluster admin), and polling helpers. With
//! [`Env::start_rbac`] the stand-in authorizes like kube-apiserver with RBAC, and
//! [`OperatorOptions::kubeconfig`] runs the operator as a ServiceAccount.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kube_standin::{AuthorizationMode, RecordedRequest, StandIn, StandInOptions};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// Namespace of the operator (leader-election Lease, webhook Service).
pub const OPERATOR_NS: &str = "memcached-operator-system";
/// User-Agent of the test's own client, to tell its requests from the operator's.
pub const TEST_AGENT: &str = "e2e-test";
/// User-Agent prefix of the operator.
pub const OPERATOR_AGENT: &str = "memcached-operator/";

/// A test CA and a webhook serving certificate it signed, written as tls.crt/tls.key.
pub struct Certs {
    pub dir: tempfile::TempDir,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

pub fn make_certs() -> Certs {
    let wiring = memcached_api::crd::wiring();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "operator e2e CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        format!("{}.{}.svc", wiring.service_name, wiring.service_namespace),
    ])
    .unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    Certs {
        dir: tempfile::tempdir().unwrap(),
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

impl Certs {
    /// Writes tls.crt and tls.key into the cert directory (atomically, by rename).
    pub fn install(&self) {
        for (name, content) in [("tls.key", &self.key_pem), ("tls.crt", &self.cert_pem)] {
            let tmp = self.dir.path().join(format!(".{name}.tmp"));
            std::fs::write(&tmp, content).unwrap();
            std::fs::rename(&tmp, self.dir.path().join(name)).unwrap();
        }
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The stand-in, a kubeconfig for it, the test's client and the webhook wiring.
pub struct Env {
    pub standin: StandIn,
    pub client: Client,
    pub kubeconfig: PathBuf,
    pub certs: Certs,
    pub webhook_port: u16,
    _dir: tempfile::TempDir,
}

pub async fn client_for(kubeconfig_yaml: &str) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig_yaml).unwrap();
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(TEST_AGENT),
    ));
    Client::try_from(config).unwrap()
}

impl Env {
    /// A stand-in (workload simulation on) with the Memcached CRD whose conversion webhook
    /// Service maps to `https://127.0.0.1:<webhook_port>`, and `namespaces` created.
    pub async fn start(namespaces: &[&str]) -> Env {
        Self::start_with(namespaces, true).await
    }

    /// Like [`Env::start`]; without `install_certs` the webhook's cert directory stays empty.
    pub async fn start_with(namespaces: &[&str], install_certs: bool) -> Env {
        Self::start_with_authorization(namespaces, install_certs, AuthorizationMode::AlwaysAllow)
            .await
    }

    /// Like [`Env::start`], authorizing every request with RBAC (the test's client stays a
    /// cluster admin; OwnerReferencesPermissionEnforcement on).
    pub async fn start_rbac(namespaces: &[&str]) -> Env {
        Self::start_with_authorization(namespaces, true, AuthorizationMode::Rbac).await
    }

    pub async fn start_with_authorization(
        namespaces: &[&str],
        install_certs: bool,
        authorization: AuthorizationMode,
    ) -> Env {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certs = make_certs();
        if install_certs {
            certs.install();
        }
        let webhook_port = free_port();
        let wiring = memcached_api::ConversionWiring {
            ca_bundle: Some(certs.ca_pem.clone().into_bytes()),
            ..memcached_api::crd::wiring()
        };
        let crd = serde_json::to_value(memcached_api::crd_with_conversion(&wiring)).unwrap();
        let mut all_ns: Vec<String> = namespaces.iter().map(|s| s.to_string()).collect();
        all_ns.push(OPERATOR_NS.to_string());
        let standin = StandIn::start(StandInOptions {
            simulate_workloads: true,
            crds: vec![crd],
            namespaces: all_ns,
            service_endpoints: BTreeMap::from([(
                format!("{}/{}", wiring.service_namespace, wiring.service_name),
                format!("https://127.0.0.1:{webhook_port}"),
            )]),
            authorization,
            ..Default::default()
        })
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        standin.write_kubeconfig(&kubeconfig, "default").unwrap();
        let client = client_for(&standin.kubeconfig_yaml("default")).await;
        Env {
            standin,
            client,
            kubeconfig,
            certs,
            webhook_port,
            _dir: dir,
        }
    }

    /// Requests the operator made (by User-Agent).
    pub fn operator_requests(&self) -> Vec<RecordedRequest> {
        self.standin
            .requests()
            .into_iter()
            .filter(|r| r.user_agent.starts_with(OPERATOR_AGENT))
            .collect()
    }

    /// A kubeconfig file that authenticates as the ServiceAccount `namespace/name` (created
    /// when missing).
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let yaml = self
            .standin
            .kubeconfig_for_service_account(namespace, name)
            .unwrap();
        let path = self
            ._dir
            .path()
            .join(format!("kubeconfig-{namespace}-{name}"));
        std::fs::write(&path, yaml).unwrap();
        path
    }

    /// Requests of `user` that an authorization check refused, as `verb group/resource ns name
    /// (code)`.
    pub fn denied_requests(&self, user: &str) -> Vec<String> {
        self.standin
            .requests()
            .into_iter()
            .filter(|r| r.user == user && (r.denied() || r.code == 403))
            .map(|r| {
                let failed: Vec<String> = r
                    .checks
                    .iter()
                    .filter(|c| !c.allowed)
                    .map(|c| c.attributes.verb.clone())
                    .collect();
                format!(
                    "{} {}/{} ns={} name={} ({}; denied {failed:?})",
                    r.verb,
                    r.group,
                    resource_of(&r),
                    r.namespace,
                    r.name,
                    r.code
                )
            })
            .collect()
    }

    /// Reasons of the events about `name` in `ns`, oldest first.
    pub async fn event_reasons(&self, ns: &str, name: &str) -> Vec<String> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let mut events: Vec<Event> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .collect();
        events.sort_by_key(|e| e.event_time.clone().map(|t| t.0));
        events.into_iter().filter_map(|e| e.reason).collect()
    }
}

/// A running `operator run` process.
pub struct Operator {
    pub child: Child,
    pub health_port: u16,
    pub metrics_port: u16,
    pub log: PathBuf,
    pub name: String,
    _dir: tempfile::TempDir,
}

/// How to start the operator.
pub struct OperatorOptions<'a> {
    pub name: &'a str,
    pub webhook: bool,
    pub leader_elect: bool,
    pub watch_namespace: &'a str,
    pub extra_args: Vec<String>,
    /// RUST_LOG of the process.
    pub rust_log: &'a str,
    /// Kubeconfig of the process; None = the environment's (a cluster admin).
    pub kubeconfig: Option<PathBuf>,
}

impl Default for OperatorOptions<'_> {
    fn default() -> Self {
        Self {
            name: "operator-0",
            webhook: true,
            leader_elect: true,
            watch_namespace: "",
            extra_args: Vec::new(),
            rust_log: "warn,operator=debug,olmkit_runtime=info",
            kubeconfig: None,
        }
    }
}

impl Operator {
    pub fn spawn(env: &Env, opts: OperatorOptions<'_>) -> Operator {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("operator.log");
        let health_port = free_port();
        let metrics_port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_operator"));
        cmd.env_clear()
            .env(
                "KUBECONFIG",
                opts.kubeconfig.as_ref().unwrap_or(&env.kubeconfig),
            )
            .env("RUST_LOG", opts.rust_log)
            .env("POD_NAME", opts.name)
            .env("WATCH_NAMESPACE", opts.watch_namespace)
            .arg("run")
            .args([
                "--health-probe-bind-address",
                &format!("127.0.0.1:{health_port}"),
            ])
            .args([
                "--metrics-bind-address",
                &format!("127.0.0.1:{metrics_port}"),
            ])
            .args(["--backoff-base", "200ms", "--backoff-max", "5s"]);
        // The helpers below scrape /metrics over plain HTTP; tests of the secure endpoint pass
        // --metrics-secure in extra_args.
        if !opts
            .extra_args
            .iter()
            .any(|a| a.starts_with("--metrics-secure"))
        {
            cmd.arg("--metrics-secure=false");
        }
        if opts.webhook {
            cmd.args(["--webhook-bind-address", "127.0.0.1"])
                .args(["--webhook-port", &env.webhook_port.to_string()])
                .arg("--webhook-cert-path")
                .arg(env.certs.dir.path())
                .args(["--webhook-cert-poll-interval", "200ms"]);
        } else {
            cmd.arg("--disable-webhook");
        }
        if opts.leader_elect {
            cmd.args([
                "--leader-elect",
                "--leader-election-namespace",
                OPERATOR_NS,
                "--leader-election-lease-duration",
                "4s",
                "--leader-election-renew-grace",
                "2s",
                "--leader-election-retry-period",
                "500ms",
            ]);
        }
        cmd.args(&opts.extra_args);
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        Operator {
            child,
            health_port,
            metrics_port,
            log,
            name: opts.name.to_string(),
            _dir: dir,
        }
    }

    pub fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    pub async fn get(&self, port: u16, path: &str) -> Option<(u16, String)> {
        let url = format!("http://127.0.0.1:{port}{path}");
        let resp = reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        let code = resp.status().as_u16();
        Some((code, resp.text().await.ok()?))
    }

    pub async fn readyz(&self) -> Option<(u16, String)> {
        self.get(self.health_port, "/readyz").await
    }

    pub async fn metrics(&self) -> String {
        self.get(self.metrics_port, "/metrics")
            .await
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// A metric's value (first series whose line starts with `series`).
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let text = self.metrics().await;
        text.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    pub async fn is_leader(&self) -> bool {
        self.metric("memcached_operator_leader").await == Some(1.0)
    }

    pub async fn wait_ready(&self) {
        eventually(&format!("{} /readyz 200", self.name), 30, || async {
            matches!(self.readyz().await, Some((200, _))).then_some(())
        })
        .await;
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit.
    pub async fn wait_exit(&mut self, secs: u64) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {secs}s; log:\n{}",
                self.name,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() || std::env::var_os("OPERATOR_E2E_LOG").is_some() {
            let text = self.log_text();
            let tail: Vec<&str> = text.lines().rev().take(80).collect();
            eprintln!(
                "----- last lines of {} log -----\n{}",
                self.name,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

/// Polls `f` every 100 ms until it returns `Some`, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(what: &str, secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `group/resource[/subresource]` of a recorded request.
pub fn resource_of(r: &RecordedRequest) -> String {
    if r.subresource.is_empty() {
        r.resource.clone()
    } else {
        format!("{}/{}", r.resource, r.subresource)
    }
}

/// True for verbs that change state.
pub fn is_write(r: &RecordedRequest) -> bool {
    matches!(
        r.verb.as_str(),
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

pub fn path(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}
