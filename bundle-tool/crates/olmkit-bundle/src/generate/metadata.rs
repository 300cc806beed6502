//! Package and channel settings, and rendering of every bundle file.
//!
//! Layout and names follow `operator-sdk generate bundle`: `manifests/` with operator-sdk's file
//! names, `metadata/annotations.yaml` with the `operators.operatorframework.io.bundle.*` keys
//! plus the metrics and (when a scorecard configuration is given) test keys, a
//! `bundle.Dockerfile` whose LABELs repeat the annotations, and `tests/scorecard/config.yaml`.
//! In the versioned layout the Dockerfile lives in the bundle directory, so its COPY sources
//! are relative to it; in operator-sdk's layout it is written to the project root with COPY
//! sources under the bundle directory, and `annotations.yaml` carries operator-sdk's section
//! comments (operator-sdk `bundleutil` templates).
//! Every object is written without `metadata.namespace` (OLM installs into the namespace of the
//! OperatorGroup; operator-sdk strips it too) and with its keys sorted.

use super::collect::Collected;
use super::rbac::RbacSplit;
use super::webhooks::Webhooks;
use super::{FileLayout, GenerateBundleError, GenerateOptions, Improvement, Settings};
use crate::json::arr_at;
use crate::model::keys;
use crate::naming::{dns1123_subdomain_problem, manifest_file_name, package_of_csv_name};
use olmkit_core::csv::Csv;
use olmkit_core::dockerfile::label_value;
use olmkit_core::docs::to_yaml;
use olmkit_core::gojson::sorted_keys;
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
                .and_then(|b| b.csv_view().name())
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
/// channel must be one of them, and defaults to the only channel when there is exactly one
/// ([`Improvement::ImpliedDefaultChannel`]).
pub fn channels(
    options: &GenerateOptions,
    settings: &Settings,
) -> Result<Channels, GenerateBundleError> {
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
        None if list.len() == 1
            && settings
                .improvements
                .has(Improvement::ImpliedDefaultChannel) =>
        {
            list.first().cloned()
        }
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

/// A plain YAML scalar as operator-sdk's templates print it, quoted only when YAML would
/// otherwise read it differently (never for package, channel and layout names in practice).
fn yaml_scalar(v: &str) -> String {
    let plain = !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/' | ',' | '+'))
        && !matches!(
            v,
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        && v.parse::<f64>().is_err();
    if plain {
        v.to_string()
    } else {
        serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}"))
    }
}

/// `metadata/annotations.yaml` in operator-sdk's template form: core keys under
/// `# Core bundle annotations.`, the metrics keys right after, and the test keys in their own
/// section after a blank line.
pub fn sdk_annotations_yaml(annotations: &[(String, String)]) -> String {
    let mut out = String::from("annotations:\n  # Core bundle annotations.\n");
    let mut testing = Vec::new();
    for (k, v) in annotations {
        if k.starts_with("operators.operatorframework.io.test.") {
            testing.push((k, v));
        } else {
            out.push_str(&format!("  {k}: {}\n", yaml_scalar(v)));
        }
    }
    if !testing.is_empty() {
        out.push_str("\n  # Annotations for testing.\n");
        for (k, v) in testing {
            out.push_str(&format!("  {k}: {}\n", yaml_scalar(v)));
        }
    }
    out
}

/// `bundle.Dockerfile` in operator-sdk's form, at the project root: COPY sources are
/// `<copy_dir>/manifests` etc.
pub fn sdk_dockerfile(annotations: &[(String, String)], scorecard: bool, copy_dir: &str) -> String {
    let generic = dockerfile(annotations, scorecard);
    let dir = copy_dir.trim_end_matches('/');
    let dir = if dir.is_empty() { "." } else { dir };
    generic
        .replace(
            "COPY manifests /manifests/",
            &format!("COPY {dir}/manifests /manifests/"),
        )
        .replace(
            "COPY metadata /metadata/",
            &format!("COPY {dir}/metadata /metadata/"),
        )
        .replace(
            "COPY tests/scorecard /tests/scorecard/",
            &format!("COPY {dir}/tests/scorecard /tests/scorecard/"),
        )
}

fn clean(object: &Value, settings: &Settings) -> Value {
    let mut o = object.clone();
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("namespace");
    }
    if settings.upstream_compat {
        super::upstream::typed_object(&mut o);
    }
    sorted_keys(o)
}

/// The Service as it goes into the bundle: without the ports that only route admission
/// webhooks ([`Improvement::DropWebhookServices`]), or `None` when no port is left.
fn bundle_service(
    svc: &crate::model::Manifest,
    hooks: &Webhooks,
    settings: &Settings,
    notes: &mut Vec<String>,
) -> Option<Value> {
    let mut s = svc.object.clone();
    if !settings.improvements.has(Improvement::DropWebhookServices) {
        return Some(s);
    }
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
        return None;
    }
    Some(s)
}

/// An object as YAML: with `upstream_compat`, byte for byte as operator-sdk's
/// `sigs.k8s.io/yaml.Marshal` writes it (go-yaml v2's key order, quoting and line folding,
/// through [`olmkit_core::goyaml`]); otherwise bundle-tool's canonical YAML.
fn render(what: &str, object: &Value, settings: &Settings) -> Result<String, GenerateBundleError> {
    if settings.upstream_compat {
        olmkit_core::goyaml::to_yaml(object).map_err(|e| {
            GenerateBundleError::Render(olmkit_core::docs::RenderDocumentError {
                what: what.to_string(),
                message: e.to_string(),
            })
        })
    } else {
        Ok(to_yaml(what, object)?)
    }
}

