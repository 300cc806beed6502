#!/bin/sh
# How this example was made, as a user makes an operator: `bundle-tool init` and `bundle-tool
# create api` in a new directory bundle-tool/examples/redis-operator of a toolkit checkout
# (`--toolkit-path ../../..` is relative to that directory, as Cargo reads path dependencies),
# then `make manifests` and the edits listed in .scaffold-edits. bundle-tool/tests/it/e2e_examples.rs
# runs this script again and fails when the files it generates drift from the ones here.
#
#   BUNDLE_TOOL=target/debug/bundle-tool sh SCAFFOLD.sh DIR    # DIR: new, three levels below a checkout
set -eu
BUNDLE_TOOL=${BUNDLE_TOOL:-bundle-tool}
mkdir -p "$1"
cd "$1"

# The tutorial's group cache.example.com: group cache in the domain example.com.
"$BUNDLE_TOOL" init --domain example.com --repo github.com/example/redis-operator --toolkit-path ../../..

# A plain controller (not deploy-image): the RedisCluster controller applies a headless Service
# and a StatefulSet by hand, so the scaffold's controller is the starting point, not a Deployment.
"$BUNDLE_TOOL" create api --group cache --version v1 --kind RedisCluster --short-names rdc
