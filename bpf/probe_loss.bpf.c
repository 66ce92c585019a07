// SPDX-License-Identifier: GPL-2.0
/* chronolink test bed: probe loss (docs/testbed.md "Probe loss").
 *
 * A tc (clsact) egress classifier that drops a chosen fraction of chronolink
 * datagrams: UDP from or to loss_config.udp_port whose payload starts with
 * the wire magic; the message type (payload byte 5) selects which kinds
 * (forward, reverse, follow-up, pilot). Each one is dropped with probability
 * drop_ppm / 1e6, drawn from bpf_get_prandom_u32(). The kernel here has no
 * netem; this is the test bed's only way to lose probes, and it loses
 * nothing else. Counters (seen, dropped per type) go to `loss_counters`,
 * which the loader pins so that `stats` reads them later.
 *
 * Attached on egress of one device, it loses what that node sends: the
 * forward probes of its own edges and the reverse probes and follow-ups of
 * its peers' edges.
 */
#include "vmlinux.h"

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "bpf/probe_loss.h"

char LICENSE[] SEC("license") = "GPL";

/* Not in vmlinux.h (they are #defines in the uapi headers). */
#define CL_ETH_P_IP 0x0800
#define CL_ETH_P_IPV6 0x86DD
#define CL_IPPROTO_UDP 17
#define CL_UDP_HLEN 8
#define CL_IPV6_HLEN 40
#define CL_TC_SHOT 2
/* No verdict: the next filter runs, and a clsact qdisc without one passes
 * the packet (the same -1 as the tap, bpf/probe_tap.bpf.c). */
#define CL_TC_NEXT -1

const volatile struct chronolink_loss_config loss_config = {
    .udp_port = 7319,
    .magic = 0x43484C4B,
    .drop_ppm = 0,
    .type_mask = CHRONOLINK_LOSS_ALL_TYPES,
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, CHRONOLINK_LOSS_SLOTS);
  __type(key, __u32);
  __type(value, struct chronolink_loss_count);
} loss_counters SEC(".maps");

static __always_inline __u16 be16_at(const __u8 *p) { return ((__u16)p[0] << 8) | p[1]; }
static __always_inline __u32 be32_at(const __u8 *p) {
  return ((__u32)p[0] << 24) | ((__u32)p[1] << 16) | ((__u32)p[2] << 8) | p[3];
}

/* UDP header offset from the network header, or -1: not a UDP datagram that
 * could be ours (fragments and IPv6 extension headers never are). */
static __always_inline int udp_offset(struct __sk_buff *skb, __u16 l3proto) {
  __u8 ip[CL_IPV6_HLEN];
  if (l3proto == CL_ETH_P_IP) {
    if (bpf_skb_load_bytes_relative(skb, 0, ip, 20, BPF_HDR_START_NET)) return -1;
    if ((ip[0] >> 4) != 4 || (ip[0] & 0x0F) < 5 || ip[9] != CL_IPPROTO_UDP) return -1;
    if (be16_at(ip + 6) & 0x3FFF) return -1;
    return (ip[0] & 0x0F) * 4;
  }
  if (bpf_skb_load_bytes_relative(skb, 0, ip, CL_IPV6_HLEN, BPF_HDR_START_NET)) return -1;
  if ((ip[0] >> 4) != 6 || ip[6] != CL_IPPROTO_UDP) return -1;
  return CL_IPV6_HLEN;
}

SEC("tc")
int chronolink_loss(struct __sk_buff *skb) {
  const __u16 l3proto = bpf_ntohs((__u16)skb->protocol);
  if (l3proto != CL_ETH_P_IP && l3proto != CL_ETH_P_IPV6) return CL_TC_NEXT;
  const int l4 = udp_offset(skb, l3proto);
  if (l4 < 20 || l4 > 60) return CL_TC_NEXT;

  __u8 udp[CL_UDP_HLEN];
  if (bpf_skb_load_bytes_relative(skb, l4, udp, CL_UDP_HLEN, BPF_HDR_START_NET))
    return CL_TC_NEXT;
  const __u16 port = loss_config.udp_port;
  if (be16_at(udp) != port && be16_at(udp + 2) != port) return CL_TC_NEXT;
  if (be16_at(udp + 4) < CL_UDP_HLEN + CHRONOLINK_LOSS_MIN_PAYLOAD) return CL_TC_NEXT;

  __u8 head[CHRONOLINK_LOSS_TYPE_OFF + 1];
  if (bpf_skb_load_bytes_relative(skb, l4 + CL_UDP_HLEN, head, sizeof(head), BPF_HDR_START_NET))
    return CL_TC_NEXT;
  if (be32_at(head) != loss_config.magic) return CL_TC_NEXT;

  const __u8 type = head[CHRONOLINK_LOSS_TYPE_OFF];
  __u32 slot = type < CHRONOLINK_LOSS_SLOTS ? type : 0;
  struct chronolink_loss_count *c = bpf_map_lookup_elem(&loss_counters, &slot);
  if (c) c->seen += 1;
  if (slot == 0 || !(loss_config.type_mask & (1u << slot))) return CL_TC_NEXT;
  /* Uniform in [0, 1e6): the high half of rand * 1e6 (no modulo bias). */
  const __u32 draw = (__u32)(((__u64)bpf_get_prandom_u32() * 1000000ull) >> 32);
  if (draw >= loss_config.drop_ppm) return CL_TC_NEXT;
  if (c) c->dropped += 1;
  return CL_TC_SHOT;
}
