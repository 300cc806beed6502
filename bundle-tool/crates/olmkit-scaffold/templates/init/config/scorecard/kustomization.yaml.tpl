# operator-sdk scorecard configuration; bundle generation copies it to tests/scorecard/config.yaml.
resources:
- bases/config.yaml
patches:
- path: patches/basic.config.yaml
  target:
    group: scorecard.operatorframework.io
    version: v1alpha3
    kind: Configuration
    name: config
- path: patches/olm.config.yaml
  target:
    group: scorecard.operatorframework.io
    version: v1alpha3
    kind: Configuration
    name: config
