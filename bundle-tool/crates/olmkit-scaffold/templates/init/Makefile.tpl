# {{project}}: a Kubernetes operator on kube-rs and the olmkit runtime. `make help` lists the
# targets; README.md says what each part of the project is.
#
#   make manifests            regenerate the CRDs and RBAC roles in config/ from the Rust code
#   make test                 unit and end-to-end tests (the manager against an API-server stand-in)
#   make release VERSION=X    bundle, catalog and images of version X, all or nothing (bundle-tool)

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
KUBECTL ?= kubectl
# The OLM packaging CLI of the olmkit toolkit (`make install-tools` in the toolkit installs it).
BUNDLE_TOOL ?= bundle-tool
# The catalog image's gRPC server (installed with bundle-tool); without it the catalog image
# carries the catalog only.
CATALOG_SERVER ?= $(shell command -v catalog-server)
# Release inputs (make release VERSION=0.2.0 CHANNELS="alpha stable").
VERSION ?=
CHANNELS ?=
DEFAULT_CHANNEL ?=
# Image names: $(IMAGE_TAG_BASE):$(VERSION), -bundle:v$(VERSION), -catalog:v$(VERSION).
IMAGE_TAG_BASE ?= {{image_tag_base}}
LAYOUT ?= images
RELEASE_FLAGS ?=
# Reproducible timestamps (CSV createdAt, image configs): the last commit's time, unless set.
# Given to bundle-tool, not exported to every command: Cargo reruns the build scripts that read
# it (cc's, in ring) when it changes, and with them most dependencies, so builds that share a
# target directory must all see the same value.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
RELEASE_ENV = SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)

STATIC := target/static
RELEASE_ARGS = --version $(VERSION)$(foreach c,$(CHANNELS), --channel $(c))$(if $(DEFAULT_CHANNEL), --default-channel $(DEFAULT_CHANNEL))
# The manager binary (debug): built once per target that runs it, then called directly. (Two
# projects sharing one CARGO_TARGET_DIR share this path too: run them one at a time.)
MANAGER := $(or $(CARGO_TARGET_DIR),target)/debug/manager
# Clippy is the compiler of this workspace's own crates in every build here (cargo's
# RUSTC_WORKSPACE_WRAPPER, which is how `cargo clippy` runs it), with warnings as errors, as
# kubebuilder's `make build` and `make test` run `go vet`: one compile gives the manager, the
# tests and the lints. (`cargo clippy` would check every dependency a second time: most of a
# minute on two cores.) Without clippy-driver builds are plain and `make lint` says so.
ifndef CLIPPY_DRIVER
CLIPPY_DRIVER := $(shell rustup which clippy-driver 2>/dev/null || command -v clippy-driver 2>/dev/null)
endif
LINTED := $(if $(CLIPPY_DRIVER),RUSTC_WORKSPACE_WRAPPER=$(CLIPPY_DRIVER) CLIPPY_ARGS=-Dwarnings)
# How the manager is built: with the test targets, as `make test` builds it, so that the
# manager and the tests share one compile. (`cargo build --bin manager` alone resolves the
# dependencies' features without the dev-dependencies: a second build of most crates.)
BUILD := $(LINTED) $(CARGO) build -q --workspace --bins --tests
# This workspace's packages (`cargo fmt --all` would also format the toolkit's path dependencies).
PACKAGES := -p {{project}} -p {{api_package}}
# The roles `manager rbac --output-dir` writes.
ROLES := role.yaml leader_election_role.yaml metrics_auth_role.yaml

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [VAR=value]\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: build
build: ## Build the manager (debug) and the tests.
	$(BUILD)

.PHONY: fmt
fmt: ## Format the code.
	$(CARGO) fmt $(PACKAGES)

.PHONY: lint
lint: ## cargo fmt --check and clippy with warnings as errors (every target; free after a build).
	$(CARGO) fmt $(PACKAGES) -- --check
	@[ -n "$(CLIPPY_DRIVER)" ] || { echo "error: clippy-driver not found; hint: rustup component add clippy" >&2; exit 1; }
	$(LINTED) $(CARGO) test -q --workspace --all-targets --no-run

