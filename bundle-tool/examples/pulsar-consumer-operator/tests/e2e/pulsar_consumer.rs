//! PulsarConsumer (deploy-image) against the stand-in: the sample becomes a Deployment running the
//! Pulsar image with its consumer command, user and replicas, and the service URL, topic and
//! subscription in the container's environment; `status.pods` names its running pods and
//! `status.readyReplicas` counts them; a new topic rolls the pods, a new `spec.replicas` scales
//! them; deleting it records a `Deleting` event and releases it. Specs the CRD's schema refuses
//! never reach the controller.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1 as events;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};

use pulsar_consumer_api::pulsar_consumer::{FINALIZER, PulsarConsumer};

use pulsar_consumer_operator::controller::pulsar_consumer as controller;

use crate::*;

const SAMPLE: &str = include_str!("../../config/samples/consumer_v1_pulsarconsumer.yaml");

/// The container's environment, as (name, value).
fn env_of(deployment: &Deployment) -> Vec<(String, String)> {
    let pod = deployment.spec.template.spec.clone().unwrap_or_default();
    pod.containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect()
}

/// The environment the spec of `object` asks for.
fn expected_env(object: &PulsarConsumer) -> Vec<(String, String)> {
    let spec = &object.spec;
    vec![
        (controller::URL_ENV.into(), spec.service_url.clone()),
        (controller::TOPIC_ENV.into(), spec.topic.clone()),
        (
            controller::SUBSCRIPTION_ENV.into(),
            spec.subscription_name.clone(),
        ),
    ]
}

/// The sorted names of the Running pods the Deployment `name` selects, as the API server lists
/// them (the test's own view, to compare `status.pods` with).
async fn running_pods(env: &Env, name: &str) -> Vec<String> {
    let deployments: Api<Deployment> = env.api();
    let deployment = deployments.get(name).await.unwrap();
    let selector: Vec<String> = deployment
        .spec
        .selector
        .match_labels
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let pods: Api<Pod> = env.api();
    let listed = pods
        .list(&ListParams::default().labels(&selector.join(",")))
        .await
        .unwrap();
    let mut names: Vec<String> = listed
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .map(|p| p.name_any())
        .collect();
    names.sort();
    names
}

