#!/usr/bin/env bash
# The image's entry point (deploy/container/chronolink-agent-entrypoint)
# finds the node id from the node's name: found, missing, listed twice, a
# last line without a newline, no NODE_NAME, a preset CHRONOLINK_NODE_ID,
# and the arguments passed on untouched; and the metrics address it adds
# (the node's IP from NODE_IP, never a wildcard). The agent is replaced by a stub
# that prints what it got (CHRONOLINK_AGENT).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ENTRY="$ROOT/deploy/container/chronolink-agent-entrypoint"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '#!/bin/sh\necho "id=${CHRONOLINK_NODE_ID:-unset} args=$*"\n' >"$work/agent"
chmod +x "$work/agent"
printf '# node name, id\ngpu-a 1\n\ngpu-b   2\ngpu-dup 3\ngpu-dup 4\ngpu-last 9' >"$work/table"
failures=0

# expect NAME EXIT OUTPUT_SUBSTRING -- env assignments and arguments
expect() {
  local name=$1 want_rc=$2 want_out=$3
  shift 4
  local out rc=0
  out=$(env -i PATH=/usr/bin:/bin CHRONOLINK_AGENT="$work/agent" "$@" 2>&1) || rc=$?
  if [ "$rc" -ne "$want_rc" ] || [[ "$out" != *"$want_out"* ]]; then
    echo "FAIL: $name: exit $rc, output '$out' (want exit $want_rc, '$want_out')"
    failures=$((failures + 1))
  else
    echo "ok: $name"
  fi
}

T="CHRONOLINK_NODE_ID_TABLE=$work/table"
expect "found" 0 "id=1 args=--config a.json" -- NODE_NAME=gpu-a "$T" sh "$ENTRY" --config a.json
expect "spaces between name and id" 0 "id=2 " -- NODE_NAME=gpu-b "$T" sh "$ENTRY"
expect "last line without a newline" 0 "id=9 " -- NODE_NAME=gpu-last "$T" sh "$ENTRY"
expect "missing node" 2 "node 'gpu-x' has no id" -- NODE_NAME=gpu-x "$T" sh "$ENTRY"
expect "listed twice" 2 "listed twice" -- NODE_NAME=gpu-dup "$T" sh "$ENTRY"
expect "no NODE_NAME" 2 "NODE_NAME is not" -- "$T" sh "$ENTRY"
expect "unreadable table" 2 "cannot read the node id table" -- NODE_NAME=gpu-a \
  CHRONOLINK_NODE_ID_TABLE="$work/none" sh "$ENTRY"
expect "preset id wins" 0 "id=7 " -- NODE_NAME=gpu-a "$T" CHRONOLINK_NODE_ID=7 sh "$ENTRY"
expect "no table: agent's own rules" 0 "id=unset args=--node-id 5" -- sh "$ENTRY" --node-id 5
# A prefix of a name is not the name.
expect "no prefix match" 2 "has no id" -- NODE_NAME=gpu "$T" sh "$ENTRY"

# Metrics on the node's own address (NODE_IP, the downward API's
# status.podIP), ahead of the container's arguments.
M="CHRONOLINK_METRICS_PORT=9319"
expect "metrics on the node's IPv4 address" 0 "args=--metrics 10.77.1.2:9319 --config a.json" -- \
  NODE_NAME=gpu-a "$T" NODE_IP=10.77.1.2 "$M" sh "$ENTRY" --config a.json
expect "metrics on an IPv6 node address, bracketed" 0 "args=--metrics [fd00:77::2]:9319" -- \
  NODE_IP=fd00:77::2 "$M" sh "$ENTRY"
expect "metrics port without NODE_IP" 2 "CHRONOLINK_METRICS_PORT is set but NODE_IP is not" -- "$M" sh "$ENTRY"
expect "metrics on the IPv4 wildcard refused" 2 "NODE_IP '0.0.0.0' is a wildcard" -- NODE_IP=0.0.0.0 "$M" sh "$ENTRY"
expect "metrics on the IPv6 wildcard refused" 2 "NODE_IP '::' is a wildcard" -- NODE_IP=:: "$M" sh "$ENTRY"
expect "metrics port not a number" 2 "CHRONOLINK_METRICS_PORT '93x9' is not a port number" -- \
  NODE_IP=10.77.1.2 CHRONOLINK_METRICS_PORT=93x9 sh "$ENTRY"
expect "no metrics port: no --metrics" 0 "id=unset args=--config a.json" -- NODE_IP=10.77.1.2 sh "$ENTRY" --config a.json

[ "$failures" -eq 0 ] && echo "PASS: entry point node id lookup and metrics address" || exit 1
