#!/usr/bin/env bash
# Measures cold build times (figures for BENCHMARKS.md, not a test): a clean copy of HEAD built
# into an empty target directory, so nothing is reused from target/.
#
#   hack/cold-build-times.sh            # the release binaries, as `make release` builds them
#   hack/cold-build-times.sh test       # every test target, as `make test` compiles them
#
# Prints the wall time; cargo's --timings report (per-crate durations) is written under
# $WORK/target/cargo-timings/. Crates come from the local cargo cache (~/.cargo/registry): run
# `cargo fetch` first if it is empty, since downloading is not what this measures.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-release}
WORK=${WORK:-$(mktemp -d /tmp/olmkit-cold.XXXXXX)}
git worktree add --detach "$WORK/src" HEAD >/dev/null
trap 'git worktree remove --force "$WORK/src" >/dev/null 2>&1 || true' EXIT
export CARGO_TARGET_DIR="$WORK/target"
cd "$WORK/src"
echo "cold-build-times: $what on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
start=$(date +%s)
case "$what" in
  release)
    TARGET=$(rustc -vV | sed -n 's/^host: //p')
    RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --target "$TARGET" --timings \
      -p operator --bin operator -p bundle-tool --bin bundle-tool \
      -p olmkit-catalog-server --bin catalog-server
    ;;
  test)
    cargo test --workspace --no-run --timings
    ;;
  *)
    echo "usage: $0 [release|test]" >&2
    exit 1
    ;;
esac
echo "cold-build-times: $what took $(( $(date +%s) - start )) s (load average now $(cut -d' ' -f1-3 /proc/loadavg)); timings in $CARGO_TARGET_DIR/cargo-timings/" >&2
