# {{project}}: a Kubernetes operator on kube-rs and the olmkit runtime, scaffolded by
# `bundle-tool init`. The operator (binary `manager`) is the package at the root; the API types
# are the crate {{api_package}}/ (no client or runtime: anything can depend on it cheaply).
[workspace]
resolver = "3"
members = ["{{api_package}}"]

[workspace.package]
version = "0.1.0"
edition = "2024"
rust-version = "1.95"
license = "Apache-2.0"
repository = "https://{{repo}}"
publish = false

[workspace.dependencies]
{{api_package}} = { path = "{{api_package}}" }
# The olmkit toolkit's crates are not published: they come from
# {{toolkit}}.
# To build against another checkout or a git revision, change these two lines (README.md,
# "Toolkit dependencies").
{{toolkit_runtime}}
{{toolkit_standin}}
# The versions the toolkit uses (Cargo.lock started as the toolkit's lock file).
{{dependencies}}

[package]
name = "{{project}}"
description = "The {{project_title}}: controllers for the {{domain}} APIs"
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true
repository.workspace = true
publish.workspace = true

# kubebuilder's name for the operator binary (the image runs /manager).
[[bin]]
name = "manager"
path = "src/main.rs"

[dependencies]
{{api_package}} = { workspace = true }
olmkit-runtime = { workspace = true, features = ["manager"] }
kube = { workspace = true, features = ["client", "runtime", "derive", "rustls-tls", "ring", "unstable-runtime"] }
k8s-openapi = { workspace = true }
serde = { workspace = true }
serde_json = { workspace = true }
thiserror = { workspace = true }

[dev-dependencies]
# The Kubernetes API-server stand-in the end-to-end tests run the manager against.
kube-standin = { workspace = true }
tokio = { workspace = true }
tempfile = { workspace = true }
rcgen = { workspace = true }
rustls = { workspace = true }
serde-saphyr = { workspace = true }

# The toolkit's build profiles: the same settings share compiled dependencies with it.
{{profiles}}
