//! Shared harness of the cluster e2e tests: a kube-standin API server with the OLM CRDs, the
//! real `bundle-tool` binary pointed at it, and a fake OLM (catalog operator + OLM operator)
//! and fake operator-controller that play OLM's part against the stand-in.
//!
//! The fake OLM follows OLM v0's observable behaviour closely enough for the CLI: it marks
//! CatalogSources READY, resolves a Subscription to the channel head (or `startingCSV`), and
//! one hop at a time to the bundle whose channel entry replaces the installed CSV; it creates
//! an InstallPlan per hop (phase `RequiresApproval` for Manual approval, `Installing` once
//! approved), creates the CSV and walks it through Pending → InstallReady → Installing →
//! Succeeded, completes the InstallPlan, fills the Subscription status (currentCSV,
//! installedCSV, installPlanRef, state, conditions) and deletes the replaced CSV. Unknown
//! channels give `ResolutionFailed`/`ConstraintsNotSatisfiable` with OLM's message. Scenario
//! switches make a CSV fail, an InstallPlan fail, or an InstallPlan stay Installing forever.
//! Its requests carry the user agent `fake-olm` so tests can tell them from the CLI's.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, DynamicObject};
use kube_standin::{RecordedRequest, StandIn, StandInOptions};
use olmkit_cluster::olm::{
    catalog_source_resource, cluster_catalog_resource, cluster_extension_resource, csv_resource,
    install_plan_resource, subscription_resource,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn fixtures() -> PathBuf {
    workspace().join("tests/fixtures")
}

pub fn catalog_dir() -> PathBuf {
    fixtures().join("cluster/catalog")
}

/// A stand-in, a kubeconfig for it and a scratch directory (the CLI's working directory).
pub struct Env {
    pub standin: StandIn,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
}

pub fn olm_crds() -> Vec<Value> {
    let dir = fixtures().join("olm-crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    kube_standin::load_crd_files(&files).unwrap()
}

pub fn olmv1_crds() -> Vec<Value> {
    let dir = fixtures().join("cluster/olmv1-crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    kube_standin::load_crd_files(&files).unwrap()
}

async fn client_for(standin: &StandIn, user_agent: Option<&str>) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&standin.kubeconfig_yaml("default")).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    if let Some(ua) = user_agent {
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_str(ua).unwrap(),
        ));
    }
    kube::Client::try_from(config).unwrap()
}

