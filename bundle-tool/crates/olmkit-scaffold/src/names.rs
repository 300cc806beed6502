//! Names: validation of the flags (each error names its flag) and the names derived from them.
//!
//! The rules are kubebuilder's where it has one (`--kind` PascalCase whose lower case is a
//! DNS-1035 label, `--group`/`--domain` DNS-1123 subdomains, `--version` a Kubernetes API
//! version, the project name a DNS-1123 label), plus what a Rust package name needs.

use olmkit_core::k8s_name;

use crate::ScaffoldError;

fn invalid(flag: &'static str, value: &str, reason: impl Into<String>) -> ScaffoldError {
    ScaffoldError::InvalidFlag {
        flag,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// `--kind`: PascalCase (`Whalesay`, `MemcachedCluster`), its lower case a DNS-1035 label.
pub fn validate_kind(kind: &str) -> Result<(), ScaffoldError> {
    let flag = "--kind";
    let mut chars = kind.chars();
    match chars.next() {
        None => return Err(invalid(flag, kind, "is required")),
        Some(c) if !c.is_ascii_uppercase() => {
            return Err(invalid(
                flag,
                kind,
                "must be PascalCase (UpperCamelCase), starting with an upper-case letter, e.g. Whalesay",
            ));
        }
        Some(_) => {}
    }
    if !chars.all(|c| c.is_ascii_alphanumeric()) {
        return Err(invalid(
            flag,
            kind,
            "must be PascalCase (UpperCamelCase): ASCII letters and digits only, e.g. Whalesay",
        ));
    }
    let errors = k8s_name::dns1035_label_errors(&kind.to_ascii_lowercase());
    if let Some(e) = errors.first() {
        return Err(invalid(flag, kind, format!("its lower case: {e}")));
    }
    for name in [
        kind.to_string(),
        format!("{kind}Spec"),
        format!("{kind}Status"),
    ] {
        if TAKEN.contains(&name.as_str()) {
            return Err(invalid(
                flag,
                kind,
                format!(
                    "the generated code uses the name {name} for something else; pick another kind"
                ),
            ));
        }
    }
    if KEYWORDS.contains(&snake(kind).as_str()) {
        return Err(invalid(
            flag,
            kind,
            format!(
                "its module name `{}` is a Rust keyword; pick another kind",
                snake(kind)
            ),
        ));
    }
    Ok(())
}

/// Names the generated code imports or defines next to a kind's types: a kind (or its
/// `<Kind>Spec`/`<Kind>Status`) named like one of them would not compile.
const TAKEN: &[&str] = &[
    "Action",
    "Api",
    "Arc",
    "Backoff",
    "BTreeMap",
    "CachesReady",
    "CancellationToken",
    "Capabilities",
    "Certs",
    "Child",
    "Client",
    "Command",
    "Condition",
    "Config",
    "Container",
    "ContainerPort",
    "Context",
    "Controller",
    "ControllerContext",
    "Converted",
    "CustomResource",
    "CustomResourceDefinition",
    "CustomResourceExt",
    "DeleteParams",
    "Deployment",
    "DeploymentCondition",
    "DeploymentSpec",
    "DeploymentStatus",
    "Deserialize",
    "DeserializeOwned",
    "Duration",
    "Env",
    "Error",
    "Future",
    "HubAndSpoke",
    "Instant",
    "JoinSet",
    "Kept",
    "KubeConfigOptions",
    "Kubeconfig",
    "KubeSchema",
    "LabelSelector",
    "ListParams",
    "ObjectMeta",
    "OwnerReference",
    "RbacRole",
    "ClusterRole",
    "ClusterRoleBinding",
    "PostParams",
    "ApiResource",
    "DynamicObject",
    "BTreeSet",
    "ObjectRef",
    "Operator",
    "Patch",
    "PatchParams",
    "Path",
    "PathBuf",
    "Permission",
    "PodSecurityContext",
    "PodSpec",
    "PodTemplateSpec",
    "Read",
    "Resource",
    "ResourceExt",
    "SeccompProfile",
    "SecurityContext",
    "Serialize",
    "Spoke",
    "StandIn",
    "StandInOptions",
    "Stdio",
    "Store",
    "StreamExt",
    "TcpListener",
    "TcpStream",
    "Time",
    "Timestamp",
    "WatchStreamExt",
    "Write",
    "Box",
    "Clone",
    "Copy",
    "Default",
    "Drop",
    "Eq",
    "Fn",
    "From",
    "Into",
    "Iterator",
    "Ok",
    "Option",
    "PartialEq",
    "Result",
    "Self",
    "Send",
    "Sized",
    "Some",
    "String",
    "Sync",
    "ToString",
    "Vec",
    "None",
    "Err",
];

/// Rust keywords: a kind's snake_case name is a module name.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while", "abstract", "become", "box", "do", "final", "gen", "macro", "override",
    "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// `--version`: a Kubernetes API version, `v1`, `v1alpha1`, `v2beta3` (no leading zeros).
pub fn validate_version(version: &str) -> Result<(), ScaffoldError> {
    fn number(s: &str) -> Option<&str> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (n, rest) = s.split_at(end);
        (!n.is_empty() && !n.starts_with('0')).then_some(rest)
    }
    let ok = version
        .strip_prefix('v')
        .and_then(number)
        .is_some_and(|rest| {
            rest.is_empty()
                || rest
                    .strip_prefix("alpha")
                    .or_else(|| rest.strip_prefix("beta"))
                    .and_then(number)
                    .is_some_and(str::is_empty)
        });
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "--version",
            version,
            "must be a Kubernetes API version: v<N>, v<N>alpha<M> or v<N>beta<M> without leading zeros, e.g. v1, v1alpha1, v2beta3",
        ))
    }
}

