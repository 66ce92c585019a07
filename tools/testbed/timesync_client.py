#!/usr/bin/python3
"""A model of systemd-timesyncd's servo for the test bed (docs/testbed.md
"Clocks as deployed"): SNTP against the test bed's NTP server, and the
kernel PLL told every offset the way timesyncd tells it.

Debian's chrony conflicts with its systemd-timesyncd package, so the test
bed cannot install the daemon itself next to chronyd. What this keeps of it
is what reaches the clock, after manager_adjust_clock() in
src/timesync/timesyncd-manager.c:

  |offset| < 0.4 s (NTP_MAX_ADJUST):
      adjtimex(ADJ_STATUS | ADJ_NANO | ADJ_OFFSET | ADJ_TIMECONST |
               ADJ_MAXERROR | ADJ_ESTERROR,
               status STA_PLL, offset in ns, constant log2(poll s) - 4,
               maxerror 0, esterror 0)
  else:
      adjtimex(ADJ_STATUS | ADJ_NANO | ADJ_SETOFFSET | ...): a step.

The kernel's PLL then slews the clock, changing its rate every second as
the offset decays (ntp.c's second_overflow): under the discipline shim
(LD_PRELOAD=libchronolink_discipline_shim.so, CHRONOLINK_CLOCK_STATE) that
is the shim's emulated PLL (kernel_pll.h), steering the node's clock state.
Left out: timesyncd's spike filter and its poll interval's adaptation (the
poll is held at --poll-s), and the root delay/dispersion checks. One SNTP
exchange per poll, as timesyncd makes.

Every clock read and adjtimex goes through the C library, so the shim
catches them; run it without CAP_SYS_TIME (setpriv) so that one it missed
fails instead of moving the machine's clock. Exits on SIGTERM; every poll
is logged as one JSON line to --log.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import socket
import struct
import sys
import time

NTP_EPOCH_OFFSET = 2_208_988_800  # seconds from 1900 to 1970
NTP_MAX_ADJUST = 0.4  # s: timesyncd steps beyond this

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timex import (ADJ_ESTERROR, ADJ_MAXERROR, ADJ_NANO, ADJ_OFFSET, ADJ_SETOFFSET,  # noqa: E402
                   ADJ_STATUS, ADJ_TIMECONST, STA_PLL, Timex, adjtimex, shim_is_loaded)

def realtime_ns() -> int:
    # time.clock_gettime_ns calls the C library's clock_gettime: the shim's.
    return time.clock_gettime_ns(time.CLOCK_REALTIME)


def to_ntp(ns: int) -> bytes:
    s, frac_ns = divmod(ns, 1_000_000_000)
    return struct.pack("!II", (s + NTP_EPOCH_OFFSET) & 0xFFFFFFFF, (frac_ns << 32) // 1_000_000_000)


def from_ntp(data: bytes) -> int:
    s, frac = struct.unpack("!II", data)
    return (s - NTP_EPOCH_OFFSET) * 1_000_000_000 + (frac * 1_000_000_000 >> 32)


def sntp_offset(sock: socket.socket, server: tuple[str, int], timeout_s: float) -> tuple[float, float]:
    """One exchange: (offset server - local, round-trip delay), seconds."""
    t1 = realtime_ns()
    request = bytes([0x23]) + bytes(39) + to_ntp(t1)  # LI 0, VN 4, mode 3 (client)
    sock.sendto(request, server)
    sock.settimeout(timeout_s)
    while True:
        data, _ = sock.recvfrom(512)
        t4 = realtime_ns()
        # The reply to this request: its origin timestamp is our transmit one.
        if len(data) >= 48 and data[24:32] == request[40:48] and data[0] & 0x7 == 4:
            break
    t2, t3 = from_ntp(data[32:40]), from_ntp(data[40:48])
    offset = ((t2 - t1) + (t3 - t4)) / 2e9
    delay = ((t4 - t1) - (t3 - t2)) / 1e9
    return offset, delay


def adjust(offset_s: float, poll_s: float) -> str:
    tx = Timex()
    if abs(offset_s) < NTP_MAX_ADJUST:
        tx.modes = ADJ_STATUS | ADJ_NANO | ADJ_OFFSET | ADJ_TIMECONST | ADJ_MAXERROR | ADJ_ESTERROR
        tx.status = STA_PLL
        tx.offset = int(offset_s * 1e9)
        tx.constant = int(math.log2(poll_s)) - 4
        adjtimex(tx)
        return "slew"
    tx.modes = ADJ_STATUS | ADJ_NANO | ADJ_SETOFFSET | ADJ_MAXERROR | ADJ_ESTERROR
    sec = math.floor(offset_s)
    tx.time.tv_sec = sec
    tx.time.tv_usec = int((offset_s - sec) * 1e9)  # ADJ_NANO: ns in the µs field
    adjtimex(tx)
    return "step"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True, help="the NTP server's address")
    ap.add_argument("--port", type=int, default=123)
    ap.add_argument("--poll-s", type=float, default=4.0,
                    help="seconds between polls (timesyncd's start at 32 and grow to 2048)")
    ap.add_argument("--timeout-s", type=float, default=1.0, help="wait for a reply at most this long")
    ap.add_argument("--log", required=True, help="one JSON line per poll")
    a = ap.parse_args()
    if a.poll_s < 1:
        ap.error("--poll-s must be at least 1")
    if not os.environ.get("CHRONOLINK_CLOCK_STATE") or not shim_is_loaded():
        # Never the machine's clock: this client only steers a test bed node's.
        print("timesync_client: run it under the discipline shim (LD_PRELOAD=libchronolink_discipline_shim.so "
              "and CHRONOLINK_CLOCK_STATE): adjtimex is the C library's here", file=sys.stderr)
        return 2
    stop = False

    def on_term(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    family = socket.AF_INET6 if ":" in a.server else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock, open(a.log, "a", buffering=1) as log:
        while not stop:
            entry: dict = {"realtime_ns": realtime_ns()}
            try:
                offset, delay = sntp_offset(sock, (a.server, a.port), a.timeout_s)
                entry.update(offset_ns=round(offset * 1e9), delay_ns=round(delay * 1e9),
                             action=adjust(offset, a.poll_s))
            except (OSError, socket.timeout) as e:
                entry["error"] = str(e) or type(e).__name__
            log.write(json.dumps(entry) + "\n")
            # A relative wait (select): time.sleep sleeps until an absolute
            # CLOCK_MONOTONIC deadline taken from the shim's node clock,
            # which the kernel's clock_nanosleep never reaches.
            deadline = time.monotonic() + a.poll_s
            while not stop and time.monotonic() < deadline:
                select.select([], [], [], min(0.2, max(0.0, deadline - time.monotonic())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