impl Env {
    /// A stand-in with these CRDs and namespaces.
    pub async fn start(crds: Vec<Value>, namespaces: &[&str]) -> Env {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let standin = StandIn::start(StandInOptions {
            crds,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        standin.write_kubeconfig(&kubeconfig, "operators").unwrap();
        let client = client_for(&standin, Some("test-setup")).await;
        Env {
            standin,
            dir,
            kubeconfig,
            client,
        }
    }

    /// Runs `bundle-tool` with the stand-in's kubeconfig, in the scratch directory.
    pub async fn bundle_tool(&self, args: &[&str]) -> Output {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_bundle-tool"));
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG");
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        // CLUSTER_E2E_SHOW=1 prints every run, as a user would see it (for docs and debugging).
        if std::env::var_os("CLUSTER_E2E_SHOW").is_some() {
            eprintln!(
                "$ bundle-tool {}\n{}{}[exit {}]\n",
                args.join(" "),
                text(&out.stdout),
                text(&out.stderr),
                out.status.code().unwrap_or(-1)
            );
        }
        out
    }

    /// Runs `kubectl` against the stand-in.
    pub async fn kubectl(&self, args: &[&str]) -> Output {
        let mut cmd = std::process::Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path());
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    /// Requests the CLI made (not the fake OLM's, not the test's own setup).
    pub fn cli_requests(&self) -> Vec<RecordedRequest> {
        self.standin
            .requests()
            .into_iter()
            .filter(|r| r.user_agent != "fake-olm" && r.user_agent != "test-setup")
            .collect()
    }

    /// Writes the CLI made: (verb, resource, namespace, name, content type, field manager).
    pub fn cli_writes(&self) -> Vec<(String, String, String, String, String, String)> {
        self.cli_requests()
            .into_iter()
            .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch" | ""))
            .map(|r| {
                let resource = if r.subresource.is_empty() {
                    r.resource.clone()
                } else {
                    format!("{}/{}", r.resource, r.subresource)
                };
                (
                    r.verb,
                    resource,
                    r.namespace,
                    r.name,
                    r.content_type,
                    r.field_manager,
                )
            })
            .collect()
    }

    pub fn api(&self, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
        match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    pub async fn get(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Option<Value> {
        self.api(ar, ns)
            .get_opt(name)
            .await
            .unwrap()
            .map(|o| serde_json::to_value(o).unwrap())
    }

    /// Creates an object as a test fixture (not through the CLI).
    pub async fn create(&self, ar: &ApiResource, ns: Option<&str>, obj: Value) {
        let o: DynamicObject = serde_json::from_value(obj).unwrap();
        self.api(ar, ns)
            .create(&PostParams::default(), &o)
            .await
            .unwrap();
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Removes the `[  1.2s]` prefixes of progress lines so output can be compared.
pub fn without_times(s: &str) -> String {
    s.lines()
        .map(|l| match (l.starts_with('['), l.find("s] ")) {
            (true, Some(i)) => format!("[t] {}", &l[i + 3..]),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------------
// The fixture catalog, as the fake OLM's resolver reads it.

#[derive(Clone, Debug, Default)]
pub struct FixtureCatalog {
    pub default_channel: BTreeMap<String, String>,
    /// (package, channel) -> [(bundle, replaces)].
    pub channels: BTreeMap<(String, String), Vec<(String, String)>>,
    /// bundle -> (package, version, display name).
    pub bundles: BTreeMap<String, (String, String, String)>,
    /// bundle -> (CSV, manifests), for catalogs read over gRPC (empty for the fixture).
    pub content: BTreeMap<String, (Value, Vec<Value>)>,
}

impl FixtureCatalog {
    pub fn load() -> Self {
        let mut c = FixtureCatalog::default();
        for pkg in ["memcached-operator", "ownns-operator"] {
            let text = std::fs::read(catalog_dir().join(pkg).join("catalog.json")).unwrap();
            let docs = olmkit_core::docs::parse_documents("fixture catalog", &text).unwrap();
            for d in docs {
                match d["schema"].as_str().unwrap() {
                    "olm.package" => {
                        c.default_channel.insert(
                            d["name"].as_str().unwrap().into(),
                            d["defaultChannel"].as_str().unwrap().into(),
                        );
                    }
                    "olm.channel" => {
                        let entries = d["entries"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|e| {
                                (
                                    e["name"].as_str().unwrap().to_string(),
                                    e["replaces"].as_str().unwrap_or("").to_string(),
                                )
                            })
                            .collect();
                        c.channels.insert(
                            (
                                d["package"].as_str().unwrap().into(),
                                d["name"].as_str().unwrap().into(),
                            ),
                            entries,
                        );
                    }
                    "olm.bundle" => {
                        let props = d["properties"].as_array().unwrap();
                        let version = props
                            .iter()
                            .find(|p| p["type"] == "olm.package")
                            .map(|p| p["value"]["version"].as_str().unwrap().to_string())
                            .unwrap();
                        let display = props
                            .iter()
                            .find(|p| p["type"] == "olm.csv.metadata")
                            .map(|p| p["value"]["displayName"].as_str().unwrap().to_string())
                            .unwrap_or_default();
                        c.bundles.insert(
                            d["name"].as_str().unwrap().into(),
                            (d["package"].as_str().unwrap().into(), version, display),
                        );
                    }
                    _ => {}
                }
            }
        }
        c
    }

    fn entries(&self, package: &str, channel: &str) -> Option<&Vec<(String, String)>> {
        self.channels
            .get(&(package.to_string(), channel.to_string()))
    }

    fn head(&self, package: &str, channel: &str) -> Option<String> {
        let e = self.entries(package, channel)?;
        e.iter()
            .find(|(n, _)| !e.iter().any(|(_, r)| r == n))
            .map(|(n, _)| n.clone())
    }

    /// The `replaces` of a bundle's channel entry (in any channel).
    fn replaces_of(&self, bundle: &str) -> Option<String> {
        self.channels
            .values()
            .flatten()
            .find(|(n, r)| n == bundle && !r.is_empty())
            .map(|(_, r)| r.clone())
    }

    fn next(&self, package: &str, channel: &str, installed: &str) -> Option<String> {
        self.entries(package, channel)?
            .iter()
            .find(|(_, r)| r == installed)
            .map(|(n, _)| n.clone())
    }
}

// ---------------------------------------------------------------------------------------------
// The fake OLM.

/// What should go wrong.
#[derive(Clone, Debug, Default)]
pub struct Scenario {
    /// This CSV ends in phase Failed (InstallCheckFailed).
    pub fail_csv: Option<String>,
    /// InstallPlans stay Installing forever.
    pub stuck_install_plans: bool,
    /// InstallPlans fail (InstallComponentFailed).
    pub fail_install_plans: bool,
}

pub struct FakeOlm {
    pub scenario: Arc<Mutex<Scenario>>,
    handle: JoinHandle<()>,
}

impl Drop for FakeOlm {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

fn now() -> String {
    "2026-11-22T12:00:00Z".to_string()
}

fn pp() -> PatchParams {
    PatchParams {
        field_manager: Some("fake-olm".into()),
        ..Default::default()
    }
}

impl FakeOlm {
    pub async fn start(env: &Env, scenario: Scenario) -> FakeOlm {
        Self::start_with(env, scenario, false).await
    }

    /// Like [`FakeOlm::start`], but a CatalogSource with `spec.address` is dialled as OLM
    /// dials it: its catalog is read over operator-registry's gRPC API (ListBundles,
    /// GetPackage), it is READY while that works and TRANSIENT_FAILURE while it does not, and
    /// its Subscriptions resolve against what it serves. A CSV is created from the bundle's CSV
    /// (and its CRDs from the bundle's manifests), as OLM's InstallPlan steps do.
    pub async fn start_serving_catalogs(env: &Env, scenario: Scenario) -> FakeOlm {
        Self::start_with(env, scenario, true).await
    }

    async fn start_with(env: &Env, scenario: Scenario, grpc: bool) -> FakeOlm {
        let client = client_for(&env.standin, Some("fake-olm")).await;
        let scenario = Arc::new(Mutex::new(scenario));
        let s2 = scenario.clone();
        let catalog = FixtureCatalog::load();
        let handle = tokio::spawn(async move {
            let mut counter = 0u32;
            let mut served = Served::default();
            loop {
                let sc = s2.lock().unwrap().clone();
                let dial = grpc.then_some(&mut served);
                if let Err(e) = tick(&client, &catalog, &sc, &mut counter, dial).await {
                    eprintln!("fake OLM: {e}");
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        });
        FakeOlm { scenario, handle }
    }
}

/// Catalogs read over gRPC, by address, with when they were read (re-read every 200 ms).
#[derive(Default)]
struct Served {
    by_address: BTreeMap<String, (tokio::time::Instant, Option<FixtureCatalog>)>,
}

impl Served {
    async fn get(&mut self, address: &str) -> Option<FixtureCatalog> {
        if let Some((at, c)) = self.by_address.get(address)
            && at.elapsed() < Duration::from_millis(200)
        {
            return c.clone();
        }
        let c = served_catalog(address).await;
        self.by_address.insert(
            address.to_string(),
            (tokio::time::Instant::now(), c.clone()),
        );
        c
    }
}

/// The catalog served at `address`, read the way OLM's catalog operator reads it.
async fn served_catalog(address: &str) -> Option<FixtureCatalog> {
    use olmkit_catalog_server::pb::{self, registry_client::RegistryClient};
    use olmkit_catalog_server::tonic::transport::Endpoint;
    let channel = Endpoint::from_shared(format!("http://{address}"))
        .ok()?
        .connect_timeout(Duration::from_millis(500))
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .ok()?;
    let mut client = RegistryClient::new(channel).max_decoding_message_size(64 << 20);
    let mut stream = client
        .list_bundles(pb::ListBundlesRequest {})
        .await
        .ok()?
        .into_inner();
    let mut c = FixtureCatalog::default();
    while let Some(b) = stream.message().await.ok()? {
        let csv: Value = serde_json::from_str(&b.csv_json).unwrap_or(Value::Null);
        let objects: Vec<Value> = b
            .object
            .iter()
            .filter_map(|o| serde_json::from_str(o).ok())
            .collect();
        c.channels
            .entry((b.package_name.clone(), b.channel_name.clone()))
            .or_default()
            .push((b.csv_name.clone(), b.replaces.clone()));
        let display = csv["spec"]["displayName"]
            .as_str()
            .unwrap_or("")
            .to_string();
        c.bundles.insert(
            b.csv_name.clone(),
            (b.package_name.clone(), b.version.clone(), display),
        );
        c.content.insert(b.csv_name.clone(), (csv, objects));
    }
    let packages: std::collections::BTreeSet<String> =
        c.channels.keys().map(|(p, _)| p.clone()).collect();
    for p in packages {
        let pkg = client
            .get_package(pb::GetPackageRequest { name: p.clone() })
            .await
            .ok()?
            .into_inner();
        c.default_channel.insert(p, pkg.default_channel_name);
    }
    Some(c)
}

fn api(client: &kube::Client, ar: &ApiResource, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, ar)
}

async fn patch_status(
    client: &kube::Client,
    ar: &ApiResource,
    ns: &str,
    name: &str,
    status: Value,
) -> Result<(), kube::Error> {
    api(client, ar, ns)
        .patch_status(name, &pp(), &Patch::Merge(json!({ "status": status })))
        .await
        .map(|_| ())
}

fn cond(t: &str, reason: &str, message: &str) -> Value {
    json!({"type": t, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now()})
}

async fn tick(
    client: &kube::Client,
    fixture: &FixtureCatalog,
    sc: &Scenario,
    counter: &mut u32,
    mut served: Option<&mut Served>,
) -> Result<(), kube::Error> {
    // CatalogSources: CONNECTING, then READY; dialled ones READY while they answer.
    let sources = Api::<DynamicObject>::all_with(client.clone(), &catalog_source_resource())
        .list(&Default::default())
        .await?;
    let mut by_source: BTreeMap<(String, String), FixtureCatalog> = BTreeMap::new();
    for cs in sources.items {
        let v = serde_json::to_value(&cs).unwrap();
        let ns = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
        let state = v["status"]["connectionState"]["lastObservedState"]
            .as_str()
            .unwrap_or("");
        let address = v["spec"]["address"].as_str().unwrap_or("").to_string();
        if let Some(served) = served.as_deref_mut()
            && !address.is_empty()
        {
            let catalog = served.get(&address).await;
            let next = if catalog.is_some() {
                "READY"
            } else {
                "TRANSIENT_FAILURE"
            };
            if let Some(c) = catalog {
                by_source.insert((ns.clone(), name.clone()), c);
            }
            let known = v["status"]["connectionState"]["address"]
                .as_str()
                .unwrap_or("");
            if state != next || known != address {
                patch_status(
                    client,
                    &catalog_source_resource(),
                    &ns,
                    &name,
                    json!({"connectionState": {"lastObservedState": next, "address": address, "lastConnect": now()}}),
                )
                .await?;
            }
            continue;
        }
        let next = match state {
            "" => "CONNECTING",
            "CONNECTING" => "READY",
            _ => continue,
        };
        patch_status(
            client,
            &catalog_source_resource(),
            &ns,
            &name,
            json!({"connectionState": {"lastObservedState": next, "address": format!("{name}.{ns}.svc:50051"), "lastConnect": now()}}),
        )
        .await?;
    }

    let subs = Api::<DynamicObject>::all_with(client.clone(), &subscription_resource())
        .list(&Default::default())
        .await?;
    for sub in subs.items {
        let s = serde_json::to_value(&sub).unwrap();
        let ns = s["metadata"]["namespace"].as_str().unwrap().to_string();
        let name = s["metadata"]["name"].as_str().unwrap().to_string();
        let package = s["spec"]["name"].as_str().unwrap_or("").to_string();
        let source_key = (
            s["spec"]["sourceNamespace"]
                .as_str()
                .unwrap_or(&ns)
                .to_string(),
            s["spec"]["source"].as_str().unwrap_or("").to_string(),
        );
        let catalog = by_source.get(&source_key).unwrap_or(fixture);
        let channel = match s["spec"]["channel"].as_str().unwrap_or("") {
            "" => catalog
                .default_channel
                .get(&package)
                .cloned()
                .unwrap_or_default(),
            c => c.to_string(),
        };
        let approval = s["spec"]["installPlanApproval"]
            .as_str()
            .unwrap_or("Automatic")
            .to_string();
        let status = &s["status"];
        let installed = status["installedCSV"].as_str().unwrap_or("").to_string();
        let current = status["currentCSV"].as_str().unwrap_or("").to_string();

        // The CatalogSource must be READY before OLM resolves.
        let cs_ns = s["spec"]["sourceNamespace"]
            .as_str()
            .unwrap_or(&ns)
            .to_string();
        let cs_name = s["spec"]["source"].as_str().unwrap_or("").to_string();
        let ready = api(client, &catalog_source_resource(), &cs_ns)
            .get_opt(&cs_name)
            .await?
            .map(|c| serde_json::to_value(c).unwrap())
            .is_some_and(|c| c["status"]["connectionState"]["lastObservedState"] == "READY");
        if !ready {
            continue;
        }

        if catalog.entries(&package, &channel).is_none() {
            let message = format!(
                "constraints not satisfiable: no operators found in channel {channel} of package {package} in the catalog referenced by subscription {name}, subscription {name} exists"
            );
            let already = status["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "ResolutionFailed" && c["message"] == message.as_str())
            });
            if !already {
                patch_status(
                    client,
                    &subscription_resource(),
                    &ns,
                    &name,
                    json!({"conditions": [cond("ResolutionFailed", "ConstraintsNotSatisfiable", &message)], "lastUpdated": now()}),
                )
                .await?;
            }
            continue;
        }

        let in_flight = !current.is_empty() && current != installed;
        if !in_flight {
            let target = if installed.is_empty() {
                match s["spec"]["startingCSV"].as_str() {
                    Some(c) if !c.is_empty() => Some(c.to_string()),
                    _ => catalog.head(&package, &channel),
                }
            } else {
                catalog.next(&package, &channel, &installed)
            };
            let Some(target) = target else {
                if status["state"] != "AtLatestKnown" {
                    patch_status(
                        client,
                        &subscription_resource(),
                        &ns,
                        &name,
                        json!({"state": "AtLatestKnown", "currentCSV": installed, "conditions": [], "lastUpdated": now()}),
                    )
                    .await?;
                }
                continue;
            };
            *counter += 1;
            let ip_name = format!("install-{counter}");
            let manual = approval == "Manual";
            let ip: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "InstallPlan",
                "metadata": {"name": ip_name, "namespace": ns},
                "spec": {"approval": approval, "approved": !manual,
                         "clusterServiceVersionNames": [target], "generation": *counter,
                         "source": cs_name, "sourceNamespace": cs_ns},
            }))
            .unwrap();
            api(client, &install_plan_resource(), &ns)
                .create(&PostParams::default(), &ip)
                .await?;
            let phase = if manual {
                "RequiresApproval"
            } else {
                "Installing"
            };
            patch_status(
                client,
                &install_plan_resource(),
                &ns,
                &ip_name,
                json!({"phase": phase, "catalogSources": [cs_name]}),
            )
            .await?;
            patch_status(
                client,
                &subscription_resource(),
                &ns,
                &name,
                json!({
                    "currentCSV": target, "installedCSV": if installed.is_empty() { Value::Null } else { json!(installed) },
                    "state": "UpgradePending",
                    "installPlanRef": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "name": ip_name, "namespace": ns},
                    "installplan": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "name": ip_name, "uuid": "uid"},
                    "conditions": [cond("InstallPlanPending", phase, "")],
                    "lastUpdated": now(),
                }),
            )
            .await?;
            continue;
        }

        // An upgrade is in flight: drive its InstallPlan and CSV.
        let Some(ip_name) = status["installPlanRef"]["name"].as_str() else {
            continue;
        };
        let Some(ip) = api(client, &install_plan_resource(), &ns)
            .get_opt(ip_name)
            .await?
        else {
            continue;
        };
        let ip = serde_json::to_value(ip).unwrap();
        match ip["status"]["phase"].as_str().unwrap_or("") {
            "RequiresApproval" if ip["spec"]["approved"] == true => {
                patch_status(
                    client,
                    &install_plan_resource(),
                    &ns,
                    ip_name,
                    json!({"phase": "Installing"}),
                )
                .await?;
                patch_status(
                    client,
                    &subscription_resource(),
                    &ns,
                    &name,
                    json!({"conditions": [cond("InstallPlanPending", "Installing", "")], "lastUpdated": now()}),
                )
                .await?;
            }
            "Installing" if sc.stuck_install_plans => {}
            "Installing" if sc.fail_install_plans => {
                let message =
                    format!("error creating csv {current}: admission webhook denied the request");
                patch_status(
                    client,
                    &install_plan_resource(),
                    &ns,
                    ip_name,
                    json!({"phase": "Failed", "conditions": [{"type": "Installed", "status": "False", "reason": "InstallComponentFailed", "message": message, "lastTransitionTime": now()}]}),
                )
                .await?;
                patch_status(
                    client,
                    &subscription_resource(),
                    &ns,
                    &name,
                    json!({"state": "UpgradeFailed", "conditions": [cond("InstallPlanFailed", "InstallComponentFailed", &message)], "lastUpdated": now()}),
                )
                .await?;
            }
            "Installing" => {
                drive_csv(
                    client, catalog, sc, &ns, &name, ip_name, &current, &installed,
                )
                .await?;
            }
            _ => {}
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn drive_csv(
    client: &kube::Client,
    catalog: &FixtureCatalog,
    sc: &Scenario,
    ns: &str,
    sub_name: &str,
    ip_name: &str,
    current: &str,
    installed: &str,
) -> Result<(), kube::Error> {
    let csvs = api(client, &csv_resource(), ns);
    let Some(csv) = csvs.get_opt(current).await? else {
        let (_, version, display) = catalog.bundles.get(current).cloned().unwrap_or_default();
        let mut spec = json!({
            "displayName": display, "version": version,
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "installModes": [{"type": "AllNamespaces", "supported": true}],
        });
        // A served bundle: its own CSV, and its CRDs created first (OLM's InstallPlan steps).
        if let Some((served_csv, objects)) = catalog.content.get(current) {
            if served_csv["spec"].is_object() {
                spec = served_csv["spec"].clone();
            }
            let crds = Api::<DynamicObject>::all_with(
                client.clone(),
                &ApiResource {
                    group: "apiextensions.k8s.io".into(),
                    version: "v1".into(),
                    api_version: "apiextensions.k8s.io/v1".into(),
                    kind: "CustomResourceDefinition".into(),
                    plural: "customresourcedefinitions".into(),
                },
            );
            for o in objects
                .iter()
                .filter(|o| o["kind"] == "CustomResourceDefinition")
            {
                let obj: DynamicObject = serde_json::from_value(o.clone()).unwrap();
                match crds.create(&PostParams::default(), &obj).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        // As real OLM (tests/fixtures/olm-traces): an upgrade's CSV replaces the installed
        // one; a fresh install keeps the bundle's own `replaces` (0.3.0 shows 0.2.0).
        if !installed.is_empty() {
            spec["replaces"] = json!(installed);
        } else if let Some(r) = catalog.replaces_of(current) {
            spec["replaces"] = json!(r);
        }
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": current, "namespace": ns},
            "spec": spec,
        }))
        .unwrap();
        csvs.create(&PostParams::default(), &obj).await?;
        patch_status(client, &csv_resource(), ns, current, json!({"phase": "Pending", "reason": "RequirementsUnknown", "message": "requirements not yet checked"})).await?;
        return Ok(());
    };
    let csv = serde_json::to_value(csv).unwrap();
    let fail = sc.fail_csv.as_deref() == Some(current);
    let (phase, reason, message) = match csv["status"]["phase"].as_str().unwrap_or("") {
        "Pending" => (
            "InstallReady",
            "RequirementsMet",
            "all requirements found, attempting install",
        ),
        "InstallReady" => (
            "Installing",
            "InstallWaiting",
            "installing: waiting for deployment memcached-operator-controller-manager to become ready",
        ),
        "Installing" if fail => ("Failed", "InstallCheckFailed", "install timeout"),
        "Installing" => (
            "Succeeded",
            "InstallSucceeded",
            "install strategy completed with no errors",
        ),
        "Succeeded" => {
            // Done: complete the plan, move the Subscription, remove the replaced CSV.
            patch_status(
                client,
                &install_plan_resource(),
                ns,
                ip_name,
                json!({"phase": "Complete"}),
            )
            .await?;
            patch_status(
                client,
                &subscription_resource(),
                ns,
                sub_name,
                json!({"installedCSV": current, "currentCSV": current, "state": "AtLatestKnown", "conditions": [], "lastUpdated": now()}),
            )
            .await?;
            if !installed.is_empty() {
                let _ = csvs.delete(installed, &DeleteParams::default()).await;
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    if phase == "Succeeded" && !installed.is_empty() {
        patch_status(client, &csv_resource(), ns, installed, json!({"phase": "Replacing", "reason": "BeingReplaced", "message": "being replaced by csv"})).await?;
    }
    patch_status(
        client,
        &csv_resource(),
        ns,
        current,
        json!({"phase": phase, "reason": reason, "message": message, "lastUpdateTime": now()}),
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// A fake operator-controller + catalogd for OLM v1.

pub struct FakeOperatorController {
    handle: JoinHandle<()>,
}

impl Drop for FakeOperatorController {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

impl FakeOperatorController {
    /// Serves every ClusterCatalog and installs every ClusterExtension's channel head.
    pub async fn start(env: &Env) -> FakeOperatorController {
        let client = client_for(&env.standin, Some("fake-olm")).await;
        let catalog = FixtureCatalog::load();
        let handle = tokio::spawn(async move {
            loop {
                let _ = v1_tick(&client, &catalog).await;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        });
        FakeOperatorController { handle }
    }
}

async fn v1_tick(client: &kube::Client, catalog: &FixtureCatalog) -> Result<(), kube::Error> {
    let cats = Api::<DynamicObject>::all_with(client.clone(), &cluster_catalog_resource());
    for c in cats.list(&Default::default()).await?.items {
        let v = serde_json::to_value(&c).unwrap();
        if v["status"]["conditions"].is_array() {
            continue;
        }
        let name = v["metadata"]["name"].as_str().unwrap();
        cats.patch_status(
            name,
            &pp(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Serving", "status": "True", "reason": "Available", "message": "Serving desired content from resolved source", "lastTransitionTime": now()},
                {"type": "Progressing", "status": "True", "reason": "Succeeded", "message": "Successfully unpacked and stored content from resolved source", "lastTransitionTime": now()}
            ]}})),
        )
        .await?;
    }
    let exts = Api::<DynamicObject>::all_with(client.clone(), &cluster_extension_resource());
    for e in exts.list(&Default::default()).await?.items {
        let v = serde_json::to_value(&e).unwrap();
        if v["status"]["install"].is_object() {
            continue;
        }
        let name = v["metadata"]["name"].as_str().unwrap();
        let pkg = v["spec"]["source"]["catalog"]["packageName"]
            .as_str()
            .unwrap_or("");
        let channel = v["spec"]["source"]["catalog"]["channels"][0]
            .as_str()
            .map(String::from)
            .or_else(|| catalog.default_channel.get(pkg).cloned())
            .unwrap_or_default();
        let status = match catalog.head(pkg, &channel) {
            Some(head) => {
                let version = catalog
                    .bundles
                    .get(&head)
                    .map(|b| b.1.clone())
                    .unwrap_or_default();
                json!({"conditions": [
                    {"type": "Installed", "status": "True", "reason": "Succeeded", "message": format!("Installed bundle {head} successfully"), "lastTransitionTime": now()},
                    {"type": "Progressing", "status": "True", "reason": "Succeeded", "message": "desired state reached", "lastTransitionTime": now()}
                ], "install": {"bundle": {"name": head, "version": version}}})
            }
            None => json!({"conditions": [
                {"type": "Progressing", "status": "False", "reason": "Blocked", "message": format!("no bundles found for package {pkg:?} matching channel {channel:?}"), "lastTransitionTime": now()}
            ]}),
        };
        exts.patch_status(name, &pp(), &Patch::Merge(json!({ "status": status })))
            .await?;
    }
    Ok(())
}
