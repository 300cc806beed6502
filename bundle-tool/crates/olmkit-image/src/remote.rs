//! Talking to OCI registries: client setup, credentials, retries and error classification.
//!
//! Every registry call goes through [`Session::call`], which retries transient failures
//! (connection refused or reset, timeouts, 5xx, 408, 429) with exponential backoff and never
//! retries answers that will not change (401, 403, 404, other 4xx). Failures become a
//! [`RegistryError`] that says which registry, which action and what to do about it, and that
//! knows whether it is the user's problem (bad address, credentials, name) or not.

use crate::auth::{AuthSources, ResolveAuthError, ResolvedAuth, resolve_auth};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::{Client, Reference, RegistryOperation};
use olmkit_core::image_ref::ImageRef;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// How often and how patiently to retry transient failures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts per operation (1 = no retry).
    pub attempts: u32,
    /// Wait before the second attempt; doubles each time.
    pub initial_backoff: Duration,
    /// Upper bound of one wait.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.initial_backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }
}

/// Something worth telling the user while talking to a registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemoteEvent {
    /// An operation failed transiently and will be retried after `delay`.
    Retrying {
        /// What was being done.
        action: String,
        /// The attempt that failed (1-based).
        attempt: u32,
        /// Wait before the next attempt.
        delay: Duration,
        /// The failure.
        error: String,
    },
    /// A push starts (before its tag is checked and its blobs uploaded).
    PushStarted {
        /// The target, normalized (`registry/repository:tag`).
        reference: String,
        /// How many blobs the image has (config and layers).
        blobs: usize,
    },
    /// A blob upload finished (`existed`: the registry already had it).
    BlobDone {
        /// Its digest.
        digest: String,
        /// Its size.
        size: u64,
        /// True when nothing had to be uploaded.
        existed: bool,
    },
}

/// Callback receiving [`RemoteEvent`]s (progress bars, logs).
pub type EventSink = Arc<dyn Fn(RemoteEvent) + Send + Sync>;

/// Connection options shared by push and inspect.
#[derive(Clone)]
pub struct RemoteOptions {
    /// Use plain HTTP (for local registries without TLS). Never the default.
    pub insecure: bool,
    /// Where credentials come from.
    pub auth: AuthSources,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Timeout of one read from the connection.
    pub read_timeout: Duration,
    /// Receives retry and progress events.
    pub events: Option<EventSink>,
}

impl std::fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("insecure", &self.insecure)
            .field("auth", &self.auth)
            .field("retry", &self.retry)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("events", &self.events.is_some())
            .finish()
    }
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            insecure: false,
            auth: AuthSources::anonymous(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            events: None,
        }
    }
}

/// A registry operation failed.
#[derive(Debug, Error)]
pub enum RegistryError {
    /// Credentials could not be determined.
    #[error(transparent)]
    Auth(#[from] ResolveAuthError),
    /// The image reference is malformed.
    #[error("invalid image reference {reference:?}: {message}")]
    InvalidReference {
        /// As given.
        reference: String,
        /// Why.
        message: String,
    },
    /// No connection could be made.
    #[error("cannot reach registry {registry} ({attempts} attempt(s)): {message}")]
    Unreachable {
        /// Registry host.
        registry: String,
        /// Attempts made.
        attempts: u32,
        /// Last error.
        message: String,
        /// Whether HTTPS was used.
        https: bool,
    },
    /// The registry wants (other) credentials.
    #[error("registry {registry} rejected the credentials ({source_desc}) for {action}: {message}")]
    Unauthorized {
        /// Registry host.
        registry: String,
        /// Where the credentials came from.
        source_desc: String,
        /// What was being done.
        action: String,
        /// Registry's answer.
        message: String,
    },
    /// The registry refuses access to the repository for these credentials.
    #[error("registry {registry} denied {action}: {message}")]
    Denied {
        /// Registry host.
        registry: String,
        /// What was being done.
        action: String,
        /// Registry's answer.
        message: String,
    },
    /// The repository, tag or manifest does not exist.
    #[error("not found in the registry: {message}")]
    NotFound {
        /// The reference.
        reference: String,
        /// Registry's answer.
        message: String,
    },
    /// The operation kept failing transiently (connection reset, 5xx, 429, timeout).
    #[error("{action} failed after {attempts} attempt(s): {message}")]
    Interrupted {
        /// What was being done.
        action: String,
        /// Attempts made.
        attempts: u32,
        /// Last error.
        message: String,
    },
    /// The registry refused the request for a reason retrying will not fix.
    #[error("registry refused {action}: {message}")]
    Rejected {
        /// What was being done.
        action: String,
        /// Registry's answer.
        message: String,
    },
}

impl RegistryError {
    /// True for problems the user can fix (address, credentials, names): exit code 1.
    pub fn is_user_error(&self) -> bool {
        matches!(
            self,
            RegistryError::Auth(_)
                | RegistryError::InvalidReference { .. }
                | RegistryError::Unreachable { .. }
                | RegistryError::Unauthorized { .. }
                | RegistryError::Denied { .. }
                | RegistryError::NotFound { .. }
        )
    }

