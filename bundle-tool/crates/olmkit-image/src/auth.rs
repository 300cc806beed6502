//! Registry credentials, found where Docker, podman and CI systems keep them.
//!
//! Order (first match wins): explicit credentials (`BUNDLE_TOOL_REGISTRY_USERNAME` /
//! `BUNDLE_TOOL_REGISTRY_PASSWORD`, or given by the caller), the file in `REGISTRY_AUTH_FILE`
//! (podman/skopeo), Docker's `config.json` (in `$DOCKER_CONFIG` or `~/.docker`, including
//! `credHelpers`/`credsStore` helpers, through the `docker_credential` crate), podman's
//! `$XDG_RUNTIME_DIR/containers/auth.json`, then anonymous access. A credential file that exists
//! but cannot be used is an error naming the file, never a silent fall-back to anonymous.

use docker_credential::{CredentialRetrievalError, DockerCredential};
use oci_client::secrets::RegistryAuth;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Environment variable with the registry user name.
pub const ENV_USERNAME: &str = "BUNDLE_TOOL_REGISTRY_USERNAME";
/// Environment variable with the registry password or token.
pub const ENV_PASSWORD: &str = "BUNDLE_TOOL_REGISTRY_PASSWORD";

/// Credentials could not be determined.
#[derive(Debug, Error)]
pub enum ResolveAuthError {
    /// Only one half of a user name / password pair was given.
    #[error("{given} is set but {missing} is not; set both or neither")]
    Incomplete {
        /// The variable (or option) that is set.
        given: &'static str,
        /// The one that is missing.
        missing: &'static str,
    },
    /// A credential file exists but could not be used.
    #[error("{path}: cannot get credentials for {registry}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// The registry looked up.
        registry: String,
        /// What went wrong.
        message: String,
    },
}

/// Where to look for credentials.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthSources {
    /// User name and password given explicitly.
    pub explicit: Option<(String, String)>,
    /// A podman/skopeo-style auth file (`REGISTRY_AUTH_FILE`).
    pub auth_file: Option<PathBuf>,
    /// Docker's configuration directory (holding `config.json`).
    pub docker_config_dir: Option<PathBuf>,
    /// podman's runtime auth file.
    pub podman_auth_file: Option<PathBuf>,
}

impl std::fmt::Debug for AuthSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthSources")
            .field(
                "explicit",
                &self.explicit.as_ref().map(|(u, _)| (u, "<redacted>")),
            )
            .field("auth_file", &self.auth_file)
            .field("docker_config_dir", &self.docker_config_dir)
            .field("podman_auth_file", &self.podman_auth_file)
            .finish()
    }
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl AuthSources {
    /// No sources: anonymous access.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// The standard sources of this process's environment.
    pub fn from_env() -> Result<Self, ResolveAuthError> {
        let explicit = match (env_nonempty(ENV_USERNAME), env_nonempty(ENV_PASSWORD)) {
            (Some(u), Some(p)) => Some((u, p)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ResolveAuthError::Incomplete {
                    given: ENV_USERNAME,
                    missing: ENV_PASSWORD,
                });
            }
            (None, Some(_)) => {
                return Err(ResolveAuthError::Incomplete {
                    given: ENV_PASSWORD,
                    missing: ENV_USERNAME,
                });
            }
        };
        let docker_config_dir = env_nonempty("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| env_nonempty("HOME").map(|h| Path::new(&h).join(".docker")));
        Ok(Self {
            explicit,
            auth_file: env_nonempty("REGISTRY_AUTH_FILE").map(PathBuf::from),
            docker_config_dir,
            podman_auth_file: env_nonempty("XDG_RUNTIME_DIR")
                .map(|d| Path::new(&d).join("containers/auth.json")),
        })
    }
}

/// Credentials for one registry and where they came from.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedAuth {
    /// What to send.
    pub auth: RegistryAuth,
    /// Human description of the source (`anonymous`, `~/.docker/config.json`, ...).
    pub source: String,
}

impl std::fmt::Debug for ResolvedAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedAuth")
            .field("auth", &self.auth)
            .field("source", &self.source)
            .finish()
    }
}

impl ResolvedAuth {
    /// Anonymous access.
    pub fn anonymous() -> Self {
        Self {
            auth: RegistryAuth::Anonymous,
            source: "anonymous".into(),
        }
    }
    /// User name, when basic credentials are used.
    pub fn username(&self) -> Option<&str> {
        match &self.auth {
            RegistryAuth::Basic(u, _) => Some(u),
            _ => None,
        }
    }
}

/// Keys under which credential files may store `registry`.
fn lookup_keys(registry: &str) -> Vec<String> {
    let mut keys = vec![
        registry.to_string(),
        format!("https://{registry}"),
        format!("http://{registry}"),
    ];
    if matches!(
        registry,
        "docker.io" | "index.docker.io" | "registry-1.docker.io"
    ) {
        keys.insert(0, "https://index.docker.io/v1/".into());
        keys.push("docker.io".into());
        keys.push("index.docker.io".into());
    }
    keys
}

