//! A fake kubelet for registry pods: the stand-in stores bare Pods but runs nothing, so this
//! plays the node's part for the pods `run bundle` creates. For each pod labelled
//! `bundle-tool.olmkit.io/run-bundle` without a phase, it builds the pod's file system as the
//! kubelet would (each ConfigMap volume's items, through the container's `subPath` mounts),
//! runs a catalog server on the directory and port the container's command names
//! (`opm serve DIR --port P`, `/bin/catalog-server DIR --port P`), on a loopback address of its
//! own (127.x.y.z, the pod's IP), and marks the pod Running and Ready with that IP. An image
//! whose name contains `does-not-exist` gets `ErrImagePull` instead. A deleted pod's server
//! stops. Requests carry the user agent `fake-kubelet`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::cluster_harness::Env;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::DynamicObject;
use olmkit_catalog_server::server::{IndexChoice, ServeOptions, serve};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// One running registry pod.
#[derive(Clone, Debug)]
pub struct RunningPod {
    pub namespace: String,
    pub name: String,
    pub ip: String,
    pub command: Vec<String>,
    /// The files the server reads, relative to the served directory.
    pub files: Vec<String>,
}

pub struct FakeKubelet {
    pub pods: Arc<Mutex<Vec<RunningPod>>>,
    handle: JoinHandle<()>,
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

async fn kubelet_client(env: &Env) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&env.standin.kubeconfig_yaml("default")).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static("fake-kubelet"),
    ));
    kube::Client::try_from(config).unwrap()
}

fn pods_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &kube::core::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
        },
    )
}

fn cm_api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &kube::core::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
        },
    )
}

/// A loopback address no other test is likely to use.
fn loopback() -> Ipv4Addr {
    let n = std::process::id() as u64 * 7919
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64;
    Ipv4Addr::new(
        127,
        10 + (n % 200) as u8,
        ((n >> 8) % 250) as u8,
        1 + ((n >> 16) % 250) as u8,
    )
}

