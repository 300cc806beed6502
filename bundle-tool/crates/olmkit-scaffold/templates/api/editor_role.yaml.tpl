# Create, change and delete {{kind}} objects.
# Aggregated into the built-in "edit" ClusterRole.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
  name: {{kind_lower}}-editor-role
rules:
- apiGroups:
  - {{full_group}}
  resources:
  - {{plural}}
  verbs:
  - create
  - delete
  - get
  - list
  - patch
  - update
  - watch
- apiGroups:
  - {{full_group}}
  resources:
  - {{plural}}/status
  verbs:
  - get
