//! Stage 3, generate ([`Planned::generate`] → [`Generated`]): the bundle of the release,
//! through olmkit-bundle's generator, after pointing the containers that run the manifests'
//! manager image at the new operator image (built first, in this stage, when the CSV pins it
//! by digest: [`crate::images`]).

use crate::images::{ImageSet, ImagesError, operator_image_for_csv};
use crate::plan::{Decisions, Planned};
use crate::{Event, Progress, ReleaseConfig, Stage};
use olmkit_bundle::generate::{
    GenerateBundleError, GenerateInputs, GeneratedBundle, generate_bundle,
};
use olmkit_catalog::catalog_dir::CatalogDir;
use olmkit_core::image_ref::repository_as_written;
use serde_json::Value;
use thiserror::Error;

/// The bundle could not be generated.
#[derive(Debug, Error)]
pub enum GenerateError {
    /// `--operator-repo` was given but no Deployment runs an image to replace.
    #[error("--operator-repo: the manifests have no Deployment whose image could be set")]
    NoDeployment,
    /// The generator refused the manifests.
    #[error(transparent)]
    Bundle(Box<GenerateBundleError>),
    /// The operator image the CSV pins by digest could not be built.
    #[error(transparent)]
    OperatorImage(Box<ImagesError>),
}

impl GenerateError {
    /// `hint:` lines.
    pub fn hints(&self) -> Vec<String> {
        match self {
            GenerateError::NoDeployment => vec![
                "the operator's Deployment (config/manager) must be among the manifests".into(),
            ],
            GenerateError::Bundle(e) => e.hint().into_iter().collect(),
            GenerateError::OperatorImage(e) => e.hints(),
        }
    }

    /// True when the manifests or the flags are at fault (always, but for an image build
    /// that failed on its own).
    pub fn is_user_error(&self) -> bool {
        match self {
            GenerateError::OperatorImage(e) => e.is_user_error(),
            _ => true,
        }
    }
}

/// A release with its bundle generated: the third stage, which
/// [`Generated::validate`](crate::validate) validates.
#[derive(Debug)]
pub struct Generated {
    pub(crate) config: ReleaseConfig,
    pub(crate) catalog: CatalogDir,
    pub(crate) decisions: Decisions,
    pub(crate) images: ImageSet,
    pub(crate) bundle: GeneratedBundle,
}

impl Generated {
    /// The bundle's files.
    pub fn bundle(&self) -> &GeneratedBundle {
        &self.bundle
    }
}

impl Planned {
    /// Generates the bundle (after building the operator image when the CSV pins it).
    pub fn generate(self, progress: &mut Progress<'_>) -> Result<Generated, GenerateError> {
        progress(Event::Stage(Stage::Generate));
        let mut images = ImageSet::default();
        let operator_ref =
            operator_image_for_csv(&self.config, &self.decisions, &mut images, progress)
                .map_err(|e| GenerateError::OperatorImage(Box::new(e)))?;
        let bundle = generate(
            &self.config,
            &self.decisions,
            self.inputs,
            operator_ref.as_deref(),
        )?;
        Ok(Generated {
            config: self.config,
            catalog: self.catalog,
            decisions: self.decisions,
            images,
            bundle,
        })
    }
}

/// Generates the bundle of `planned`, the manager's containers running `operator_ref` (the
/// operator image by tag, or by digest when the CSV pins it; `None` when nothing names it).
pub fn generate(
    config: &ReleaseConfig,
    planned: &Decisions,
    mut inputs: GenerateInputs,
    operator_ref: Option<&str>,
) -> Result<GeneratedBundle, GenerateError> {
    match (&planned.names.current_repo, operator_ref) {
        (Some(repo), Some(new_ref)) => {
            set_operator_image(&mut inputs, repo, new_ref);
        }
        (None, _) if config.operator_repo.is_some() => return Err(GenerateError::NoDeployment),
        _ => {}
    }
    let mut opts = config.generate_options(
        &planned.version,
        planned.created_at.clone(),
        planned.replaces.clone(),
        planned.skips.clone(),
        planned.skip_range.clone(),
        planned.bundle_default.clone(),
    );
    opts.channels = planned.channels.clone();
    generate_bundle(&inputs, &opts).map_err(|e| GenerateError::Bundle(Box::new(e)))
}

fn containers_mut(doc: &mut Value) -> impl Iterator<Item = &mut Value> {
    let spec = doc.pointer_mut("/spec/template/spec");
    let mut out = Vec::new();
    if let Some(Value::Object(spec)) = spec {
        for (k, v) in spec.iter_mut() {
            if (k == "containers" || k == "initContainers")
                && let Value::Array(list) = v
            {
                out.extend(list.iter_mut());
            }
        }
    }
    out.into_iter()
}

/// Points every Deployment container running an image of `repo` at `new_ref`; returns how many.
pub fn set_operator_image(inputs: &mut GenerateInputs, repo: &str, new_ref: &str) -> usize {
    let mut n = 0;
    for d in inputs
        .manifests
        .iter_mut()
        .filter(|d| d.kind() == "Deployment")
    {
        for c in containers_mut(&mut d.object) {
            let runs_repo = c
                .get("image")
                .and_then(Value::as_str)
                .is_some_and(|i| repository_as_written(i) == repo);
            if runs_repo {
                c["image"] = Value::from(new_ref);
                n += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operator_image_is_rewritten_only_where_it_runs() {
        let doc = |kind: &str, images: &[&str]| olmkit_bundle::Manifest {
            file: "t".into(),
            doc_index: 0,
            item: None,
            object: json!({
                "kind": kind,
                "spec": {"template": {"spec": {
                    "initContainers": [{"name": "init", "image": "busybox:1"}],
                    "containers": images.iter().map(|i| json!({"name": "manager", "image": i})).collect::<Vec<_>>()
                }}}
            }),
        };
        let mut inputs = GenerateInputs {
            manifests: vec![
                doc("StatefulSet", &["quay.io/x/other:0.1.0"]),
                doc("Deployment", &["quay.io/x/op:0.1.0", "memcached:1.6"]),
                doc("StatefulSet", &["quay.io/x/op:0.1.0"]),
            ],
            ..Default::default()
        };
        // The manager image comes from the Deployments only.
        assert_eq!(inputs.manager_image(), Some("quay.io/x/op:0.1.0"));
        assert_eq!(
            set_operator_image(&mut inputs, "quay.io/x/op", "quay.io/x/op:0.2.0"),
            1
        );
        let d = &inputs.manifests[1].object;
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/image"),
            Some(&json!("quay.io/x/op:0.2.0"))
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/1/image"),
            Some(&json!("memcached:1.6"))
        );
        assert_eq!(
            d.pointer("/spec/template/spec/initContainers/0/image"),
            Some(&json!("busybox:1"))
        );
        // Only Deployments are the operator's install strategy.
        assert_eq!(
            inputs.manifests[2]
                .object
                .pointer("/spec/template/spec/containers/0/image"),
            Some(&json!("quay.io/x/op:0.1.0"))
        );
    }
}
