//! {{kind}} (deploy-image) against the stand-in: the sample becomes a Deployment running the
//! image as `create api --image` set it up (its command, port and user, where given),
//! `Available` once its pods are, scales with `spec.size`; deleting it records a `Deleting`
//! event and releases it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1 as events;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};

use {{api_crate}}::{{kind_snake}}::{FINALIZER, {{kind}}};

use {{project_crate}}::controller::{{kind_snake}} as controller;

use crate::*;

const SAMPLE: &str = include_str!("../../config/samples/{{sample_file}}");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn {{kind_snake}}_sample_runs_the_image_and_cleans_up() {
    let env = Env::start().await;
    let api: Api<{{kind}}> = env.api();
    let deployments: Api<Deployment> = env.api();
    let mut sample: {{kind}} = sample(SAMPLE);
    let name = sample.name_any();
    apply(&api, &sample).await;

    let deployment = wait_for("the Deployment", || async {
        deployments.get_opt(&name).await.unwrap()
    })
    .await;
    let spec = deployment.spec;
    assert_eq!(spec.replicas, Some(sample.spec.size));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some(controller::DEFAULT_IMAGE));
{{#if has_command}}
    assert_eq!(container.command.as_deref().unwrap(), controller::COMMAND);
{{/if}}
{{#if has_port}}
    let port = container.ports.as_ref().unwrap()[0].container_port;
    assert_eq!(port, sample.spec.container_port);
{{/if}}
{{#if has_run_as_user}}
    let security = container.security_context.as_ref().unwrap();
    assert_eq!(security.run_as_user, Some(controller::RUN_AS_USER));
{{/if}}
    let owner = &deployment.metadata.owner_references.unwrap()[0];
    assert_eq!(owner.kind, "{{kind}}");
    assert_eq!(owner.name, name);

    // The stand-in runs the Deployment's pods; the {{kind}} becomes Available.
    let object = wait_for("Available=True", || async {
        let object = api.get(&name).await.unwrap();
        let status = object.status.clone().unwrap_or_default();
        (condition(&status.conditions, "Available") == Some("True")).then_some(object)
    })
    .await;
    assert!(object.finalizers().iter().any(|f| f == FINALIZER));
    let status = object.status.unwrap();
    assert_eq!(status.observed_generation, object.metadata.generation);

    // A new size reaches the Deployment, with an event.
    sample.spec.size += 1;
    apply(&api, &sample).await;
    wait_for("the Deployment to scale", || async {
        let d = deployments.get(&name).await.unwrap();
        (d.spec.replicas == Some(sample.spec.size)).then_some(())
    })
    .await;

    // Deletion: the finalizer records an event and lets the {{kind}} go; the garbage collector
    // takes the Deployment.
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for("the {{kind}} to be gone", || async {
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
}
