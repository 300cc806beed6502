//! Authentication and RBAC authorization like kube-apiserver's: the admin kubeconfig, anonymous
//! requests, TokenRequest-issued ServiceAccount tokens, every RBAC rule part, bindings of each
//! subject kind at cluster and namespace scope, the extra `create` check of an apply or PUT that
//! creates, 403 bodies, watches, and OwnerReferencesPermissionEnforcement; every decision in the
//! request log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Status;
use kube::{Client, Config};
use kube_standin::{AuthorizationMode, StandIn, StandInOptions};
use serde_json::{Value, json};

async fn rbac_standin(owner_refs: Option<bool>) -> (StandIn, Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let standin = StandIn::start(StandInOptions {
        crds: vec![widget_crd(None)],
        namespaces: vec!["ns".into(), "other".into()],
        authorization: AuthorizationMode::Rbac,
        owner_references_permission_enforcement: owner_refs,
        ..Default::default()
    })
    .await
    .expect("stand-in starts");
    let admin = client_of(&standin.kubeconfig_yaml("ns")).await;
    (standin, admin)
}

async fn client_of(kubeconfig: &str) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

async fn sa_client(standin: &StandIn, ns: &str, name: &str) -> Client {
    client_of(
        &standin
            .kubeconfig_for_service_account(ns, name)
            .expect("sa kubeconfig"),
    )
    .await
}

fn api_err(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

fn apply_cm(name: &str) -> Patch<Value> {
    Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"k": "applied"}}))
}

/// Creates (or replaces) a Role or ClusterRole and binds it with `subject`.
async fn grant(admin: &Client, ns: Option<&str>, name: &str, rules: Value, subject: Value) {
    let (role_kind, binding_kind, rpath, bpath) = match ns {
        Some(ns) => (
            "Role",
            "RoleBinding",
            format!("namespaces/{ns}/roles"),
            format!("namespaces/{ns}/rolebindings"),
        ),
        None => (
            "ClusterRole",
            "ClusterRoleBinding",
            "clusterroles".to_string(),
            "clusterrolebindings".to_string(),
        ),
    };
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role_kind,
        "metadata": {"name": name}, "rules": rules});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding_kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [subject]});
    for (path, body) in [(rpath, role), (bpath, binding)] {
        let req = http::Request::put(format!("/apis/rbac.authorization.k8s.io/v1/{path}/{name}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        admin.request_text(req).await.expect("PUT rbac object");
    }
}

fn sa_subject(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": "ns"})
}

fn user_of(standin: &StandIn, path_end: &str) -> Vec<kube_standin::RecordedRequest> {
    standin
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with(path_end))
        .collect()
}

#[tokio::test]
async fn admin_anonymous_and_bad_tokens() {
    let (standin, admin) = rbac_standin(None).await;
    // The admin kubeconfig is a system:masters user: everything is allowed.
    Api::<Namespace>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .expect("admin lists namespaces");
    let last = standin.requests().pop().unwrap();
    assert_eq!(last.user, "standin-admin");
    assert!(last.groups.iter().any(|g| g == "system:masters"));
    assert_eq!(last.authorization, "allow");
    assert_eq!(last.checks[0].reason, "system:masters");

    let http = reqwest::Client::new();
    let base = standin.url();
    // Anonymous: public info yes, discovery and resources no.
    let r = http.get(format!("{base}/version")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = http.get(format!("{base}/apis")).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/apis\""
    );
    let r = http
        .get(format!("{base}/api/v1/namespaces/ns/configmaps"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ns\"",
            "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403})
    );
    let logged = user_of(&standin, "/api/v1/namespaces/ns/configmaps")
        .pop()
        .unwrap();
    assert_eq!(
        (
            logged.user.as_str(),
            logged.authorization.as_str(),
            logged.code
        ),
        ("system:anonymous", "deny", 403)
    );
    assert!(logged.denied());
    // An unknown token is a 401, whatever the path.
    let r = http
        .get(format!("{base}/version"))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["reason"].clone(), body["message"].clone()),
        (json!("Unauthorized"), json!("Unauthorized"))
    );
    assert_eq!(standin.requests().pop().unwrap().user, "");
}