    /// What the user can do about it.
    pub fn hints(&self) -> Vec<String> {
        match self {
            RegistryError::Auth(_) => vec![format!(
                "set {} and {} together, or log in with `docker login`/`podman login`",
                crate::auth::ENV_USERNAME,
                crate::auth::ENV_PASSWORD
            )],
            RegistryError::Unreachable {
                registry, https, ..
            } => {
                let mut h = vec![format!(
                    "check that {registry} is the right address and that the registry is running"
                )];
                if *https {
                    h.push(
                        "for a registry that serves plain HTTP (e.g. a local one), add --insecure"
                            .into(),
                    );
                }
                h
            }
            RegistryError::Unauthorized { .. } => vec![format!(
                "log in with `docker login`/`podman login`, or set {} and {}",
                crate::auth::ENV_USERNAME,
                crate::auth::ENV_PASSWORD
            )],
            RegistryError::Denied { .. } => {
                vec!["check that these credentials may write to this repository".into()]
            }
            RegistryError::NotFound { .. } => {
                vec!["check the repository and tag (`skopeo list-tags docker://REPO` lists tags)".into()]
            }
            RegistryError::Interrupted { .. } => vec![
                "the registry or the network failed repeatedly; retry later (blobs already uploaded are reused)"
                    .into(),
            ],
            _ => Vec::new(),
        }
    }
}

/// Parses an image reference (`host[:port]/repo[:tag][@digest]`) with docker's grammar and
/// normalisation ([`olmkit_core::image_ref`]); a reference with neither tag nor digest means
/// `:latest`, as docker's `TagNameOnly`.
pub fn parse_reference(s: &str) -> Result<Reference, RegistryError> {
    let r = ImageRef::parse(s).map_err(|e| RegistryError::InvalidReference {
        reference: s.to_string(),
        message: e.to_string(),
    })?;
    Ok(match (r.tag, r.digest) {
        (Some(tag), Some(digest)) => Reference::with_tag_and_digest(r.domain, r.path, tag, digest),
        (None, Some(digest)) => Reference::with_digest(r.domain, r.path, digest),
        (tag, None) => {
            Reference::with_tag(r.domain, r.path, tag.unwrap_or_else(|| "latest".into()))
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Connect,
    Transient,
    Unauthorized,
    Denied,
    NotFound,
    Other,
}

fn kind_of_status(code: u16) -> Kind {
    match code {
        401 => Kind::Unauthorized,
        403 => Kind::Denied,
        404 => Kind::NotFound,
        408 | 429 | 500..=599 => Kind::Transient,
        _ => Kind::Other,
    }
}

fn classify(e: &OciDistributionError) -> Kind {
    match e {
        OciDistributionError::RequestError(r) => {
            if let Some(status) = r.status() {
                kind_of_status(status.as_u16())
            } else if r.is_connect() {
                Kind::Connect
            } else if r.is_timeout() || r.is_request() || r.is_body() || r.is_decode() {
                Kind::Transient
            } else {
                Kind::Other
            }
        }
        OciDistributionError::ServerError { code, .. } => kind_of_status(*code),
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => Kind::Unauthorized,
        OciDistributionError::ImageManifestNotFoundError(_) => Kind::NotFound,
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes.iter().any(|c| **c == OciErrorCode::Toomanyrequests) {
                Kind::Transient
            } else if codes.iter().any(|c| **c == OciErrorCode::Unauthorized) {
                Kind::Unauthorized
            } else if codes.iter().any(|c| **c == OciErrorCode::Denied) {
                Kind::Denied
            } else if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                        | OciErrorCode::BlobUnknown
                )
            }) {
                Kind::NotFound
            } else {
                Kind::Other
            }
        }
        OciDistributionError::IoError(_) => Kind::Transient,
        _ => Kind::Other,
    }
}

