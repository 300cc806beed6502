#!/usr/bin/env bash
# Builds statically linked release binaries for container images: glibc static-pie, no dynamic
# loader, so they run in bundle-tool's base-less images (`bundle-tool image build ...`).
#
#   hack/build-static.sh                      # operator, bundle-tool and catalog-server
#   hack/build-static.sh catalog-server       # only some of them
#   OUT=dist TARGET=aarch64-unknown-linux-gnu hack/build-static.sh operator
#
# Output: $OUT/<binary> (default target/static/). `--target` is passed explicitly so that
# RUSTFLAGS (+crt-static) apply to the binaries only, not to build scripts and proc macros.
# Each binary is checked afterwards: one that still asks for a dynamic loader is an error.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=${TARGET:-$(rustc -vV | sed -n 's/^host: //p')}
OUT=${OUT:-target/static}
TARGET_DIR=${CARGO_TARGET_DIR:-target}

# binary name -> cargo package
declare -A PACKAGE=(
  [operator]=operator
  [bundle-tool]=bundle-tool
  [catalog-server]=olmkit-catalog-server
)

bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=(operator bundle-tool catalog-server)

args=()
for b in "${bins[@]}"; do
  pkg=${PACKAGE[$b]:-}
  if [ -z "$pkg" ]; then
    echo "build-static: unknown binary '$b' (known: ${!PACKAGE[*]})" >&2
    exit 1
  fi
  args+=(-p "$pkg" --bin "$b")
done

export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static"
echo "build-static: cargo build --release --target $TARGET ${args[*]}" >&2
cargo build --release --target "$TARGET" "${args[@]}"

mkdir -p "$OUT"
for b in "${bins[@]}"; do
  src="$TARGET_DIR/$TARGET/release/$b"
  if readelf -l "$src" | grep -q 'Requesting program interpreter'; then
    echo "build-static: $src is dynamically linked; is a static libc (libc6-dev) installed?" >&2
    exit 1
  fi
  cp "$src" "$OUT/$b"
  echo "build-static: $OUT/$b ($(du -h "$OUT/$b" | cut -f1), static)" >&2
done
