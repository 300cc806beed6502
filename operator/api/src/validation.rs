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
    problems
}

#[cfg(test)]
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
    fn quantities() {
        assert_eq!(parse_memory_quantity("128Mi"), Some(128 << 20));
        assert_eq!(parse_memory_quantity("1G"), Some(1_000_000_000));
        assert_eq!(parse_memory_quantity("1.5Gi"), Some(3 << 29));
        assert_eq!(parse_memory_quantity("abc"), None);
    }
}
