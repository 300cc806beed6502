//! Package and channel settings, and rendering of every bundle file.
//!
//! Layout and names follow `operator-sdk generate bundle`: `manifests/` with operator-sdk's file
//! names, `metadata/annotations.yaml` with the `operators.operatorframework.io.bundle.*` keys
//! plus the metrics and (when a scorecard configuration is given) test keys, a
//! `bundle.Dockerfile` whose LABELs repeat the annotations, and `tests/scorecard/config.yaml`.
//! The Dockerfile lives in the bundle directory, so its COPY sources are relative to it.
//! Every object is written without `metadata.namespace` (OLM installs into the namespace of the
//! OperatorGroup; operator-sdk strips it too) and with its keys sorted.

use super::collect::Collected;
use super::csv::sort_keys;
use super::rbac::RbacSplit;
use super::webhooks::Webhooks;
use super::{GenerateBundleError, GenerateOptions};
use crate::json::{arr_at, str_at};
use crate::model::keys;
use crate::naming::{dns1123_subdomain_problem, manifest_file_name, package_of_csv_name};
use olmkit_core::docs::to_yaml;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Metrics annotation: the tool that built the bundle.
pub const METRICS_BUILDER: &str = "operators.operatorframework.io.metrics.builder";
/// Metrics annotation: media type.
pub const METRICS_MEDIATYPE: &str = "operators.operatorframework.io.metrics.mediatype.v1";
/// Metrics annotation: project layout (copied from the base CSV).
pub const METRICS_LAYOUT: &str = "operators.operatorframework.io.metrics.project_layout";
/// Test annotation: media type of the test configuration.
pub const TEST_MEDIATYPE: &str = "operators.operatorframework.io.test.mediatype.v1";
/// Test annotation: where the scorecard configuration is.
pub const TEST_CONFIG: &str = "operators.operatorframework.io.test.config.v1";

/// Channels of the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Channels {
    /// In the order given, without duplicates.
    pub list: Vec<String>,
    /// Default channel, if any.
    pub default: Option<String>,
}

/// The package name: `--package`, or the base CSV's name without its version.
pub fn package_name(
    options: &GenerateOptions,
    c: &Collected,
) -> Result<String, GenerateBundleError> {
    let (name, from_flag) = match &options.package {
        Some(p) => (p.clone(), true),
        None => {
            let base = c
                .base_csv
                .as_ref()
                .and_then(|b| str_at(&b.object, "/metadata/name"))
                .ok_or(GenerateBundleError::NoPackage)?;
            (package_of_csv_name(base).to_string(), false)
        }
    };
    if let Some(problem) = dns1123_subdomain_problem(&name) {
        return Err(if from_flag {
            GenerateBundleError::Option {
                flag: "package",
                value: name,
                message: problem,
            }
        } else {
            GenerateBundleError::NoPackage
        });
    }
    Ok(name)
}

/// Channels from the options: `alpha` when none are given (operator-sdk's default); the default
/// channel must be one of them, and defaults to the only channel when there is exactly one.
pub fn channels(options: &GenerateOptions) -> Result<Channels, GenerateBundleError> {
    let mut list: Vec<String> = Vec::new();
    for ch in &options.channels {
        let ch = ch.trim();
        if ch.is_empty() || ch.contains(',') || ch.chars().any(char::is_whitespace) {
            return Err(GenerateBundleError::Option {
                flag: "channels",
                value: options.channels.join(","),
                message: format!("{ch:?} is not a valid channel name"),
            });
        }
        if !list.iter().any(|c| c == ch) {
            list.push(ch.to_string());
        }
    }
    if list.is_empty() {
        list.push("alpha".into());
    }
    let default = match &options.default_channel {
        Some(d) if !list.contains(d) => {
            return Err(GenerateBundleError::Option {
                flag: "default-channel",
                value: d.clone(),
                message: format!(
                    "is not one of the bundle's channels ({}); OLM would have no such channel to subscribe to",
                    list.join(",")
                ),
            });
        }
        Some(d) => Some(d.clone()),
        None if list.len() == 1 => list.first().cloned(),
        None => None,
    };
    Ok(Channels { list, default })
}

