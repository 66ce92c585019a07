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

#include "bpf/packet_headers.bpf.h"
#include "bpf/probe_loss.h"

char LICENSE[] SEC("license") = "GPL";

#define CL_TC_SHOT 2 /* TC_ACT_SHOT: dropped */

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


SEC("tc")
int chronolink_loss(struct __sk_buff *skb) {
  const __u16 l3proto = bpf_ntohs((__u16)skb->protocol);
  if (l3proto != CL_ETH_P_IP && l3proto != CL_ETH_P_IPV6) return CL_TC_NEXT;
  const int l4 = skb_udp_offset(skb, l3proto);
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
