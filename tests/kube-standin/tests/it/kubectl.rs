//! The `kube-standin` binary with the real kubectl: apply (client-side and server-side), get
//! (tables with printer columns, -o yaml), delete, api-resources, errors, and `kubectl get csv`
//! with the OLM CRDs loaded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::widget_crd;

struct Server {
    child: Child,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn start(dir: &Path) -> Server {
    let widget = dir.join("widget-crd.json");
    std::fs::write(&widget, widget_crd(None).to_string()).expect("write crd");
    let kubeconfig = dir.join("kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-standin"));
    cmd.arg("--port")
        .arg("0")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--namespace")
        .arg("demo");
    cmd.arg("--crd").arg(&widget);
    let mut olm: Vec<PathBuf> = std::fs::read_dir(fixtures().join("olm-crds"))
        .expect("olm crds")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    olm.sort();
    for f in olm {
        cmd.arg("--crd").arg(f);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kube-standin");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read");
    assert!(line.starts_with("listening on http://127.0.0.1:"), "{line}");
    Server {
        child,
        kubeconfig,
        cache: dir.join("cache"),
    }
}

fn kubectl(s: &Server, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new("kubectl");
    cmd.arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .arg("--cache-dir")
        .arg(&s.cache)
        .args(args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl must be installed");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("stdin");
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().expect("kubectl output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(s: &Server, args: &[&str], stdin: Option<&str>) -> String {
    let (success, out, err) = kubectl(s, args, stdin);
    assert!(success, "kubectl {args:?} failed: {err}");
    out
}

const WIDGET: &str =
    "apiVersion: test.example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  replicas: 2\n";

#[test]
fn kubectl_against_the_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path());

    assert_eq!(
        ok(&s, &["apply", "-f", "-"], Some(WIDGET)).trim(),
        "widget.test.example.com/w created"
    );
    assert_eq!(
        ok(&s, &["apply", "-f", "-"], Some(WIDGET)).trim(),
        "widget.test.example.com/w unchanged"
    );
    let changed = WIDGET.replace("replicas: 2", "replicas: 3");
    assert_eq!(
        ok(&s, &["apply", "-f", "-"], Some(&changed)).trim(),
        "widget.test.example.com/w configured"
    );

    let table = ok(&s, &["get", "widgets"], None);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, vec!["NAME", "REPLICAS", "PHASE", "READY"]);
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row, vec!["w", "3"]);

    let yaml = ok(&s, &["get", "widget", "w", "-o", "yaml"], None);
    assert!(
        yaml.contains("replicas: 3")
            && yaml.contains("image: busybox:1.36")
            && yaml.contains("namespace: demo"),
        "{yaml}"
    );
    let json_out = ok(&s, &["get", "wd", "-o", "json"], None);
    let list: serde_json::Value = serde_json::from_str(&json_out).expect("json");
    assert_eq!(list["items"][0]["metadata"]["name"], "w");

    // Server-side apply through kubectl: the field client-side apply set conflicts, as on a real
    // cluster, until forced.
    let ssa = WIDGET.replace("replicas: 2", "replicas: 4");
    let (success, _, err) = kubectl(
        &s,
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "cli",
            "-f",
            "-",
        ],
        Some(&ssa),
    );
    assert!(!success);
    assert!(
        err.contains("conflict with \"kubectl-client-side-apply\"")
            && err.contains(".spec.replicas"),
        "{err}"
    );
    assert_eq!(
        ok(
            &s,
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager",
                "cli",
                "-f",
                "-"
            ],
            Some(&ssa)
        )
        .trim(),
        "widget.test.example.com/w serverside-applied"
    );
    assert_eq!(
        ok(
            &s,
            &[
                "apply",
                "--server-side",
                "--field-manager",
                "cli",
                "-f",
                "-"
            ],
            Some(&ssa)
        )
        .trim(),
        "widget.test.example.com/w serverside-applied"
    );

    // Errors come back as kubectl prints them for a real cluster.
    let (success, _, err) = kubectl(&s, &["get", "widget", "missing"], None);
    assert!(!success);
    assert_eq!(
        err.trim(),
        "Error from server (NotFound): widgets.test.example.com \"missing\" not found"
    );
    let bad = WIDGET.replace("replicas: 2", "replicas: -1");
    let (success, _, err) = kubectl(&s, &["apply", "-f", "-"], Some(&bad));
    assert!(!success);
    assert!(err.contains("spec.replicas"), "{err}");

    let resources = ok(&s, &["api-resources"], None);
    assert!(resources.lines().any(|l| l.starts_with("widgets")
        && l.contains("wd")
        && l.contains("test.example.com/v1")));
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("clusterserviceversions") && l.contains("csv"))
    );
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("deployments") && l.contains("apps/v1"))
    );

    assert_eq!(
        ok(&s, &["delete", "-f", "-"], Some(WIDGET)).trim(),
        "widget.test.example.com \"w\" deleted"
    );
    assert!(ok(&s, &["get", "widgets"], None).is_empty());

    // kubectl get csv prints OLM's printer columns.
    ok(
        &s,
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: placeholder\n"),
    );
    let csv = fixtures().join("real-bundles/node-healthcheck-operator/0.7.0/manifests/node-healthcheck-operator.clusterserviceversion.yaml");
    ok(&s, &["apply", "-f", csv.to_str().expect("path")], None);
    let out = ok(&s, &["get", "csv", "-n", "placeholder"], None);
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // The columns are the CSV CRD's additionalPrinterColumns (priority 0), upper-cased by kubectl.
    let crd = kube_standin::load_crd_files(&[
        fixtures().join("olm-crds/operators.coreos.com_clusterserviceversions.yaml")
    ])
    .expect("csv crd");
    let mut want = vec!["NAME".to_string()];
    for c in crd[0]["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .expect("columns")
    {
        if c["priority"].as_i64().unwrap_or(0) == 0 {
            want.push(c["name"].as_str().unwrap_or_default().to_uppercase());
        }
    }
    assert!(
        want.len() >= 5 && want.contains(&"REPLACES".to_string()),
        "{want:?}"
    );
    assert_eq!(header, want);
    assert!(
        out.lines().nth(1).is_some_and(
            |l| l.starts_with("node-healthcheck-operator.v0.7.0") && l.contains("0.7.0")
        ),
        "{out}"
    );

    // Built-in kinds via apply, and namespace deletion.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: placeholder\ndata:\n  a: \"1\"\n";
    assert_eq!(
        ok(&s, &["apply", "-f", "-"], Some(cm)).trim(),
        "configmap/c created"
    );
    ok(&s, &["delete", "namespace", "placeholder"], None);
    let (success, _, _) = kubectl(&s, &["get", "namespace", "placeholder"], None);
    assert!(!success, "the namespace and its contents are gone");
}

#[test]
fn binary_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = start(dir.path());
    let pid = s.child.id().to_string();
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(&pid)
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = s.child.wait().expect("wait");
    assert!(exit.success(), "{exit:?}");
}
