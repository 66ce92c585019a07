#!/usr/bin/env python3
"""A spoofer of chronolink probe packets, for the test bed's attack tests.

It plays an attacker on the path who holds no cluster key: it watches real
probes on one link with a packet socket (run it in the router namespace of a
routed test bed, sniffing the veth towards one node) and sends spoofed
144-byte datagrams to a target agent with an ordinary UDP socket:

  predict  the header of every probe addressed to the target (bytes 0-44:
           magic .. index; the epoch is in clear and sequence numbers are
           predictable) with the next --ahead sequence numbers, both
           indexes, and a zero MAC. They reach the target's eBPF hooks
           before the real packets with those headers do.
  reverse  for every forward probe the target sends, the header of the
           reverse pair its peer will answer with (same seq), zero MAC.
  replay   an exact copy, MAC included, of every --replay-every-th probe
           addressed to the target: a duplicate the decoder accepts.
  own      an exact copy of every --own-every-th probe the target sent,
           sent back to it: a received packet claiming the target's own id.

Standard library only; needs CAP_NET_RAW (root). Prints one JSON line with
what it saw and sent when it stops (after --seconds, or on SIGTERM/SIGINT).
Every wait has a timeout.
"""
from __future__ import annotations

import argparse
import json
import select
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
PACKET_OUTGOING = 4
MAGIC = 0x43484C4B
WIRE_SIZE = 144
KEY_BYTES = 45          # bytes [0, 45): magic .. index, what the tap keys on (without the MAC)
TYPE_FORWARD, TYPE_REVERSE = 1, 2


def parse_probe(frame: bytes, port: int) -> bytes | None:
    """The 144-byte UDP payload of a chronolink probe in an Ethernet frame, or None."""
    if len(frame) < 14 + 20 + 8 + WIRE_SIZE:
        return None
    if struct.unpack_from("!H", frame, 12)[0] != ETH_P_IP:
        return None
    ihl = (frame[14] & 0x0F) * 4
    if frame[14] >> 4 != 4 or ihl < 20 or frame[14 + 9] != 17:
        return None
    udp = 14 + ihl
    sport, dport, ulen = struct.unpack_from("!HHH", frame, udp)
    if port not in (sport, dport) or ulen != 8 + WIRE_SIZE or len(frame) < udp + ulen:
        return None
    payload = frame[udp + 8:udp + ulen]
    if struct.unpack_from("!I", payload, 0)[0] != MAGIC:
        return None
    return payload


def header_fields(p: bytes) -> tuple[int, int, int, int]:
    """(type, sender, receiver, seq) of a probe payload."""
    return p[5], struct.unpack_from("!I", p, 12)[0], struct.unpack_from("!I", p, 16)[0], \
        struct.unpack_from("!Q", p, 36)[0]


def forged(head: bytes, *, type_: int | None = None, sender: int | None = None,
           receiver: int | None = None, epoch: bytes | None = None, seq: int, index: int) -> bytes:
    """A 144-byte datagram: a real header with some fields replaced, zeros after it (no MAC)."""
    h = bytearray(head[:KEY_BYTES])
    if type_ is not None:
        h[5] = type_
    if sender is not None:
        struct.pack_into("!I", h, 12, sender)
    if receiver is not None:
        struct.pack_into("!I", h, 16, receiver)
    if epoch is not None:
        h[20:28] = epoch
    struct.pack_into("!Q", h, 36, seq)
    h[44] = index
    return bytes(h) + bytes(WIRE_SIZE - KEY_BYTES)


class Forger:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.stats = {"probes_seen": 0, "to_target_seen": 0, "from_target_seen": 0,
                      "predicted_sent": 0, "reverse_predicted_sent": 0, "replayed_sent": 0,
                      "own_sent": 0, "send_errors": 0}
        self.epochs: dict[int, bytes] = {}  # sender id -> its epoch, as seen on the wire
        self.n_to = self.n_from = 0
        self.out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.dst = (a.target, a.port)

    def send(self, datagram: bytes, counter: str) -> None:
        try:
            self.out.sendto(datagram, self.dst)
            self.stats[counter] += 1
        except OSError:
            self.stats["send_errors"] += 1

    def on_probe(self, p: bytes) -> None:
        a = self.a
        self.stats["probes_seen"] += 1
        type_, sender, receiver, seq = header_fields(p)
        self.epochs[sender] = p[20:28]
        index = p[44]
        if receiver == a.target_id:
            self.stats["to_target_seen"] += 1
            self.n_to += 1
            if a.replay_every and self.n_to % a.replay_every == 0:
                self.send(p, "replayed_sent")
            if index == 0 and type_ in (TYPE_FORWARD, TYPE_REVERSE):
                for ahead in range(1, a.ahead + 1):
                    for i in (0, 1):
                        self.send(forged(p, seq=seq + ahead, index=i), "predicted_sent")
        elif sender == a.target_id:
            self.stats["from_target_seen"] += 1
            self.n_from += 1
            if a.own_every and self.n_from % a.own_every == 0:
                self.send(p, "own_sent")
            peer_epoch = self.epochs.get(receiver)
            if type_ == TYPE_FORWARD and index == 0 and peer_epoch is not None:
                # The peer answers forward pair `seq` with reverse pair `seq`.
                for i in (0, 1):
                    self.send(forged(p, type_=TYPE_REVERSE, sender=receiver, receiver=sender,
                                     epoch=peer_epoch, seq=seq, index=i), "reverse_predicted_sent")

    def run(self) -> int:
        sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sniff.bind((self.a.sniff, 0))
        sniff.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        stop = {"flag": False}
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.update(flag=True))
        print("forger ready", flush=True)
        end = time.monotonic() + self.a.seconds
        while not stop["flag"] and time.monotonic() < end:
            ready, _, _ = select.select([sniff], [], [], 0.2)
            if not ready:
                continue
            try:
                frame, _addr = sniff.recvfrom(2048)
            except (BlockingIOError, InterruptedError):
                continue
            p = parse_probe(frame, self.a.port)
            if p is not None:
                self.on_probe(p)
        print(json.dumps(self.stats), flush=True)
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sniff", required=True, help="device to watch (e.g. the router's veth-n1)")
    ap.add_argument("--target", required=True, help="IPv4 address of the agent to spoof")
    ap.add_argument("--target-id", type=int, required=True, help="its node id")
    ap.add_argument("--port", type=int, default=7319)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--ahead", type=int, default=3, help="predicted sequence numbers per pair")
    ap.add_argument("--replay-every", type=int, default=16, help="0: no exact copies")
    ap.add_argument("--own-every", type=int, default=4, help="0: no copies of the target's own probes")
    return Forger(ap.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
