resources:
- manager.yaml
# The operator image. `bundle-tool release --operator-repo` sets the released one.
images:
- name: controller
  newName: {{image_tag_base}}
  newTag: 0.1.0
