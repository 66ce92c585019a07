#!/usr/bin/env python3
"""Checks deploy/kubernetes/ without a cluster (docs/deployment.md "Checking
the manifests"):

1. `kubectl kustomize` builds the directory, and kubectl decodes every object into its typed Go struct, with no server:
   `kubectl set env --local --dry-run=client -o json -f FILE NAME=1` (an edit
   that is never applied, only printed; `apply` and `create --dry-run=client`
   need the server's discovery, and an edit that changes nothing prints
   nothing).
   A YAML syntax error or a value of the wrong type fails the decode. For
   objects with a pod template the typed result is printed, and every key
   of the file must still be in it: the typed decode drops unknown fields,
   so a misspelt field shows up as a missing key.
2. The invariants the agent needs, read from the YAML (python3-yaml):
   host network, exactly drop ALL / add BPF NET_ADMIN PERFMON, non-root,
   read-only root, metrics on the node's own address (NODE_IP from the
   downward API, never a wildcard), probes and the Prometheus annotation on
   that metrics port, the key, clock page and output volumes where
   the config puts them, the node id table, resources.
3. That the checks can fail: broken copies of the manifests (a misspelt
   field, a wrong type, a YAML error, an extra capability, the probe on
   another port, ...) must each be rejected.

Exit 0 when the manifests pass and every broken copy is rejected.
"""
import argparse
import copy
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
AGENT_CAPS = {"BPF", "NET_ADMIN", "PERFMON"}
AGENT_UID = 10001  # the image's chronolink user (deploy/Containerfile)


class Invalid(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Invalid(what)


# ---- 1. kubectl ------------------------------------------------------------

def kubectl_decode(kubectl, path):
    """Typed decode of one file by kubectl; returns the typed objects it
    printed (those with a pod template), raises Invalid on a decode error."""
    env = dict(os.environ, KUBECONFIG=os.devnull)  # never a real cluster
    r = subprocess.run([kubectl, "set", "env", "--local", "--dry-run=client", "-o", "json",
                        "-f", str(path), "CHRONOLINK_MANIFEST_CHECK=1"],
                       capture_output=True, text=True, errors="replace", timeout=60, env=env)
    errors = [l for l in r.stderr.splitlines() if l.strip()]
    # Decoded, but not a pod template (Namespace, ConfigMap, Service): fine.
    real = [l for l in errors if "is not a pod or does not have a pod template" not in l]
    if real:
        raise Invalid(f"kubectl rejects {path.name}: {' '.join(real)[:400]}")
    if r.returncode != 0 and not errors:
        raise Invalid(f"kubectl failed on {path.name} (exit {r.returncode})")
    if not r.stdout.strip():
        return []
    out = json.loads(r.stdout)
    return out["items"] if out.get("kind") == "List" else [out]


def missing_keys(src, typed, path=""):
    """Key paths of src that the typed object lacks (unknown fields)."""
    out = []
    if isinstance(src, dict):
        if not isinstance(typed, dict):
            return [path or "."]
        for k, v in src.items():
            if k not in typed:
                out.append(f"{path}.{k}")
            else:
                out += missing_keys(v, typed[k], f"{path}.{k}")
    elif isinstance(src, list) and isinstance(typed, list):
        for i, v in enumerate(src):
            if i >= len(typed):
                out.append(f"{path}[{i}]")
            else:
                out += missing_keys(v, typed[i], f"{path}[{i}]")
    return out


def check_kustomization(kubectl, directory):
    """`kubectl kustomize` (client-side) builds the same objects as the files."""
    r = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True,
                       errors="replace", timeout=60, env=dict(os.environ, KUBECONFIG=os.devnull))
    check(r.returncode == 0, f"kubectl kustomize fails: {r.stderr.strip()[:300]}")
    built = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(r.stdout) if d}
    check(built == set(load(directory)), f"kustomize builds {sorted(built)}, the files hold {sorted(load(directory))}")