/// What a registry failure says, on one line: the registry's own messages for error
/// envelopes, the status for other HTTP errors, the cause chain otherwise.
fn oci_error_text(e: &OciDistributionError) -> String {
    match e {
        OciDistributionError::RegistryError { envelope, url } => {
            let msgs: Vec<String> = envelope
                .errors
                .iter()
                .map(|e| {
                    let code = serde_json::to_value(&e.code)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    if e.message.is_empty() {
                        code
                    } else {
                        format!("{} ({code})", e.message)
                    }
                })
                .collect();
            format!("{} [{url}]", msgs.join("; "))
        }
        OciDistributionError::ServerError { code, url, message } => {
            let m = message.trim();
            if m.is_empty() {
                format!("HTTP {code} [{url}]")
            } else {
                format!("HTTP {code}: {m} [{url}]")
            }
        }
        other => error_text(other),
    }
}

/// The whole cause chain of an error on one line (reqwest hides the useful part in sources).
pub(crate) fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// A configured client with resolved credentials for one registry.
pub struct Session {
    pub(crate) client: Client,
    pub(crate) auth: ResolvedAuth,
    pub(crate) registry: String,
    pub(crate) opts: RemoteOptions,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("registry", &self.registry)
            .field("auth", &self.auth)
            .finish()
    }
}

