//! Reading a registry+v1 bundle directory into a [`Bundle`].
//!
//! The loader only parses: a bundle with wrong content still loads, and the validators report
//! what is wrong with it. It fails only when it cannot read or parse a file, naming that file.

use crate::model::{Bundle, Manifest};
use olmkit_core::docs::{parse_document, parse_documents};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A bundle directory could not be read.
#[derive(Debug, Error)]
pub enum LoadBundleError {
    /// The path does not exist or is not a directory.
    #[error("{0}: not a bundle directory (no such directory)")]
    NotADirectory(PathBuf),
    /// The directory has no `manifests/` folder.
    #[error("{0}: not a bundle directory (no manifests/ folder)")]
    NoManifests(PathBuf),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be parsed.
    #[error(transparent)]
    Parse(#[from] olmkit_core::docs::ParseDocumentError),
    /// `annotations.yaml` is not of the form `annotations: {key: string}`.
    #[error("{path}: field annotations: {message}")]
    Annotations {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

fn read(path: &Path) -> Result<Vec<u8>, LoadBundleError> {
    fs::read(path).map_err(|source| LoadBundleError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn sorted_files(dir: &Path) -> Result<Vec<PathBuf>, LoadBundleError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = fs::read_dir(&d).map_err(|source| LoadBundleError::Read {
            path: d.clone(),
            source,
        })?;
        for e in rd {
            let e = e.map_err(|source| LoadBundleError::Read {
                path: d.clone(),
                source,
            })?;
            let p = e.path();
            let ft = e.file_type().map_err(|source| LoadBundleError::Read {
                path: p.clone(),
                source,
            })?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() || ft.is_symlink() {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Parses the `LABEL` instructions of a Dockerfile (`LABEL k=v [k2=v2 ...]`, quoted or not,
/// with line continuations).
pub fn parse_dockerfile_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    for line in joined.lines() {
        let line = line.trim();
        let Some(rest) = line
            .strip_prefix("LABEL ")
            .or_else(|| line.strip_prefix("label "))
        else {
            continue;
        };
        let mut chars = rest.chars().peekable();
        loop {
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            let mut key = String::new();
            while let Some(&c) = chars.peek() {
                if c == '=' || c.is_whitespace() {
                    break;
                }
                key.push(c);
                chars.next();
            }
            if key.is_empty() || chars.next() != Some('=') {
                break;
            }
            let mut val = String::new();
            match chars.peek() {
                Some('"') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => {
                                if let Some(n) = chars.next() {
                                    val.push(n)
                                }
                            }
                            '"' => break,
                            c => val.push(c),
                        }
                    }
                }
                _ => {
                    while let Some(&c) = chars.peek() {
                        if c.is_whitespace() {
                            break;
                        }
                        val.push(c);
                        chars.next();
                    }
                }
            }
            labels.insert(key.trim_matches('"').to_string(), val);
        }
    }
    labels
}

/// Loads the bundle in `dir`.
pub fn load_bundle_dir(dir: &Path) -> Result<Bundle, LoadBundleError> {
    if !dir.is_dir() {
        return Err(LoadBundleError::NotADirectory(dir.to_path_buf()));
    }
    let manifests_dir = dir.join("manifests");
    if !manifests_dir.is_dir() {
        return Err(LoadBundleError::NoManifests(dir.to_path_buf()));
    }
    let mut bundle = Bundle {
        root: dir.to_path_buf(),
        ..Default::default()
    };
    for path in sorted_files(&manifests_dir)? {
        let name = rel(dir, &path);
        let bytes = read(&path)?;
        for (i, object) in parse_documents(&name, &bytes)?.into_iter().enumerate() {
            bundle.manifests.push(Manifest {
                file: name.clone(),
                doc_index: i,
                object,
            });
        }
    }
    let metadata = dir.join("metadata");
    for file in ["annotations.yaml", "annotations.yml"] {
        let p = metadata.join(file);
        if p.is_file() {
            let name = rel(dir, &p);
            let doc = parse_document(&name, &read(&p)?)?;
            let map = doc
                .get("annotations")
                .ok_or_else(|| LoadBundleError::Annotations {
                    path: name.clone(),
                    message: "missing top-level `annotations:` map".into(),
                })?;
            let obj = map
                .as_object()
                .ok_or_else(|| LoadBundleError::Annotations {
                    path: name.clone(),
                    message: "must be a map of strings".into(),
                })?;
            for (k, v) in obj {
                let s = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(_) | Value::Bool(_) => v.to_string(),
                    _ => {
                        return Err(LoadBundleError::Annotations {
                            path: name.clone(),
                            message: format!("value of {k} must be a string"),
                        });
                    }
                };
                bundle.annotations.insert(k.clone(), s);
            }
            bundle.annotations_file = Some(name);
            break;
        }
    }
    for (file, slot) in [
        ("dependencies.yaml", &mut bundle.dependencies),
        ("properties.yaml", &mut bundle.properties),
    ] {
        let p = metadata.join(file);
        if p.is_file() {
            let name = rel(dir, &p);
            *slot = Some(parse_document(&name, &read(&p)?)?);
        }
    }
    let dockerfile = dir.join("bundle.Dockerfile");
    if dockerfile.is_file() {
        let text = String::from_utf8_lossy(&read(&dockerfile)?).into_owned();
        bundle.dockerfile_labels = Some(parse_dockerfile_labels(&text));
    }
    for path in sorted_files(dir)? {
        let r = rel(dir, &path);
        if !r.starts_with("manifests/") && !r.starts_with("metadata/") && r != "bundle.Dockerfile" {
            bundle.other_files.push(r);
        }
    }
    Ok(bundle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerfile_labels() {
        let l = parse_dockerfile_labels(
            "FROM scratch\nLABEL a=b \"c.d\"=\"e f\" \\\n  g=h\nLABEL operators.operatorframework.io.bundle.channels.v1=alpha,stable\n",
        );
        assert_eq!(l["a"], "b");
        assert_eq!(l["c.d"], "e f");
        assert_eq!(l["g"], "h");
        assert_eq!(
            l["operators.operatorframework.io.bundle.channels.v1"],
            "alpha,stable"
        );
    }

    #[test]
    fn loads_a_real_bundle() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../tests/fixtures/real-bundles/authorino-operator/0.13.0");
        let b = load_bundle_dir(&dir).unwrap();
        assert_eq!(b.package(), Some("authorino-operator"));
        assert_eq!(b.csv_name(), Some("authorino-operator.v0.13.0"));
        assert_eq!(b.channels(), vec!["stable"]);
        assert_eq!(b.crds().count(), 2);
        assert!(
            b.other_files
                .iter()
                .any(|f| f.starts_with("tests/scorecard"))
        );
    }

    #[test]
    fn missing_dir_is_an_error() {
        assert!(matches!(
            load_bundle_dir(Path::new("/nonexistent")),
            Err(LoadBundleError::NotADirectory(_))
        ));
    }
}
