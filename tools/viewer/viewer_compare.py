"""The aligned traces of a run opened in a real viewer, against the same
traces as recorded (speedscope in headless Chromium: speedscope_check.py).

One call for the end-to-end test and the demo: every aligned rank must load
and show no more nesting errors than its recorded file, and the combined
file no more than all recorded files together (its threads are theirs).
String pids (torch 1.13's "CPU functions") are served as numbers, which is
all speedscope 1.25 needs to load such a file; times are the files' own.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "speedscope_check.py")
PYTHON = "/usr/bin/python3"
SETUP_PROBLEM = 2  # speedscope_check.py's exit code for a missing viewer


class ViewerMissing(RuntimeError):
    """speedscope or Chromium is not installed (scripts/install-viewer.sh)."""


def compare_in_viewer(pairs: list[tuple[str, str]], combined: str | None, timeout_s: float = 900) -> dict:
    """pairs: (recorded, aligned) files. Returns per pair and for the combined
    file what the viewer showed, and `ok`. Raises ViewerMissing."""
    argv = [PYTHON, CHECK, "--number-string-pids", "--jobs", "2", "--timeout-s", "240"]
    for recorded, aligned in pairs:
        argv += ["--compare", f"{recorded}={aligned}"]
    with tempfile.TemporaryDirectory(prefix="viewer-compare-") as tmp:
        out = os.path.join(tmp, "viewer.json")
        cp = subprocess.run([*argv, "--json", out, *([combined] if combined else [])],
                            capture_output=True, text=True, timeout=timeout_s)
        if cp.returncode == SETUP_PROBLEM:
            raise ViewerMissing(cp.stderr.strip())
        if not os.path.exists(out):
            raise RuntimeError(f"speedscope_check.py wrote no results (exit {cp.returncode}): {cp.stderr[-500:]}")
        with open(out) as f:
            report = json.load(f)
    files = {r["file"]: r for r in report["files"]}
    ranks = []
    for recorded, aligned in pairs:
        rec, ali = files[recorded], files[aligned]
        ranks.append({"recorded": recorded, "aligned": aligned,
                      "recorded_loaded": rec["loaded"], "aligned_loaded": ali["loaded"],
                      "recorded_errors": rec["nesting_errors"], "aligned_errors": ali["nesting_errors"],
                      "ok": ali["loaded"] and ali["nesting_errors"] <= rec["nesting_errors"]})
    result = {"ranks": ranks, "ok": all(r["ok"] for r in ranks)}
    if combined:
        c = files[combined]
        allowed = sum(r["recorded_errors"] for r in ranks)
        result["combined"] = {"file": combined, "loaded": c["loaded"], "errors": c["nesting_errors"],
                              "recorded_errors": allowed, "ok": c["loaded"] and c["nesting_errors"] <= allowed}
        result["ok"] = result["ok"] and result["combined"]["ok"]
    return result


def describe(result: dict) -> list[str]:
    """One line per file, as the demo and the test print them."""
    lines = []
    for r in result["ranks"]:
        state = "loaded" if r["aligned_loaded"] else "NOT LOADED"
        lines.append(f"{os.path.basename(r['aligned'])}: nesting errors {r['recorded_errors']} as recorded -> "
                     f"{r['aligned_errors']} aligned ({state})")
    c = result.get("combined")
    if c:
        state = "loaded" if c["loaded"] else "NOT LOADED"
        lines.append(f"{os.path.basename(c['file'])}: nesting errors {c['errors']} (all ranks as recorded: "
                     f"{c['recorded_errors']}) ({state})")
    return lines
