//! The optional suites: `operatorhub` and `good-practices` (operator-framework/api
//! `OperatorHubValidator` in `operatorhub.go`, with `checkCategories`/`checkCapabilities` and
//! the removed-APIs check of `removed_apis.go`, and `GoodPracticesValidator`), with the same
//! severities: errors for what OperatorHub.io refuses, warnings for conventions.

use super::Ctx;
use super::rules::{GOOD_PRACTICES, OPERATORHUB};
use olmkit_core::csv::str_at;
use serde_json::Value;

const CAPABILITIES: &[&str] = &[
    "Basic Install",
    "Seamless Upgrades",
    "Full Lifecycle",
    "Deep Insights",
    "Auto Pilot",
];
const MEDIATYPES: &[&str] = &["image/gif", "image/jpeg", "image/png", "image/svg+xml"];
/// operator-framework/api `validCategories` (standardcategories.go), used unless custom
/// categories are given (`OPERATOR_BUNDLE_CATEGORIES`).
pub const CATEGORIES: &[&str] = &[
    "AI/Machine Learning",
    "Application Runtime",
    "Big Data",
    "Cloud Provider",
    "Developer Tools",
    "Database",
    "Integration & Delivery",
    "Logging & Tracing",
    "Monitoring",
    "Modernization & Migration",
    "Networking",
    "Observability",
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

/// Go's `url.ParseRequestURI` as operator-framework/api `checkSpecLinks` uses it: an absolute
/// path, or `scheme:` followed by an opaque part or `//authority/path`. Spaces are fine in
/// the path and query; control characters, an invalid host or a bad `%` escape are not.
fn valid_url(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    let (rest, _query) = s.split_once('?').unwrap_or((s, ""));
    let scheme_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)));
    let rest = match scheme_end {
        Some(i) if rest[i..].starts_with(':') => {
            if i == 0 || !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
                return false;
            }
            let after = &rest[i + 1..];
            if !after.starts_with('/') {
                // An opaque URL such as mailto:x (or an empty one) is accepted.
                return true;
            }
            after
        }
        _ => {
            if !rest.starts_with('/') {
                return false;
            }
            rest
        }
    };
    let path = match rest.strip_prefix("//") {
        Some(auth_and_path) => {
            let (authority, path) = match auth_and_path.find('/') {
                Some(i) => auth_and_path.split_at(i),
                None => (auth_and_path, ""),
            };
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            let host_ok = host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:[]<>\"%".contains(c));
            if !host_ok || !escapes_ok(host) {
                return false;
            }
            path
        }
        None => rest,
    };
    escapes_ok(path)
}

