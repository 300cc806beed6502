# Full control of {{kind}} objects, for namespace admins.
# Aggregated into the built-in "admin" ClusterRole.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
  name: {{kind_lower}}-admin-role
rules:
- apiGroups:
  - {{full_group}}
  resources:
  - {{plural}}
  verbs:
  - "*"
- apiGroups:
  - {{full_group}}
  resources:
  - {{plural}}/status
  verbs:
  - get
