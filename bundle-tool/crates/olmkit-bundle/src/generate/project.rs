//! The kubebuilder `PROJECT` file: the package name and project layout operator-sdk reads.
//!
//! operator-sdk's `genutil.GetPackageNameAndLayout` takes the package name from `projectName`
//! unless `--package` is set, and the layout (`projutil.GetProjectLayout`: the plugin chain,
//! comma-joined) for the `project_layout` metrics annotations. Config version 3 lists the chain
//! under `layout`; version 2 has a single `layout` string, and no `layout` means kubebuilder's
//! original `go.kubebuilder.io/v2`.

use super::GenerateBundleError;
use serde_json::Value;

/// What generation uses from `PROJECT`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectConfig {
    /// `projectName`.
    pub project_name: Option<String>,
    /// The plugin chain, comma-joined (`go.kubebuilder.io/v4`).
    pub layout: String,
}

/// Parses the `PROJECT` file `bytes` read from `file` (named in errors).
pub fn parse_project(file: &str, bytes: &[u8]) -> Result<ProjectConfig, GenerateBundleError> {
    let err = |field: &str, message: String| GenerateBundleError::Project {
        file: file.to_string(),
        field: field.to_string(),
        message,
    };
    let doc = olmkit_core::docs::parse_document(file, bytes)
        .map_err(|e| err("(document)", format!("not a YAML mapping: {e}")))?;
    let Value::Object(map) = &doc else {
        return Err(err(
            "(document)",
            "not a YAML mapping (a kubebuilder PROJECT file has version, layout, projectName...)"
                .into(),
        ));
    };
    let project_name = match map.get("projectName") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(_) => return Err(err("projectName", "must be a string".into())),
    };
    let layout = match map.get("layout") {
        None | Some(Value::Null) => "go.kubebuilder.io/v2".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            let mut chain = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some(s) => chain.push(s.to_string()),
                    None => {
                        return Err(err(
                            &format!("layout[{i}]"),
                            "must be a plugin key string (e.g. go.kubebuilder.io/v4)".into(),
                        ));
                    }
                }
            }
            chain.join(",")
        }
        Some(_) => {
            return Err(err(
                "layout",
                "must be a list of plugin keys (e.g. [go.kubebuilder.io/v4])".into(),
            ));
        }
    };
    Ok(ProjectConfig {
        project_name,
        layout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v3_project() {
        let p = parse_project(
            "PROJECT",
            b"domain: example.com\nlayout:\n- go.kubebuilder.io/v4\nprojectName: memcached-operator\nversion: \"3\"\n",
        )
        .unwrap();
        assert_eq!(p.project_name.as_deref(), Some("memcached-operator"));
        assert_eq!(p.layout, "go.kubebuilder.io/v4");
    }

    #[test]
    fn bad_fields_are_named() {
        let e = parse_project("PROJECT", b"projectName: [a]\n").unwrap_err();
        assert_eq!(e.to_string(), "PROJECT: projectName: must be a string");
        let e = parse_project("PROJECT", b"layout: {a: b}\n").unwrap_err();
        assert!(e.to_string().starts_with("PROJECT: layout: "));
        let e = parse_project("PROJECT", b"- a\n").unwrap_err();
        assert!(e.to_string().starts_with("PROJECT: (document): "));
    }
}