/// Bundle files (relative to the bundle directory) and project-root files.
pub type RenderedFiles = (BTreeMap<PathBuf, Vec<u8>>, BTreeMap<PathBuf, Vec<u8>>);

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
    settings: &Settings,
    notes: &mut Vec<String>,
) -> Result<RenderedFiles, GenerateBundleError> {
    let objects = manifest_objects(c, rbac, hooks, csv, settings, notes);
    let mut files = manifest_files(objects, package, settings)?;
    let layout = Csv::new(csv).annotation("operators.operatorframework.io/project_layout");
    let scorecard = c.scorecard.is_some() || settings.scorecard_in_output;
    let ann = annotations(package, channels, options, layout, scorecard);
    let root_files = metadata_files(&ann, scorecard, settings, &mut files)?;
    if let Some(sc) = &c.scorecard {
        let mut config = clean(&sc.object, settings);
        if settings.upstream_compat {
            super::upstream::typed_scorecard(&mut config);
            config = sorted_keys(config);
        }
        files.insert(
            PathBuf::from("tests/scorecard/config.yaml"),
            render("tests/scorecard/config.yaml", &config, settings)?.into_bytes(),
        );
    }
    Ok((files, root_files))
}

/// The objects of `manifests/`, each with how errors name it: the CSV, the CRDs, the RBAC the
/// CSV does not absorb, the service accounts OLM does not create, the Services, the rest.
fn manifest_objects(
    c: &Collected,
    rbac: &RbacSplit,
    hooks: &Webhooks,
    csv: &Value,
    settings: &Settings,
    notes: &mut Vec<String>,
) -> Vec<(Value, String)> {
    let mut objects: Vec<(Value, String)> = vec![(csv.clone(), "the CSV".into())];
    for crd in &c.crds {
        objects.push((clean(&crd.doc.object, settings), crd.doc.label()));
    }
    for r in &rbac.manifests {
        objects.push((clean(r, settings), "RBAC".into()));
    }
    let operator_accounts = &rbac.accounts;
    for sa in &c.service_accounts {
        if operator_accounts.iter().any(|a| a == sa.name()) {
            // OLM creates it from the CSV; shipping it too is an error for
            // operator-framework/api ("sa name cannot match service account defined for
            // deployment spec in CSV").
            continue;
        }
        objects.push((clean(&sa.object, settings), sa.label()));
    }
    for svc in &c.services {
        if let Some(s) = bundle_service(svc, hooks, settings, notes) {
            objects.push((clean(&s, settings), svc.label()));
        }
    }
    for o in &c.others {
        objects.push((clean(&o.object, settings), o.label()));
    }
    objects
}

/// The `manifests/` files of `objects`, refusing two objects that would share a file name.
fn manifest_files(
    objects: Vec<(Value, String)>,
    package: &str,
    settings: &Settings,
) -> Result<BTreeMap<PathBuf, Vec<u8>>, GenerateBundleError> {
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
        files.insert(path.clone(), render(&what, &object, settings)?.into_bytes());
        origin.insert(path, label);
    }
    Ok(files)
}

/// `metadata/annotations.yaml` (into `files`) and `bundle.Dockerfile` (into `files` for the
/// versioned layout, into the returned root files for operator-sdk's) from the annotations.
fn metadata_files(
    ann: &[(String, String)],
    scorecard: bool,
    settings: &Settings,
    files: &mut BTreeMap<PathBuf, Vec<u8>>,
) -> Result<BTreeMap<PathBuf, Vec<u8>>, GenerateBundleError> {
    let mut root_files = BTreeMap::new();
    match &settings.layout {
        FileLayout::Versioned => {
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
                dockerfile(ann, scorecard).into_bytes(),
            );
        }
        FileLayout::Sdk { copy_dir } => {
            files.insert(
                PathBuf::from("metadata/annotations.yaml"),
                sdk_annotations_yaml(ann).into_bytes(),
            );
            root_files.insert(
                PathBuf::from("bundle.Dockerfile"),
                sdk_dockerfile(ann, scorecard, copy_dir).into_bytes(),
            );
        }
    }
    Ok(root_files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use olmkit_core::dockerfile::parse_labels as parse_dockerfile_labels;

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
        let sdk = sdk_dockerfile(&ann, true, "bundle");
        assert!(sdk.contains("COPY bundle/manifests /manifests/\nCOPY bundle/metadata /metadata/\nCOPY bundle/tests/scorecard /tests/scorecard/\n"));
        let y = sdk_annotations_yaml(&ann);
        assert!(y.starts_with("annotations:\n  # Core bundle annotations.\n  a.b: plain\n"));
        assert!(y.contains("\n\n  # Annotations for testing.\n"));
    }

    #[test]
    fn channel_defaults() {
        let o = GenerateOptions::default();
        let st = Settings::default();
        assert_eq!(
            channels(&o, &st).unwrap(),
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
        assert!(channels(&o, &st).is_err());
        let o = GenerateOptions::default();
        let upstream = Settings {
            improvements: crate::generate::Improvements::none(),
            ..Default::default()
        };
        assert_eq!(channels(&o, &upstream).unwrap().default, None);
    }
}
