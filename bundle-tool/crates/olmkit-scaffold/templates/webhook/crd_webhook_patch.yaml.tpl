# Converts between the versions of {{kind}} through the operator's conversion webhook (HTTPS,
# path /convert); the storage version is the hub (see {{api_package}}/src/{{kind_snake}}/).
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {{plural}}.{{full_group}}
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          namespace: system
          name: webhook-service
          path: /convert
          port: 443
      conversionReviewVersions:
      - v1
