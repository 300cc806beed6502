//! Authentication and authorization of `/metrics` requests, delegated to the API server the way
//! controller-runtime's `filters.WithAuthenticationAndAuthorization` does for kubebuilder
//! managers (`--metrics-secure`, the default):
//!
//! 1. the request's `Authorization: Bearer <token>` is checked with a TokenReview
//!    (`authentication.k8s.io/v1`); no token, another scheme or a token the API server does not
//!    authenticate is a 401 (anonymous requests are not accepted). Here we deliberately differ
//!    from controller-runtime: its webhook token authenticator turns a refused token's
//!    `status.error` (kube-apiserver always sets one, "invalid bearer token") into an error, so
//!    it answers a bad token with 500 "Authentication failed"; a refused credential is a 401
//!    here, and 500 is kept for reviews that could not be made (3.);
//! 2. the user the TokenReview names is authorized with a SubjectAccessReview
//!    (`authorization.k8s.io/v1`) for the lower-cased HTTP method on the request path as a
//!    non-resource URL (`get` on `/metrics`, what the `metrics-reader` ClusterRole grants);
//!    anything but `allowed` is a 403;
//! 3. a review that cannot be made (API server unreachable, the operator lacks `create` on the
//!    review APIs) is a 500, so a scraper sees an outage rather than a denial.
//!
//! Results are cached like upstream's delegating authenticator and authorizer do (token
//! reviews 1 minute, allowed decisions 5 minutes, denied ones 30 seconds), so Prometheus
//! scraping every few seconds costs the API server two requests per few minutes. Tokens the API
//! server refused are remembered apart, for [`REFUSED_TTL`], so that a client sending endless
//! random tokens neither pushes the good ones out nor costs a review per retry of the same bad
//! one. The caches are bounded ([`CACHE_CAPACITY`] entries each), so such a client cannot grow
//! the process either; tokens are kept only as SHA-256 digests.
//!
//! TokenReviews for tokens in no cache are rate-limited ([`ReviewLimits`]: a burst of
//! [`REVIEW_BURST`], then [`REVIEW_RATE`] per second): beyond it the request is answered
//! `429 Too Many Requests` with `Retry-After` and no review is made, so random tokens cost the
//! API server at most that rate. Cached tokens (Prometheus') are never limited.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// How long a TokenReview result is reused (upstream `DelegatingAuthenticatorConfig.CacheTTL`).
pub const AUTHN_TTL: Duration = Duration::from_secs(60);
/// How long an allowed SubjectAccessReview is reused (upstream `AllowCacheTTL`).
pub const ALLOW_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a denied SubjectAccessReview is reused (upstream `DenyCacheTTL`).
pub const DENY_TTL: Duration = Duration::from_secs(30);
/// Entries each cache holds at most.
pub const CACHE_CAPACITY: usize = 1024;
/// How long a token the API server refused is answered 401 without asking again.
pub const REFUSED_TTL: Duration = Duration::from_secs(10);
/// TokenReviews that may be made at once after a quiet period.
pub const REVIEW_BURST: u32 = 10;
/// TokenReviews per second, sustained.
pub const REVIEW_RATE: f64 = 2.0;
/// Longest wait for one review (upstream `TokenAccessReviewTimeout`).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// The group every authenticated user is in; added when a TokenReview leaves it out, as
/// upstream's `AuthenticatedGroupAdder` does.
const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// An authenticated user, as a TokenReview describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct User {
    /// User name (`system:serviceaccount:<ns>:<name>` for ServiceAccounts).
    pub name: String,
    /// UID, when the authenticator gives one.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A SubjectAccessReview's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// `status.allowed`.
    pub allowed: bool,
    /// `status.reason` (for the log only: the client just gets 403).
    pub reason: String,
}