#[tokio::test]
async fn token_request_issues_service_account_tokens() {
    let (standin, admin) = rbac_standin(None).await;
    let base = standin.url();
    let http = reqwest::Client::new();
    let post = |name: &str, body: Value| {
        http.post(format!(
            "{base}/api/v1/namespaces/ns/serviceaccounts/{name}/token"
        ))
        .bearer_auth(standin.admin_token())
        .json(&body)
        .send()
    };
    let tr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    assert_eq!(post("ghost", tr.clone()).await.unwrap().status(), 404);
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "ns");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap(),
    )
    .await
    .unwrap();
    let r = post("robot", tr.clone()).await.unwrap();
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["kind"], "TokenRequest");
    assert_eq!(body["spec"]["expirationSeconds"], 3600);
    let token = body["status"]["token"].as_str().unwrap().to_string();
    let log = user_of(&standin, "/serviceaccounts/robot/token")
        .pop()
        .unwrap();
    assert_eq!(
        (
            log.verb.as_str(),
            log.resource.as_str(),
            log.subresource.as_str()
        ),
        ("create", "serviceaccounts", "token")
    );
    let short = json!({"kind": "TokenRequest", "spec": {"expirationSeconds": 60}});
    let r = post("robot", short).await.unwrap();
    assert_eq!(r.status(), 422);

    // The token authenticates as the ServiceAccount (and is then subject to RBAC).
    let r = http
        .get(format!("{base}/api/v1/namespaces/ns/configmaps"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let last = standin.requests().pop().unwrap();
    assert_eq!(last.user, "system:serviceaccount:ns:robot");
    assert_eq!(
        last.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ns",
            "system:authenticated"
        ]
    );
    // Authenticated users may discover.
    let r = http
        .get(format!("{base}/apis"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // A ServiceAccount without the token subresource permission cannot mint tokens.
    let r = http
        .post(format!(
            "{base}/api/v1/namespaces/ns/serviceaccounts/robot/token"
        ))
        .bearer_auth(&token)
        .json(&tr)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["message"],
        "serviceaccounts \"robot\" is forbidden: User \"system:serviceaccount:ns:robot\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"ns\""
    );
    // Deleting the ServiceAccount invalidates its tokens.
    sas.delete("robot", &DeleteParams::default()).await.unwrap();
    let r = http
        .get(format!("{base}/version"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

/// Bound tokens carry audiences: one issued for `vault` is not good for the API server, and a
/// TokenReview answers with the audiences asked for that the token holds, or refuses it.
#[tokio::test]
async fn tokens_are_bound_to_their_audiences() {
    let (standin, admin) = rbac_standin(None).await;
    let base = standin.url();
    let http = reqwest::Client::new();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "ns");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap(),
    )
    .await
    .unwrap();
    let r = http
        .post(format!(
            "{base}/api/v1/namespaces/ns/serviceaccounts/robot/token"
        ))
        .bearer_auth(standin.admin_token())
        .json(&json!({"kind": "TokenRequest", "spec": {"audiences": ["vault"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["spec"]["audiences"], json!(["vault"]));
    let token = body["status"]["token"].as_str().unwrap().to_string();

    // Not a credential for the API server.
    let r = http
        .get(format!("{base}/apis"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    let review = |audiences: Value| {
        http.post(format!("{base}/apis/authentication.k8s.io/v1/tokenreviews"))
            .bearer_auth(standin.admin_token())
            .json(
                &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token, "audiences": audiences}}),
            )
            .send()
    };
    let ok: Value = review(json!(["other", "vault"]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ok["status"]["authenticated"], true, "{ok}");
    assert_eq!(ok["status"]["audiences"], json!(["vault"]));
    // No audiences means the API server's, which the token does not hold.
    let refused: Value = review(json!([])).await.unwrap().json().await.unwrap();
    assert!(refused["status"]["authenticated"].is_null(), "{refused}");
    assert!(
        refused["status"]["error"]
            .as_str()
            .unwrap()
            .contains("token audiences"),
        "{refused}"
    );
}

#[tokio::test]
async fn apply_that_creates_needs_create_and_patch() {
    let (standin, admin) = rbac_standin(None).await;
    let sa = sa_client(&standin, "ns", "op").await;
    let cms: Api<ConfigMap> = Api::namespaced(sa.clone(), "ns");
    let pp = PatchParams::apply("op");
    // patch only: the apply that would create is refused on the create check.
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}]),
        sa_subject("op"),
    )
    .await;
    let e = api_err(cms.patch("c", &pp, &apply_cm("c")).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert!(
        e.message.starts_with("configmaps \"c\" is forbidden"),
        "{}",
        e.message
    );
    let log = user_of(&standin, "/configmaps/c").pop().unwrap();
    let checks: Vec<(String, bool)> = log
        .checks
        .iter()
        .map(|c| (c.attributes.verb.clone(), c.allowed))
        .collect();
    assert_eq!(checks, [("patch".into(), true), ("create".into(), false)]);
    assert_eq!(log.authorization, "deny");
    assert!(standin.object("", "configmaps", "ns", "c").is_none());
    // create only: the PATCH itself is refused by the filter.
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
        sa_subject("op"),
    )
    .await;
    let e = api_err(cms.patch("c", &pp, &apply_cm("c")).await.unwrap_err());
    assert_eq!(
        e.message,
        "configmaps \"c\" is forbidden: User \"system:serviceaccount:ns:op\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"ns\""
    );
    // both: created.
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch"]}]),
        sa_subject("op"),
    )
    .await;
    cms.patch("c", &pp, &apply_cm("c"))
        .await
        .expect("apply creates");
    assert_eq!(user_of(&standin, "/configmaps/c").pop().unwrap().code, 201);
    // An apply of an existing object needs only patch.
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}]),
        sa_subject("op"),
    )
    .await;
    let mut changed = apply_cm("c");
    if let Patch::Apply(v) = &mut changed {
        v["data"]["k"] = json!("again");
    }
    cms.patch("c", &pp, &changed).await.expect("apply updates");
    let log = user_of(&standin, "/configmaps/c").pop().unwrap();
    assert_eq!((log.code, log.checks.len()), (200, 1));
}

