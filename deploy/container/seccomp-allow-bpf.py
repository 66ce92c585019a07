#!/usr/bin/env python3
"""Writes a seccomp profile for the chronolink agent: a container runtime's
default profile, with `bpf` allowed to a container holding CAP_BPF and
`perf_event_open` to one holding CAP_PERFMON.

Why: some default profiles allow both system calls only with CAP_SYS_ADMIN
(podman/CRI-O's containers-common before 2025, Docker before 23.0,
containerd before 1.7), so the agent's tap load fails with EPERM although
the container holds CAP_BPF. Newer defaults already gate them on CAP_BPF
and CAP_PERFMON; there RuntimeDefault is enough (docs/deployment.md).

  seccomp-allow-bpf.py /usr/share/containers/seccomp.json > chronolink-agent.json

Then podman run --security-opt seccomp=chronolink-agent.json, or in
Kubernetes seccompProfile {type: Localhost, localhostProfile: ...} with the
file under the kubelet's seccomp directory on every node.
"""
import json
import sys

GATED = {"bpf": "CAP_BPF", "perf_event_open": "CAP_PERFMON"}


def allow_gated(profile):
    """The profile with every rule naming bpf/perf_event_open stripped of
    them (an ERRNO rule would override an allow), then one allow rule each,
    gated on its capability. CAP_SYS_ADMIN keeps both, as before."""
    rules = []
    for rule in profile.get("syscalls", []):
        names = [n for n in rule.get("names", []) if n not in GATED]
        if not names and rule.get("names"):
            continue
        rules.append(dict(rule, names=names) if "names" in rule else rule)
    for name, cap in GATED.items():
        for gate in (cap, "CAP_SYS_ADMIN"):
            rules.append({"names": [name], "action": "SCMP_ACT_ALLOW", "args": [], "includes": {"caps": [gate]},
                          "excludes": {} if gate == cap else {"caps": [cap]}})
    return dict(profile, syscalls=rules)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1]) as f:
            profile = json.load(f)
    except (OSError, ValueError) as e:
        print(f"seccomp-allow-bpf: cannot read {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    if not isinstance(profile.get("syscalls"), list):
        print(f"seccomp-allow-bpf: {sys.argv[1]} has no 'syscalls' list: not a seccomp profile", file=sys.stderr)
        return 1
    json.dump(allow_gated(profile), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
