resources:
- service.yaml
