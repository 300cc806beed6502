apiVersion: {{full_group}}/{{version}}
kind: {{kind}}
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
  name: {{kind_lower}}-sample
spec:
{{#if deploy_image}}
  # TODO(user): the number of pods running the image.
  size: 1
{{#if has_port}}
  # TODO(user): the port the container listens on.
  containerPort: {{container_port}}
{{/if}}
{{else}}
  # TODO(user): the fields of your {{kind}}Spec.
  foo: bar
{{/if}}
