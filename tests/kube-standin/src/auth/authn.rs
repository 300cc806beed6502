//! Bearer-token authentication, like kube-apiserver's token authenticators: a static admin
//! token (what `--token-auth-file` gives a cluster admin) and ServiceAccount tokens issued by the
//! TokenRequest API (`serviceaccounts/<name>/token`), which stop working when they expire or
//! when their ServiceAccount is deleted (or re-created with another uid), as bound tokens do.
//! ServiceAccount tokens carry the audiences they were issued for, and a token is accepted only
//! for an audience it carries: the API server's own (`API_AUDIENCE`) for requests to it, the
//! ones a TokenReview names for a review. The static admin token is audience-agnostic, so it is
//! good for the API server's audience only, as kube-apiserver's `WrapAudienceAgnosticToken`
//! treats static tokens. A request without credentials is anonymous (`--anonymous-auth=true`, the default:
//! <https://kubernetes.io/docs/reference/access-authn-authz/authentication/#anonymous-requests>).

use std::collections::HashMap;
use std::sync::Mutex;

use super::UserInfo;

/// The API server's audience (kube-apiserver's `--api-audiences`, which defaults to its
/// service-account issuer): the audience of tokens that do not ask for one, and the one
/// requests to the API server need.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Why a presented token was refused (the request gets a 401).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("unknown bearer token")]
    Unknown,
    #[error("token expired")]
    Expired,
    #[error("service account {namespace}/{name} no longer exists")]
    ServiceAccountGone { namespace: String, name: String },
    /// The token is for none of the audiences asked for (the JWT authenticator's wording).
    #[error("token audiences {token:?} is invalid for the target audiences {wanted:?}")]
    Audience {
        token: Vec<String>,
        wanted: Vec<String>,
    },
}

/// What a ServiceAccount token is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundServiceAccount {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

#[derive(Clone, Debug)]
struct Token {
    user: UserInfo,
    service_account: Option<BoundServiceAccount>,
    /// Unix seconds; None = never.
    expires: Option<i64>,
    /// The audiences it was issued for; None for an audience-agnostic (static) token.
    audiences: Option<Vec<String>>,
}

/// The token table.
#[derive(Debug)]
pub struct Authenticator {
    admin_token: String,
    tokens: Mutex<HashMap<String, Token>>,
}

impl Default for Authenticator {
    fn default() -> Self {
        Self::new()
    }
}

impl Authenticator {
    pub fn new() -> Self {
        let admin_token = format!("standin-admin.{}", crate::meta::new_uid().replace('-', ""));
        let mut tokens = HashMap::new();
        tokens.insert(
            admin_token.clone(),
            Token {
                user: UserInfo::admin(),
                service_account: None,
                expires: None,
                audiences: None,
            },
        );
        Authenticator {
            admin_token,
            tokens: Mutex::new(tokens),
        }
    }

    /// The token of the stand-in's own kubeconfig (a `system:masters` user).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Issues a token for a ServiceAccount, valid for `seconds`, for `audiences` (the API
    /// server's when empty, as the TokenRequest API defaults them).
    pub fn issue_service_account_token(
        &self,
        sa: BoundServiceAccount,
        seconds: i64,
        audiences: Vec<String>,
    ) -> String {
        let token = format!("standin-sa.{}", crate::meta::new_uid().replace('-', ""));
        let audiences = if audiences.is_empty() {
            vec![API_AUDIENCE.to_string()]
        } else {
            audiences
        };
        let entry = Token {
            user: UserInfo::service_account(&sa.namespace, &sa.name),
            service_account: Some(sa),
            expires: Some(jiff::Timestamp::now().as_second() + seconds),
            audiences: Some(audiences),
        };
        if let Ok(mut t) = self.tokens.lock() {
            t.insert(token.clone(), entry);
        }
        token
    }