/// A review could not be made.
#[derive(Debug, Error)]
pub enum ReviewError {
    /// The API server refused or failed the request.
    #[error("{what} failed: {source}")]
    Api {
        /// `TokenReview` or `SubjectAccessReview`.
        what: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// No answer within [`REVIEW_TIMEOUT`].
    #[error("{what} got no answer within {REVIEW_TIMEOUT:?}")]
    Timeout {
        /// `TokenReview` or `SubjectAccessReview`.
        what: &'static str,
    },
}

/// Who answers the reviews: the API server in production, a fake in unit tests.
pub trait Reviewer: Send + Sync + 'static {
    /// The user `token` authenticates as, or None when it does not authenticate.
    fn review_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<User>, ReviewError>>;

    /// Whether `user` may send `verb` to the non-resource URL `path`.
    fn review_access<'a>(
        &'a self,
        user: &'a User,
        verb: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Decision, ReviewError>>;
}

/// Reviews through the API server the operator talks to.
#[derive(Clone)]
pub struct ApiReviewer {
    client: kube::Client,
}

impl ApiReviewer {
    /// Reviews with `client` (which needs `create` on tokenreviews and subjectaccessreviews).
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

async fn with_timeout<T>(
    what: &'static str,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ReviewError> {
    match tokio::time::timeout(REVIEW_TIMEOUT, call).await {
        Ok(result) => result.map_err(|source| ReviewError::Api { what, source }),
        Err(_) => Err(ReviewError::Timeout { what }),
    }
}

impl Reviewer for ApiReviewer {
    fn review_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<User>, ReviewError>> {
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: token.to_string(),
                    // No audiences: the API server's own, as upstream's delegating
                    // authenticator asks without APIAudiences.
                    audiences: None,
                },
                ..Default::default()
            };
            let api: Api<TokenReview> = Api::all(self.client.clone());
            let answer =
                with_timeout("TokenReview", api.create(&PostParams::default(), &review)).await?;
            let status = answer.status.unwrap_or_default();
            if status.authenticated != Some(true) {
                if let Some(error) = status.error.filter(|e| !e.is_empty()) {
                    tracing::debug!(%error, "metrics: token not authenticated");
                }
                return Ok(None);
            }
            let info = status.user.unwrap_or_default();
            let mut groups = info.groups.unwrap_or_default();
            if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
                groups.push(AUTHENTICATED_GROUP.to_string());
            }
            Ok(Some(User {
                name: info.username.unwrap_or_default(),
                uid: info.uid.unwrap_or_default(),
                groups,
                extra: info.extra.unwrap_or_default(),
            }))
        })
    }

    fn review_access<'a>(
        &'a self,
        user: &'a User,
        verb: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Decision, ReviewError>> {
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.name.clone()),
                    uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                    groups: Some(user.groups.clone()),
                    extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                    non_resource_attributes: Some(NonResourceAttributes {
                        path: Some(path.to_string()),
                        verb: Some(verb.to_string()),
                    }),
                    resource_attributes: None,
                },
                ..Default::default()
            };
            let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
            let answer = with_timeout(
                "SubjectAccessReview",
                api.create(&PostParams::default(), &review),
            )
            .await?;
            let status = answer.status.unwrap_or_default();
            Ok(Decision {
                allowed: status.allowed,
                reason: status.reason.unwrap_or_default(),
            })
        })
    }
}

/// A map whose entries expire, holding at most `capacity` of them: when full, expired entries
/// go first, then the one closest to expiry.
#[derive(Debug)]
struct TtlCache<K, V> {
    entries: HashMap<K, (V, Instant)>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries
            .get(key)
            .filter(|(_, expires)| *expires > now)
            .map(|(v, _)| v.clone())
    }

    fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, expires)| *expires > now);
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// How often TokenReviews may be made for tokens in no cache, and how long refusals are kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReviewLimits {
    /// Reviews allowed at once after a quiet period.
    pub burst: u32,
    /// Reviews per second, sustained.
    pub per_second: f64,
    /// How long a refused token is remembered.
    pub refused_ttl: Duration,
}

