# OLM issues, mounts and rotates the webhook certificate itself and injects its CA into the
# CRD's conversion stanza; OLM bundles cannot carry cert-manager objects. Remove the cert-manager
# pieces config/default adds.
patches:
- target:
    group: apps
    version: v1
    kind: Deployment
    name: {{project}}-controller-manager
  # OLM mounts its own certificate at /tmp/k8s-webhook-server/serving-certs: drop the
  # cert-manager Secret volume and its mount (matched by key, not by position).
  patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: {{project}}-controller-manager
      namespace: {{project}}-system
    spec:
      template:
        spec:
          containers:
          - name: manager
            volumeMounts:
            - mountPath: /tmp/k8s-webhook-server/serving-certs
              $patch: delete
          volumes:
          - name: cert
            $patch: delete
- patch: |-
    $patch: delete
    apiVersion: cert-manager.io/v1
    kind: Certificate
    metadata:
      name: {{project}}-serving-cert
      namespace: {{project}}-system
- patch: |-
    $patch: delete
    apiVersion: cert-manager.io/v1
    kind: Issuer
    metadata:
      name: {{project}}-selfsigned-issuer
      namespace: {{project}}-system
# +olmkit:scaffold:manifests-crd-patches
