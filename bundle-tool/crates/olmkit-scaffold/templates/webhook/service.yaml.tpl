# Front of the conversion webhook: the API server calls https://<this service>.<namespace>.svc:443/convert,
# which reaches container port 9443 of the operator pods.
apiVersion: v1
kind: Service
metadata:
  labels:
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
  name: webhook-service
  namespace: system
spec:
  ports:
  - name: webhook
    port: 443
    protocol: TCP
    targetPort: 9443
  selector:
    control-plane: controller-manager
    app.kubernetes.io/name: {{project}}
