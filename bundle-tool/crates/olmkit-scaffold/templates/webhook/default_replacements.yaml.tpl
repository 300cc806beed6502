# Wire cert-manager to the webhook, as kubebuilder does: the CRD's CA-injection annotation names
# the Certificate, and the Certificate's DNS names are the webhook Service's.
replacements:
- source:
    kind: Certificate
    group: cert-manager.io
    version: v1
    name: serving-cert
    fieldPath: .metadata.namespace
  targets:
  - select:
      kind: CustomResourceDefinition
    fieldPaths:
    - .metadata.annotations.[cert-manager.io/inject-ca-from]
    options:
      delimiter: /
      index: 0
      create: true
- source:
    kind: Certificate
    group: cert-manager.io
    version: v1
    name: serving-cert
    fieldPath: .metadata.name
  targets:
  - select:
      kind: CustomResourceDefinition
    fieldPaths:
    - .metadata.annotations.[cert-manager.io/inject-ca-from]
    options:
      delimiter: /
      index: 1
      create: true
- source:
    kind: Service
    version: v1
    name: webhook-service
    fieldPath: .metadata.name
  targets:
  - select:
      kind: Certificate
      group: cert-manager.io
      version: v1
      name: serving-cert
    fieldPaths:
    - .spec.dnsNames.0
    - .spec.dnsNames.1
    options:
      delimiter: .
      index: 0
      create: true
- source:
    kind: Service
    version: v1
    name: webhook-service
    fieldPath: .metadata.namespace
  targets:
  - select:
      kind: Certificate
      group: cert-manager.io
      version: v1
      name: serving-cert
    fieldPaths:
    - .spec.dnsNames.0
    - .spec.dnsNames.1
    options:
      delimiter: .
      index: 1
      create: true
