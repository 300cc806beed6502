//! The optional suites: `operatorhub` and `good-practices` (operator-framework/api
//! `OperatorHubValidator` and `GoodPracticesValidator`), with the same severities: errors for
//! what OperatorHub.io refuses, warnings for conventions.

use super::Ctx;
use super::format::parse_tolerant;
use crate::json::{arr_at, str_at};
use serde_json::Value;

const CAPABILITIES: &[&str] = &[
    "Basic Install",
    "Seamless Upgrades",
    "Full Lifecycle",
    "Deep Insights",
    "Auto Pilot",
];
const MEDIATYPES: &[&str] = &["image/gif", "image/jpeg", "image/png", "image/svg+xml"];
const CATEGORIES: &[&str] = &[
    "AI/Machine Learning",
    "Application Runtime",
    "Big Data",
    "Cloud Provider",
    "Developer Tools",
    "Database",
    "Integration & Delivery",
    "Logging & Tracing",
    "Monitoring",
    "Networking",
    "OpenShift Optional",
    "Security",
    "Storage",
    "Streaming & Messaging",
];

fn valid_email(s: &str) -> bool {
    // net/mail ParseAddress accepts `Name <a@b>` too; OperatorHub data uses bare addresses.
    let addr = match (s.find('<'), s.rfind('>')) {
        (Some(a), Some(b)) if a < b => &s[a + 1..b],
        _ => s,
    };
    let Some((local, domain)) = addr.trim().split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !addr.chars().any(char::is_whitespace)
}