fn from_file(path: &Path, registry: &str) -> Result<Option<RegistryAuth>, ResolveAuthError> {
    if !path.is_file() {
        return Ok(None);
    }
    let file_err = |message: String| ResolveAuthError::File {
        path: path.to_path_buf(),
        registry: registry.to_string(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| file_err(format!("cannot read: {e}")))?;
    if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
        return Err(file_err("not valid JSON".into()));
    }
    for key in lookup_keys(registry) {
        match docker_credential::get_credential_from_reader(bytes.as_slice(), &key) {
            Ok(DockerCredential::UsernamePassword(u, p)) => {
                return Ok(Some(RegistryAuth::Basic(u, p)));
            }
            Ok(DockerCredential::IdentityToken(_)) => {
                return Err(file_err(format!(
                    "entry {key:?} holds an identity token (an OAuth refresh token), which is \
                     not supported; log in with a user name and password or set {ENV_USERNAME} \
                     and {ENV_PASSWORD}"
                )));
            }
            Err(CredentialRetrievalError::NoCredentialConfigured) => continue,
            Err(e) => return Err(file_err(e.to_string())),
        }
    }
    Ok(None)
}

/// Finds credentials for `registry` (host and optional port, e.g. `quay.io`, `127.0.0.1:5000`).
pub fn resolve_auth(
    registry: &str,
    sources: &AuthSources,
) -> Result<ResolvedAuth, ResolveAuthError> {
    if let Some((u, p)) = &sources.explicit {
        return Ok(ResolvedAuth {
            auth: RegistryAuth::Basic(u.clone(), p.clone()),
            source: format!("{ENV_USERNAME}/{ENV_PASSWORD}"),
        });
    }
    let files = [
        sources.auth_file.clone(),
        sources
            .docker_config_dir
            .as_ref()
            .map(|d| d.join("config.json")),
        sources.podman_auth_file.clone(),
    ];
    for path in files.into_iter().flatten() {
        if let Some(auth) = from_file(&path, registry)? {
            return Ok(ResolvedAuth {
                auth,
                source: path.display().to_string(),
            });
        }
    }
    Ok(ResolvedAuth::anonymous())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn docker_config_then_auth_file_precedence() {
        let d = tempfile::tempdir().unwrap();
        let docker = d.path().join("docker");
        std::fs::create_dir_all(&docker).unwrap();
        std::fs::write(
            docker.join("config.json"),
            format!(
                r#"{{"auths":{{"127.0.0.1:5000":{{"auth":"{}"}},"https://quay.io":{{"auth":"{}"}}}}}}"#,
                b64("alice:s3cret"),
                b64("bob:pw")
            ),
        )
        .unwrap();
        let mut sources = AuthSources {
            docker_config_dir: Some(docker.clone()),
            ..Default::default()
        };
        let a = resolve_auth("127.0.0.1:5000", &sources).unwrap();
        assert_eq!(a.auth, RegistryAuth::Basic("alice".into(), "s3cret".into()));
        assert!(a.source.ends_with("config.json"));
        let q = resolve_auth("quay.io", &sources).unwrap();
        assert_eq!(q.username(), Some("bob"));
        assert_eq!(
            resolve_auth("ghcr.io", &sources).unwrap(),
            ResolvedAuth::anonymous()
        );

        let auth_file = d.path().join("auth.json");
        std::fs::write(
            &auth_file,
            format!(
                r#"{{"auths":{{"127.0.0.1:5000":{{"auth":"{}"}}}}}}"#,
                b64("carol:x")
            ),
        )
        .unwrap();
        sources.auth_file = Some(auth_file);
        assert_eq!(
            resolve_auth("127.0.0.1:5000", &sources).unwrap().username(),
            Some("carol")
        );
        sources.explicit = Some(("dave".into(), "y".into()));
        assert_eq!(
            resolve_auth("127.0.0.1:5000", &sources).unwrap().username(),
            Some("dave")
        );
    }

    #[test]
    fn unusable_files_are_errors_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("config.json"), "{not json").unwrap();
        let sources = AuthSources {
            docker_config_dir: Some(d.path().to_path_buf()),
            ..Default::default()
        };
        let err = resolve_auth("quay.io", &sources).unwrap_err();
        assert!(err.to_string().contains("config.json"), "{err}");

        std::fs::write(
            d.path().join("config.json"),
            r#"{"auths":{"quay.io":{"identitytoken":"abc"}}}"#,
        )
        .unwrap();
        let err = resolve_auth("quay.io", &sources).unwrap_err();
        assert!(err.to_string().contains("identity token"), "{err}");
    }

    #[test]
    fn debug_output_hides_secrets() {
        let s = AuthSources {
            explicit: Some(("u".into(), "hunter2".into())),
            ..Default::default()
        };
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
