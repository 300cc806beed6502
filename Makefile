# Memcached operator + bundle-tool (OLM packaging in Rust). `make help` lists the targets.
#
# The two commands the README promises:
#   make release VERSION=X   the main job: bundle, catalog update and images into ./images (OCI layout)
#   make test                installs what the tests need (tests/scripts/setup.sh) and runs them all
# Test tiers: `make test-unit` (no setup, no e2e: minutes; needs only the toolchain and the
# kubectl that `make release` needs too) and `make test`
# (setup, then every unit, property, snapshot and e2e test, verify and lint). The e2e suites are
# the `e2e_*` modules of the integration tests (`tests/it/`) of the package whose binary they drive.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
KUBECTL ?= kubectl
# Release inputs (override on the command line: make release VERSION=0.4.0 CHANNELS="alpha stable").
VERSION ?=
CHANNELS ?=
DEFAULT_CHANNEL ?=
# Image names: $(IMAGE_TAG_BASE):$(VERSION), -bundle:v$(VERSION), -catalog:v$(VERSION).
IMAGE_TAG_BASE ?= quay.io/example/memcached-operator
LAYOUT ?= images
RELEASE_FLAGS ?=
# Which static binaries `make static` builds (default: all three).
BINS ?=
# Reproducible timestamps (CSV createdAt, image configs): the last commit's time, unless set.
# Given to bundle-tool, not exported to every command: Cargo reruns the build scripts that read
# it (cc's, in ring) when it changes, and with them most dependencies, so every build sharing
# the target directory (the tests', the example operators') must see the same value.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
RELEASE_ENV = SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)