fn valid_url(s: &str) -> bool {
    // Go's url.ParseRequestURI: an absolute URI (scheme:...) or an absolute path.
    if s.starts_with('/') {
        return !s.chars().any(char::is_whitespace);
    }
    match s.split_once(':') {
        Some((scheme, rest)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && !rest.is_empty()
                && !s.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn channel_names(ctx: &Ctx) -> Vec<String> {
    let mut v = ctx.bundle.channels();
    if let Some(d) = ctx.bundle.default_channel()
        && !v.iter().any(|c| c == d)
    {
        v.push(d.to_string());
    }
    v
}

/// OperatorHub.io publishing criteria.
pub(crate) fn operatorhub(ctx: &mut Ctx) {
    let Some(file) = ctx.csv_file() else { return };
    let csv = ctx.csv_obj();
    let f = Some(file);
    let r = "operatorhub";
    if str_at(csv, "/spec/provider/name").is_none_or(str::is_empty) {
        ctx.error(
            r,
            f,
            Some("spec.provider.name"),
            "csv.Spec.Provider.Name not specified",
        );
    }
    for (i, m) in arr_at(csv, "/spec/maintainers").iter().enumerate() {
        let (name, email) = (
            str_at(m, "/name").unwrap_or(""),
            str_at(m, "/email").unwrap_or(""),
        );
        let path = format!("spec.maintainers[{i}]");
        if name.is_empty() || email.is_empty() {
            ctx.error(
                r,
                f,
                Some(&path),
                "csv.Spec.Maintainers elements should contain both name and email",
            );
        }
        if !email.is_empty() && !valid_email(email) {
            ctx.error(
                r,
                f,
                Some(&format!("{path}.email")),
                format!("csv.Spec.Maintainers email {email} is invalid"),
            );
        }
    }
    for (i, l) in arr_at(csv, "/spec/links").iter().enumerate() {
        let (name, url) = (
            str_at(l, "/name").unwrap_or(""),
            str_at(l, "/url").unwrap_or(""),
        );
        let path = format!("spec.links[{i}]");
        if name.is_empty() || url.is_empty() {
            ctx.error(
                r,
                f,
                Some(&path),
                "csv.Spec.Links elements should contain both name and url",
            );
        }
        if !url.is_empty() && !valid_url(url) {
            ctx.error(
                r,
                f,
                Some(&format!("{path}.url")),
                format!("csv.Spec.Links url {url} is invalid"),
            );
        }
    }
    if let Some(cap) = str_at(csv, "/metadata/annotations/capabilities")
        && !CAPABILITIES.contains(&cap)
    {
        ctx.error(
            r,
            f,
            Some("metadata.annotations.capabilities"),
            format!(
                "csv.Metadata.Annotations.Capabilities {cap} is not a valid capabilities level"
            ),
        );
    }
    if let Some(cats) = str_at(csv, "/metadata/annotations/categories") {
        for c in cats.split(',') {
            if !CATEGORIES.contains(&c.trim()) {
                ctx.error(r, f, Some("metadata.annotations.categories"), format!("csv.Metadata.Annotations[\"categories\"] value {c} is not in the set of default categories"));
            }
        }
    }
    if str_at(csv, "/spec/version").is_none_or(str::is_empty) {
        ctx.error(r, f, Some("spec.version"), "csv.Spec.Version must be set");
    }
    match csv.pointer("/spec/icon").and_then(Value::as_array) {
        None => {
            ctx.warning(r, f, Some("spec.icon"), "csv.Spec.Icon not specified");
        }
        Some(icons) => {
            if icons.len() != 1 {
                ctx.error(
                    r,
                    f,
                    Some("spec.icon"),
                    "csv.Spec.Icon should only have one element",
                );
            }
            if let Some(icon) = icons.first() {
                let mt = str_at(icon, "/mediatype").unwrap_or("");
                if mt.is_empty() || str_at(icon, "/base64data").is_none_or(str::is_empty) {
                    ctx.error(
                        r,
                        f,
                        Some("spec.icon[0]"),
                        "csv.Spec.Icon elements should contain both data and mediatype",
                    );
                }
                if !mt.is_empty() && !MEDIATYPES.contains(&mt) {
                    ctx.error(
                        r,
                        f,
                        Some("spec.icon[0].mediatype"),
                        format!("csv.Spec.Icon {mt} does not have a valid mediatype"),
                    );
                }
            }
        }
    }
    match str_at(csv, "/spec/minKubeVersion").map(str::trim) {
        None | Some("") => {
            ctx.warning(r, f, Some("spec.minKubeVersion"), "csv.Spec.minKubeVersion is not informed. It is recommended you provide this information. Otherwise, it would mean that your operator project can be distributed and installed in any cluster version available, which is not necessarily the case for all projects.");
        }
        Some(v) if parse_tolerant(v).is_none() => {
            ctx.error(
                r,
                f,
                Some("spec.minKubeVersion"),
                format!("csv.Spec.MinKubeVersion has an invalid value: {v}"),
            );
        }
        _ => {}
    }
    let name = str_at(csv, "/metadata/name").unwrap_or("");
    let version_suffix_ok = name
        .rsplit_once(".v")
        .is_some_and(|(_, v)| semver::Version::parse(v).is_ok());
    if !version_suffix_ok {
        ctx.warning(r, f, Some("metadata.name"), format!("csv.metadata.Name {name} is not following the recommended naming convention: <operator-name>.v<semver> e.g. memcached-operator.v0.0.1"));
    }
    let odd: Vec<String> = channel_names(ctx)
        .into_iter()
        .filter(|c| {
            !["preview", "stable", "fast"]
                .iter()
                .any(|p| c.starts_with(p))
        })
        .collect();
    if !odd.is_empty() {
        let ann = ctx.bundle.annotations_file.clone();
        ctx.warning(r, ann.as_deref(), Some("annotations"), format!("channel(s) {odd:?} are not following the recommended naming convention: https://olm.operatorframework.io/docs/best-practices/channel-naming"));
    }
}

fn has_quantity(resources: &Value, key: &str) -> bool {
    resources
        .pointer(&format!("/requests/{key}"))
        .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()) || v.is_number())
}

/// operator-framework/api good practices.
pub(crate) fn good_practices(ctx: &mut Ctx) {
    let Some(file) = ctx.csv_file() else { return };
    let csv = ctx.csv_obj();
    let f = Some(file);
    let r = "good-practices";
    let deployments = arr_at(csv, "/spec/install/spec/deployments");
    if deployments.is_empty() {
        ctx.error(
            r,
            f,
            Some("spec.install.spec.deployments"),
            "unable to find a deployment to install in the CSV",
        );
    }
    for (i, d) in deployments.iter().enumerate() {
        for (j, c) in arr_at(d, "/spec/template/spec/containers")
            .iter()
            .enumerate()
        {
            let res = c.get("resources").cloned().unwrap_or(Value::Null);
            if !has_quantity(&res, "cpu") || !has_quantity(&res, "memory") {
                ctx.warning(
                    r,
                    f,
                    Some(&format!("spec.install.spec.deployments[{i}].spec.template.spec.containers[{j}].resources.requests")),
                    format!("unable to find the resource requests for the container: ({}). It is recommended to ensure the resource request for CPU and Memory. Be aware that for some clusters configurations it is required to specify requests or limits for those values. Otherwise, the system or quota may reject Pod creation. More info: https://master.sdk.operatorframework.io/docs/best-practices/managing-resources/", str_at(c, "/name").unwrap_or("")),
                );
            }
        }
    }
    for rel in ["owned", "required"] {
        for (i, c) in arr_at(csv, &format!("/spec/customresourcedefinitions/{rel}"))
            .iter()
            .enumerate()
        {
            if str_at(c, "/description").is_none_or(|d| d.trim().is_empty()) {
                ctx.warning(
                    r,
                    f,
                    Some(&format!(
                        "spec.customresourcedefinitions.{rel}[{i}].description"
                    )),
                    format!(
                        "{rel} CRD {:?} has an empty description",
                        str_at(c, "/name").unwrap_or("")
                    ),
                );
            }
        }
    }
    let odd: Vec<String> = channel_names(ctx)
        .into_iter()
        .filter(|c| {
            !["candidate", "stable", "fast"]
                .iter()
                .any(|p| c.starts_with(p))
        })
        .collect();
    if !odd.is_empty() {
        let ann = ctx.bundle.annotations_file.clone();
        ctx.warning(r, ann.as_deref(), Some("annotations"), format!("channel(s) {odd:?} are not following the recommended naming convention: https://olm.operatorframework.io/docs/best-practices/channel-naming"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_and_urls() {
        assert!(valid_email("dcesare@redhat.com"));
        assert!(valid_email("Jane <jane@example.com>"));
        assert!(!valid_email("nobody"));
        assert!(!valid_email("a b@c.d"));
        assert!(valid_url("https://github.com/Kuadrant/authorino"));
        assert!(!valid_url("github.com/x"));
        assert!(!valid_url("not a url"));
    }
}