/// The directory and port a registry command serves.
fn served_dir_and_port(command: &[String]) -> (String, u16) {
    let dir = command
        .iter()
        .skip(1)
        .find(|a| a.starts_with('/'))
        .cloned()
        .unwrap_or_default();
    let port = command
        .iter()
        .position(|a| a == "--port" || a == "-p")
        .and_then(|i| command.get(i + 1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(50051);
    (dir, port)
}

/// Writes the pod's view of `mount_root`: ConfigMap items through `subPath` mounts.
async fn materialize(
    client: &kube::Client,
    ns: &str,
    pod: &Value,
    root: &Path,
) -> Result<Vec<String>, String> {
    let spec = &pod["spec"];
    let container = &spec["containers"][0];
    let mut files = Vec::new();
    for m in container["volumeMounts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let vol = spec["volumes"]
            .as_array()
            .and_then(|vs| vs.iter().find(|v| v["name"] == m["name"]))
            .ok_or("mount of an unknown volume")?;
        let cm_name = vol["configMap"]["name"]
            .as_str()
            .ok_or("not a ConfigMap volume")?;
        let cm = cm_api(client, ns)
            .get_opt(cm_name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or(format!("ConfigMap {cm_name} not found"))?;
        let cm = serde_json::to_value(cm).unwrap();
        let sub = m["subPath"].as_str().unwrap_or("");
        let mount = m["mountPath"].as_str().ok_or("mount without a path")?;
        for item in vol["configMap"]["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let path = item["path"].as_str().unwrap_or("");
            let Some(rel) = path
                .strip_prefix(&format!("{sub}/"))
                .or((sub.is_empty()).then_some(path))
            else {
                continue;
            };
            let data = cm["data"][item["key"].as_str().unwrap_or("")]
                .as_str()
                .ok_or("ConfigMap item without data")?;
            let target = root.join(mount.trim_start_matches('/')).join(rel);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::write(&target, data).unwrap();
            files.push(format!("{}/{rel}", mount.trim_end_matches('/')));
        }
    }
    Ok(files)
}

async fn patch_pod_status(client: &kube::Client, ns: &str, name: &str, status: Value) {
    let api = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        ns,
        &kube::core::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
        },
    );
    let _ = api
        .patch_status(
            name,
            &PatchParams {
                field_manager: Some("fake-kubelet".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({ "status": status })),
        )
        .await;
}

struct Server {
    stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

impl FakeKubelet {
    pub async fn start(env: &Env) -> FakeKubelet {
        let client = kubelet_client(env).await;
        let pods = Arc::new(Mutex::new(Vec::<RunningPod>::new()));
        let pods2 = pods.clone();
        let handle = tokio::spawn(async move {
            let mut servers: BTreeMap<(String, String), Server> = BTreeMap::new();
            // Pods already started (or failed): the stand-in gives every pod phase Pending.
            let mut handled: std::collections::BTreeSet<(String, String, String)> =
                std::collections::BTreeSet::new();
            loop {
                let list = pods_api(&client)
                    .list(
                        &kube::api::ListParams::default()
                            .labels("bundle-tool.olmkit.io/run-bundle"),
                    )
                    .await;
                if let Ok(list) = list {
                    let mut present = Vec::new();
                    for p in list.items {
                        let v = serde_json::to_value(&p).unwrap();
                        let ns = v["metadata"]["namespace"].as_str().unwrap().to_string();
                        let name = v["metadata"]["name"].as_str().unwrap().to_string();
                        present.push((ns.clone(), name.clone()));
                        let uid = v["metadata"]["uid"].as_str().unwrap_or("").to_string();
                        if !handled.insert((ns.clone(), name.clone(), uid)) {
                            continue;
                        }
                        let image = v["spec"]["containers"][0]["image"].as_str().unwrap_or("");
                        if image.contains("does-not-exist") {
                            patch_pod_status(&client, &ns, &name, json!({
                                "phase": "Pending",
                                "containerStatuses": [{"name": "registry-grpc", "ready": false, "image": image, "imageID": "",
                                    "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull",
                                    "message": format!("failed to pull image \"{image}\": not found")}}}],
                            })).await;
                            continue;
                        }
                        let command: Vec<String> = v["spec"]["containers"][0]["command"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|x| x.as_str().map(String::from))
                                    .collect()
                            })
                            .unwrap_or_default();
                        let (dir, port) = served_dir_and_port(&command);
                        let tmp = tempfile::tempdir().unwrap();
                        let files = match materialize(&client, &ns, &v, tmp.path()).await {
                            Ok(f) => f,
                            Err(e) => {
                                eprintln!("fake kubelet: pod {ns}/{name}: {e}");
                                continue;
                            }
                        };
                        let configs: PathBuf = tmp.path().join(dir.trim_start_matches('/'));
                        // A loopback address of its own, as a pod has its own IP.
                        let mut started = None;
                        for _ in 0..20 {
                            let ip = loopback();
                            if std::net::TcpListener::bind((ip, port)).is_err() {
                                continue;
                            }
                            let mut opts = ServeOptions::new(&configs);
                            opts.address = IpAddr::V4(ip);
                            opts.port = port;
                            opts.index = IndexChoice::Off;
                            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                            tokio::spawn(serve(opts, async move {
                                let _ = rx.await;
                            }));
                            started = Some((ip, tx));
                            break;
                        }
                        let Some((ip, stop)) = started else {
                            eprintln!("fake kubelet: no free loopback address for {ns}/{name}");
                            continue;
                        };
                        servers.insert((ns.clone(), name.clone()), Server { stop, _dir: tmp });
                        pods2.lock().unwrap().push(RunningPod {
                            namespace: ns.clone(),
                            name: name.clone(),
                            ip: ip.to_string(),
                            command: command.clone(),
                            files,
                        });
                        patch_pod_status(&client, &ns, &name, json!({
                            "phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
                            "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}],
                            "containerStatuses": [{"name": "registry-grpc", "ready": true, "image": image, "imageID": "",
                                "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2026-11-22T12:00:00Z"}}}],
                        })).await;
                    }
                    let gone: Vec<(String, String)> = servers
                        .keys()
                        .filter(|k| !present.contains(k))
                        .cloned()
                        .collect();
                    handled.retain(|(ns, n, _)| present.contains(&(ns.clone(), n.clone())));
                    for k in gone {
                        if let Some(s) = servers.remove(&k) {
                            let _ = s.stop.send(());
                        }
                        pods2
                            .lock()
                            .unwrap()
                            .retain(|p| (p.namespace.clone(), p.name.clone()) != k);
                    }
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        });
        FakeKubelet { pods, handle }
    }

    /// The registry pods running now.
    pub fn running(&self) -> Vec<RunningPod> {
        self.pods.lock().unwrap().clone()
    }
}