/// Waits until `status.pods` lists `replicas` pods, all ready, that are the Running pods of the
/// Deployment (the current ones: the stand-in replaces pods at once) and that `accept` accepts,
/// and returns them.
async fn wait_for_pods(
    env: &Env,
    name: &str,
    replicas: usize,
    what: &str,
    accept: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let api: Api<PulsarConsumer> = env.api();
    wait_for(what, || async {
        let status = api.get(name).await.unwrap().status.unwrap_or_default();
        let ready = usize::try_from(status.ready_replicas).unwrap_or(0);
        let listed = running_pods(env, name).await;
        let current = status.pods.len() == replicas && ready == replicas && status.pods == listed;
        (current && accept(&status.pods)).then_some(status.pods)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_consumer_sample_consumes_scales_and_cleans_up() {
    let env = Env::start().await;
    let api: Api<PulsarConsumer> = env.api();
    let deployments: Api<Deployment> = env.api();
    let mut sample: PulsarConsumer = sample(SAMPLE);
    let name = sample.name_any();
    assert_eq!(sample.spec.replicas, 2);
    apply(&api, &sample).await;

    let deployment = wait_for("the Deployment", || async {
        deployments.get_opt(&name).await.unwrap()
    })
    .await;
    assert_eq!(env_of(&deployment), expected_env(&sample));
    let spec = deployment.spec;
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some(controller::DEFAULT_IMAGE));
    assert_eq!(container.command.as_deref().unwrap(), controller::COMMAND);
    let security = container.security_context.as_ref().unwrap();
    assert_eq!(security.run_as_user, Some(controller::RUN_AS_USER));
    let owner = &deployment.metadata.owner_references.unwrap()[0];
    assert_eq!(owner.kind, "PulsarConsumer");
    assert_eq!(owner.name, name);

    // The stand-in runs the Deployment's two pods: the status names them and the PulsarConsumer
    // becomes Available.
    let first = wait_for_pods(&env, &name, 2, "status.pods to list 2 pods", |_| true).await;
    let object = wait_for("Available=True", || async {
        let object = api.get(&name).await.unwrap();
        let status = object.status.clone().unwrap_or_default();
        (condition(&status.conditions, "Available") == Some("True")).then_some(object)
    })
    .await;
    assert!(object.finalizers().iter().any(|f| f == FINALIZER));
    let status = object.status.unwrap();
    assert_eq!(status.observed_generation, object.metadata.generation);

    // A new topic reaches the containers' environment, which rolls the pods.
    sample.spec.topic = "persistent://public/default/payments".into();
    apply(&api, &sample).await;
    wait_for("the Deployment to consume the new topic", || async {
        let d = deployments.get(&name).await.unwrap();
        (env_of(&d) == expected_env(&sample)).then_some(())
    })
    .await;
    let replaced = |pods: &[String]| pods.iter().all(|p| !first.contains(p));
    let rolled = wait_for_pods(&env, &name, 2, "status.pods to list new pods", replaced).await;

    // Scaling up and down reaches the Deployment and then the status.
    for replicas in [3, 1] {
        sample.spec.replicas = replicas;
        apply(&api, &sample).await;
        wait_for("the Deployment to scale", || async {
            let d = deployments.get(&name).await.unwrap();
            (d.spec.replicas == Some(replicas)).then_some(())
        })
        .await;
        let count = usize::try_from(replicas).unwrap();
        let what = "status.pods to follow the scale";
        let pods = wait_for_pods(&env, &name, count, what, |_| true).await;
        // Scaling keeps the template: the pods that stay are those of the rollout.
        assert!(
            pods.iter().any(|p| rolled.contains(p)),
            "{pods:?} {rolled:?}"
        );
    }

    // Deletion: the finalizer records an event and lets the PulsarConsumer go; the garbage
    // collector takes the Deployment and its pods.
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for("the PulsarConsumer to be gone", || async {
        let object = api.get_opt(&name).await.unwrap();
        object.is_none().then_some(())
    })
    .await;
    wait_for("the Deployment to be gone", || async {
        let deployment = deployments.get_opt(&name).await.unwrap();
        deployment.is_none().then_some(())
    })
    .await;
    let events: Api<events::Event> = env.api();
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str()))
        .filter_map(|e| e.reason)
        .collect();
    for reason in ["Created", "Updated", "Deleting"] {
        let found = reasons.iter().any(|r| r == reason);
        assert!(found, "no {reason} event in {reasons:?}");
    }
    // The role generated from src/rbac.rs covered every call the manager made.
    let denied: Vec<String> = env
        .standin
        .requests()
        .iter()
        .filter(|r| r.denied())
        .map(|r| format!("{} {} {}/{}", r.user, r.verb, r.group, r.resource))
        .collect();
    assert!(denied.is_empty(), "denied: {denied:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_the_schema_refuses_never_reach_the_controller() {
    let env = Env::start().await;
    let api: Api<PulsarConsumer> = env.api();
    let valid: PulsarConsumer = sample(SAMPLE);
    type Edit = fn(&mut PulsarConsumer);
    let cases: [(&str, Edit); 8] = [
        ("an HTTP URL", |o| {
            o.spec.service_url = "http://pulsar.pulsar.svc:8080".into()
        }),
        ("a URL without a host", |o| {
            o.spec.service_url = "pulsar://".into()
        }),
        ("a URL with a blank", |o| {
            o.spec.service_url = "pulsar://pulsar 6650".into()
        }),
        ("a topic read as an option", |o| o.spec.topic = "-n".into()),
        ("a full topic name without namespace", |o| {
            o.spec.topic = "persistent://orders".into()
        }),
        ("an empty subscription", |o| {
            o.spec.subscription_name = String::new()
        }),
        ("a subscription with a blank", |o| {
            o.spec.subscription_name = "two words".into()
        }),
        ("negative replicas", |o| o.spec.replicas = -1),
    ];
    for (i, (what, edit)) in cases.into_iter().enumerate() {
        let mut object = valid.clone();
        object.metadata.name = Some(format!("invalid-{i}"));
        edit(&mut object);
        let params = PatchParams::apply(TEST_MANAGER).force();
        let name = object.name_any();
        match api.patch(&name, &params, &Patch::Apply(&object)).await {
            Err(kube::Error::Api(e)) => assert_eq!(e.code, 422, "{what}: {e:?}"),
            other => panic!("{what} was not refused: {other:?}"),
        }
    }
    // The refused objects do not exist: nothing was created for the controller to run.
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert!(listed.items.is_empty(), "{:?}", listed.items);
}
