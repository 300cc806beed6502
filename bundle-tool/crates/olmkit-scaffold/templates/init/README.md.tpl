# {{project}}

The {{project_title}}: a Kubernetes operator in Rust, on [kube-rs](https://kube.rs) and the
olmkit runtime, packaged for [OLM](https://olm.operatorframework.io) with bundle-tool.
Scaffolded by `bundle-tool init` (the layout is kubebuilder's, `rust.olmkit.io/v1` in
`PROJECT`); add APIs with `bundle-tool create api`.

## Getting started

```sh
bundle-tool create api --group demo --version v1alpha1 --kind Whalesay \
  --image docker.io/library/busybox:1.36 --image-container-command sleep,infinity
make manifests   # the CRDs (config/crd/bases) and RBAC roles (config/rbac) from the Rust code
make test        # unit tests, and the manager against an API-server stand-in
make verify      # config/ is what the code generates; the OLM bundle generates and validates
```

The first `make manifests` after `create api` writes the kind's CRD: `create api` cannot (the
CRD comes from the Rust types, so the project must build first), and `kubectl kustomize
config/...` fails until it has. The RBAC roles are written by `init` and `create api` already.

## What is where

| path | what |
|---|---|
| `PROJECT` | what was scaffolded (kubebuilder's PROJECT file); `create api` reads and extends it |
| `src/main.rs`, `src/lib.rs` | the `manager` binary: `Operator::new(...)` with the CRDs, permissions, conversions and controllers; subcommands `run`, `webhook`, `crd`, `rbac` |
| `src/controller/` | one controller per kind (`<kind>.rs`); `mod.rs` runs each once per watched namespace |
| `src/rbac.rs` | the table of API calls; `make manifests` generates `config/rbac/role.yaml` from it |
| `{{api_package}}/` | the API crate: `src/<kind>/<version>.rs` the types (kube-rs `CustomResource`, schemars), `src/<kind>/mod.rs` the CRD and conversion wiring (rewritten by `create api`), `src/<kind>/conversion.rs` the conversions between versions |
| `tests/e2e.rs`, `tests/e2e/` | end-to-end tests: the `manager` binary against kube-standin, an in-memory API server |
| `config/` | kustomize manifests in kubebuilder's layout: `crd`, `rbac`, `manager`, `default`, `manifests` (the base CSV), `samples`, `scorecard`, and `webhook`/`certmanager` once a kind has a conversion webhook |
| `Makefile` | `make help` |

## Where to change what

| to | where |
|---|---|
| add a field | `{{api_package}}/src/<kind>/<version>.rs`, then `make manifests`; with several versions, the conversion in `conversion.rs` (the compiler points at it) |
| change what a controller does | `src/controller/<kind>.rs` (`TODO(user)` marks the places); a new API call needs a row in `src/rbac.rs`, then `make manifests` |
| add a kind or a version | `bundle-tool create api --group G --version V --kind K` (`--image IMG` for one that runs an image; a new `--version` of an existing kind adds the conversion, `--storage` makes it the stored one) |
| describe the operator for OLM | `config/manifests/bases/{{project}}.clusterserviceversion.yaml` (description, icon, maintainers...) |
| release | `make release VERSION=0.1.0`: a static `manager`, then `bundle-tool release` writes `bundle/`, `catalog/` and the images (`IMAGE_TAG_BASE={{image_tag_base}}`) |

`bundle-tool create api` edits `src/lib.rs`, `src/rbac.rs`, `src/controller/mod.rs`,
`tests/e2e.rs`, `{{api_package}}/src/lib.rs` and the kustomizations at their `+olmkit:scaffold:`
marker comments: keep the markers where they are.

## Make targets

`help`, `build`, `fmt`, `lint`, `manifests`, `verify`, `test`, `test-unit`, `static`, `release`,
`release-plan`, `run`, `install`, `uninstall`, `deploy`, `undeploy`. `BUNDLE_TOOL` (default
`bundle-tool` on `PATH`) and `CATALOG_SERVER` (default `catalog-server` on `PATH`) name the
toolkit's binaries. Every build they make compiles this workspace's crates with clippy
(`RUSTC_WORKSPACE_WRAPPER=clippy-driver`, warnings as errors), as kubebuilder's targets run
`go vet`; `make lint` adds the format check and the targets not built yet.

## Toolkit dependencies

The operator builds on two crates of the olmkit toolkit that are not published on crates.io:
`olmkit-runtime` (the manager: leader election, metrics, health, conversion webhook, backoff,
events, RBAC generation) and, for the tests, `kube-standin`. Everything else comes from
crates.io, and `Cargo.lock` started as the toolkit's own, so the versions are the ones it was
tested with. They are the two toolkit lines in `Cargo.toml`'s `[workspace.dependencies]`.

{{toolkit_readme}}
