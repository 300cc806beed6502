# A self-signed issuer and the webhook's serving certificate. cert-manager writes the certificate
# to the Secret `webhook-server-cert` (mounted by the manager at
# /tmp/k8s-webhook-server/serving-certs) and injects its CA into the CRD's conversion stanza.
# The DNS names are filled in by config/default from the webhook Service's name and namespace.
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
  name: selfsigned-issuer
  namespace: system
spec:
  selfSigned: {}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
  name: serving-cert
  namespace: system
spec:
  dnsNames:
  - SERVICE_NAME.SERVICE_NAMESPACE.svc
  - SERVICE_NAME.SERVICE_NAMESPACE.svc.cluster.local
  issuerRef:
    kind: Issuer
    name: selfsigned-issuer
  secretName: webhook-server-cert