/// `--group` or `--domain`: a DNS-1123 subdomain.
pub fn validate_subdomain(flag: &'static str, value: &str) -> Result<(), ScaffoldError> {
    if value.is_empty() {
        return Err(invalid(flag, value, "is required"));
    }
    match k8s_name::dns1123_subdomain_errors(value).first() {
        Some(e) => Err(invalid(flag, value, e.clone())),
        None => Ok(()),
    }
}

/// Package names a project must not take: they would shadow a dependency of the generated
/// code, or are reserved by Rust.
const RESERVED: &[&str] = &[
    "core",
    "std",
    "alloc",
    "test",
    "proc-macro",
    "self",
    "super",
    "crate",
    "kube",
    "kube-standin",
    "k8s-openapi",
    "schemars",
    "serde",
    "serde-json",
    "thiserror",
    "tokio",
    "olmkit-runtime",
];

/// The project name (`--project-name`, default the directory's name): a DNS-1123 label that
/// starts with a letter (a Rust package name), e.g. `whalesay-operator`.
pub fn validate_project_name(name: &str) -> Result<(), ScaffoldError> {
    let flag = "--project-name";
    if name.is_empty() {
        return Err(invalid(flag, name, "is required"));
    }
    if let Some(e) = k8s_name::dns1123_label_errors(name).first() {
        return Err(invalid(flag, name, e.clone()));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(invalid(
            flag,
            name,
            "must start with a letter: it is also the name of the Rust package",
        ));
    }
    for taken in [name, api_package(name).as_str()] {
        if RESERVED.contains(&taken) {
            return Err(invalid(
                flag,
                name,
                format!(
                    "the Rust package {taken:?} would shadow a crate of that name; pick another name"
                ),
            ));
        }
    }
    Ok(())
}

/// The API crate of a project: `whalesay-operator` → `whalesay-api`.
pub fn api_package(project: &str) -> String {
    let base = project.strip_suffix("-operator").unwrap_or(project);
    format!("{base}-api")
}

/// A package name as a Rust crate name (`-` → `_`).
pub fn crate_name(package: &str) -> String {
    package.replace('-', "_")
}

/// `--plural`, or kubebuilder's (flect's) plural of the lower-cased kind: `busybox` →
/// `busyboxes`, `policy` → `policies`, `memcached` → `memcacheds`.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    let consonant_y = lower.len() > 1
        && lower.ends_with('y')
        && !matches!(
            lower.as_bytes()[lower.len() - 2],
            b'a' | b'e' | b'i' | b'o' | b'u'
        );
    if consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// `--plural`: a DNS-1035 label (it is the resource's URL segment and the CRD's name prefix).
pub fn validate_plural(plural: &str) -> Result<(), ScaffoldError> {
    match k8s_name::dns1035_label_errors(plural).first() {
        Some(e) => Err(invalid("--plural", plural, e.clone())),
        None => Ok(()),
    }
}

/// `--short-names`: DNS-1035 labels.
pub fn validate_short_name(name: &str) -> Result<(), ScaffoldError> {
    match k8s_name::dns1035_label_errors(name).first() {
        Some(e) => Err(invalid("--short-names", name, e.clone())),
        None => Ok(()),
    }
}

/// PascalCase to snake_case: `MemcachedCluster` → `memcached_cluster` (the kind's Rust module).
pub fn snake(kind: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = kind.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower = i > 0 && !chars[i - 1].is_ascii_uppercase();
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            if i > 0 && (prev_lower || next_lower) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(*c);
        }
    }
    out
}

/// The group of a resource, qualified with the domain: `demo` + `example.com` →
/// `demo.example.com` (kubebuilder's `QualifiedGroup`).
pub fn qualified_group(group: &str, domain: &str) -> String {
    match (group.is_empty(), domain.is_empty()) {
        (true, _) => domain.to_string(),
        (_, true) => group.to_string(),
        _ => format!("{group}.{domain}"),
    }
}

