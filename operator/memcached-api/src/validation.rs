//! Semantic checks of a v1 spec that the operator runs before acting on it.
//!
//! The CRD schema already bounds each field on a real API server; these checks repeat the bounds
//! (objects can come from a server without schema validation, or predate a tightened schema) and
//! add cross-field rules a schema cannot express. Every problem is reported, not only the first.

use crate::image_ref::ImageRef;
use crate::v1::MemcachedSpec;

/// One problem with a spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecProblem {
    /// JSON path of the offending field, e.g. `spec.memcached.memoryLimitMiB`.
    pub field: String,
    /// CamelCase reason, used as the Degraded condition and event reason.
    pub reason: &'static str,
    /// Human-readable explanation.
    pub message: String,
}

/// Fixed memory the memcached process needs beyond its item memory (connection buffers, hash
/// table, thread stacks), in MiB.
pub const PROCESS_OVERHEAD_MIB: i64 = 32;
/// Per-connection buffer memory, in KiB.
pub const PER_CONNECTION_KIB: i64 = 8;

/// Container memory limit in MiB derived from the memcached settings.
pub fn derived_memory_limit_mib(spec: &MemcachedSpec) -> i64 {
    let conn_mib = (spec.memcached.max_connections as i64 * PER_CONNECTION_KIB + 1023) / 1024;
    spec.memcached.memory_limit_mib as i64 + PROCESS_OVERHEAD_MIB + conn_mib
}

/// Parses a Kubernetes memory quantity into bytes. Returns `None` for malformed quantities.
pub fn parse_memory_quantity(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let mult: i128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "m" => {
            return num
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(|v| (v / 1000.0) as i128);
        }
        _ => {
            // Exponent form such as 1e9.
            return q
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(|v| v as i128);
        }
    };
    if let Ok(i) = num.parse::<i128>() {
        return i.checked_mul(mult);
    }
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| (v * mult as f64) as i128)
}

/// A Kubernetes quantity in thousandths of its unit, computed exactly (no floats): `1500m` →
/// 1500, `2Ki` → 2_048_000, `1.5Gi` → 1_610_612_736_000. `None` when `q` is not a quantity in
/// the suffix forms (decimal SI, binary SI, milli) the operator accepts.
pub fn parse_quantity_millis(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let mul: i128 = match suffix {
        "" => 1000,
        "m" => 1,
        "k" => 1_000_000,
        "M" => 1_000_000_000,
        "G" => 1_000_000_000_000,
        "T" => 1_000_000_000_000_000,
        "P" => 1_000_000_000_000_000_000,
        "Ki" => 1000 << 10,
        "Mi" => 1000 << 20,
        "Gi" => 1000 << 30,
        "Ti" => 1000 << 40,
        "Pi" => 1000 << 50,
        _ => return None,
    };
    let (negative, digits) = match num.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.bytes().all(|c| c.is_ascii_digit())
        || !frac_part.bytes().all(|c| c.is_ascii_digit())
        || frac_part.len() > 18
        || int_part.len() > 20
    {
        return None;
    }
    let int: i128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    let frac: i128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().ok()?
    };
    let scale = 10i128.pow(frac_part.len() as u32);
    let value = int
        .checked_mul(scale)?
        .checked_add(frac)?
        .checked_mul(mul)?
        / scale;
    Some(if negative { -value } else { value })
}

/// Problems with the name of a Memcached. The name becomes the name of its Service (a DNS-1035
/// label: lowercase letters, digits and `-`, starting with a letter, at most 63 characters) and
/// the value of the `app.kubernetes.io/instance` label (at most 63 characters), which a
/// Memcached name (a DNS subdomain of up to 253 characters) does not guarantee.
pub fn validate_name(name: &str) -> Vec<SpecProblem> {
    // A DNS-1035 label is also a valid label value (shorter, fewer characters).
    if olmkit_core::k8s_name::is_dns1035_label(name) {
        Vec::new()
    } else {
        vec![SpecProblem {
            field: "metadata.name".to_string(),
            reason: "InvalidName",
            message: format!(
                "name {name:?} cannot name a Service: use at most 63 lowercase letters, digits and '-', starting with a letter and not ending with '-'"
            ),
        }]
    }
}

