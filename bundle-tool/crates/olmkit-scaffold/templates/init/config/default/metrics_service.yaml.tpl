# Prometheus scrapes /metrics of every operator replica through this Service, over HTTPS with a
# bearer token (the operator's --metrics-secure default): the token's identity needs the
# metrics-reader ClusterRole (config/rbac/metrics_reader_role.yaml). The certificate is
# self-signed unless --metrics-cert-path points at a mounted one, so scrape with
# `insecure_skip_verify` or mount a certificate (kubebuilder's cert-manager option).
apiVersion: v1
kind: Service
metadata:
  labels:
    control-plane: controller-manager
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
  name: controller-manager-metrics-service
  namespace: system
spec:
  ports:
  - name: https
    port: 8443
    protocol: TCP
    targetPort: 8443
  selector:
    control-plane: controller-manager
    app.kubernetes.io/name: {{project}}
