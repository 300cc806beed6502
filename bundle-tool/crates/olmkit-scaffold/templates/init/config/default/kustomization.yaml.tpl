# The operator for installs without OLM: `kubectl apply -k config/default` (`make deploy`).
namespace: {{project}}-system
# Prefixes every name, so several kustomize-deployed operators do not collide.
namePrefix: {{project}}-

resources:
- ../crd
- ../rbac
- ../manager
- metrics_service.yaml
# +olmkit:scaffold:default-resources

# +olmkit:scaffold:default-replacements
