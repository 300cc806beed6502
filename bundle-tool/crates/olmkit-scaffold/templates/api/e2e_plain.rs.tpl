//! {{kind}} against the stand-in: the sample is reconciled (`Available`, `observedGeneration`),
//! and again after each change.

use kube::ResourceExt;

use {{api_crate}}::{{kind_snake}}::{{kind}};

use crate::*;

const SAMPLE: &str = include_str!("../../config/samples/{{sample_file}}");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn {{kind_snake}}_sample_is_reconciled() {
    let env = Env::start().await;
{{#if namespaced}}
    let api: Api<{{kind}}> = env.api();
{{else}}
    let api: Api<{{kind}}> = Api::all(env.client.clone());
{{/if}}
    let mut sample: {{kind}} = sample(SAMPLE);
    let name = sample.name_any();
    let created = apply(&api, &sample).await;
    let reconciled = |generation: Option<i64>| {
        let api = api.clone();
        let name = name.clone();
        move || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let status = api.get(&name).await.unwrap().status.unwrap_or_default();
                let available = condition(&status.conditions, "Available") == Some("True");
                (available && status.observed_generation == generation).then_some(())
            }
        }
    };
    wait_for("Available=True", reconciled(created.metadata.generation)).await;

    // TODO(user): change a field your controller acts on, and check what it did.
    sample.spec.foo = Some("changed".into());
    let changed = apply(&api, &sample).await;
    let generation = changed.metadata.generation;
    assert_ne!(generation, created.metadata.generation);
    wait_for("the new generation", reconciled(generation)).await;
}