/// A display name from a project or kind name: `whalesay-operator` → `Whalesay Operator`.
pub fn title(name: &str) -> String {
    name.split(['-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--image`: a container image reference.
pub fn validate_image(image: &str) -> Result<(), ScaffoldError> {
    olmkit_core::image_ref::ImageRef::parse(image)
        .map(|_| ())
        .map_err(|e| invalid("--image", image, e.to_string()))
}

/// `--image-container-command`: comma-separated, no empty element (kubebuilder splits on `,`).
pub fn parse_command(command: &str) -> Result<Vec<String>, ScaffoldError> {
    let parts: Vec<String> = command.split(',').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(invalid(
            "--image-container-command",
            command,
            "has an empty element; separate the command and its arguments with single commas, e.g. memcached,-m=64,-o,modern",
        ));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag_of(e: ScaffoldError) -> &'static str {
        match e {
            ScaffoldError::InvalidFlag { flag, .. } => flag,
            other => panic!("not a flag error: {other}"),
        }
    }

    #[test]
    fn kinds_are_pascal_case() {
        for ok in ["Whalesay", "MemcachedCluster", "A", "V1Thing"] {
            assert!(validate_kind(ok).is_ok(), "{ok}");
        }
        for bad in [
            "whalesay",
            "",
            "Whale_say",
            "Whale-say",
            "Wh√",
            &"A".repeat(64),
            "Deployment",
            "Pod",
            "Type",
            "Error",
        ] {
            let e = validate_kind(bad).expect_err(bad);
            assert!(e.to_string().starts_with("--kind "), "{e}");
            assert_eq!(flag_of(e), "--kind");
        }
    }

    #[test]
    fn versions_are_kubernetes_versions() {
        for ok in ["v1", "v1alpha1", "v2beta3", "v10", "v1beta10"] {
            assert!(validate_version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1", "v", "v0", "v01", "v1alpha", "v1gamma1", "v1alpha0", "V1", "v1.0", "v1beta01", "",
        ] {
            let e = validate_version(bad).expect_err(bad);
            assert_eq!(flag_of(e), "--version", "{bad}");
        }
    }

    #[test]
    fn groups_and_domains_are_subdomains() {
        assert!(validate_subdomain("--group", "demo").is_ok());
        assert!(validate_subdomain("--domain", "example.com").is_ok());
        let e = validate_subdomain("--domain", "Example.com").unwrap_err();
        assert!(e.to_string().contains("--domain"), "{e}");
        assert!(e.to_string().contains("RFC 1123 subdomain"), "{e}");
        assert_eq!(
            flag_of(validate_subdomain("--group", "").unwrap_err()),
            "--group"
        );
    }

    #[test]
    fn project_names_are_labels_and_package_names() {
        assert!(validate_project_name("whalesay-operator").is_ok());
        for bad in [
            "Whalesay",
            "1st-operator",
            "a_b",
            "kube",
            "serde-operator-x.y",
            "",
        ] {
            assert_eq!(
                flag_of(validate_project_name(bad).unwrap_err()),
                "--project-name"
            );
        }
        // `serde-operator` would make an API crate `serde-api`: fine; `serde` itself is not.
        assert!(validate_project_name("serde-operator").is_ok());
        assert!(validate_project_name("tokio").is_err());
    }

    #[test]
    fn derived_names() {
        assert_eq!(api_package("whalesay-operator"), "whalesay-api");
        assert_eq!(api_package("widgets"), "widgets-api");
        assert_eq!(crate_name("whalesay-api"), "whalesay_api");
        assert_eq!(plural("Busybox"), "busyboxes");
        assert_eq!(plural("Memcached"), "memcacheds");
        assert_eq!(plural("Policy"), "policies");
        assert_eq!(plural("Gateway"), "gateways");
        assert_eq!(plural("Whalesay"), "whalesays");
        assert_eq!(plural("Match"), "matches");
        assert_eq!(snake("MemcachedCluster"), "memcached_cluster");
        assert_eq!(snake("Whalesay"), "whalesay");
        assert_eq!(snake("HTTPRoute"), "http_route");
        assert_eq!(qualified_group("demo", "example.com"), "demo.example.com");
        assert_eq!(title("whalesay-operator"), "Whalesay Operator");
    }

    #[test]
    fn commands_split_on_commas() {
        assert_eq!(
            parse_command("sleep,infinity").unwrap(),
            ["sleep", "infinity"]
        );
        assert_eq!(
            flag_of(parse_command("a,,b").unwrap_err()),
            "--image-container-command"
        );
    }

    #[test]
    fn images_are_references() {
        assert!(validate_image("docker.io/library/busybox:1.36").is_ok());
        assert_eq!(
            flag_of(validate_image("docker.io/library/BusyBox").unwrap_err()),
            "--image"
        );
    }
}