impl Default for ReviewLimits {
    fn default() -> Self {
        Self {
            burst: REVIEW_BURST,
            per_second: REVIEW_RATE,
            refused_ttl: REFUSED_TTL,
        }
    }
}

/// A token bucket.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn take(&mut self, limits: &ReviewLimits, now: Instant) -> bool {
        let refill = now.duration_since(self.last).as_secs_f64() * limits.per_second;
        self.tokens = (self.tokens + refill).min(f64::from(limits.burst));
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What the filter decided about one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Serve it.
    Allowed(User),
    /// 401: no usable bearer token, or one the API server does not authenticate.
    Unauthenticated,
    /// 403: the user may not send this request.
    Denied(User),
    /// 500: the TokenReview could not be made.
    AuthenticationFailed,
    /// 500: the SubjectAccessReview could not be made.
    AuthorizationFailed(User),
    /// 429: the token is in no cache and TokenReviews are over their rate.
    Throttled,
}

impl Outcome {
    /// The answer to send instead of the endpoint's (None when the request is allowed). Bodies
    /// are controller-runtime's, so scrapers see the same messages; the one code that differs is
    /// a refused token's (401 here, 500 there: see the module header).
    pub fn refusal(&self) -> Option<Response> {
        let (code, text) = match self {
            Outcome::Allowed(_) => return None,
            Outcome::Unauthenticated => (StatusCode::UNAUTHORIZED, "Unauthorized".to_string()),
            Outcome::Denied(u) => (
                StatusCode::FORBIDDEN,
                format!("Authorization denied for user {}", u.name),
            ),
            Outcome::AuthenticationFailed => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Authentication failed".to_string(),
            ),
            Outcome::AuthorizationFailed(u) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Authorization for user {} failed", u.name),
            ),
            Outcome::Throttled => (
                StatusCode::TOO_MANY_REQUESTS,
                "Too many authentication requests, retry later".to_string(),
            ),
        };
        let mut resp = (code, format!("{text}\n")).into_response();
        let headers = resp.headers_mut();
        if matches!(self, Outcome::Throttled) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(1u32));
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        Some(resp)
    }
}

type AccessKey = (User, String, String);

/// The `/metrics` filter: reviews and their caches.
pub struct MetricsAuth {
    reviewer: Arc<dyn Reviewer>,
    tokens: Mutex<TtlCache<[u8; 32], User>>,
    refused: Mutex<TtlCache<[u8; 32], ()>>,
    decisions: Mutex<TtlCache<AccessKey, bool>>,
    limits: ReviewLimits,
    bucket: Mutex<Bucket>,
}

/// Why a token was not authenticated.
enum AuthnError {
    Review(ReviewError),
    Throttled,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuth").finish_non_exhaustive()
    }
}

