//! A TLS server's certificate (the webhook's, the metrics endpoint's): how to load it, and keeping
//! it current. Where the webhook looks for it is the webhook's business ([`crate::webhook`]).
//!
//! The TLS server resolves its certificate per handshake from a [`ReloadableCert`]. A watcher
//! polls the certificate files and swaps in a new key pair when their content changes, so a
//! rotated certificate (OLM and cert-manager both rotate by rewriting the mounted Secret) is served
//! from the next handshake on, without a restart. Until a first certificate loads, handshakes fail
//! fast with a TLS alert and readiness says why. A rotation caught half-written (new certificate,
//! old key) is rejected by the key-match check and retried at the next poll while the previous
//! certificate keeps serving.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};

/// A certificate chain file and its private key file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl CertFiles {
    /// The pair `cert` and `key` in `dir`.
    pub fn in_dir(dir: &Path, cert: &str, key: &str) -> Self {
        Self {
            cert: dir.join(cert),
            key: dir.join(key),
        }
    }

    fn describe(&self) -> String {
        format!("{} + {}", self.cert.display(), self.key.display())
    }
}

/// Why a certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadCertError {
    /// No candidate pair exists yet.
    #[error("no serving certificate yet: none of {0} exists")]
    Missing(String),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The certificate file holds no usable PEM certificate.
    #[error("{path} holds no PEM certificate{detail}")]
    NoCertificate {
        /// The file.
        path: PathBuf,
        /// Parse error, if any.
        detail: String,
    },
    /// The key file holds no usable PEM private key.
    #[error("{path} holds no PEM private key: {detail}")]
    NoKey {
        /// The file.
        path: PathBuf,
        /// Parse error.
        detail: String,
    },
    /// The key does not fit the certificate or is of an unsupported type.
    #[error("{cert} and {key} do not form a usable key pair: {source}")]
    KeyPair {
        /// Certificate file.
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
        /// The cause.
        source: rustls::Error,
    },
}

/// The raw bytes of a certificate pair as last read from disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertBytes {
    /// Which files they came from.
    pub files: CertFiles,
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// Reads the first candidate pair whose files both exist.
pub async fn read_first(candidates: &[CertFiles]) -> Result<CertBytes, LoadCertError> {
    for files in candidates {
        let cert_exists = tokio::fs::try_exists(&files.cert).await.unwrap_or(false);
        let key_exists = tokio::fs::try_exists(&files.key).await.unwrap_or(false);
        if !(cert_exists && key_exists) {
            continue;
        }
        let read = |path: &Path| {
            let path = path.to_path_buf();
            async move {
                tokio::fs::read(&path)
                    .await
                    .map_err(|source| LoadCertError::Read { path, source })
            }
        };
        return Ok(CertBytes {
            files: files.clone(),
            cert: read(&files.cert).await?,
            key: read(&files.key).await?,
        });
    }
    Err(LoadCertError::Missing(
        candidates
            .iter()
            .map(CertFiles::describe)
            .collect::<Vec<_>>()
            .join(", "),
    ))
}

/// A parsed key pair ready to serve, with the fingerprint of its leaf certificate.
#[derive(Debug, Clone)]
pub struct LoadedCert {
    /// The key pair.
    pub key: Arc<CertifiedKey>,
    /// Lowercase hex SHA-256 of the leaf certificate (DER), as `openssl x509 -fingerprint
    /// -sha256` prints it without colons.
    pub fingerprint: String,
}

/// Parses PEM bytes into a key pair, checking that the key matches the leaf certificate.
pub fn parse(bytes: &CertBytes, provider: &CryptoProvider) -> Result<LoadedCert, LoadCertError> {
    let files = &bytes.files;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes.cert)
        .collect::<Result<_, _>>()
        .map_err(|e| LoadCertError::NoCertificate {
            path: files.cert.clone(),
            detail: format!(": {e}"),
        })?;
    let Some(leaf) = chain.first() else {
        return Err(LoadCertError::NoCertificate {
            path: files.cert.clone(),
            detail: String::new(),
        });
    };
    let fingerprint = hex::encode(Sha256::digest(leaf.as_ref()));
    let key = PrivateKeyDer::from_pem_slice(&bytes.key).map_err(|e| LoadCertError::NoKey {
        path: files.key.clone(),
        detail: e.to_string(),
    })?;
    let key =
        CertifiedKey::from_der(chain, key, provider).map_err(|source| LoadCertError::KeyPair {
            cert: files.cert.clone(),
            key: files.key.clone(),
            source,
        })?;
    Ok(LoadedCert {
        key: Arc::new(key),
        fingerprint,
    })
}

/// The certificate the TLS server presents; empty until the first one loads.
#[derive(Debug, Default)]
pub struct ReloadableCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl ReloadableCert {
    /// Serves `key` from the next handshake on.
    pub fn set(&self, key: Arc<CertifiedKey>) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(key);
    }

    /// Whether a certificate is loaded.
    pub fn is_loaded(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

impl ResolvesServerCert for ReloadableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
