"""The kernel's NTP interface, adjtimex, through ctypes, for the test bed's
clients of the discipline shim (tools/testbed/timesync_client.py, the
shim's test): the mode and status bits, struct timex, and the call.

adjtimex is looked up in the process's own symbols, where a preloaded shim
comes first; see LIBC below.
"""
from __future__ import annotations

import ctypes
import os

ADJ_OFFSET = 0x0001
ADJ_FREQUENCY = 0x0002
ADJ_MAXERROR = 0x0004
ADJ_ESTERROR = 0x0008
ADJ_STATUS = 0x0010
ADJ_TIMECONST = 0x0020
ADJ_SETOFFSET = 0x0100
ADJ_TICK = 0x4000
ADJ_NANO = 0x2000
STA_PLL = 0x0001
STA_NANO = 0x2000


class Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class Timex(ctypes.Structure):
    """struct timex of <sys/timex.h> (the glibc layout on 64-bit Linux)."""
    _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
                ("constant", ctypes.c_long), ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
                ("time", Timeval), ("tick", ctypes.c_long), ("ppsfreq", ctypes.c_long),
                ("jitter", ctypes.c_long), ("shift", ctypes.c_int), ("stabil", ctypes.c_long),
                ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long), ("errcnt", ctypes.c_long),
                ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int), ("_reserved", ctypes.c_int * 11)]


# The process's own symbols (dlopen(NULL)): the preloaded shim's adjtimex
# comes before the C library's. A handle on libc.so.6 itself would reach
# the kernel's and steer the machine's clock.
LIBC = ctypes.CDLL(None, use_errno=True)


def shim_is_loaded() -> bool:
    """Whether adjtimex resolves to a function other than the C library's
    own (the discipline shim's)."""
    own = ctypes.cast(ctypes.CDLL("libc.so.6").adjtimex, ctypes.c_void_p).value
    return ctypes.cast(LIBC.adjtimex, ctypes.c_void_p).value != own


def adjtimex(tx: Timex) -> int:
    r = LIBC.adjtimex(ctypes.byref(tx))
    if r < 0:
        raise OSError(ctypes.get_errno(), f"adjtimex: {os.strerror(ctypes.get_errno())}")
    return r