/// The annotations of `metadata/annotations.yaml`, in operator-sdk's order.
pub fn annotations(
    package: &str,
    channels: &Channels,
    options: &GenerateOptions,
    project_layout: Option<&str>,
    scorecard: bool,
) -> Vec<(String, String)> {
    let mut a = vec![
        (keys::MEDIATYPE.to_string(), "registry+v1".to_string()),
        (keys::MANIFESTS.to_string(), "manifests/".to_string()),
        (keys::METADATA.to_string(), "metadata/".to_string()),
        (keys::PACKAGE.to_string(), package.to_string()),
        (keys::CHANNELS.to_string(), channels.list.join(",")),
    ];
    if let Some(d) = &channels.default {
        a.push((keys::DEFAULT_CHANNEL.to_string(), d.clone()));
    }
    a.push((METRICS_BUILDER.to_string(), options.builder.clone()));
    a.push((METRICS_MEDIATYPE.to_string(), "metrics+v1".to_string()));
    if let Some(l) = project_layout {
        a.push((METRICS_LAYOUT.to_string(), l.to_string()));
    }
    if scorecard {
        a.push((TEST_MEDIATYPE.to_string(), "scorecard+v1".to_string()));
        a.push((TEST_CONFIG.to_string(), "tests/scorecard/".to_string()));
    }
    a
}

fn label_value(v: &str) -> String {
    let plain = !v.is_empty()
        && v.chars()
            .all(|c| !c.is_whitespace() && !matches!(c, '"' | '\\' | '$' | '\''));
    if plain {
        v.to_string()
    } else {
        let escaped = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('$', "\\$");
        format!("\"{escaped}\"")
    }
}

/// `bundle.Dockerfile`: LABELs equal to the annotations, COPY sources relative to the bundle
/// directory (where this file is written).
pub fn dockerfile(annotations: &[(String, String)], scorecard: bool) -> String {
    let mut out = String::from("FROM scratch\n\n# Core bundle labels.\n");
    let mut testing = Vec::new();
    for (k, v) in annotations {
        if k.starts_with("operators.operatorframework.io.test.") {
            testing.push((k, v));
            continue;
        }
        out.push_str(&format!("LABEL {k}={}\n", label_value(v)));
    }
    if !testing.is_empty() {
        out.push_str("\n# Labels for testing.\n");
        for (k, v) in testing {
            out.push_str(&format!("LABEL {k}={}\n", label_value(v)));
        }
    }
    out.push_str("\n# Copy files to locations specified by labels.\n");
    out.push_str("COPY manifests /manifests/\nCOPY metadata /metadata/\n");
    if scorecard {
        out.push_str("COPY tests/scorecard /tests/scorecard/\n");
    }
    out
}

fn clean(object: &Value) -> Value {
    let mut o = object.clone();
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("namespace");
    }
    sort_keys(&o)
}