    /// The user of a bearer token, for the audiences `wanted`, and the audiences among them the
    /// token is good for (never empty: none is an error). `sa_uid` tells the current uid of a
    /// ServiceAccount (None when it does not exist), so tokens of deleted ServiceAccounts stop
    /// working.
    pub fn authenticate(
        &self,
        token: &str,
        wanted: &[String],
        sa_uid: impl Fn(&str, &str) -> Option<String>,
    ) -> Result<(UserInfo, Vec<String>), TokenError> {
        let entry = self
            .tokens
            .lock()
            .ok()
            .and_then(|t| t.get(token).cloned())
            .ok_or(TokenError::Unknown)?;
        if entry
            .expires
            .is_some_and(|e| e <= jiff::Timestamp::now().as_second())
        {
            return Err(TokenError::Expired);
        }
        if let Some(sa) = &entry.service_account
            && sa_uid(&sa.namespace, &sa.name).as_deref() != Some(sa.uid.as_str())
        {
            return Err(TokenError::ServiceAccountGone {
                namespace: sa.namespace.clone(),
                name: sa.name.clone(),
            });
        }
        let held = entry
            .audiences
            .unwrap_or_else(|| vec![API_AUDIENCE.to_string()]);
        let granted: Vec<String> = wanted
            .iter()
            .filter(|a| held.contains(a))
            .cloned()
            .collect();
        if granted.is_empty() {
            return Err(TokenError::Audience {
                token: held,
                wanted: wanted.to_vec(),
            });
        }
        Ok((entry.user, granted))
    }
}

/// The bearer token of an `Authorization` header value (other schemes are not credentials this
/// server understands, so such requests stay anonymous, as kube-apiserver's bearer
/// authenticator ignores them).
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> Vec<String> {
        vec![API_AUDIENCE.to_string()]
    }

    #[test]
    fn tokens_map_to_users_and_die_with_their_service_account() {
        let a = Authenticator::new();
        let (admin, _) = a
            .authenticate(a.admin_token(), &api(), |_, _| None)
            .expect("admin");
        assert!(admin.groups.iter().any(|g| g == "system:masters"));
        let sa = BoundServiceAccount {
            namespace: "ns".into(),
            name: "op".into(),
            uid: "u1".into(),
        };
        let t = a.issue_service_account_token(sa, 600, Vec::new());
        let (user, granted) = a
            .authenticate(&t, &api(), |_, _| Some("u1".into()))
            .expect("sa token");
        assert_eq!(granted, api());
        assert_eq!(user.name, "system:serviceaccount:ns:op");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert!(matches!(
            a.authenticate(&t, &api(), |_, _| Some("u2".into())),
            Err(TokenError::ServiceAccountGone { .. })
        ));
        assert_eq!(
            a.authenticate("nope", &api(), |_, _| None),
            Err(TokenError::Unknown)
        );
        let expired = a.issue_service_account_token(
            BoundServiceAccount {
                namespace: "ns".into(),
                name: "op".into(),
                uid: "u1".into(),
            },
            -1,
            Vec::new(),
        );
        assert_eq!(
            a.authenticate(&expired, &api(), |_, _| Some("u1".into())),
            Err(TokenError::Expired)
        );
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
    }

    #[test]
    fn tokens_are_good_only_for_their_audiences() {
        let a = Authenticator::new();
        let sa = BoundServiceAccount {
            namespace: "ns".into(),
            name: "op".into(),
            uid: "u1".into(),
        };
        let vault = a.issue_service_account_token(sa, 600, vec!["vault".into(), "x".into()]);
        let uid = |_: &str, _: &str| Some("u1".to_string());
        // Not for the API server...
        assert!(matches!(
            a.authenticate(&vault, &api(), uid),
            Err(TokenError::Audience { .. })
        ));
        // ...but for a review asking for one of its audiences, which are the overlap.
        let (_, granted) = a
            .authenticate(&vault, &["y".into(), "vault".into()], uid)
            .expect("vault audience");
        assert_eq!(granted, ["vault"]);
        // The static admin token is good for the API server's audience only.
        assert!(matches!(
            a.authenticate(a.admin_token(), &["vault".into()], |_, _| None),
            Err(TokenError::Audience { .. })
        ));
    }
}
