#!/bin/sh
# How this example was made, as a user makes an operator: `bundle-tool init` and `bundle-tool
# create api` in a new directory bundle-tool/examples/pulsar-consumer-operator of a toolkit
# checkout (`--toolkit-path ../../..` is relative to that directory, as Cargo reads path
# dependencies), then `make manifests` and the edits listed in .scaffold-edits.
# bundle-tool/tests/it/e2e_examples.rs runs this script again and fails when the files it generates
# drift from the ones here.
#
#   BUNDLE_TOOL=target/debug/bundle-tool sh SCAFFOLD.sh DIR    # DIR: new, three levels below a checkout
set -eu
BUNDLE_TOOL=${BUNDLE_TOOL:-bundle-tool}
mkdir -p "$1"
cd "$1"

# The tutorial's group consumer.example.com: group consumer in the domain example.com.
"$BUNDLE_TOOL" init --domain example.com --repo github.com/example/pulsar-consumer-operator \
  --toolkit-path ../../..

# deploy-image: a Deployment of the Pulsar image whose container runs the Pulsar CLI's consumer.
# The script reads the broker, topic and subscription from the environment (PULSAR_URL,
# PULSAR_TOPIC, PULSAR_SUBSCRIPTION, added by hand from the PulsarConsumer's spec), consumes
# forever (`-n 0`), and shares the subscription between the replicas (`-t Shared`: the default,
# Exclusive, would refuse every consumer but the first). The image runs as its `pulsar` user,
# uid 10000.
"$BUNDLE_TOOL" create api --group consumer --version v1 --kind PulsarConsumer --short-names pc \
  --image docker.io/apachepulsar/pulsar:3.3.0 \
  --image-container-command 'sh,-c,exec bin/pulsar-client --url "$PULSAR_URL" consume -s "$PULSAR_SUBSCRIPTION" -t Shared -n 0 "$PULSAR_TOPIC"' \
  --run-as-user 10000