STATIC := target/static
RELEASE_ARGS = --version $(VERSION)$(foreach c,$(CHANNELS), --channel $(c))$(if $(DEFAULT_CHANNEL), --default-channel $(DEFAULT_CHANNEL))
# Clippy is the compiler of this workspace's own crates in every build here (cargo's
# RUSTC_WORKSPACE_WRAPPER, which is how `cargo clippy` runs it), with warnings as errors, as
# kubebuilder's `make build` and `make test` run `go vet`: one compile gives the binaries, the
# tests and the lints. (`cargo clippy` is a second, check-only build of every dependency: 77 s
# of a cold `make test` on two cores.) Dependencies are built by rustc as always; a plain
# `cargo build` keeps its own copy of the workspace's crates. Without clippy-driver (rustup
# installs it from rust-toolchain.toml) builds are plain and `make lint` says so.
ifndef CLIPPY_DRIVER
CLIPPY_DRIVER := $(shell rustup which clippy-driver 2>/dev/null || command -v clippy-driver 2>/dev/null)
endif
LINTED := $(if $(CLIPPY_DRIVER),RUSTC_WORKSPACE_WRAPPER=$(CLIPPY_DRIVER) CLIPPY_ARGS=-Dwarnings)
# The debug binaries `manifests`, `verify` and `run` call, built with the test targets as
# `make test` builds them, so that they share its compile. (`cargo run -p bundle-tool` alone
# resolves the dependencies' features without the dev-dependencies: a second build of most
# crates, minutes on two cores.)
BUILD := $(LINTED) $(CARGO) build -q --workspace --bins --tests
# What `make lint` compiles: every target, the benchmarks too (as tests: unoptimized).
LINT_BUILD := $(LINTED) $(CARGO) test -q --workspace --all-targets --no-run
DEBUG_BIN := $(or $(CARGO_TARGET_DIR),target)/debug
BUNDLE_TOOL := $(DEBUG_BIN)/bundle-tool
# The example operators (bundle-tool/examples/<name>/, each its own Cargo workspace made by
# `bundle-tool init` + `create api`). They build in this target directory, sharing its
# compiled dependencies.
EXAMPLES := $(notdir $(patsubst %/SCAFFOLD.sh,%,$(wildcard bundle-tool/examples/*/SCAFFOLD.sh)))
EXAMPLE_TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(abspath target))
OPERATOR := $(DEBUG_BIN)/operator

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [VAR=value]\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: build
build: ## Build every binary (debug), with the test targets as `make test` builds them (one compile for both).
	$(BUILD)

.PHONY: fmt
fmt: ## Format the code.
	$(CARGO) fmt --all

.PHONY: lint
lint: ## cargo fmt --check and clippy with warnings as errors (every target; free after `make test`).
	$(CARGO) fmt --all -- --check
	@[ -n "$(CLIPPY_DRIVER)" ] || { echo "error: clippy-driver not found; hint: rustup component add clippy" >&2; exit 1; }
	$(LINT_BUILD)
	@for ex in $(EXAMPLES); do \
	  echo "lint: bundle-tool/examples/$$ex" >&2; \
	  $(MAKE) --no-print-directory -C bundle-tool/examples/$$ex lint CARGO_TARGET_DIR=$(EXAMPLE_TARGET_DIR); \
	done

.PHONY: manifests
manifests: ## Regenerate the CRD and RBAC in config/ (from the Rust types and the operator's API-call table) and catalog.Dockerfile.
	$(BUILD)
	$(OPERATOR) crd --output-dir config/crd/bases
	$(OPERATOR) rbac --output-dir config/rbac
	$(BUNDLE_TOOL) image dockerfile catalog --configs-dir catalog --server $(STATIC)/catalog-server \
	  --health-probe $(STATIC)/catalog-server --output catalog.Dockerfile

.PHONY: verify
verify: manifests ## Regenerate everything generated and fail on a diff; check bundle/ and catalog/ against each other.
	@git diff --exit-code -- config/ catalog.Dockerfile || { echo "error: generated files are out of date: run 'make manifests' and commit" >&2; exit 1; }
	@[ -z "$$(git ls-files --others --exclude-standard -- config/ catalog.Dockerfile)" ] || { echo "error: untracked generated files: run 'make manifests' and commit:" >&2; git ls-files --others --exclude-standard -- config/ catalog.Dockerfile >&2; exit 1; }
	$(BUNDLE_TOOL) validate bundle/*/*/
	$(BUNDLE_TOOL) catalog validate catalog
	$(BUNDLE_TOOL) catalog verify --catalog-dir catalog --bundles bundle

##@ Test

# Each package's integration tests are one test binary, `tests/it/` (a module per suite; a file
# that must stay its own crate, like operator/tests/crd_field_checklist.rs, is its own binary).
# Every test belongs to the unit tier except the end-to-end suites, the modules named `e2e_*`
# (they run the real binaries and may need what `make setup` installs): the tiers select them
# by that prefix of the test names.
E2E := e2e_
# Test threads per test binary: libtest's default, one per CPU. Most e2e tests wait on what
# they start, and `make test RUST_TEST_THREADS=4` on two cores is about 70 s faster cold, but
# in five such runs two timing-sensitive tests failed once (BENCHMARKS.md, "Build and test
# times"), so more threads are a choice, not the default.

.PHONY: setup
setup: ## Install what the tests need (Debian packages, Python venv); idempotent.
	tests/scripts/setup.sh

.PHONY: test-unit
test-unit: ## Fast tier, no setup (toolchain and kubectl only): unit tests of every lib and bin, doc tests, and the integration tests that are not e2e (the e2e_* modules of tests/it/).
	$(LINTED) $(CARGO) test --workspace --no-fail-fast --lib --bins --tests -- --skip $(E2E)
	$(LINTED) $(CARGO) test --workspace --no-fail-fast --doc

.PHONY: test-e2e
test-e2e: setup ## Install what the tests need, then run only the e2e suites (the e2e_* modules of each package's tests/it/).
	$(LINTED) $(CARGO) test --workspace --no-fail-fast --tests -- $(E2E)

.PHONY: test
test: setup ## Full tier: install what the tests need, then run every test (unit, property, snapshot, e2e), verify and lint.
	$(LINTED) $(CARGO) test --workspace --no-fail-fast
	$(MAKE) --no-print-directory verify
	$(MAKE) --no-print-directory lint

.PHONY: bench
bench: setup ## Run the benchmarks (figures, not assertions); see BENCHMARKS.md.
	$(CARGO) bench -p operator
	$(CARGO) bench -p bundle-tool
	$(CARGO) bench -p olmkit-catalog-server
	$(CARGO) bench -p olmkit-cluster
	$(CARGO) bench -p kube-standin

.PHONY: conformance
conformance: ## Agreement with operator-sdk v1.38 on the community-operators corpus (../shared/conformance): matrix per suite and time per bundle.
	$(CARGO) test -q -p olmkit-bundle --test it -- --ignored --nocapture conformance::conformance_report

##@ Release

.PHONY: static
static: ## Build statically linked operator, bundle-tool and catalog-server (target/static/).
	hack/build-static.sh $(BINS)

# Checked before anything compiles: a missing VERSION must not cost a cold build first.
.PHONY: check-version
check-version:
	@[ -n "$(VERSION)" ] || { echo "error: VERSION is required, e.g. make release VERSION=0.4.0" >&2; exit 1; }

.PHONY: release
release: check-version ## Release VERSION: bundle, catalog entries and images in ./images, all or nothing.
	@echo "release: compile (static release binaries; about 9 min cold on 2 cores, seconds when built)" >&2
	$(MAKE) --no-print-directory static
	$(RELEASE_ENV) $(STATIC)/bundle-tool release $(RELEASE_ARGS) --operator-repo $(IMAGE_TAG_BASE) \
	  --operator-binary $(STATIC)/operator --catalog-server $(STATIC)/catalog-server \
	  --layout $(LAYOUT) $(RELEASE_FLAGS)

# One release command per example operator, into this repository's bundle/ and catalog/ (a
# package of its own in the one catalog) with its images in ./images:
#   make release-whalesay-operator VERSION=0.1.0
# The example's own `make release` does the work (its static manager, `bundle-tool release`);
# the catalog image holds the whole catalog, every package.
.PHONY: release-examples
release-examples: check-version $(addprefix release-,$(EXAMPLES)) ## Release VERSION of every example operator (one: make release-<name>, e.g. release-whalesay-operator).

.PHONY: $(addprefix release-,$(EXAMPLES))
$(addprefix release-,$(EXAMPLES)): release-%: check-version
	$(MAKE) --no-print-directory static
	$(MAKE) --no-print-directory -C bundle-tool/examples/$* release VERSION=$(VERSION) \
	  CHANNELS="$(CHANNELS)" DEFAULT_CHANNEL="$(DEFAULT_CHANNEL)" \
	  CARGO_TARGET_DIR=$(EXAMPLE_TARGET_DIR) BUNDLE_TOOL=$(abspath $(STATIC)/bundle-tool) \
	  CATALOG_SERVER=$(abspath $(STATIC)/catalog-server) IMAGE_TAG_BASE=quay.io/example/$* \
	  LAYOUT=$(abspath $(LAYOUT)) \
	  RELEASE_FLAGS="--bundle-root $(abspath bundle) --catalog-dir $(abspath catalog) $(RELEASE_FLAGS)"

.PHONY: release-plan
release-plan: check-version ## Show what `make release VERSION=X` would change, changing nothing (same binaries as release).
	$(MAKE) --no-print-directory static
	$(RELEASE_ENV) $(STATIC)/bundle-tool release $(RELEASE_ARGS) --operator-repo $(IMAGE_TAG_BASE) --plan $(RELEASE_FLAGS)

# Where `make install-tools` puts the binaries (rustup's ~/.cargo/bin is on PATH already).
BINDIR ?= $(HOME)/.cargo/bin

.PHONY: install-tools
install-tools: ## Put bundle-tool, operator and catalog-server (the release binaries) on PATH, in $(BINDIR).
	$(MAKE) --no-print-directory static
	install -d $(BINDIR)
	install -m 0755 $(STATIC)/bundle-tool $(STATIC)/operator $(STATIC)/catalog-server $(BINDIR)/
	@echo "installed bundle-tool, operator and catalog-server into $(BINDIR)" >&2

##@ Cluster (needs a kubeconfig)

.PHONY: run
run: ## Run the operator against the current kubeconfig's cluster (CRD must be installed); plain-HTTP /metrics on :8080.
	$(BUILD)
	$(OPERATOR) run --disable-webhook --metrics-secure=false

.PHONY: install
install: ## Install the CRD into the cluster.
	$(KUBECTL) kustomize config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: ## Remove the CRD (and every Memcached) from the cluster.
	$(KUBECTL) kustomize config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: ## Deploy the operator with kustomize (config/default; needs cert-manager).
	$(KUBECTL) kustomize config/default | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove what `make deploy` created.
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found -f -
