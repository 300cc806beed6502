//! The metrics server's TLS certificate, chosen like controller-runtime's metrics server does:
//! with `--metrics-cert-path` the key pair in that directory (`--metrics-cert-name`,
//! `--metrics-cert-key`), which must load at start and is re-read every
//! [`CERT_POLL_INTERVAL`] so a rotated Secret is served without a restart (controller-runtime's
//! certwatcher); without it a self-signed certificate for `localhost`/`127.0.0.1` generated at
//! start, which encrypts the scrape but proves nothing about the server (Prometheus then scrapes
//! with `insecure_skip_verify`, as kubebuilder's ServiceMonitor does until cert-manager is wired).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::certs::{self, CertBytes, CertFiles, LoadCertError, ReloadableCert};

/// How often the certificate files of `--metrics-cert-path` are re-read.
pub const CERT_POLL_INTERVAL: Duration = Duration::from_secs(10);

/// Names the self-signed certificate is valid for.
const SELF_SIGNED_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// Where the metrics certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertSource {
    /// A key pair on disk, re-read on change.
    Files(CertFiles),
    /// A self-signed certificate generated at start.
    SelfSigned,
}

impl CertSource {
    /// `dir/name` + `dir/key` when a directory is given, else self-signed.
    pub fn from_flags(dir: Option<PathBuf>, name: &str, key: &str) -> Self {
        match dir {
            Some(dir) => CertSource::Files(CertFiles {
                cert: dir.join(name),
                key: dir.join(key),
            }),
            None => CertSource::SelfSigned,
        }
    }
}

/// The metrics certificate cannot be set up.
#[derive(Debug, Error)]
pub enum MetricsTlsError {
    /// The files of `--metrics-cert-path` are missing or unusable.
    #[error("metrics serving certificate: {0}")]
    Load(#[from] LoadCertError),
    /// Generating the self-signed certificate failed.
    #[error("cannot generate the self-signed metrics certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the key or the configuration.
    #[error("metrics TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A self-signed key pair for [`SELF_SIGNED_NAMES`].
pub fn self_signed(provider: &CryptoProvider) -> Result<CertifiedKey, MetricsTlsError> {
    let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|s| s.to_string()).collect();
    let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(names)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(signing_key.serialize_der()));
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
    Ok(CertifiedKey::from_der(chain, key, provider)?)
}

/// A server configuration serving the certificate of `source`, and for files the task that
/// keeps it current until `stop`.
pub async fn server_config(
    source: &CertSource,
    stop: CancellationToken,
) -> Result<rustls::ServerConfig, MetricsTlsError> {
    // The provider is chosen here (ring), as for the webhook, whatever the process default.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver = Arc::new(ReloadableCert::default());
    match source {
        CertSource::SelfSigned => {
            resolver.set(Arc::new(self_signed(&provider)?));
            tracing::info!("serving /metrics with a self-signed certificate");
        }
        CertSource::Files(files) => {
            let bytes = certs::read_first(std::slice::from_ref(files)).await?;
            let loaded = certs::parse(&bytes, &provider)?;
            resolver.set(loaded.key);
            tracing::info!(cert = %files.cert.display(), sha256 = %loaded.fingerprint,
                "loaded the metrics serving certificate");
            tokio::spawn(watch(
                files.clone(),
                bytes,
                resolver.clone(),
                provider.clone(),
                stop,
            ));
        }
    }
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Re-reads the files every [`CERT_POLL_INTERVAL`]; a changed, valid pair is served from the
/// next handshake on, a broken one is logged and the previous pair keeps serving.
async fn watch(
    files: CertFiles,
    mut serving: CertBytes,
    resolver: Arc<ReloadableCert>,
    provider: Arc<CryptoProvider>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(CERT_POLL_INTERVAL) => {}
        }
        let read = certs::read_first(std::slice::from_ref(&files)).await;
        match read {
            Ok(bytes) if bytes == serving => {}
            Ok(bytes) => match certs::parse(&bytes, &provider) {
                Ok(loaded) => {
                    resolver.set(loaded.key);
                    tracing::info!(sha256 = %loaded.fingerprint, "reloaded the metrics serving certificate");
                    serving = bytes;
                }
                Err(e) => tracing::warn!(error = %e, "keeping the previous metrics certificate"),
            },
            Err(e) => tracing::warn!(error = %e, "keeping the previous metrics certificate"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_self_signed_certificate_matches_its_key() {
        let provider = rustls::crypto::ring::default_provider();
        let key = self_signed(&provider).unwrap();
        assert_eq!(key.cert.len(), 1);
        assert!(key.keys_match().is_ok());
    }

    #[tokio::test]
    async fn missing_files_fail_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let source = CertSource::from_flags(Some(dir.path().into()), "tls.crt", "tls.key");
        let err = server_config(&source, CancellationToken::new())
            .await
            .unwrap_err();
        assert!(matches!(err, MetricsTlsError::Load(_)), "{err}");
        assert_eq!(
            CertSource::from_flags(None, "tls.crt", "tls.key"),
            CertSource::SelfSigned
        );
    }
}
