# Who may scrape /metrics: bind this ClusterRole to the scraper's identity (for Prometheus, its
# ServiceAccount) with a ClusterRoleBinding. The operator asks the API server (SubjectAccessReview)
# whether the caller may `get` the non-resource URL /metrics; callers without it get 403.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
  name: metrics-reader
rules:
- nonResourceURLs:
  - /metrics
  verbs:
  - get
