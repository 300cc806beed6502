# Lets the operator review the bearer tokens and permissions of /metrics callers
# (--metrics-secure, the default): bound to its own ServiceAccount, as kubebuilder does.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
  name: metrics-auth-rolebinding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: metrics-auth-role
subjects:
- kind: ServiceAccount
  name: controller-manager
  namespace: system