def check_with_kubectl(kubectl, directory):
    check_kustomization(kubectl, directory)
    for path in sorted(directory.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        typed = kubectl_decode(kubectl, path)
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for t in typed:
            src = next((d for d in docs if d["kind"] == t["kind"] and d["metadata"]["name"] == t["metadata"]["name"]), None)
            check(src is not None, f"{path.name}: kubectl printed {t['kind']} {t['metadata']['name']} not in the file")
            lost = missing_keys(src, t)
            check(not lost, f"{path.name}: fields kubectl does not know (misspelt?): {', '.join(lost)}")


# ---- 2. invariants ---------------------------------------------------------

def load(directory):
    objs = {}
    for path in sorted(directory.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as e:
            raise Invalid(f"{path.name}: {e}")
        for d in docs:
            if d:
                objs[(d["kind"], d["metadata"]["name"])] = d
    return objs


def port_number(container, port):
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    raise Invalid(f"container {container['name']}: no port named '{port}'")


def mount_for(container, path):
    """The volume mount whose mountPath holds path."""
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"]):
                best = m
    check(best is not None, f"container {container['name']}: nothing mounted at {path}")
    return best


def check_invariants(directory):
    objs = load(directory)
    ds = objs.get(("DaemonSet", "chronolink-agent"))
    check(ds is not None, "no DaemonSet chronolink-agent")
    cm = objs.get(("ConfigMap", "chronolink-config"))
    check(cm is not None, "no ConfigMap chronolink-config")
    pod = ds["spec"]["template"]
    spec = pod["spec"]
    check(spec.get("hostNetwork") is True, "hostNetwork must be true (the tap hooks the node's interfaces)")
    agents = [c for c in spec["containers"] if c["name"] == "agent"]
    check(len(agents) == 1, "one container named agent")
    agent = agents[0]
    sc = agent.get("securityContext", {})
    caps = sc.get("capabilities", {})
    check(caps.get("drop") == ["ALL"], f"agent capabilities.drop must be exactly [ALL], is {caps.get('drop')}")
    add = caps.get("add", [])
    check(sorted(add) == sorted(AGENT_CAPS) and len(add) == len(AGENT_CAPS),
          f"agent capabilities.add must be exactly {sorted(AGENT_CAPS)}, is {add}")
    check(sc.get("privileged") in (None, False), "agent must not be privileged")
    check(sc.get("readOnlyRootFilesystem") is True, "agent readOnlyRootFilesystem must be true")
    check(sc.get("runAsNonRoot") is True, "agent runAsNonRoot must be true")
    check(sc.get("runAsUser") == AGENT_UID, f"agent runAsUser must be {AGENT_UID} (the image's user)")
    # File capabilities work only without no_new_privs.
    check(sc.get("allowPrivilegeEscalation") is True,
          "agent allowPrivilegeEscalation must be true: its capabilities are file capabilities")
    seccomp = sc.get("seccompProfile") or spec.get("securityContext", {}).get("seccompProfile") or {}
    check(seccomp.get("type") in ("RuntimeDefault", "Localhost"),
          "a seccomp profile (RuntimeDefault, or Localhost from seccomp-allow-bpf.py), never Unconfined")
    for c in spec.get("initContainers", []):
        isc = c.get("securityContext", {})
        check(isc.get("privileged") in (None, False), f"init container {c['name']} must not be privileged")
        check(isc.get("capabilities", {}).get("drop") == ["ALL"], f"init container {c['name']}: drop ALL")
        check(set(isc.get("capabilities", {}).get("add", [])) <= {"CHOWN"},
              f"init container {c['name']}: may add CHOWN only")
        check(isc.get("allowPrivilegeEscalation") is False, f"init container {c['name']}: allowPrivilegeEscalation false")

    # The agent's own config, as the pod mounts it.
    check(agent.get("args", [])[:1] == ["--config"], "agent args must start with --config FILE")
    cfg_path = agent["args"][1]
    cfg_mount = mount_for(agent, cfg_path)
    cfg_vol = next(v for v in spec["volumes"] if v["name"] == cfg_mount["name"])
    check(cfg_vol.get("configMap", {}).get("name") == "chronolink-config", "config volume is the ConfigMap")
    cfg = json.loads(cm["data"][os.path.relpath(cfg_path, cfg_mount["mountPath"])])
    check(cfg.get("capture", {}).get("bpf") == "on", "agent.json: capture.bpf must be on (the image exists for the tap)")
    check("node_id" not in cfg, "agent.json: node_id must not be fixed (one ConfigMap for all nodes)")

    # Metrics: served on the node's own address, which the entry point passes
    # as --metrics $NODE_IP:$CHRONOLINK_METRICS_PORT; never on a wildcard,
    # which serves every network the node is on. The kubelet's probes and
    # Prometheus connect to the pod IP: with hostNetwork, the node's.
    env = {e["name"]: e for e in agent.get("env", [])}
    check("metrics" not in cfg, "agent.json must not set metrics: the entry point binds them to the node's "
          f"address (is {cfg.get('metrics')!r})")
    check(not any(a == "--metrics" or a.startswith("--metrics=") for a in agent.get("args", [])),
          "agent args must not set --metrics: the entry point binds them to the node's address")
    check("CHRONOLINK_METRICS" not in env, "env CHRONOLINK_METRICS must not be set: the entry point binds "
          "metrics to the node's address")
    node_ip = env.get("NODE_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    check(node_ip in ("status.podIP", "status.hostIP"),
          f"NODE_IP must come from the downward API status.podIP (the node's IP with hostNetwork), is {node_ip}")
    mport = env.get("CHRONOLINK_METRICS_PORT", {}).get("value")
    check(mport is not None and mport.isdigit() and 1024 <= int(mport) <= 65535,
          f"CHRONOLINK_METRICS_PORT must be a port 1024..65535 (the agent binds it unprivileged), is {mport!r}")
    mport = int(mport)
    check(port_number(agent, "metrics") == mport, "container port 'metrics' must be the agent's metrics port")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        p = agent.get(probe)
        check(p is not None and "httpGet" in p, f"agent {probe} must be an httpGet")
        check(p["httpGet"]["path"] == "/metrics", f"{probe} path must be /metrics (the only path served)")
        check(port_number(agent, p["httpGet"]["port"]) == mport, f"{probe} must be on the metrics port")
    ann = pod["metadata"].get("annotations", {})
    check(ann.get("prometheus.io/scrape") == "true", "prometheus.io/scrape must be \"true\"")
    check(ann.get("prometheus.io/port") == str(mport), "prometheus.io/port must be the metrics port")
    check(ann.get("prometheus.io/path") == "/metrics", "prometheus.io/path must be /metrics")

    # Volumes where the config puts the files.
    vols = {v["name"]: v for v in spec["volumes"]}
    page_vol = vols[mount_for(agent, cfg["clock_page"])["name"]]
    check("hostPath" in page_vol, "the clock page's directory must be a hostPath (training pods read it)")
    out_vol = vols[mount_for(agent, cfg["output_dir"])["name"]]
    check("hostPath" in out_vol or "emptyDir" in out_vol, "output_dir must be a writable volume")
    key_mount = mount_for(agent, cfg["key_file"])
    check(key_mount.get("readOnly") is True, "the key must be mounted read-only in the agent")
    secrets = [v for v in spec["volumes"] if "secret" in v]
    check(len(secrets) == 1 and secrets[0]["secret"]["secretName"] == "chronolink-cluster-key",
          "one Secret volume, chronolink-cluster-key")
    check(secrets[0]["secret"].get("defaultMode") == 0o400, "the key Secret must be mounted with defaultMode 0400")
    check(all(m["name"] != secrets[0]["name"] for m in agent["volumeMounts"]),
          "the agent reads its own copy of the key, not the Secret volume (root-owned there)")
    check(vols[key_mount["name"]].get("emptyDir", {}).get("medium") == "Memory",
          "the key copy must be on a Memory emptyDir")

    # Node id: from the node's name through the table.
    check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
          "NODE_NAME must come from the downward API spec.nodeName")
    table = env.get("CHRONOLINK_NODE_ID_TABLE", {}).get("value")
    check(table is not None, "CHRONOLINK_NODE_ID_TABLE must name the node id table")
    check(mount_for(agent, table)["name"] == cfg_mount["name"], "the node id table comes from the ConfigMap")
    rows = [l.split() for l in cm["data"][os.path.relpath(table, cfg_mount["mountPath"])].splitlines()
            if l.strip() and not l.lstrip().startswith("#")]
    check(all(len(r) == 2 and r[1].isdigit() and 1 <= int(r[1]) <= 4294967295 for r in rows),
          "node-ids: lines '<node name> <id 1..4294967295>'")
    check(len({r[0] for r in rows}) == len(rows) and len({r[1] for r in rows}) == len(rows),
          "node-ids: names and ids unique")
    if "cluster_file" in cfg:
        cluster = json.loads(cm["data"][os.path.relpath(cfg["cluster_file"], cfg_mount["mountPath"])])
        ids = {n["id"] for n in cluster["nodes"]}
        check({int(r[1]) for r in rows} <= ids, "node-ids: every id must be in cluster.json")

    # Resources: requests and limits for CPU and memory.
    res = agent.get("resources", {})
    for kind in ("requests", "limits"):
        check({"cpu", "memory"} <= set(res.get(kind, {})), f"agent resources.{kind} must set cpu and memory")

    # Every manifest is in the kustomization.
    kust = yaml.safe_load((directory / "kustomization.yaml").read_text())
    listed = set(kust.get("resources", []))
    files = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
    check(listed == files, f"kustomization.yaml resources {sorted(listed)} must be {sorted(files)}")

    # The prometheus-operator example scrapes the same port and path.
    sm_file = directory / "prometheus-operator" / "servicemonitor.yaml"
    sm = {d["kind"]: d for d in yaml.safe_load_all(sm_file.read_text()) if d}
    svc = sm["Service"]
    check(svc["spec"].get("clusterIP") == "None", "the metrics Service is headless")
    sport = next(p for p in svc["spec"]["ports"] if p["name"] == "metrics")
    check(port_number(agent, sport["targetPort"]) == mport, "the Service's metrics port targets the agent's")
    check(svc["spec"]["selector"] == pod["metadata"]["labels"], "the Service selects the agent's pods")
    ep = sm["ServiceMonitor"]["spec"]["endpoints"]
    check(any(e.get("port") == "metrics" and e.get("path") == "/metrics" for e in ep),
          "the ServiceMonitor scrapes port metrics, path /metrics")


# ---- 3. broken copies ------------------------------------------------------

def edit_daemonset(fn):
    def apply(directory):
        path = directory / "daemonset.yaml"
        ds = yaml.safe_load(path.read_text())
        fn(ds)
        path.write_text(yaml.safe_dump(ds, sort_keys=False))
    return apply


def edit_text(old, new, name="daemonset.yaml"):
    def apply(directory):
        path = directory / name
        text = path.read_text()
        assert old in text, f"{old!r} not in {name}"
        path.write_text(text.replace(old, new, 1))
    return apply


def agent_of(ds):
    return next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")


# (what, edit, which check must catch it)
BROKEN = [
    ("misspelt field hostNetwrk", edit_text("hostNetwork: true", "hostNetwrk: true"), "kubectl"),
    ("misspelt field in a probe", edit_text("periodSeconds: 20", "periodSecond: 20"), "kubectl"),
    ("port not a number", edit_text("containerPort: 9319", "containerPort: nine"), "kubectl"),
    ("YAML syntax error", edit_text("  template:\n", "  template: [\n"), "kubectl"),
    ("ConfigMap data not a string", edit_text("\ndata:\n", "\ndata:\n  number: 5\n", "configmap.yaml"), "kubectl"),
    ("kustomization names a missing file",
     edit_text("- daemonset.yaml", "- daemonset.yml", "kustomization.yaml"), "kubectl"),
    ("capability SYS_ADMIN added",
     edit_daemonset(lambda d: agent_of(d)["securityContext"]["capabilities"]["add"].append("SYS_ADMIN")), "invariants"),
    ("capability PERFMON missing",
     edit_daemonset(lambda d: agent_of(d)["securityContext"]["capabilities"]["add"].remove("PERFMON")), "invariants"),
    ("no drop ALL", edit_daemonset(lambda d: agent_of(d)["securityContext"]["capabilities"].pop("drop")), "invariants"),
    ("hostNetwork false", edit_daemonset(lambda d: d["spec"]["template"]["spec"].update(hostNetwork=False)),
     "invariants"),
    ("writable root filesystem",
     edit_daemonset(lambda d: agent_of(d)["securityContext"].update(readOnlyRootFilesystem=False)), "invariants"),
    ("runs as root", edit_daemonset(lambda d: agent_of(d)["securityContext"].update(runAsUser=0)), "invariants"),
    ("liveness probe on another port",
     edit_daemonset(lambda d: agent_of(d)["livenessProbe"]["httpGet"].update(port=9320)), "invariants"),
    ("scrape annotation on another port",
     edit_daemonset(lambda d: d["spec"]["template"]["metadata"]["annotations"].update({"prometheus.io/port": "9320"})),
     "invariants"),
    ("metrics port moved in the env only", edit_text('value: "9319"', 'value: "9400"'), "invariants"),
    ("metrics on 0.0.0.0 in agent.json", edit_text('"log_level"', '"metrics": "0.0.0.0:9319",\n      "log_level"',
                                                   "configmap.yaml"), "invariants"),
    ("--metrics 0.0.0.0 in the agent's args",
     edit_daemonset(lambda d: agent_of(d)["args"].extend(["--metrics", "0.0.0.0:9319"])), "invariants"),
    ("NODE_IP from the node's name", edit_text("fieldPath: status.podIP", "fieldPath: spec.nodeName"), "invariants"),
    ("no metrics port", edit_daemonset(lambda d: agent_of(d)["env"].__setitem__(
        slice(None), [e for e in agent_of(d)["env"] if e["name"] != "CHRONOLINK_METRICS_PORT"])), "invariants"),
    ("clock page outside the hostPath", edit_text('"/run/chronolink/clock-page"', '"/dev/shm/chronolink-page"',
                                                  "configmap.yaml"), "invariants"),
    ("no node name from the downward API",
     edit_daemonset(lambda d: agent_of(d)["env"].pop(0)), "invariants"),
    ("seccomp Unconfined",
     edit_daemonset(lambda d: d["spec"]["template"]["spec"]["securityContext"].update(
         seccompProfile={"type": "Unconfined"})), "invariants"),
    ("no memory limit", edit_daemonset(lambda d: agent_of(d)["resources"]["limits"].pop("memory")), "invariants"),
]


def run_checks(kubectl, directory, which):
    if which in ("kubectl", "all"):
        check_with_kubectl(kubectl, directory)
    if which in ("invariants", "all"):
        check_invariants(directory)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubectl", default=os.environ.get("KUBECTL") or shutil.which("kubectl"),
                    help="kubectl to use (default: $KUBECTL, else the one on PATH)")
    ap.add_argument("--dir", default=str(MANIFESTS), help="manifests (default deploy/kubernetes)")
    a = ap.parse_args()
    if not a.kubectl:
        print("FAIL: kubectl not found (scripts/install-deps.sh installs kubernetes-client)")
        return 1
    directory = pathlib.Path(a.dir)
    failures = 0
    try:
        run_checks(a.kubectl, directory, "all")
        print(f"ok: {directory} passes kubectl ({a.kubectl}) and the invariants")
    except Invalid as e:
        print(f"FAIL: {directory}: {e}")
        failures += 1
    for what, edit, which in BROKEN:
        with tempfile.TemporaryDirectory() as tmp:
            copy_dir = pathlib.Path(tmp) / "kubernetes"
            shutil.copytree(directory, copy_dir)
            edit(copy_dir)
            try:
                run_checks(a.kubectl, copy_dir, which)
                print(f"FAIL: broken copy not rejected by the {which} check: {what}")
                failures += 1
            except Invalid as e:
                print(f"ok: rejected ({which}): {what}: {str(e)[:160]}")
    print(f"{len(BROKEN)} broken copies, {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
