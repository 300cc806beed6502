# Read-only access to {{kind}} objects.
# Aggregated into the built-in "view" ClusterRole.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
    rbac.authorization.k8s.io/aggregate-to-view: "true"
  name: {{kind_lower}}-viewer-role
rules:
- apiGroups:
  - {{full_group}}
  resources:
  - {{plural}}
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - {{full_group}}
  resources:
  - {{plural}}/status
  verbs:
  - get