impl Session {
    /// Sets up a client for the registry of `reference`.
    pub fn new(reference: &Reference, opts: &RemoteOptions) -> Result<Self, RegistryError> {
        let registry = reference.resolve_registry().to_string();
        let auth = resolve_auth(reference.registry(), &opts.auth)?;
        let config = ClientConfig {
            protocol: if opts.insecure {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            // One PUT per blob: fewer round trips, and a failed upload restarts cleanly.
            use_monolithic_push: true,
            connect_timeout: Some(opts.connect_timeout),
            read_timeout: Some(opts.read_timeout),
            ..Default::default()
        };
        let client = Client::try_from(config).map_err(|e| RegistryError::Rejected {
            action: "client setup".into(),
            message: error_text(&e),
        })?;
        Ok(Self {
            client,
            auth,
            registry,
            opts: opts.clone(),
        })
    }

    /// The credentials in use.
    pub fn auth(&self) -> &ResolvedAuth {
        &self.auth
    }

    /// Authenticates for `op` on `reference` (fetches a bearer token where the registry uses
    /// token auth; a no-op for basic auth), with retries.
    pub async fn authenticate(
        &self,
        reference: &Reference,
        op: RegistryOperation,
    ) -> Result<(), RegistryError> {
        self.client
            .store_auth_if_needed(&self.registry, &self.auth.auth)
            .await;
        // Also the connectivity check: `auth` starts with GET /v2/, so an unreachable
        // registry fails here once, not once per blob.
        self.call("connect and authenticate", reference, || async {
            self.client
                .auth(reference, &self.auth.auth, op)
                .await
                .map(|_| ())
        })
        .await
    }

    fn emit(&self, e: RemoteEvent) {
        if let Some(sink) = &self.opts.events {
            sink(e);
        }
    }

    pub(crate) fn emit_blob_done(&self, digest: String, size: u64, existed: bool) {
        self.emit(RemoteEvent::BlobDone {
            digest,
            size,
            existed,
        });
    }

    /// Runs `f` with retries, turning its final failure into a [`RegistryError`].
    pub async fn call<T, F, Fut>(
        &self,
        action: &str,
        reference: &Reference,
        f: F,
    ) -> Result<T, RegistryError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, OciDistributionError>>,
    {
        let policy = &self.opts.retry;
        let attempts = policy.attempts.max(1);
        let mut attempt = 1;
        loop {
            let err = match f().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let kind = classify(&err);
            let text = oci_error_text(&err);
            let retryable = matches!(kind, Kind::Connect | Kind::Transient);
            if retryable && attempt < attempts {
                let delay = policy.backoff(attempt);
                tracing::warn!(%action, attempt, ?delay, error = %text, "transient registry failure; retrying");
                self.emit(RemoteEvent::Retrying {
                    action: action.to_string(),
                    attempt,
                    delay,
                    error: text,
                });
                tokio::time::sleep(delay).await;
                attempt += 1;
                continue;
            }
            let action = format!("{action} ({reference})");
            return Err(match kind {
                Kind::Connect => RegistryError::Unreachable {
                    registry: self.registry.clone(),
                    attempts: attempt,
                    message: text,
                    https: !self.opts.insecure,
                },
                Kind::Transient => RegistryError::Interrupted {
                    action,
                    attempts: attempt,
                    message: text,
                },
                Kind::Unauthorized => RegistryError::Unauthorized {
                    registry: self.registry.clone(),
                    source_desc: self.auth.source.clone(),
                    action,
                    message: text,
                },
                Kind::Denied => RegistryError::Denied {
                    registry: self.registry.clone(),
                    action,
                    message: text,
                },
                Kind::NotFound => RegistryError::NotFound {
                    reference: reference.whole(),
                    message: text,
                },
                Kind::Other => RegistryError::Rejected {
                    action,
                    message: text,
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_agree_with_oci_client() {
        let sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        for r in [
            "memcached".to_string(),
            "team/app:v1".into(),
            "index.docker.io/app".into(),
            "localhost:5000/a/b:1.0".into(),
            format!("quay.io/example/op@{sha}"),
            format!("quay.io/example/op:v1@{sha}"),
        ] {
            let ours = parse_reference(&r).unwrap();
            let theirs: Reference = r.parse().unwrap();
            assert_eq!(ours.whole(), theirs.whole(), "{r}");
        }
        // distribution/reference accepts IPv6 registries; oci-client's older grammar does not.
        let v6 = parse_reference("[::1]:5000/img:tag").unwrap();
        assert_eq!(v6.registry(), "[::1]:5000");
        for bad in ["UPPER/Case:v1", "a//b", "img:", ""] {
            let e = parse_reference(bad).unwrap_err().to_string();
            assert!(e.contains("invalid image reference"), "{e}");
        }
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy {
            attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(700),
        };
        let waits: Vec<u128> = (1..=6).map(|a| p.backoff(a).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 700, 700, 700]);
        assert_eq!(p.backoff(100), Duration::from_millis(700));
    }

    #[test]
    fn classification() {
        let server = |code| OciDistributionError::ServerError {
            code,
            url: "u".into(),
            message: String::new(),
        };
        assert_eq!(classify(&server(503)), Kind::Transient);
        assert_eq!(classify(&server(429)), Kind::Transient);
        assert_eq!(classify(&server(401)), Kind::Unauthorized);
        assert_eq!(classify(&server(403)), Kind::Denied);
        assert_eq!(classify(&server(404)), Kind::NotFound);
        assert_eq!(classify(&server(400)), Kind::Other);
        let envelope: oci_client::errors::OciEnvelope =
            serde_json::from_str(r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"x"}]}"#)
                .unwrap();
        assert_eq!(
            classify(&OciDistributionError::RegistryError {
                envelope,
                url: "u".into()
            }),
            Kind::NotFound
        );
    }

    #[tokio::test]
    async fn connection_refused_is_retried_then_unreachable() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // A port nobody listens on: bind, note the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = parse_reference(&format!("127.0.0.1:{port}/x:y")).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(0u32));
        let seen2 = seen.clone();
        let opts = RemoteOptions {
            insecure: true,
            retry: RetryPolicy {
                attempts: 3,
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(2),
            },
            events: Some(Arc::new(move |e| {
                if matches!(e, RemoteEvent::Retrying { .. }) {
                    *seen2.lock().unwrap() += 1;
                }
            })),
            ..Default::default()
        };
        let s = Session::new(&r, &opts).unwrap();
        let err = s
            .call("check", &r, || s.client.blob_exists(&r, "sha256:00"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                RegistryError::Unreachable {
                    attempts: 3,
                    https: false,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.is_user_error());
        assert_eq!(*seen.lock().unwrap(), 2);
    }
}
