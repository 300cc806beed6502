resources:
# The operator's own identity and permissions. role.yaml, leader_election_role.yaml and
# metrics_auth_role.yaml are generated from the table of API calls in src/rbac.rs and the
# runtime's own tables by `make manifests` (`manager rbac --output-dir config/rbac`).
- service_account.yaml
- role.yaml
- role_binding.yaml
- leader_election_role.yaml
- leader_election_role_binding.yaml
# The secure metrics endpoint (--metrics-secure, the default), as kubebuilder lays it out: the
# operator's right to review /metrics callers (TokenReview, SubjectAccessReview), and the role a
# scraper must be bound to (not bound to anyone here).
- metrics_auth_role.yaml
- metrics_auth_role_binding.yaml
- metrics_reader_role.yaml
# Convenience roles for people using the operator's kinds (not bound to anyone). They aggregate
# into the built-in admin/edit/view ClusterRoles.
# +olmkit:scaffold:rbac-resources
