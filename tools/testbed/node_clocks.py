"""The clocks a test bed gives its nodes, and their exact truth
(docs/testbed.md "Clocks as deployed").

Two models:
  linear  t + offset + drift·(t - t0): the agent applies it itself
          (--virtual-offset-ns/--virtual-drift-ppm/--virtual-t0-ns); the
          truth is truth.VClock. What every figure before issue 31 used.
  wander  a crystal oscillator: the same offset and drift plus white and
          random-walk frequency noise (Allan deviations at 1 s), drawn by
          chronolink-testbed-clock into one state file per node, which the
          agent reads (--virtual-clock-state) and so does the truth
          (clock_trajectory.NodeClockState).
  chronyd wander, and a real chronyd per node steering that clock against
          the test bed's NTP server (clock_discipline.ClockDiscipline), as
          on a deployed node.
  timesyncd
          wander, and a model of systemd-timesyncd's servo per node
          (timesync_client.py) telling the kernel PLL each offset: the rate
          changes every second while the PLL slews one.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
from typing import Any

from clock_trajectory import NodeClockState
from truth import VClock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CLOCK_TOOL = os.path.join(REPO, "build", "tools", "chronolink-testbed-clock")
MODELS = ("linear", "wander", "chronyd", "timesyncd")
DISCIPLINED = ("chronyd", "timesyncd")
# A server's crystal over seconds to minutes: about 5 ns/sqrt(s) of phase
# random walk (chronolink-sim's default wander) and a frequency that walks
# by about 0.1 ppb/sqrt(s) (docs/testbed.md).
DEFAULT_WHITE_FM_ADEV = 5e-9
DEFAULT_RANDOM_WALK_FM_ADEV = 2e-11


@dataclasses.dataclass
class NodeClock:
    node: int
    model: str
    agent_args: list[str]
    linear: VClock | None = None
    state_file: str | None = None

    def truth(self) -> Any:
        """The node's CLOCK_REALTIME as an exact clock (at, true_time,
        rate_at). For a state file, read it when asked: after the run it
        holds every correction a discipline made."""
        if self.linear is not None:
            return self.linear
        return NodeClockState.load(self.state_file).realtime()

    def raw_truth(self) -> Any:
        """The node's CLOCK_MONOTONIC_RAW as an exact clock: the state
        file's oscillator; a linear virtual clock is undisciplined, its own
        RAW."""
        if self.linear is not None:
            return self.linear
        return NodeClockState.load(self.state_file).raw

    def describe(self) -> dict:
        if self.linear is not None:
            return {"model": "linear", "offset_ns": self.linear.offset_ns,
                    "drift_ppm": str(self.linear.drift_ppm), "t0_ns": self.linear.t0_ns}
        return {"model": self.model, "state_file": self.state_file}


def described_node_clock(node: int, described: dict) -> NodeClock:
    """A node's clock again from what NodeClock.describe() wrote (a run's
    summary.json), to read its truth after the run."""
    if described.get("model") == "linear":
        return NodeClock(node, "linear", [], linear=VClock.make(described["offset_ns"], described["drift_ppm"],
                                                                 described["t0_ns"]))
    if described.get("model") not in ("wander",) + DISCIPLINED or not described.get("state_file"):
        raise ValueError(f"node {node}: clock description {described!r} is neither linear nor a state file's")
    return NodeClock(node, described["model"], [], state_file=described["state_file"])


def make_node_clock(model: str, node: int, offset_ns: int, drift_ppm: str, t0_ns: int, *,
                    state_dir: str = "", duration_s: float = 3600.0,
                    white_fm_adev: float = DEFAULT_WHITE_FM_ADEV,
                    random_walk_fm_adev: float = DEFAULT_RANDOM_WALK_FM_ADEV,
                    seed: int = 1, clock_tool: str = DEFAULT_CLOCK_TOOL) -> NodeClock:
    """One node's clock. drift_ppm as typed (a decimal string), so the
    linear agent parses exactly what the truth uses."""
    if model == "linear":
        return NodeClock(node, model, ["--virtual-offset-ns", str(offset_ns), "--virtual-drift-ppm", drift_ppm,
                                       "--virtual-t0-ns", str(t0_ns)], linear=VClock.make(offset_ns, drift_ppm, t0_ns))
    if model not in ("wander",) + DISCIPLINED:
        raise ValueError(f"clock model {model!r}: one of {', '.join(MODELS)}")
    path = os.path.join(state_dir, f"node{node}.clock")
    if os.path.exists(path):
        os.unlink(path)
    cmd = [clock_tool, "create", path, "--node", str(node), "--offset-ns", str(offset_ns),
           "--drift-ppm", drift_ppm, "--white-fm-adev", repr(white_fm_adev),
           "--random-walk-fm-adev", repr(random_walk_fm_adev), "--seed", str(seed),
           "--start-ns", str(t0_ns), "--duration-s", repr(float(duration_s))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return NodeClock(node, model, ["--virtual-clock-state", path], state_file=path)