/// Renders every file of the bundle.
#[allow(clippy::too_many_arguments)]
pub fn render_files(
    c: &Collected,
    rbac: &RbacSplit,
    hooks: &Webhooks,
    csv: &Value,
    package: &str,
    channels: &Channels,
    options: &GenerateOptions,
    notes: &mut Vec<String>,
) -> Result<BTreeMap<PathBuf, Vec<u8>>, GenerateBundleError> {
    let mut objects: Vec<(Value, String)> = vec![(csv.clone(), "the CSV".into())];
    for crd in &c.crds {
        objects.push((clean(&crd.doc.object), crd.doc.label()));
    }
    for r in &rbac.manifests {
        objects.push((clean(r), "RBAC".into()));
    }
    let operator_accounts = c.deployment_service_accounts();
    for sa in &c.service_accounts {
        if operator_accounts.iter().any(|a| a == sa.name()) {
            // OLM creates it from the CSV; shipping it too is an error for
            // operator-framework/api ("sa name cannot match service account defined for
            // deployment spec in CSV").
            continue;
        }
        objects.push((clean(&sa.object), sa.label()));
    }
    for svc in &c.services {
        let mut s = svc.object.clone();
        let before = arr_at(&s, "/spec/ports").len();
        if let Some(ports) = s.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            ports.retain(|p| {
                let port = p.get("port").and_then(Value::as_i64).unwrap_or(-1);
                !hooks
                    .admission_service_ports
                    .contains(&(svc.name().to_string(), port))
            });
        }
        let after = arr_at(&s, "/spec/ports").len();
        if after == 0 && before > 0 {
            notes.push(format!(
                "left out Service {}: it only serves admission webhooks, for which OLM creates its own Service (<deployment>-service)",
                svc.name()
            ));
            continue;
        }
        objects.push((clean(&s), svc.label()));
    }
    for o in &c.others {
        objects.push((clean(&o.object), o.label()));
    }

    let mut files: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
    let mut origin: BTreeMap<PathBuf, String> = BTreeMap::new();
    for (object, label) in objects {
        let path = PathBuf::from("manifests").join(manifest_file_name(&object, package));
        if let Some(first) = origin.get(&path) {
            return Err(GenerateBundleError::Duplicate {
                what: format!("bundle file {}", path.display()),
                first: first.clone(),
                second: label,
            });
        }
        let what = path.display().to_string();
        files.insert(path.clone(), to_yaml(&what, &object)?.into_bytes());
        origin.insert(path, label);
    }

    let layout = str_at(
        csv,
        "/metadata/annotations/operators.operatorframework.io~1project_layout",
    );
    let ann = annotations(package, channels, options, layout, c.scorecard.is_some());
    let ann_map: Map<String, Value> = ann
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
        .collect();
    let mut wrapper = Map::new();
    wrapper.insert("annotations".into(), Value::Object(ann_map));
    files.insert(
        PathBuf::from("metadata/annotations.yaml"),
        to_yaml("metadata/annotations.yaml", &Value::Object(wrapper))?.into_bytes(),
    );
    files.insert(
        PathBuf::from("bundle.Dockerfile"),
        dockerfile(&ann, c.scorecard.is_some()).into_bytes(),
    );
    if let Some(sc) = &c.scorecard {
        files.insert(
            PathBuf::from("tests/scorecard/config.yaml"),
            to_yaml("tests/scorecard/config.yaml", &clean(&sc.object))?.into_bytes(),
        );
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::parse_dockerfile_labels;

    #[test]
    fn dockerfile_labels_round_trip() {
        let ann = vec![
            ("a.b".to_string(), "plain".to_string()),
            ("c".to_string(), "with space \"q\" $x".to_string()),
            (TEST_CONFIG.to_string(), "tests/scorecard/".to_string()),
        ];
        let df = dockerfile(&ann, true);
        let labels = parse_dockerfile_labels(&df);
        assert_eq!(labels.get("a.b").map(String::as_str), Some("plain"));
        assert_eq!(
            labels.get(TEST_CONFIG).map(String::as_str),
            Some("tests/scorecard/")
        );
        assert!(df.contains("COPY tests/scorecard /tests/scorecard/"));
    }

    #[test]
    fn channel_defaults() {
        let o = GenerateOptions::default();
        assert_eq!(
            channels(&o).unwrap(),
            Channels {
                list: vec!["alpha".into()],
                default: Some("alpha".into())
            }
        );
        let o = GenerateOptions {
            channels: vec!["stable".into(), "fast".into()],
            default_channel: Some("candidate".into()),
            ..Default::default()
        };
        assert!(channels(&o).is_err());
    }
}
