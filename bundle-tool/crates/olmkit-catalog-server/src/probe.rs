//! The `grpc_health_probe` personality of the catalog server.
//!
//! OLM's catalog pods check their server with exec probes running
//! `grpc_health_probe -addr=:50051`. Catalog images built by bundle-tool link
//! `/bin/grpc_health_probe` to the server binary, which behaves like that tool when invoked
//! under its name: it asks `grpc.health.v1.Health/Check` and exits with grpc_health_probe's
//! codes, so the image needs no second binary. This module owns the flag parsing (Go's `flag`
//! syntax: `-addr=X`, `--addr X`...) and the check; TLS flags are refused, since the catalog
//! server does not serve TLS.

use std::time::Duration;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

/// Exit code: the service is SERVING.
pub const EXIT_SERVING: u8 = 0;
/// Exit code: bad flags.
pub const EXIT_FLAGS: u8 = 1;
/// Exit code: the connection failed or timed out.
pub const EXIT_CONNECTION: u8 = 2;
/// Exit code: the RPC failed or timed out.
pub const EXIT_RPC: u8 = 3;
/// Exit code: the service answered, but not SERVING.
pub const EXIT_UNHEALTHY: u8 = 4;

/// What to check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeArgs {
    /// `host:port`; a bare `:port` means localhost.
    pub addr: String,
    /// Service name (empty: the server as a whole).
    pub service: String,
    /// Time allowed to connect.
    pub connect_timeout: Duration,
    /// Time allowed for the RPC.
    pub rpc_timeout: Duration,
    /// Print nothing on success.
    pub quiet: bool,
}

/// Bad probe flags, with the message grpc_health_probe users expect.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ProbeFlagsError(String);

fn parse_go_duration(flag: &str, v: &str) -> Result<Duration, ProbeFlagsError> {
    // grpc_health_probe's flags are Go `flag.Duration`s: Go's duration grammar (`1h30m`,
    // `500ms`), with the flag package's wording on error.
    let d = match olmkit_core::duration::parse_duration(v) {
        Ok(d) => Some(d),
        // valid for Go, then refused by the probe's own check below
        Err(olmkit_core::duration::ParseDurationError::Negative(_)) => None,
        Err(_) => {
            return Err(ProbeFlagsError(format!(
                "invalid value {v:?} for flag -{flag}: parse error"
            )));
        }
    };
    let Some(d) = d.filter(|d| !d.is_zero()) else {
        return Err(ProbeFlagsError(format!(
            "-{flag} must be greater than zero"
        )));
    };
    Ok(d)
}

/// Parses grpc_health_probe's command line (without the program name).
pub fn parse_probe_args(args: &[String]) -> Result<ProbeArgs, ProbeFlagsError> {
    let mut out = ProbeArgs {
        addr: String::new(),
        service: String::new(),
        connect_timeout: Duration::from_secs(1),
        rpc_timeout: Duration::from_secs(1),
        quiet: false,
    };
    let mut i = 0;
    while i < args.len() {
        let raw = &args[i];
        let Some(flag) = raw.strip_prefix("--").or_else(|| raw.strip_prefix('-')) else {
            return Err(ProbeFlagsError(format!("unexpected argument {raw:?}")));
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        let value = |i: &mut usize| -> Result<String, ProbeFlagsError> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            *i += 1;
            args.get(*i)
                .cloned()
                .ok_or_else(|| ProbeFlagsError(format!("flag needs an argument: -{name}")))
        };
        match name {
            "addr" => out.addr = value(&mut i)?,
            "service" => out.service = value(&mut i)?,
            "connect-timeout" => out.connect_timeout = parse_go_duration(name, &value(&mut i)?)?,
            "rpc-timeout" => out.rpc_timeout = parse_go_duration(name, &value(&mut i)?)?,
            "v" => {}
            "quiet" => out.quiet = inline.as_deref() != Some("false"),
            // Headers and user agents change nothing for our server; accept them.
            "user-agent" | "rpc-header" => {
                value(&mut i)?;
            }
            "tls" | "tls-ca-cert" | "tls-client-cert" | "tls-client-key" | "tls-no-verify"
            | "tls-server-name" | "spiffe" | "alts" | "gzip" => {
                return Err(ProbeFlagsError(format!(
                    "-{name} is not supported: the catalog server speaks plain gRPC"
                )));
            }
            other => {
                return Err(ProbeFlagsError(format!(
                    "flag provided but not defined: -{other}"
                )));
            }
        }
        i += 1;
    }
    if out.addr.is_empty() {
        return Err(ProbeFlagsError("-addr not specified".into()));
    }
    Ok(out)
}

