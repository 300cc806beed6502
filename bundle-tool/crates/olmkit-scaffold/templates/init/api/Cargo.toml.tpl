[package]
name = "{{api_package}}"
description = "API types of the {{project_title}}: every kind and version, CRDs and conversion"
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true
repository.workspace = true
publish.workspace = true

[dependencies]
# `derive` only: the types and their CRDs, no client and no runtime.
kube = { workspace = true, features = ["derive"] }
k8s-openapi = { workspace = true }
schemars = { workspace = true }
serde = { workspace = true }
serde_json = { workspace = true }
# The conversion framework and CRD merging, without the manager.
olmkit-runtime = { workspace = true }

[dev-dependencies]
proptest = { workspace = true }
