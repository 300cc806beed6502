apiVersion: v1
kind: Namespace
metadata:
  labels:
    control-plane: controller-manager
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
    # The operator pods meet the "restricted" Pod Security Standard.
    pod-security.kubernetes.io/enforce: restricted
  name: system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller-manager
  namespace: system
  labels:
    control-plane: controller-manager
    app.kubernetes.io/name: {{project}}
    app.kubernetes.io/managed-by: kustomize
spec:
  selector:
    matchLabels:
      control-plane: controller-manager
      app.kubernetes.io/name: {{project}}
  replicas: 1
  template:
    metadata:
      annotations:
        kubectl.kubernetes.io/default-container: manager
      labels:
        control-plane: controller-manager
        app.kubernetes.io/name: {{project}}
    spec:
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: manager
        image: controller:latest
        command:
        - /manager
        args:
        - run
        - --leader-elect
        - --health-probe-bind-address=:8081
        # HTTPS, each scrape authenticated and authorized through the API server
        # (--metrics-secure defaults to true; see config/default/metrics_service.yaml).
        - --metrics-bind-address=:8443
        env:
        # OLM writes the namespaces of the OperatorGroup into this annotation (empty for
        # AllNamespaces); without OLM it is absent, the variable is empty, and the operator
        # watches every namespace.
        - name: WATCH_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.annotations['olm.targetNamespaces']
        # Namespace of the leader-election Lease.
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        # Identity in the Lease and reportingInstance of events.
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        # +olmkit:scaffold:manager-env
        ports:
        - containerPort: 8443
          name: https
          protocol: TCP
        # Health probes stay plain, unauthenticated HTTP: the kubelet's probes send no
        # credentials, and this port is in no Service.
        - containerPort: 8081
          name: health
          protocol: TCP
        # +olmkit:scaffold:manager-ports
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop:
            - ALL
        livenessProbe:
          httpGet:
            path: /healthz
            port: 8081
          initialDelaySeconds: 15
          periodSeconds: 20
        readinessProbe:
          httpGet:
            path: /readyz
            port: 8081
          initialDelaySeconds: 5
          periodSeconds: 10
        resources:
          limits:
            cpu: 500m
            memory: 128Mi
          requests:
            cpu: 10m
            memory: 64Mi
        # +olmkit:scaffold:manager-container
      # +olmkit:scaffold:manager-pod
      serviceAccountName: controller-manager
      # The manager drains in-flight reconciles and releases its Lease within 25s of SIGTERM.
      terminationGracePeriodSeconds: 30