#[tokio::test]
async fn put_that_creates_needs_create_where_the_kind_allows_it() {
    let (standin, admin) = rbac_standin(None).await;
    let sa = sa_client(&standin, "ns", "op").await;
    let leases: Api<Lease> = Api::namespaced(sa, "ns");
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}))
            .unwrap();
    grant(&admin, Some("ns"), "op", json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update"]}]), sa_subject("op")).await;
    let e = api_err(
        leases
            .replace("l", &PostParams::default(), &lease)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    assert!(
        e.message
            .starts_with("leases.coordination.k8s.io \"l\" is forbidden"),
        "{}",
        e.message
    );
    grant(&admin, Some("ns"), "op", json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update", "create"]}]), sa_subject("op")).await;
    leases
        .replace("l", &PostParams::default(), &lease)
        .await
        .expect("PUT creates a Lease");
    let log = user_of(&standin, "/leases/l").pop().unwrap();
    assert_eq!(log.code, 201);
    assert_eq!(log.checks.len(), 2);
    // ConfigMaps do not allow create on update: a PUT of a missing one is a 404.
    let cms: Api<ConfigMap> = Api::namespaced(admin, "ns");
    let e = api_err(
        cms.replace("none", &PostParams::default(), &cm("none"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn rule_parts_subresources_wildcards_and_names() {
    let (standin, admin) = rbac_standin(None).await;
    let sa = sa_client(&standin, "ns", "op").await;
    let w = widgets(&admin, "ns");
    w.create(&PostParams::default(), &widget("w1", 1))
        .await
        .unwrap();
    w.create(&PostParams::default(), &widget("w2", 1))
        .await
        .unwrap();
    let sw = widgets(&sa, "ns");
    // A subresource rule grants the subresource only.
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": [GROUP], "resources": ["widgets/scale"], "verbs": ["get"]}]),
        sa_subject("op"),
    )
    .await;
    sw.get_scale("w1").await.expect("scale allowed");
    assert_eq!(api_err(sw.get("w1").await.unwrap_err()).code, 403);
    // `*/status` grants the status of any resource; `*` verbs.
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": [GROUP], "resources": ["*/status"], "verbs": ["*"]}]),
        sa_subject("op"),
    )
    .await;
    sw.get_status("w1").await.expect("status allowed");
    assert_eq!(api_err(sw.get_scale("w1").await.unwrap_err()).code, 403);
    // `*` resources include subresources; `*` groups.
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}]),
        sa_subject("op"),
    )
    .await;
    sw.get("w1").await.unwrap();
    sw.get_scale("w1").await.unwrap();
    assert_eq!(
        api_err(sw.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );
    // resourceNames: get of the named object; list only when the field selector pins it.
    grant(&admin, Some("ns"), "op", json!([{"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["get", "list"], "resourceNames": ["w1"]}]), sa_subject("op")).await;
    sw.get("w1").await.unwrap();
    assert_eq!(api_err(sw.get("w2").await.unwrap_err()).code, 403);
    assert_eq!(
        api_err(sw.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );
    let pinned = sw
        .list(&ListParams::default().fields("metadata.name=w1"))
        .await
        .expect("list pinned to the granted name");
    assert_eq!(pinned.items.len(), 1);
}

#[tokio::test]
async fn bindings_of_each_subject_kind_and_scope() {
    let (standin, admin) = rbac_standin(None).await;
    let sa = sa_client(&standin, "ns", "op").await;
    let read_cms = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]);
    let in_ns: Api<ConfigMap> = Api::namespaced(sa.clone(), "ns");
    let in_other: Api<ConfigMap> = Api::namespaced(sa.clone(), "other");
    let everywhere: Api<ConfigMap> = Api::all(sa.clone());
    let lp = ListParams::default();
    assert_eq!(api_err(in_ns.list(&lp).await.unwrap_err()).code, 403);
    // RoleBinding, ServiceAccount subject without namespace = the binding's namespace.
    grant(
        &admin,
        Some("ns"),
        "a",
        read_cms.clone(),
        json!({"kind": "ServiceAccount", "name": "op"}),
    )
    .await;
    in_ns.list(&lp).await.expect("namespaced grant");
    assert_eq!(api_err(in_other.list(&lp).await.unwrap_err()).code, 403);
    let e = api_err(everywhere.list(&lp).await.unwrap_err());
    assert_eq!(
        e.message,
        "configmaps is forbidden: User \"system:serviceaccount:ns:op\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope"
    );
    // A RoleBinding in another namespace to a ClusterRole, Group subject.
    grant(
        &admin,
        None,
        "reader",
        read_cms.clone(),
        json!({"kind": "Group", "name": "nobody"}),
    )
    .await;
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "reader", "namespace": "other"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
        "subjects": [{"kind": "Group", "name": "system:serviceaccounts:ns"}]});
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin.clone(), "other")
        .create(&PostParams::default(), &serde_json::from_value(rb).unwrap())
        .await
        .unwrap();
    in_other
        .list(&lp)
        .await
        .expect("RoleBinding to a ClusterRole");
    assert_eq!(api_err(everywhere.list(&lp).await.unwrap_err()).code, 403);
    // A ClusterRoleBinding, User subject: every namespace and the cluster scope.
    grant(
        &admin,
        None,
        "reader2",
        read_cms,
        json!({"kind": "User", "name": "system:serviceaccount:ns:op"}),
    )
    .await;
    everywhere.list(&lp).await.expect("cluster-wide grant");
    // A binding to a missing role: denied, with RBAC's reason in the message.
    let other_sa = sa_client(&standin, "ns", "lost").await;
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "lost", "namespace": "ns"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "missing"},
        "subjects": [{"kind": "ServiceAccount", "name": "lost"}]});
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin.clone(), "ns")
        .create(&PostParams::default(), &serde_json::from_value(rb).unwrap())
        .await
        .unwrap();
    let e = api_err(
        Api::<ConfigMap>::namespaced(other_sa, "ns")
            .list(&lp)
            .await
            .unwrap_err(),
    );
    assert!(
        e.message
            .ends_with(": RBAC: role.rbac.authorization.k8s.io \"missing\" not found"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn aggregated_cluster_roles_and_denied_watches() {
    let (standin, admin) = rbac_standin(None).await;
    let sa = sa_client(&standin, "ns", "op").await;
    let agg = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "agg"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/agg": "true"}}]}});
    let part = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "part", "labels": {"example.com/agg": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]});
    let crs: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    for o in [agg, part] {
        crs.create(&PostParams::default(), &serde_json::from_value(o).unwrap())
            .await
            .unwrap();
    }
    let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "agg"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "agg"},
        "subjects": [sa_subject("op")]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(crb).unwrap(),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(sa, "ns");
    cms.list(&ListParams::default())
        .await
        .expect("aggregated rule");
    // Watch is its own verb: denied before any event is streamed.
    let e = cms
        .watch(&WatchParams::default(), "0")
        .await
        .err()
        .map(api_err);
    let e = e.expect("watch refused");
    assert_eq!(e.code, 403);
    assert!(
        e.message.contains("cannot watch resource \"configmaps\""),
        "{}",
        e.message
    );
    let log = standin.requests().pop().unwrap();
    assert_eq!((log.verb.as_str(), log.code), ("watch", 403));
}