/// Runs the check and returns (exit code, message for stdout or stderr).
pub async fn probe(args: &ProbeArgs) -> (u8, String) {
    let host = if args.addr.starts_with(':') {
        format!("127.0.0.1{}", args.addr)
    } else {
        args.addr.clone()
    };
    let endpoint = match tonic::transport::Endpoint::from_shared(format!("http://{host}")) {
        Ok(e) => e.connect_timeout(args.connect_timeout),
        Err(e) => return (EXIT_FLAGS, format!("invalid -addr {:?}: {e}", args.addr)),
    };
    let channel = match tokio::time::timeout(args.connect_timeout, endpoint.connect()).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return (
                EXIT_CONNECTION,
                format!("error: failed to connect service at {:?}: {e}", args.addr),
            );
        }
        Err(_) => {
            return (
                EXIT_CONNECTION,
                format!(
                    "timeout: failed to connect service {:?} within {:?}",
                    args.addr, args.connect_timeout
                ),
            );
        }
    };
    let mut client = HealthClient::new(channel);
    let req = HealthCheckRequest {
        service: args.service.clone(),
    };
    match tokio::time::timeout(args.rpc_timeout, client.check(req)).await {
        Err(_) => (
            EXIT_RPC,
            format!(
                "timeout: health rpc did not complete within {:?}",
                args.rpc_timeout
            ),
        ),
        Ok(Err(status)) => (
            EXIT_RPC,
            format!(
                "error: health rpc failed: {:?}: {}",
                status.code(),
                status.message()
            ),
        ),
        Ok(Ok(resp)) => {
            let status = resp.into_inner().status;
            if status == ServingStatus::Serving as i32 {
                (EXIT_SERVING, "status: SERVING".into())
            } else {
                let name = ServingStatus::try_from(status)
                    .map(|s| s.as_str_name().to_string())
                    .unwrap_or_else(|_| status.to_string());
                (
                    EXIT_UNHEALTHY,
                    format!("service unhealthy (responded with {name:?})"),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_as_olm_passes_them() {
        let p = parse_probe_args(&args(&["-addr=:50051"])).unwrap();
        assert_eq!(p.addr, ":50051");
        assert_eq!(p.connect_timeout, Duration::from_secs(1));
        let p = parse_probe_args(&args(&[
            "--addr",
            "localhost:1",
            "-service=api.Registry",
            "-connect-timeout=250ms",
            "-rpc-timeout",
            "2s",
            "-quiet",
        ]))
        .unwrap();
        assert_eq!(p.addr, "localhost:1");
        assert_eq!(p.service, "api.Registry");
        assert_eq!(p.connect_timeout, Duration::from_millis(250));
        assert_eq!(p.rpc_timeout, Duration::from_secs(2));
        assert!(p.quiet);
    }

    #[test]
    fn bad_flags() {
        assert!(parse_probe_args(&args(&[])).is_err());
        assert!(parse_probe_args(&args(&["-addr"])).is_err());
        assert!(parse_probe_args(&args(&["-addr=:1", "-tls"])).is_err());
        assert!(parse_probe_args(&args(&["-addr=:1", "-bogus=1"])).is_err());
        assert!(parse_probe_args(&args(&["-addr=:1", "-rpc-timeout=0s"])).is_err());
        assert!(parse_probe_args(&args(&["-addr=:1", "-rpc-timeout=fast"])).is_err());
        assert!(parse_probe_args(&args(&["stray"])).is_err());
        let e = parse_probe_args(&args(&["-addr=:1", "-rpc-timeout=-5s"])).unwrap_err();
        assert!(e.to_string().contains("greater than zero"), "{e}");
    }

    #[test]
    fn durations_are_go_durations() {
        let p = parse_probe_args(&args(&[
            "-addr=:1",
            "-connect-timeout=1h30m",
            "-rpc-timeout=1.5s",
        ]))
        .unwrap();
        assert_eq!(p.connect_timeout, Duration::from_secs(5400));
        assert_eq!(p.rpc_timeout, Duration::from_millis(1500));
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connection_failure() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let p = parse_probe_args(&args(&[&format!("-addr=127.0.0.1:{port}")])).unwrap();
        assert_eq!(probe(&p).await.0, EXIT_CONNECTION);
    }
}
