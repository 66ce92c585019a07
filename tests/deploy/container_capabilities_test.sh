#!/usr/bin/env bash
# The agent as the DaemonSet runs it: uid 10001, capabilities exactly those
# of deploy/kubernetes/daemonset.yaml (drop ALL, add BPF NET_ADMIN PERFMON),
# the ConfigMap's agent.json, the node id from the node-ids table. It must
# attach the eBPF tap, then hold no capability: CapEff, CapPrm, CapInh and
# CapAmb 0 in /proc/<pid>/status, no_new_privs, still uid 10001, still
# holding its BPF links, serving /metrics on the node's address only (the
# entry point's --metrics NODE_IP:PORT, no wildcard); under podman, the
# image holds no setuid/setgid file.
#
# Two ways to start it, and the output says which ran:
#   podman   the image (scripts/build-image.sh; CHRONOLINK_IMAGE, default
#            localhost/chronolink:dev) with --cap-drop ALL --cap-add ...,
#            --user 10001, --read-only, in a network namespace of its own;
#            the agent gets its capabilities from its file capabilities.
#   setpriv  where podman or the image is missing: the built agent under
#            setpriv with the same uid, bounding set and those capabilities
#            as ambient ones (what a non-root container with ambient
#            capabilities would get), in the same namespace.
# CHRONOLINK_CAPTEST_MODE=podman|setpriv forces one.
#
# Needs root and the tap: exit 77 (skip) outside CI, 1 under CI (the rule of
# tests/support/ci_rule.h). Usage:
#   container_capabilities_test.sh AGENT_BIN [--no-tap]
# (--no-tap: the build has no eBPF tap, so there is nothing to test.)
# CHRONOLINK_PYTHON3: a python3 with yaml (default python3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
AGENT_BIN=${1:?usage: $0 AGENT_BIN [--no-tap]}
TAP_BUILT=1
[ "${2:-}" = --no-tap ] && TAP_BUILT=0
PY=${CHRONOLINK_PYTHON3:-python3}
IMAGE=${CHRONOLINK_IMAGE:-localhost/chronolink:dev}
UID_AGENT=10001
NS=clcap-$$
PEER_NS=clcap-peer-$$
PODMAN=(podman --cgroup-manager=cgroupfs --runtime=runc)
PODMAN_RUN=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)

under_ci() { case "${CI:-}" in "" | 0 | false | FALSE | False) return 1 ;; esac; }
skip() {
  if under_ci; then echo "FAIL: CI must run this test, but: $1"; exit 1; fi
  echo "SKIP: $1"; exit 77
}
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, the eBPF tap)"
[ -x "$AGENT_BIN" ] || fail "no agent at $AGENT_BIN"
[ "$TAP_BUILT" = 1 ] || skip "the agent was built without the eBPF tap (CHRONOLINK_WITH_BPF off)"
[ -r /sys/kernel/btf/vmlinux ] || skip "kernel without BTF: the tap cannot load"

mode=${CHRONOLINK_CAPTEST_MODE:-}
if [ -z "$mode" ]; then
  if command -v podman >/dev/null && "${PODMAN[@]}" image exists "$IMAGE" 2>/dev/null; then mode=podman; else mode=setpriv; fi
fi
echo "capability test: mode $mode"

