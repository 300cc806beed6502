- target:
    group: apiextensions.k8s.io
    version: v1
    kind: CustomResourceDefinition
    name: {{plural}}.{{full_group}}
  patch: |-
    - op: remove
      path: /metadata/annotations/cert-manager.io~1inject-ca-from
