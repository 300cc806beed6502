# Everything an OLM bundle is generated from (`kubectl kustomize config/manifests`, read by
# `bundle-tool generate bundle` and `bundle-tool release`): the base CSV, the operator
# (config/default), the samples (alm-examples) and the scorecard configuration.
resources:
- bases/{{project}}.clusterserviceversion.yaml
- ../default
- ../samples
- ../scorecard

# +olmkit:scaffold:manifests-patches
