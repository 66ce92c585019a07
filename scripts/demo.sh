#!/usr/bin/env bash
# Sets everything up and runs the main job: a local multi-node demo on a
# network-namespace test bed (needs root). Extra arguments go to the demo,
# e.g. scripts/demo.sh --nodes 4 --seconds 90
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-viewer.sh  # speedscope (npm): the demo opens its aligned traces in a real viewer
scripts/build.sh
exec tools/demo/chronolink-demo "$@"
