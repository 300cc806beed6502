# Asks cert-manager's CA injector to fill spec.conversion.webhook.clientConfig.caBundle with the
# CA of the webhook's serving certificate. config/default replaces the placeholders with the
# Certificate's namespace and name; config/manifests removes the annotation again (under OLM,
# OLM injects its own CA).
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    cert-manager.io/inject-ca-from: CERTIFICATE_NAMESPACE/CERTIFICATE_NAME
  name: {{plural}}.{{full_group}}
