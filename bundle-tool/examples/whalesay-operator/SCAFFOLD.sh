#!/bin/sh
# How this example was made, as a user makes an operator: `bundle-tool init` and `bundle-tool
# create api` in a new directory bundle-tool/examples/whalesay-operator of a toolkit checkout
# (`--toolkit-path ../../..` is relative to that directory, as Cargo reads path dependencies),
# then `make manifests` and the edits listed in .scaffold-edits. bundle-tool/tests/it/e2e_examples.rs
# runs this script again and fails when the files it generates drift from the ones here.
#
#   BUNDLE_TOOL=target/debug/bundle-tool sh SCAFFOLD.sh DIR    # DIR: new, three levels below a checkout
set -eu
BUNDLE_TOOL=${BUNDLE_TOOL:-bundle-tool}
mkdir -p "$1"
cd "$1"

# The tutorial's group devsectim.io: group devsectim in the domain io.
"$BUNDLE_TOOL" init --domain io --repo github.com/example/whalesay-operator --toolkit-path ../../..

# deploy-image: a Deployment of the whalesay image; the container runs cowsay on its first
# argument (the message, added by hand: spec.message becomes the container's args) and then
# stays up, so that the Deployment stays available.
"$BUNDLE_TOOL" create api --group devsectim --version v1alpha1 --kind WhaleSay --short-names wsay \
  --image docker.io/docker/whalesay:latest \
  --image-container-command 'sh,-c,cowsay "$0" && exec sleep infinity' \
  --run-as-user 1001