/// The bearer token of the request (`Authorization: Bearer <token>`, scheme case-insensitive).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl MetricsAuth {
    /// A filter asking `reviewer`, with empty caches of [`CACHE_CAPACITY`] entries.
    pub fn new(reviewer: Arc<dyn Reviewer>) -> Self {
        Self::with_capacity(reviewer, CACHE_CAPACITY)
    }

    /// Like [`MetricsAuth::new`] with another cache size.
    pub fn with_capacity(reviewer: Arc<dyn Reviewer>, capacity: usize) -> Self {
        Self::with_limits(reviewer, capacity, ReviewLimits::default())
    }

    /// Like [`MetricsAuth::new`] with another cache size and review limits.
    pub fn with_limits(reviewer: Arc<dyn Reviewer>, capacity: usize, limits: ReviewLimits) -> Self {
        Self {
            reviewer,
            tokens: Mutex::new(TtlCache::new(capacity)),
            refused: Mutex::new(TtlCache::new(capacity)),
            decisions: Mutex::new(TtlCache::new(capacity)),
            limits,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(limits.burst),
                last: Instant::now(),
            }),
        }
    }

    /// Entries in the token (accepted and refused) and decision caches (for tests of the
    /// bound).
    pub fn cached(&self) -> (usize, usize) {
        let t = self.tokens.lock().map(|c| c.len()).unwrap_or_default();
        let r = self.refused.lock().map(|c| c.len()).unwrap_or_default();
        let d = self.decisions.lock().map(|c| c.len()).unwrap_or_default();
        (t + r, d)
    }

    async fn authenticate(&self, token: &str) -> Result<Option<User>, AuthnError> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(hit) = self
            .tokens
            .lock()
            .ok()
            .and_then(|cache| cache.get(&digest, now))
        {
            return Ok(Some(hit));
        }
        if self
            .refused
            .lock()
            .ok()
            .and_then(|cache| cache.get(&digest, now))
            .is_some()
        {
            return Ok(None);
        }
        let allowed = self
            .bucket
            .lock()
            .map(|mut bucket| bucket.take(&self.limits, now))
            .unwrap_or(false);
        if !allowed {
            return Err(AuthnError::Throttled);
        }
        let user = self
            .reviewer
            .review_token(token)
            .await
            .map_err(AuthnError::Review)?;
        match &user {
            Some(user) => {
                if let Ok(mut cache) = self.tokens.lock() {
                    cache.insert(digest, user.clone(), AUTHN_TTL, Instant::now());
                }
            }
            None => {
                if let Ok(mut cache) = self.refused.lock() {
                    cache.insert(digest, (), self.limits.refused_ttl, Instant::now());
                }
            }
        }
        Ok(user)
    }

    async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<bool, ReviewError> {
        let key = (user.clone(), verb.to_string(), path.to_string());
        let now = Instant::now();
        if let Some(hit) = self
            .decisions
            .lock()
            .ok()
            .and_then(|cache| cache.get(&key, now))
        {
            return Ok(hit);
        }
        let decision = self.reviewer.review_access(user, verb, path).await?;
        if !decision.allowed {
            tracing::debug!(user = %user.name, reason = %decision.reason, "metrics: access denied");
        }
        let ttl = if decision.allowed {
            ALLOW_TTL
        } else {
            DENY_TTL
        };
        if let Ok(mut cache) = self.decisions.lock() {
            cache.insert(key, decision.allowed, ttl, Instant::now());
        }
        Ok(decision.allowed)
    }

    /// Authenticates and authorizes one request.
    pub async fn check(&self, headers: &HeaderMap, method: &str, path: &str) -> Outcome {
        let Some(token) = bearer_token(headers) else {
            return Outcome::Unauthenticated;
        };
        let user = match self.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Outcome::Unauthenticated,
            Err(AuthnError::Throttled) => {
                tracing::debug!("metrics: TokenReviews over their rate; answering 429");
                return Outcome::Throttled;
            }
            Err(AuthnError::Review(e)) => {
                tracing::error!(error = %e, "metrics: authentication failed");
                return Outcome::AuthenticationFailed;
            }
        };
        let verb = method.to_ascii_lowercase();
        match self.authorize(&user, &verb, path).await {
            Ok(true) => Outcome::Allowed(user),
            Ok(false) => Outcome::Denied(user),
            Err(e) => {
                tracing::error!(error = %e, user = %user.name, "metrics: authorization failed");
                Outcome::AuthorizationFailed(user)
            }
        }
    }
}

