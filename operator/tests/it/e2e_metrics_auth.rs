//! The secure metrics endpoint (`--metrics-secure`, the default) end to end: the real
//! `operator run` against the API stand-in with RBAC authorization, the operator running as its
//! ServiceAccount under the roles in `config/rbac/` (the generated `manager-role`,
//! `leader-election-role` and `metrics-auth-role`: the released 0.4.0 CSV does not carry the
//! review permissions yet). `/metrics` answers over HTTPS (self-signed certificate) 401 without
//! or with a bad token, 403 to a ServiceAccount not bound to `metrics-reader`, 200 with the
//! metrics to one that is; the reviews are cached; and the operator's TokenReview and
//! SubjectAccessReview requests are all allowed by `metrics-auth-role`, which grants nothing
//! they do not use.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::harness::operator_harness as harness;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use harness::*;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

const NS: &str = "demo";
const MONITORING: &str = "monitoring";
const OPERATOR_SA: &str = "controller-manager";

fn config_file(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn binding_json(name: &str, role_kind: &str, role: &str, ns: &str, sa: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
    })
}

/// Creates a ClusterRole from `config/rbac/<file>` and binds it to `ns/sa`.
async fn bind_cluster_role(env: &Env, file: &str, ns: &str, sa: &str) -> String {
    let role: ClusterRole = serde_saphyr::from_str(&config_file(file)).unwrap();
    let name = role.metadata.name.clone().unwrap();
    let roles: Api<ClusterRole> = Api::all(env.client.clone());
    if roles.get_opt(&name).await.unwrap().is_none() {
        roles.create(&PostParams::default(), &role).await.unwrap();
    }
    let binding: ClusterRoleBinding = serde_json::from_value(binding_json(
        &format!("{name}-{ns}-{sa}"),
        "ClusterRole",
        &name,
        ns,
        sa,
    ))
    .unwrap();
    Api::<ClusterRoleBinding>::all(env.client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    name
}

/// The operator's ServiceAccount gets exactly the roles of config/rbac (as kustomize deploys
/// them); returns its kubeconfig.
async fn install_operator_rbac(env: &Env) -> PathBuf {
    let kubeconfig = env.service_account_kubeconfig(OPERATOR_NS, OPERATOR_SA);
    for file in [
        "config/rbac/role.yaml",
        "config/rbac/metrics_auth_role.yaml",
    ] {
        bind_cluster_role(env, file, OPERATOR_NS, OPERATOR_SA).await;
    }
    let role: Role =
        serde_saphyr::from_str(&config_file("config/rbac/leader_election_role.yaml")).unwrap();
    let name = role.metadata.name.clone().unwrap();
    Api::<Role>::namespaced(env.client.clone(), OPERATOR_NS)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding =
        serde_json::from_value(binding_json(&name, "Role", &name, OPERATOR_NS, OPERATOR_SA))
            .unwrap();
    Api::<RoleBinding>::namespaced(env.client.clone(), OPERATOR_NS)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    kubeconfig
}

/// GET https://127.0.0.1:<port>/metrics, with a bearer token if given: status and body.
async fn scrape(port: u16, token: Option<&str>) -> (u16, String) {
    // The certificate is self-signed: a scraper skips verification (or mounts a real one).
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut req = client.get(format!("https://127.0.0.1:{port}/metrics"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The operator's requests to the review APIs, as (resource, code, allowed).
fn review_requests(env: &Env) -> Vec<(String, u16, bool)> {
    env.operator_requests()
        .into_iter()
        .filter(|r| r.resource.ends_with("reviews"))
        .map(|r| (r.resource.clone(), r.code, !r.denied()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_token_allowed_to_get_metrics() {
    // The file config/ deploys is the one `operator rbac --role metrics-auth` prints.
    assert_eq!(
        config_file("config/rbac/metrics_auth_role.yaml"),
        olmkit_runtime::rbac::to_yaml(&olmkit_runtime::rbac::metrics_auth_role(), "operator rbac")
            .unwrap(),
        "config/rbac/metrics_auth_role.yaml is stale: regenerate it with \
         `operator rbac --role metrics-auth`"
    );
    let env = Env::start_rbac(&[NS, MONITORING]).await;
    let kubeconfig = install_operator_rbac(&env).await;
    bind_cluster_role(
        &env,
        "config/rbac/metrics_reader_role.yaml",
        MONITORING,
        "prometheus",
    )
    .await;
    let reader = env
        .standin
        .service_account_token(MONITORING, "prometheus")
        .unwrap();
    let stranger = env
        .standin
        .service_account_token(MONITORING, "stranger")
        .unwrap();

    let op = Operator::spawn(
        &env,
        OperatorOptions {
            kubeconfig: Some(kubeconfig),
            extra_args: vec!["--metrics-secure".into()],
            ..Default::default()
        },
    );
    op.wait_ready().await;
    let port = op.metrics_port;

    let (code, body) = scrape(port, None).await;
    assert_eq!((code, body.as_str()), (401, "Unauthorized\n"));
    let (code, body) = scrape(port, Some("not-a-token")).await;
    assert_eq!((code, body.as_str()), (401, "Unauthorized\n"));
    let (code, body) = scrape(port, Some(&stranger)).await;
    assert_eq!(
        (code, body.as_str()),
        (
            403,
            "Authorization denied for user system:serviceaccount:monitoring:stranger\n"
        )
    );
    let (code, body) = scrape(port, Some(&reader)).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("memcached_operator_leader"), "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    // Plain HTTP gets no metrics from a TLS port.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .timeout(Duration::from_secs(2))
        .send()
        .await;
    assert!(
        plain.is_err() || plain.is_ok_and(|r| r.status().as_u16() != 200),
        "plain HTTP must not serve metrics"
    );

    // One TokenReview per token (3) and one SubjectAccessReview per user (2); repeated scrapes
    // are answered from the caches.
    let before = review_requests(&env);
    let count = |resource: &str| before.iter().filter(|r| r.0 == resource).count();
    assert_eq!(count("tokenreviews"), 3, "{before:?}");
    assert_eq!(count("subjectaccessreviews"), 2, "{before:?}");
    for _ in 0..3 {
        assert_eq!(scrape(port, Some(&reader)).await.0, 200);
        assert_eq!(scrape(port, Some(&stranger)).await.0, 403);
        assert_eq!(scrape(port, None).await.0, 401);
    }
    assert_eq!(review_requests(&env), before, "reviews were not cached");

    // Both ways: every review the operator sent was allowed (201), and metrics-auth-role grants
    // exactly what they use.
    assert!(
        before
            .iter()
            .all(|(_, code, allowed)| *code == 201 && *allowed),
        "{before:?}"
    );
    let used: BTreeSet<(String, String, String)> = env
        .operator_requests()
        .iter()
        .filter(|r| r.resource.ends_with("reviews"))
        .flat_map(|r| r.checks.clone())
        .map(|c| {
            let a = c.attributes;
            (a.group, a.resource, a.verb)
        })
        .collect();
    let granted: BTreeSet<(String, String, String)> = olmkit_runtime::rbac::METRICS_AUTH
        .iter()
        .flat_map(|p| {
            p.verbs()
                .into_iter()
                .map(|v| (p.group.to_string(), p.resource.to_string(), v.to_string()))
        })
        .collect();
    assert_eq!(used, granted);
    let user = format!("system:serviceaccount:{OPERATOR_NS}:{OPERATOR_SA}");
    let denied = env.denied_requests(&user);
    assert!(denied.is_empty(), "requests refused to {user}: {denied:?}");
}

/// `--metrics-secure=false` keeps plain, unauthenticated HTTP for local use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_metrics_are_plain_http() {
    let env = Env::start(&[NS]).await;
    let op = Operator::spawn(
        &env,
        OperatorOptions {
            extra_args: vec!["--metrics-secure=false".into()],
            ..Default::default()
        },
    );
    op.wait_ready().await;
    let (code, body) = op.get(op.metrics_port, "/metrics").await.unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("memcached_operator_leader"), "{body}");
    assert!(
        env.operator_requests()
            .iter()
            .all(|r| !r.resource.ends_with("reviews")),
        "no reviews without --metrics-secure"
    );
}

/// A client sending a new random bearer token with every request costs the API server at most
/// the TokenReview rate (a burst of `REVIEW_BURST`, then `REVIEW_RATE` per second): the rest are
/// answered 429 without a review. A refused token is remembered, and a scraper whose token was
/// reviewed keeps getting its metrics throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tokens_cost_a_bounded_number_of_token_reviews() {
    use olmkit_runtime::http::auth::{REVIEW_BURST, REVIEW_RATE};
    let env = Env::start(&[NS, MONITORING]).await;
    let reader = env
        .standin
        .service_account_token(MONITORING, "prometheus")
        .unwrap();
    let op = Operator::spawn(
        &env,
        OperatorOptions {
            extra_args: vec!["--metrics-secure".into()],
            ..Default::default()
        },
    );
    op.wait_ready().await;
    let port = op.metrics_port;
    assert_eq!(scrape(port, Some(&reader)).await.0, 200);
    let token_reviews = || {
        env.operator_requests()
            .iter()
            .filter(|r| r.resource == "tokenreviews")
            .count()
    };
    assert_eq!(token_reviews(), 1);

    // The same bad token, again and again: one review.
    for _ in 0..5 {
        assert_eq!(scrape(port, Some("not-a-token")).await.0, 401);
    }
    assert_eq!(token_reviews(), 2);

    // 100 random tokens, 10 at a time.
    let started = std::time::Instant::now();
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    for round in 0..10 {
        let scrapes = (0..10).map(|i| {
            let token = format!("random-{round}-{i}-{}", std::process::id());
            async move { scrape(port, Some(&token)).await.0 }
        });
        for code in futures::future::join_all(scrapes).await {
            *codes.entry(code).or_default() += 1;
        }
        // The scraper is served throughout.
        assert_eq!(scrape(port, Some(&reader)).await.0, 200);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let reviews = token_reviews() - 2;
    let allowed = f64::from(REVIEW_BURST) + REVIEW_RATE * elapsed + 1.0;
    eprintln!(
        "FIGURES: 100 random tokens in {elapsed:.2} s: {reviews} TokenReviews (at most \
         {allowed:.0} allowed); answers {codes:?}"
    );
    assert!(
        reviews as f64 <= allowed,
        "{reviews} TokenReviews for 100 random tokens in {elapsed:.2} s; answers {codes:?}"
    );
    assert_eq!(
        codes.keys().copied().collect::<Vec<_>>(),
        vec![401, 429],
        "{codes:?}"
    );
}