/// Every `%` is followed by two hex digits.
fn escapes_ok(s: &str) -> bool {
    let b = s.as_bytes();
    (0..b.len()).all(|i| {
        b[i] != b'%'
            || (i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit())
    })
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

/// operator-framework/api `checkCategories`: each comma-separated category (trimmed) must be
/// a standard one, or one of the custom categories when they are given.
fn categories(ctx: &mut Ctx, file: &str) {
    let Some(cats) = ctx.csv_view().annotation("categories") else {
        return;
    };
    let custom = ctx.options.categories.as_ref();
    for c in cats.split(',') {
        let known = match custom {
            Some(set) => set.contains(c.trim()),
            None => CATEGORIES.contains(&c.trim()),
        };
        if !known {
            let set = if custom.is_some() {
                "custom"
            } else {
                "standard"
            };
            ctx.at(Some(file), Some("metadata.annotations.categories")).error(&OPERATORHUB, format!("csv.Metadata.Annotations[\"categories\"] value {c:?} is not in the set of {set} categories")).hint(format!(
                    "one of: {}",
                    match custom {
                        Some(set) => set.iter().cloned().collect::<Vec<_>>().join(", "),
                        None => CATEGORIES.join(", "),
                    }
                ));
        }
    }
}

/// OperatorHub.io publishing criteria (operator-framework/api `OperatorHubValidator`).
pub(crate) fn operatorhub(ctx: &mut Ctx) {
    let Some(file) = ctx.csv_file() else { return };
    for check in HUB_CHECKS {
        check(ctx, file);
    }
    super::csv::min_kube_findings(ctx, file, &OPERATORHUB);
    super::removed::check(ctx, file);
    hub_naming(ctx, file);
}

/// The checks of operator-framework/api `validateHubCSVSpec`, in its order.
const HUB_CHECKS: &[fn(&mut Ctx, &str)] = &[
    hub_provider,
    hub_maintainers,
    hub_links,
    hub_capabilities,
    categories,
    hub_version,
    hub_icon,
];

/// `checkSpecProviderName`: the provider has a name.
fn hub_provider(ctx: &mut Ctx, file: &str) {
    let csv = ctx.csv_view();
    let f = Some(file);
    let r = &OPERATORHUB;
    if csv.provider_name().is_none_or(str::is_empty) {
        ctx.at(f, Some("spec.provider.name"))
            .error(r, "csv.Spec.Provider.Name not specified");
    }
}

/// `checkSpecMaintainers`: maintainers have a name and a valid email.
fn hub_maintainers(ctx: &mut Ctx, file: &str) {
    let csv = ctx.csv_view();
    let f = Some(file);
    let r = &OPERATORHUB;
    for (i, m) in csv.maintainers().iter().enumerate() {
        let (name, email) = (
            str_at(m, "/name").unwrap_or(""),
            str_at(m, "/email").unwrap_or(""),
        );
        let path = format!("spec.maintainers[{i}]");
        if name.is_empty() || email.is_empty() {
            ctx.at(f, Some(&path)).error(
                r,
                "csv.Spec.Maintainers elements should contain both name and email",
            );
        }
        if !email.is_empty() && !valid_email(email) {
            ctx.at(f, Some(&format!("{path}.email")))
                .error(r, format!("csv.Spec.Maintainers email {email} is invalid"));
        }
    }
}

/// `checkSpecLinks`: links have a name and a valid URL.
fn hub_links(ctx: &mut Ctx, file: &str) {
    let csv = ctx.csv_view();
    let f = Some(file);
    let r = &OPERATORHUB;
    for (i, l) in csv.links().iter().enumerate() {
        let (name, url) = (
            str_at(l, "/name").unwrap_or(""),
            str_at(l, "/url").unwrap_or(""),
        );
        let path = format!("spec.links[{i}]");
        if name.is_empty() || url.is_empty() {
            ctx.at(f, Some(&path)).error(
                r,
                "csv.Spec.Links elements should contain both name and url",
            );
        }
        if !url.is_empty() && !valid_url(url) {
            ctx.at(f, Some(&format!("{path}.url")))
                .error(r, format!("csv.Spec.Links url {url} is invalid"));
        }
    }
}

/// `checkCapabilities`: the capabilities annotation is a known level.
fn hub_capabilities(ctx: &mut Ctx, file: &str) {
    let f = Some(file);
    let r = &OPERATORHUB;
    if let Some(cap) = ctx.csv_view().annotation("capabilities")
        && !CAPABILITIES.contains(&cap)
    {
        ctx.at(f, Some("metadata.annotations.capabilities")).error(
            r,
            format!(
                "csv.Metadata.Annotations.Capabilities {cap:?} is not a valid capabilities level"
            ),
        );
    }
}

/// `checkSpecVersion`: the version is set (and not 0.0.0).
fn hub_version(ctx: &mut Ctx, file: &str) {
    let f = Some(file);
    let r = &OPERATORHUB;
    let zero_version = match ctx.csv_view().version() {
        None => true,
        Some(v) => semver::Version::parse(v).is_ok_and(|v| v == semver::Version::new(0, 0, 0)),
    };
    if zero_version {
        ctx.at(f, Some("spec.version"))
            .error(r, "csv.Spec.Version must be set");
    }
}

/// `checkSpecIcon`: one icon with data and a known mediatype (none: a warning).
fn hub_icon(ctx: &mut Ctx, file: &str) {
    let csv = ctx.csv_view();
    let f = Some(file);
    let r = &OPERATORHUB;
    match csv.icons() {
        None => {
            ctx.at(f, Some("spec.icon"))
                .warning(r, "csv.Spec.Icon not specified");
        }
        Some(icons) => {
            if icons.len() != 1 {
                ctx.at(f, Some("spec.icon"))
                    .error(r, "csv.Spec.Icon should only have one element");
            }
            if let Some(icon) = icons.first() {
                let mt = str_at(icon, "/mediatype").unwrap_or("");
                if mt.is_empty() || str_at(icon, "/base64data").is_none_or(str::is_empty) {
                    ctx.at(f, Some("spec.icon[0]")).error(
                        r,
                        "csv.Spec.Icon elements should contain both data and mediatype",
                    );
                }
                if !mt.is_empty() && !MEDIATYPES.contains(&mt) {
                    ctx.at(f, Some("spec.icon[0].mediatype")).error(
                        r,
                        format!("csv.Spec.Icon {mt} does not have a valid mediatype"),
                    );
                }
            }
        }
    }
}

/// operator-framework/api `OperatorHubValidator` (`validateBundleOperatorHub`) warnings: the
/// CSV name and the channels follow the naming conventions.
fn hub_naming(ctx: &mut Ctx, file: &str) {
    let f = Some(file);
    let r = &OPERATORHUB;
    let name = ctx.csv_view().name().unwrap_or("");
    let version_suffix_ok = name
        .rsplit_once(".v")
        .is_some_and(|(_, v)| semver::Version::parse(v).is_ok());
    if !version_suffix_ok {
        ctx.at(f, Some("metadata.name")).warning(r, format!("csv.metadata.Name {name} is not following the recommended naming convention: <operator-name>.v<semver> e.g. memcached-operator.v0.0.1"));
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
        ctx.at(ann.as_deref(), Some("annotations")).warning(r, format!("channel(s) {odd:?} are not following the recommended naming convention: https://olm.operatorframework.io/docs/best-practices/channel-naming"));
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
    let csv = ctx.csv_view();
    let f = Some(file);
    let r = &GOOD_PRACTICES;
    let deployments: Vec<_> = csv.deployments().collect();
    if deployments.is_empty() {
        ctx.at(f, Some("spec.install.spec.deployments"))
            .error(r, "unable to find a deployment to install in the CSV");
    }
    for d in &deployments {
        let i = d.index;
        for container in d.spec().pod_spec().containers() {
            let (j, c) = (container.index, container.raw);
            let res = c.get("resources").cloned().unwrap_or(Value::Null);
            if !has_quantity(&res, "cpu") || !has_quantity(&res, "memory") {
                ctx.at(f, Some(&format!("spec.install.spec.deployments[{i}].spec.template.spec.containers[{j}].resources.requests"))).warning(r, format!("unable to find the resource requests for the container: ({}). It is recommended to ensure the resource request for CPU and Memory. Be aware that for some clusters configurations it is required to specify requests or limits for those values. Otherwise, the system or quota may reject Pod creation. More info: https://master.sdk.operatorframework.io/docs/best-practices/managing-resources/", str_at(c, "/name").unwrap_or("")));
            }
        }
    }
    for (rel, list) in [
        ("owned", csv.owned_crds().collect::<Vec<_>>()),
        ("required", csv.required_crds().collect()),
    ] {
        for c in list {
            let i = c.index;
            if c.description().is_none_or(|d| d.trim().is_empty()) {
                ctx.at(
                    f,
                    Some(&format!(
                        "spec.customresourcedefinitions.{rel}[{i}].description"
                    )),
                )
                .warning(
                    r,
                    format!(
                        "{rel} CRD {:?} has an empty description",
                        c.name().unwrap_or("")
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
        ctx.at(ann.as_deref(), Some("annotations")).warning(r, format!("channel(s) {odd:?} are not following the recommended naming convention: https://olm.operatorframework.io/docs/best-practices/channel-naming"));
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
        // Go's url.ParseRequestURI accepts spaces outside the host.
        assert!(valid_url("https://example.com/docs/Getting Started"));
        assert!(!valid_url("https://exa mple.com/"));
        assert!(valid_url("mailto:someone@example.com"));
        assert!(!valid_url("https://example.com/%zz"));
    }
}