/// axum middleware: serves the request only when [`MetricsAuth::check`] allows it.
pub async fn require(State(auth): State<Arc<MetricsAuth>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let outcome = auth
        .check(req.headers(), req.method().as_str(), &path)
        .await;
    match outcome.refusal() {
        Some(refused) => refused,
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Knows the token `good` (user `alice`, allowed `get /metrics`), `other` (user `bob`,
    /// allowed nothing) and `broken` (the review fails); counts the reviews it answers.
    #[derive(Default)]
    struct Fake {
        token_reviews: AtomicUsize,
        access_reviews: AtomicUsize,
    }

    impl Reviewer for Fake {
        fn review_token<'a>(
            &'a self,
            token: &'a str,
        ) -> BoxFuture<'a, Result<Option<User>, ReviewError>> {
            self.token_reviews.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let user = |name: &str| User {
                    name: name.into(),
                    groups: vec![AUTHENTICATED_GROUP.into()],
                    ..Default::default()
                };
                match token {
                    "good" => Ok(Some(user("alice"))),
                    "other" => Ok(Some(user("bob"))),
                    "broken" => Err(ReviewError::Timeout {
                        what: "TokenReview",
                    }),
                    _ => Ok(None),
                }
            })
        }

        fn review_access<'a>(
            &'a self,
            user: &'a User,
            verb: &'a str,
            path: &'a str,
        ) -> BoxFuture<'a, Result<Decision, ReviewError>> {
            self.access_reviews.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Ok(Decision {
                    allowed: user.name == "alice" && verb == "get" && path == "/metrics",
                    reason: String::new(),
                })
            })
        }
    }

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[tokio::test]
    async fn outcomes_follow_the_reviews() {
        let fake = Arc::new(Fake::default());
        let auth = MetricsAuth::new(fake.clone());
        assert_eq!(
            auth.check(&HeaderMap::new(), "GET", "/metrics").await,
            Outcome::Unauthenticated
        );
        assert_eq!(
            auth.check(&headers("Basic good"), "GET", "/metrics").await,
            Outcome::Unauthenticated
        );
        assert_eq!(
            auth.check(&headers("Bearer nope"), "GET", "/metrics").await,
            Outcome::Unauthenticated
        );
        assert!(matches!(
            auth.check(&headers("bearer good"), "GET", "/metrics").await,
            Outcome::Allowed(u) if u.name == "alice"
        ));
        assert!(matches!(
            auth.check(&headers("Bearer good"), "POST", "/metrics").await,
            Outcome::Denied(u) if u.name == "alice"
        ));
        assert!(matches!(
            auth.check(&headers("Bearer other"), "GET", "/metrics").await,
            Outcome::Denied(u) if u.name == "bob"
        ));
        assert_eq!(
            auth.check(&headers("Bearer broken"), "GET", "/metrics")
                .await,
            Outcome::AuthenticationFailed
        );
    }

    #[tokio::test]
    async fn reviews_are_cached() {
        let fake = Arc::new(Fake::default());
        let auth = MetricsAuth::new(fake.clone());
        for _ in 0..5 {
            auth.check(&headers("Bearer good"), "GET", "/metrics").await;
            auth.check(&headers("Bearer nope"), "GET", "/metrics").await;
        }
        // One review per token and one per (user, verb, path).
        assert_eq!(fake.token_reviews.load(Ordering::SeqCst), 2);
        assert_eq!(fake.access_reviews.load(Ordering::SeqCst), 1);
        // A failed review is not cached: the next request asks again.
        auth.check(&headers("Bearer broken"), "GET", "/metrics")
            .await;
        auth.check(&headers("Bearer broken"), "GET", "/metrics")
            .await;
        assert_eq!(fake.token_reviews.load(Ordering::SeqCst), 4);
    }

    fn unlimited() -> ReviewLimits {
        ReviewLimits {
            burst: u32::MAX,
            per_second: f64::MAX,
            refused_ttl: REFUSED_TTL,
        }
    }

    #[tokio::test]
    async fn caches_stay_bounded() {
        let fake = Arc::new(Fake::default());
        let auth = MetricsAuth::with_limits(fake.clone(), 8, unlimited());
        for i in 0..100 {
            auth.check(&headers(&format!("Bearer random-{i}")), "GET", "/metrics")
                .await;
        }
        assert_eq!(auth.cached().0, 8);
        assert_eq!(fake.token_reviews.load(Ordering::SeqCst), 100);
    }

    #[tokio::test]
    async fn refused_tokens_do_not_push_out_good_ones() {
        let fake = Arc::new(Fake::default());
        let auth = MetricsAuth::with_limits(fake.clone(), 8, unlimited());
        assert!(matches!(
            auth.check(&headers("Bearer good"), "GET", "/metrics").await,
            Outcome::Allowed(_)
        ));
        for i in 0..100 {
            auth.check(&headers(&format!("Bearer random-{i}")), "GET", "/metrics")
                .await;
        }
        assert!(matches!(
            auth.check(&headers("Bearer good"), "GET", "/metrics").await,
            Outcome::Allowed(_)
        ));
        assert_eq!(fake.token_reviews.load(Ordering::SeqCst), 101);
    }

    #[tokio::test]
    async fn reviews_of_unknown_tokens_are_rate_limited() {
        let fake = Arc::new(Fake::default());
        let limits = ReviewLimits {
            burst: 5,
            per_second: 0.001,
            refused_ttl: REFUSED_TTL,
        };
        let auth = MetricsAuth::with_limits(fake.clone(), 64, limits);
        // A known token is reviewed (and cached) within the burst.
        assert!(matches!(
            auth.check(&headers("Bearer good"), "GET", "/metrics").await,
            Outcome::Allowed(_)
        ));
        let mut throttled = 0;
        for i in 0..50 {
            match auth
                .check(&headers(&format!("Bearer random-{i}")), "GET", "/metrics")
                .await
            {
                Outcome::Throttled => throttled += 1,
                other => assert_eq!(other, Outcome::Unauthenticated),
            }
        }
        assert_eq!(fake.token_reviews.load(Ordering::SeqCst), 5);
        assert_eq!(throttled, 46);
        // Cached answers are not limited: the good token, and a refused one.
        assert!(matches!(
            auth.check(&headers("Bearer good"), "GET", "/metrics").await,
            Outcome::Allowed(_)
        ));
        assert_eq!(
            auth.check(&headers("Bearer random-0"), "GET", "/metrics")
                .await,
            Outcome::Unauthenticated
        );
        let refusal = Outcome::Throttled.refusal().unwrap();
        assert_eq!(refusal.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refusal.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn expired_entries_are_misses_and_go_first() {
        let mut cache = TtlCache::new(2);
        let t0 = Instant::now();
        cache.insert("a", 1, Duration::from_secs(1), t0);
        cache.insert("b", 2, Duration::from_secs(10), t0);
        assert_eq!(cache.get(&"a", t0), Some(1));
        let later = t0 + Duration::from_secs(2);
        assert_eq!(cache.get(&"a", later), None);
        cache.insert("c", 3, Duration::from_secs(10), later);
        assert_eq!(
            cache.get(&"b", later),
            Some(2),
            "the expired entry was evicted"
        );
        assert_eq!(cache.get(&"c", later), Some(3));
        cache.insert("d", 4, Duration::from_secs(30), later);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&"d", later), Some(4));
    }

    #[tokio::test]
    async fn refusals_carry_controller_runtime_bodies() {
        let denied = Outcome::Denied(User {
            name: "system:serviceaccount:ns:sa".into(),
            ..Default::default()
        })
        .refusal()
        .unwrap();
        assert_eq!(denied.status(), StatusCode::FORBIDDEN);
        let body = axum::body::to_bytes(denied.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(
            body,
            "Authorization denied for user system:serviceaccount:ns:sa\n"
        );
        let unauth = Outcome::Unauthenticated.refusal().unwrap();
        assert_eq!(unauth.status(), StatusCode::UNAUTHORIZED);
        assert!(Outcome::Allowed(User::default()).refusal().is_none());
    }
}
