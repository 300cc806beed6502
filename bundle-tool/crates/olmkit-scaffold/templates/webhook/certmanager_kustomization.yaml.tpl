# Certificates for installs without OLM (OLM issues and rotates the webhook certificate itself).
# Requires cert-manager in the cluster (https://cert-manager.io).
resources:
- certificate.yaml

configurations:
- kustomizeconfig.yaml