fn resource_problems(spec: &MemcachedSpec, push: &mut impl FnMut(&str, &'static str, String)) {
    let Some(res) = spec.resources.as_ref() else {
        return;
    };
    let mut parsed = |kind: &str,
                      map: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        let mut out = std::collections::BTreeMap::new();
        for (name, q) in map.iter().flatten() {
            // The memory limit has its own, more specific checks.
            if kind == "limits" && name == "memory" {
                if let Some(v) = parse_quantity_millis(&q.0) {
                    out.insert(name.clone(), v);
                }
                continue;
            }
            match parse_quantity_millis(&q.0) {
                Some(v) if v >= 0 => {
                    out.insert(name.clone(), v);
                }
                _ => push(
                    &format!("spec.resources.{kind}.{name}"),
                    "InvalidResources",
                    format!("{:?} is not a valid non-negative quantity", q.0),
                ),
            }
        }
        out
    };
    let limits = parsed("limits", &res.limits);
    let requests = parsed("requests", &res.requests);
    let derived_memory = derived_memory_limit_mib(spec) as i128 * 1000 * (1 << 20);
    for (name, request) in &requests {
        let limit = match limits.get(name) {
            Some(l) => Some(*l),
            // Without a user limit the operator derives the memory limit.
            None if name == "memory" => Some(derived_memory),
            None => None,
        };
        if let Some(limit) = limit
            && *request > limit
        {
            push(
                &format!("spec.resources.requests.{name}"),
                "InvalidResources",
                format!(
                    "request {:?} is above the {} limit",
                    res.requests
                        .as_ref()
                        .and_then(|r| r.get(name))
                        .map(|q| q.0.as_str())
                        .unwrap_or_default(),
                    if limits.contains_key(name) {
                        "container"
                    } else {
                        "derived"
                    }
                ),
            );
        }
    }
}

