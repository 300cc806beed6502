# The CRDs, generated from the Rust types in {{api_package}}/ by `make manifests`
# (`manager crd --output-dir config/crd/bases`). Not meant to be built on its own once a kind has
# a conversion webhook: the Service it points at is resolved by config/default.
resources:
# +olmkit:scaffold:crdkustomizeresource

patches:
# +olmkit:scaffold:crdkustomizewebhookpatch

# Teach kustomize that spec.conversion refers to a Service (name prefix, namespace).
configurations:
- kustomizeconfig.yaml