.PHONY: manifests
manifests: ## Regenerate the CRDs (config/crd/bases) and RBAC roles (config/rbac) from the Rust code.
	$(BUILD)
	$(MANAGER) crd --output-dir config/crd/bases
	$(MANAGER) rbac --output-dir config/rbac

.PHONY: verify
verify: ## Fail when config/ is not what the code generates; generate and validate the OLM bundle.
	$(BUILD)
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(MANAGER) crd --output-dir "$$tmp/crd"; \
	$(MANAGER) rbac --output-dir "$$tmp/rbac"; \
	diff -r "$$tmp/crd" config/crd/bases || { echo "error: config/crd/bases is out of date: run 'make manifests'" >&2; exit 1; }; \
	for role in $(ROLES); do \
	  diff "$$tmp/rbac/$$role" "config/rbac/$$role" || { echo "error: config/rbac/$$role is out of date: run 'make manifests'" >&2; exit 1; }; \
	done; \
	$(BUNDLE_TOOL) generate bundle --layout versioned --version 0.0.1 --output-dir "$$tmp/bundle" --quiet; \
	$(BUNDLE_TOOL) validate "$$tmp/bundle"

##@ Test

.PHONY: test
test: ## Every test: unit, property and end-to-end (the manager against kube-standin).
	$(LINTED) $(CARGO) test --workspace --no-fail-fast

.PHONY: test-unit
test-unit: ## Unit and property tests only (no end-to-end).
	$(LINTED) $(CARGO) test --workspace --no-fail-fast --lib --bins

##@ Release

.PHONY: static
static: ## Build a statically linked manager (glibc static-pie) into target/static/ for the image.
	@target=$$(rustc -vV | sed -n 's/^host: //p'); \
	RUSTFLAGS="$${RUSTFLAGS:-} -C target-feature=+crt-static" $(CARGO) build --release --target "$$target" --bin manager; \
	src="$${CARGO_TARGET_DIR:-target}/$$target/release/manager"; \
	if readelf -l "$$src" | grep -q 'Requesting program interpreter'; then \
	  echo "error: $$src is dynamically linked; is a static libc (libc6-dev) installed?" >&2; exit 1; \
	fi; \
	mkdir -p $(STATIC) && cp "$$src" $(STATIC)/manager && echo "static: $(STATIC)/manager" >&2

# Checked before anything compiles: a missing VERSION must not cost a build first.
.PHONY: check-version
check-version:
	@[ -n "$(VERSION)" ] || { echo "error: VERSION is required, e.g. make release VERSION=0.1.0" >&2; exit 1; }

.PHONY: release
release: check-version ## Release VERSION: bundle, catalog entries and images in ./images, all or nothing.
	$(MAKE) --no-print-directory static
	$(RELEASE_ENV) $(BUNDLE_TOOL) release $(RELEASE_ARGS) --operator-repo $(IMAGE_TAG_BASE) \
	  --operator-binary $(STATIC)/manager $(if $(CATALOG_SERVER),--catalog-server $(CATALOG_SERVER)) \
	  --layout $(LAYOUT) $(RELEASE_FLAGS)

.PHONY: release-plan
release-plan: check-version ## Show what `make release VERSION=X` would change, changing nothing.
	$(RELEASE_ENV) $(BUNDLE_TOOL) release $(RELEASE_ARGS) --operator-repo $(IMAGE_TAG_BASE) --plan $(RELEASE_FLAGS)

##@ Cluster (needs a kubeconfig)

.PHONY: run
run: ## Run the manager against the current kubeconfig's cluster (CRDs installed: make install).
	$(BUILD)
	$(MANAGER) run --disable-webhook --metrics-secure=false

.PHONY: install
install: ## Install the CRDs into the cluster.
	$(KUBECTL) kustomize config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: ## Remove the CRDs (and every object of their kinds) from the cluster.
	$(KUBECTL) kustomize config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: ## Deploy the operator with kustomize (config/default).
	$(KUBECTL) kustomize config/default | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove what `make deploy` created.
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found -f -