work=$(mktemp -d /tmp/chronolink-captest.XXXXXX)
name=chronolink-captest-$$
cleanup() {
  if [ "$mode" = podman ]; then "${PODMAN[@]}" rm -f -t 2 "$name" >/dev/null 2>&1 || true; fi
  [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
  ip netns del "$NS" 2>/dev/null || true
  ip netns del "$PEER_NS" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# What the DaemonSet asks for, read from the manifests themselves.
"$PY" - "$ROOT/deploy/kubernetes" "$work" <<'EOF'
import json, pathlib, sys, yaml
src, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
ds = yaml.safe_load((src / "daemonset.yaml").read_text())
cm = yaml.safe_load((src / "configmap.yaml").read_text())
agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
sc = agent["securityContext"]
(work / "caps").write_text(" ".join(sorted(sc["capabilities"]["add"])) + "\n")
(work / "drop").write_text(" ".join(sc["capabilities"]["drop"]) + "\n")
(work / "uid").write_text(f"{sc['runAsUser']}\n")
cfg = json.loads(cm["data"]["agent.json"])
(work / "agent.json").write_text(json.dumps(cfg))
# The metrics port the entry point binds on the node's address (NODE_IP).
env = {e["name"]: e.get("value") for e in agent.get("env", [])}
(work / "metrics").write_text(env["CHRONOLINK_METRICS_PORT"] + "\n")
EOF
read -r -a CAPS <"$work/caps"
[ "$(cat "$work/drop")" = ALL ] || fail "the DaemonSet does not drop ALL"
[ "$(cat "$work/uid")" = "$UID_AGENT" ] || fail "the DaemonSet's runAsUser is not $UID_AGENT"
metrics_port=$(cat "$work/metrics")
echo "capability test: DaemonSet capabilities ${CAPS[*]}, uid $UID_AGENT"

# Two namespaces joined by a veth: the agent's route to its peer gives the
# tap its device. The peer need not run: the tap attaches at start.
ip netns add "$NS"
ip netns add "$PEER_NS"
ip link add veth-cap0 netns "$NS" type veth peer name veth-cap1 netns "$PEER_NS"
ip -n "$NS" addr add 10.231.7.1/24 dev veth-cap0
ip -n "$PEER_NS" addr add 10.231.7.2/24 dev veth-cap1
ip -n "$NS" link set lo up
ip -n "$NS" link set veth-cap0 up
ip -n "$PEER_NS" link set veth-cap1 up

# The pod's volumes, owned as the init container leaves them.
mkdir -p "$work/config" "$work/key" "$work/out" "$work/page"
cp "$work/agent.json" "$work/config/agent.json"
cat >"$work/config/cluster.json" <<'EOF'
{"cluster_id": 7, "nodes": [{"id": 1, "address": "10.231.7.1", "hostname": "captest-node"},
                            {"id": 2, "address": "10.231.7.2"}]}
EOF
printf 'captest-node 1\n' >"$work/config/node-ids"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/key/cluster.key"
chown "$UID_AGENT:$UID_AGENT" "$work/key/cluster.key" "$work/out" "$work/page"
chmod 0400 "$work/key/cluster.key"
chmod 0755 "$work" "$work/config" "$work/key" "$work/out" "$work/page"
chmod 0644 "$work/config/"*

# The paths of the ConfigMap's agent.json, as the DaemonSet mounts them.
cfgdir=/etc/chronolink/config
log=$work/agent.log
caps_csv=$(IFS=,; echo "${CAPS[*]}")
if [ "$mode" = podman ]; then
  # This podman's default seccomp profile allows bpf() only with
  # CAP_SYS_ADMIN: gate it on CAP_BPF instead (deploy/container/seccomp-allow-bpf.py).
  seccomp=()
  default_profile=${CHRONOLINK_SECCOMP_DEFAULT:-/usr/share/containers/seccomp.json}
  if [ -r "$default_profile" ]; then
    "$PY" "$ROOT/deploy/container/seccomp-allow-bpf.py" "$default_profile" >"$work/seccomp.json"
    seccomp=(--security-opt "seccomp=$work/seccomp.json")
    echo "capability test: seccomp: $default_profile with bpf gated on CAP_BPF"
  fi
  # The image holds no setuid or setgid file (deploy/Containerfile strips
  # them): nothing a process in the container could exec to gain a uid.
  suid=$("${PODMAN[@]}" run --rm "${PODMAN_RUN[@]}" --user 0:0 --network none --entrypoint /usr/bin/find \
    "$IMAGE" / -xdev -perm /6000 -type f) || fail "cannot list the image's setuid/setgid files"
  [ -z "$suid" ] || fail "the image holds setuid/setgid files: $(echo $suid)"
  echo "capability test: the image holds no setuid/setgid file"
  "${PODMAN[@]}" run -d --name "$name" "${PODMAN_RUN[@]}" "${seccomp[@]}" \
    --network "ns:/run/netns/$NS" --user "$UID_AGENT:$UID_AGENT" --read-only --read-only-tmpfs=false \
    --cap-drop ALL --cap-add "$caps_csv" \
    -v "$work/config:$cfgdir:ro" -v "$work/key:/run/chronolink-key:ro" \
    -v "$work/out:/var/lib/chronolink" -v "$work/page:/run/chronolink" \
    -e NODE_NAME=captest-node -e CHRONOLINK_NODE_ID_TABLE=$cfgdir/node-ids \
    -e NODE_IP=10.231.7.1 -e CHRONOLINK_METRICS_PORT="$metrics_port" \
    -e CHRONOLINK_CLUSTER_FILE=$cfgdir/cluster.json \
    "$IMAGE" --config $cfgdir/agent.json --duration-s 60 >/dev/null
  pid_of_agent() { "${PODMAN[@]}" inspect --format '{{.State.Pid}}' "$name"; }
  agent_log() { "${PODMAN[@]}" logs "$name" 2>&1; }
else
  # The same config with the volumes' paths mapped to the work directories.
  "$PY" - "$work" <<'PY'
import pathlib, sys
work = pathlib.Path(sys.argv[1])
text = (work / "config" / "agent.json").read_text()
for pod, here in (("/etc/chronolink/config", "config"), ("/run/chronolink-key", "key"),
                  ("/var/lib/chronolink", "out"), ("/run/chronolink", "page")):
    text = text.replace(f'"{pod}/', f'"{work / here}/').replace(f'"{pod}"', f'"{work / here}"')
(work / "config" / "agent.json").write_text(text)
PY
  lower=$(echo "$caps_csv" | tr 'A-Z' 'a-z' | sed 's/[^,]*/+&/g')
  # Every step execs the next: the agent keeps this pid.
  ip netns exec "$NS" setpriv --reuid "$UID_AGENT" --regid "$UID_AGENT" --clear-groups \
    --inh-caps "-all,$lower" --ambient-caps "-all,$lower" --bounding-set "-all,$lower" \
    env NODE_NAME=captest-node CHRONOLINK_NODE_ID_TABLE="$work/config/node-ids" \
    NODE_IP=10.231.7.1 CHRONOLINK_METRICS_PORT="$metrics_port" \
    CHRONOLINK_CLUSTER_FILE="$work/config/cluster.json" CHRONOLINK_AGENT="$AGENT_BIN" \
    sh "$ROOT/deploy/container/chronolink-agent-entrypoint" --config "$work/config/agent.json" --duration-s 60 \
    >"$log" 2>&1 &
  spid=$!
  pid_of_agent() { echo "$spid"; }
  agent_log() { cat "$log"; }
fi

# The tap attaches, then the drop: both logged before the probe loop.
for _ in $(seq 1 150); do
  grep -q "dropped every capability\|dropped privileges\|cannot start" <<<"$(agent_log)" && break
  sleep 0.2
done
sleep 1
out=$(agent_log)
pid=$(pid_of_agent)
grep -v "^  \|^}" <<<"$out" | sed -n "1,30s/^/  agent: /p"
grep -q "eBPF tap on" <<<"$out" || fail "the tap did not attach ($mode)"
grep -q "dropped every capability (staying uid $UID_AGENT" <<<"$out" || fail "no drop logged ($mode)"
[ -n "$pid" ] && [ -r "/proc/$pid/status" ] || fail "the agent is not running ($mode)"
status() { awk -v k="$1:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$pid/status"; }
grep -q chronolink-agent "/proc/$pid/comm" 2>/dev/null || grep -q chronolink-agen "/proc/$pid/comm" ||
  fail "pid $pid is $(cat "/proc/$pid/comm"), not the agent"
echo "capability test: agent pid $pid: Uid $(status Uid), CapInh $(status CapInh)," \
     "CapPrm $(status CapPrm), CapEff $(status CapEff), CapAmb $(status CapAmb), CapBnd $(status CapBnd)," \
     "NoNewPrivs $(status NoNewPrivs)"
for set in CapEff CapPrm CapInh CapAmb; do
  [ "$(status $set)" = 0000000000000000 ] || fail "$set is $(status $set) after the drop ($mode)"
done
[ "$(status NoNewPrivs)" = 1 ] || fail "no_new_privs not set ($mode)"
[ "$(status Uid | tr -s ' \t' ' ')" = "$UID_AGENT $UID_AGENT $UID_AGENT $UID_AGENT" ] ||
  fail "uid changed: $(status Uid) ($mode)"
# The tap's links stay, held as descriptors by the unprivileged agent.
links=$(cat /proc/"$pid"/fdinfo/* 2>/dev/null | grep -c "^link_id:" || true)
[ "$links" -ge 1 ] || fail "the agent holds no BPF link after the drop ($mode)"
# /metrics answers where the kubelet's probes ask (the port of agent.json).
# The server listens before the probe loop's first turn renders the series:
# ask again for up to 10 s (a loaded CI machine once answered empty).
for _ in $(seq 1 50); do
  body=$(ip netns exec "$NS" "$PY" -c "import urllib.request; print(urllib.request.urlopen(
    'http://10.231.7.1:$metrics_port/metrics', timeout=5).read().decode())") ||
    fail "/metrics on port $metrics_port does not answer ($mode)"
  grep -q "^chronolink_" <<<"$body" && break
  sleep 0.2
done
grep -q "^chronolink_" <<<"$body" || fail "/metrics has no chronolink series within 10 s ($mode)"
# ... and only there: the node's address (NODE_IP), no wildcard.
listeners=$(ip netns exec "$NS" ss -Hltn "sport = :$metrics_port" | awk '{print $4}')
[ "$listeners" = "10.231.7.1:$metrics_port" ] ||
  fail "metrics listen on '$(echo $listeners)', not only on the node's address 10.231.7.1:$metrics_port ($mode)"
echo "PASS ($mode): tap attached ($links BPF links), then CapEff/CapPrm/CapInh/CapAmb 0, uid $UID_AGENT," \
     "no_new_privs, /metrics up on the node's address only; peak RSS $(status VmHWM)"