/// The memcached settings: item memory, connections and threads within memcached's bounds.
fn memcached_problems(spec: &MemcachedSpec, push: &mut impl FnMut(&str, &'static str, String)) {
    let m = &spec.memcached;
    if m.memory_limit_mib < crate::MIN_MEMORY_LIMIT_MIB
        || m.memory_limit_mib > crate::MAX_MEMORY_LIMIT_MIB
    {
        push(
            "spec.memcached.memoryLimitMiB",
            "MemoryTooSmall",
            format!(
                "memcached needs at least {} MiB of item memory (at most {}), got {}",
                crate::MIN_MEMORY_LIMIT_MIB,
                crate::MAX_MEMORY_LIMIT_MIB,
                m.memory_limit_mib
            ),
        );
    }
    if !(1..=65536).contains(&m.max_connections) {
        push(
            "spec.memcached.maxConnections",
            "InvalidMaxConnections",
            format!(
                "maxConnections must be between 1 and 65536, got {}",
                m.max_connections
            ),
        );
    }
    if !(1..=64).contains(&m.threads) {
        push(
            "spec.memcached.threads",
            "InvalidThreads",
            format!("threads must be between 1 and 64, got {}", m.threads),
        );
    }
}

/// Extra arguments must not set a flag the operator manages (it would fight the spec).
fn extra_args_problems(spec: &MemcachedSpec, push: &mut impl FnMut(&str, &'static str, String)) {
    let m = &spec.memcached;
    const MANAGED: [&str; 12] = [
        "-p",
        "-m",
        "-c",
        "-t",
        "-U",
        "-l",
        "--port",
        "--memory-limit",
        "--conn-limit",
        "--threads",
        "--listen",
        "--udp-port",
    ];
    for (i, a) in m.extra_args.iter().enumerate() {
        let managed = MANAGED.iter().any(|f| {
            a == f
                || (f.starts_with("--") && a.starts_with(&format!("{f}=")))
                || (f.len() == 2
                    && !f.starts_with("--")
                    && a.starts_with(f)
                    && a.len() > 2
                    && !a.starts_with("--"))
        });
        if managed {
            push(
                &format!("spec.memcached.extraArgs[{i}]"),
                "ManagedFlagOverride",
                format!("extra argument {a:?} sets a flag the operator manages"),
            );
        }
    }
}

/// A memory limit must be a quantity and leave memcached the memory its spec needs.
fn memory_limit_problems(spec: &MemcachedSpec, push: &mut impl FnMut(&str, &'static str, String)) {
    let m = &spec.memcached;
    if let Some(limit) = spec
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
    {
        match parse_memory_quantity(&limit.0) {
            None => push(
                "spec.resources.limits.memory",
                "InvalidResources",
                format!("memory limit {:?} is not a valid quantity", limit.0),
            ),
            Some(bytes) => {
                let need = derived_memory_limit_mib(spec) as i128 * (1 << 20);
                if bytes < need {
                    push(
                        "spec.resources.limits.memory",
                        "MemoryTooSmall",
                        format!(
                            "memory limit {} is below the {} MiB memcached needs for {} MiB of items and {} connections",
                            limit.0,
                            derived_memory_limit_mib(spec),
                            m.memory_limit_mib,
                            m.max_connections
                        ),
                    );
                }
            }
        }
    }
}

/// Every problem with `spec`; empty when the operator can act on it.
pub fn validate_spec(spec: &MemcachedSpec) -> Vec<SpecProblem> {
    let mut problems = Vec::new();
    let mut push = |field: &str, reason: &'static str, message: String| {
        problems.push(SpecProblem {
            field: field.to_string(),
            reason,
            message,
        })
    };
    if spec.replicas < 0 || spec.replicas > crate::MAX_REPLICAS {
        push(
            "spec.replicas",
            "InvalidReplicas",
            format!(
                "replicas must be between 0 and {}, got {}",
                crate::MAX_REPLICAS,
                spec.replicas
            ),
        );
    }
    if let Err(e) = ImageRef::parse(&spec.image) {
        push(
            "spec.image",
            "InvalidImage",
            format!("cannot use image: {e}"),
        );
    }
    if !(1..=65535).contains(&spec.port) {
        push(
            "spec.port",
            "InvalidPort",
            format!("port must be between 1 and 65535, got {}", spec.port),
        );
    }
    memcached_problems(spec, &mut push);
    extra_args_problems(spec, &mut push);
    memory_limit_problems(spec, &mut push);
    resource_problems(spec, &mut push);
    problems
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::field_reassign_with_default)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn default_spec_is_valid() {
        assert!(validate_spec(&MemcachedSpec::default()).is_empty());
    }

    #[test]
    fn reports_every_problem() {
        let mut s = MemcachedSpec {
            replicas: -1,
            image: "Bad Image".into(),
            ..Default::default()
        };
        s.memcached.memory_limit_mib = 4;
        s.memcached.extra_args = vec!["-m".into(), "-vv".into(), "--port=1".into()];
        let reasons: Vec<_> = validate_spec(&s).iter().map(|p| p.reason).collect();
        assert_eq!(
            reasons,
            [
                "InvalidReplicas",
                "InvalidImage",
                "MemoryTooSmall",
                "ManagedFlagOverride",
                "ManagedFlagOverride"
            ]
        );
    }

    #[test]
    fn memory_limit_must_cover_items() {
        let mut s = MemcachedSpec::default();
        s.resources = Some(ResourceRequirements {
            limits: Some([("memory".to_string(), Quantity("64Mi".into()))].into()),
            ..Default::default()
        });
        assert_eq!(validate_spec(&s)[0].reason, "MemoryTooSmall");
        s.resources
            .as_mut()
            .unwrap()
            .limits
            .as_mut()
            .unwrap()
            .insert("memory".into(), Quantity("1Gi".into()));
        assert!(validate_spec(&s).is_empty());
    }

    #[test]
    fn names_must_fit_a_service() {
        assert!(validate_name("web-cache").is_empty());
        assert!(validate_name("a").is_empty());
        for bad in [
            "",
            "1cache",
            "Cache",
            "web.cache",
            "cache-",
            &"a".repeat(64),
        ] {
            let p = validate_name(bad);
            assert_eq!(p.len(), 1, "{bad:?}");
            assert_eq!(p[0].reason, "InvalidName");
            assert_eq!(p[0].field, "metadata.name");
        }
    }

    #[test]
    fn resource_quantities_and_request_bounds() {
        let mut s = MemcachedSpec::default();
        s.resources = Some(ResourceRequirements {
            limits: Some(
                [
                    ("cpu".to_string(), Quantity("500m".into())),
                    ("memory".to_string(), Quantity("1Gi".into())),
                ]
                .into(),
            ),
            requests: Some(
                [
                    ("cpu".to_string(), Quantity("1".into())),
                    ("memory".to_string(), Quantity("2Gi".into())),
                    ("ephemeral-storage".to_string(), Quantity("lots".into())),
                ]
                .into(),
            ),
            claims: None,
        });
        let fields: Vec<_> = validate_spec(&s)
            .into_iter()
            .map(|p| (p.field, p.reason))
            .collect();
        assert_eq!(
            fields,
            [
                (
                    "spec.resources.requests.ephemeral-storage".to_string(),
                    "InvalidResources"
                ),
                (
                    "spec.resources.requests.cpu".to_string(),
                    "InvalidResources"
                ),
                (
                    "spec.resources.requests.memory".to_string(),
                    "InvalidResources"
                ),
            ]
        );
        // A memory request above the derived limit (104Mi for the defaults) is refused too.
        s.resources = Some(ResourceRequirements {
            requests: Some([("memory".to_string(), Quantity("200Mi".into()))].into()),
            ..Default::default()
        });
        assert_eq!(validate_spec(&s)[0].field, "spec.resources.requests.memory");
    }

    #[test]
    fn exact_quantities() {
        assert_eq!(parse_quantity_millis("1"), Some(1000));
        assert_eq!(parse_quantity_millis("250m"), Some(250));
        assert_eq!(parse_quantity_millis("1.5Gi"), Some(1500 << 30));
        assert_eq!(parse_quantity_millis("2k"), Some(2_000_000));
        assert_eq!(parse_quantity_millis("-1"), Some(-1000));
        assert_eq!(parse_quantity_millis(".5"), Some(500));
        assert_eq!(parse_quantity_millis("Mi"), None);
        assert_eq!(parse_quantity_millis("1Xi"), None);
        assert_eq!(parse_quantity_millis("1.2.3"), None);
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_memory_quantity("128Mi"), Some(128 << 20));
        assert_eq!(parse_memory_quantity("1G"), Some(1_000_000_000));
        assert_eq!(parse_memory_quantity("1.5Gi"), Some(3 << 29));
        assert_eq!(parse_memory_quantity("abc"), None);
    }
}