fn owned_cm(name: &str, owner_uid: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "name": "w1", "uid": owner_uid,
        "blockOwnerDeletion": true}]}}))
    .unwrap()
}

#[tokio::test]
async fn block_owner_deletion_needs_update_on_the_owners_finalizers() {
    let (standin, admin) = rbac_standin(None).await;
    let w = widgets(&admin, "ns")
        .create(&PostParams::default(), &widget("w1", 1))
        .await
        .unwrap();
    let uid = w.metadata.uid.clone().unwrap();
    let sa = sa_client(&standin, "ns", "op").await;
    let cms: Api<ConfigMap> = Api::namespaced(sa, "ns");
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
        sa_subject("op"),
    )
    .await;
    let e = api_err(
        cms.create(&PostParams::default(), &owned_cm("c", &uid))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    assert_eq!(
        e.message,
        "configmaps \"c\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>"
    );
    let log = standin.requests().pop().unwrap();
    let last = log.checks.last().unwrap();
    assert_eq!(
        (
            last.attributes.verb.as_str(),
            last.attributes.resource.as_str(),
            last.attributes.subresource.as_str(),
            last.attributes.name.as_str()
        ),
        ("update", "widgets", "finalizers", "w1")
    );
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {"apiGroups": [GROUP], "resources": ["widgets/finalizers"], "verbs": ["update"]}]),
        sa_subject("op"),
    )
    .await;
    cms.create(&PostParams::default(), &owned_cm("c", &uid))
        .await
        .expect("allowed now");
    // Changing the owner references of an existing object needs delete on it.
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch"]},
        {"apiGroups": [GROUP], "resources": ["widgets/finalizers"], "verbs": ["update"]}]),
        sa_subject("op"),
    )
    .await;
    let drop_refs = Patch::Merge(json!({"metadata": {"ownerReferences": null}}));
    let e = api_err(
        cms.patch("c", &PatchParams::default(), &drop_refs)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "configmaps \"c\" is forbidden: cannot set an ownerRef on a resource you can't delete: , <nil>"
    );
    let unchanged = Patch::Merge(json!({"data": {"k": "other"}}));
    cms.patch("c", &PatchParams::default(), &unchanged)
        .await
        .expect("owner references untouched: no delete needed");
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch", "delete"]}]),
        sa_subject("op"),
    )
    .await;
    cms.patch("c", &PatchParams::default(), &drop_refs)
        .await
        .expect("delete granted");

    // Switched off, the plugin checks nothing.
    let (standin, admin) = rbac_standin(Some(false)).await;
    let w = widgets(&admin, "ns")
        .create(&PostParams::default(), &widget("w1", 1))
        .await
        .unwrap();
    let sa = sa_client(&standin, "ns", "op").await;
    grant(
        &admin,
        Some("ns"),
        "op",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
        sa_subject("op"),
    )
    .await;
    Api::<ConfigMap>::namespaced(sa, "ns")
        .create(
            &PostParams::default(),
            &owned_cm("c", &w.metadata.uid.unwrap()),
        )
        .await
        .expect("no owner-reference enforcement");
}

#[tokio::test]
async fn always_allow_records_decisions() {
    let (standin, client) = start_with_widgets().await;
    Api::<ConfigMap>::namespaced(client, "test")
        .create(&PostParams::default(), &cm("x"))
        .await
        .expect("anonymous is allowed under AlwaysAllow");
    let log = standin.requests().pop().unwrap();
    assert_eq!(log.user, "system:anonymous");
    assert_eq!(log.authorization, "allow");
    assert_eq!(log.checks[0].reason, "AlwaysAllow");
    assert_eq!(log.checks[0].attributes.verb, "create");
}
