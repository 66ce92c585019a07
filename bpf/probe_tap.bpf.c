// SPDX-License-Identifier: GPL-2.0
/* chronolink eBPF timestamp tap (docs/bpf-tap.md).
 *
 * Recognises chronolink probe packets (UDP, source or destination port ==
 * tap_config.udp_port, payload >= 144 bytes, magic and cluster id matching)
 * at four points of the stack and pushes one struct chronolink_tap_record
 * per packet and hook into the ring buffer `tap_records` (the payload's head
 * and its MAC, which the agent checks against the authenticated datagram):
 *
 *   TX: tc/tcx egress (chronolink_tc_egress)  -> tp_btf/net_dev_start_xmit
 *       (chronolink_dev_xmit, the packet is handed to the driver)
 *   RX: XDP (chronolink_xdp, or chronolink_xdp_hw device-bound with the NIC
 *       RX stamp)  -> tc/tcx ingress (chronolink_tc_ingress)
 *
 * Records are submitted with BPF_RB_NO_WAKEUP: the agent polls the ring on
 * its own timer, so no wakeup is ever charged to the packet being timed.
 *
 * Every program name starts with "chronolink_": the loader's stale-hook
 * cleanup recognises ours by that prefix and never touches anything else.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/packet_headers.bpf.h"
#include "bpf/probe_tap.h"

char LICENSE[] SEC("license") = "GPL";

/* Not in vmlinux.h (#defines in the uapi headers); the rest are in
 * bpf/packet_headers.bpf.h. */
#define CL_ETH_HLEN 14
#define CL_ETH_P_8021Q 0x8100
#define CL_ETH_P_8021AD 0x88A8

/* Set by the loader through the skeleton's rodata before load. */
const volatile struct chronolink_tap_config tap_config = {
    .udp_port = 7319,
    .magic = 0x43484C4B,
    .cluster_id = 0,
    .netns_ino = 0,
};

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 20); /* 1 MiB: 9362 records of 104 bytes + 8 header */
} tap_records SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, CHRONOLINK_CNT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} tap_counters SEC(".maps");

/* NIC RX hardware timestamp (device-bound XDP only, kernel >= 6.3). */
extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx, __u64 *timestamp) __ksym;

static __always_inline void count(__u32 which) {
  __u64 *v = bpf_map_lookup_elem(&tap_counters, &which);
  if (v) *v += 1;
}


/* 1 when the UDP header names our port (either side) and announces a
 * payload of at least one full probe. 0: not to/from our port (not counted).
 * -1: to/from our port but too short. */
static __always_inline int udp_is_ours(const __u8 *udp) {
  const __u16 port = tap_config.udp_port;
  if (be16_at(udp) != port && be16_at(udp + 2) != port) return 0;
  if (be16_at(udp + 4) < CL_UDP_HLEN + CHRONOLINK_WIRE_SIZE) return -1;
  return 1;
}

static __always_inline int head_is_ours(const __u8 *head) {
  return be32_at(head + CHRONOLINK_WIRE_MAGIC_OFF) == tap_config.magic &&
         be32_at(head + CHRONOLINK_WIRE_CLUSTER_OFF) == tap_config.cluster_id;
}

static __always_inline void submit(struct chronolink_tap_record *rec) {
  count(CHRONOLINK_CNT_SEEN);
  rec->mono_ns = bpf_ktime_get_ns();
  rec->tai_ns = bpf_ktime_get_tai_ns();
  if (bpf_ringbuf_output(&tap_records, rec, sizeof(*rec), BPF_RB_NO_WAKEUP) != 0)
    count(CHRONOLINK_CNT_RINGBUF_FULL);
}

/* ---------------------------------------------------------------- tc / tcx */

static __always_inline int tap_skb(struct __sk_buff *skb, __u32 hook) {
  const __u16 l3proto = bpf_ntohs((__u16)skb->protocol);
  if (l3proto != CL_ETH_P_IP && l3proto != CL_ETH_P_IPV6) return CL_TC_NEXT;

  /* Relative to the network header: right on devices with and without an
   * L2 header, and past any VLAN tag. */
  const int l4 = skb_udp_offset(skb, l3proto);
  if (l4 < 20 || l4 > 60) return CL_TC_NEXT;

  __u8 udp[CL_UDP_HLEN];
  if (bpf_skb_load_bytes_relative(skb, l4, udp, CL_UDP_HLEN, BPF_HDR_START_NET))
    return CL_TC_NEXT;
  const int ours = udp_is_ours(udp);
  if (ours == 0) return CL_TC_NEXT;
  if (ours < 0) {
    count(CHRONOLINK_CNT_PARSE_SHORT);
    return CL_TC_NEXT;
  }

  struct chronolink_tap_record rec = {};
  if (bpf_skb_load_bytes_relative(skb, l4 + CL_UDP_HLEN, rec.head, CHRONOLINK_WIRE_KEY_BYTES,
                                  BPF_HDR_START_NET) ||
      !head_is_ours(rec.head) ||
      bpf_skb_load_bytes_relative(skb, l4 + CL_UDP_HLEN + CHRONOLINK_WIRE_MAC_OFF, rec.mac,
                                  CHRONOLINK_WIRE_MAC_BYTES, BPF_HDR_START_NET)) {
    count(CHRONOLINK_CNT_PARSE_SHORT);
    return CL_TC_NEXT;
  }
  rec.hook = hook;
  rec.ifindex = skb->ifindex;
  rec.skb_tstamp_ns = skb->tstamp;
  submit(&rec);
  return CL_TC_NEXT;
}

SEC("tc")
int chronolink_tc_egress(struct __sk_buff *skb) { return tap_skb(skb, CHRONOLINK_HOOK_TC_EGRESS); }

SEC("tc")
int chronolink_tc_ingress(struct __sk_buff *skb) { return tap_skb(skb, CHRONOLINK_HOOK_TC_INGRESS); }

/* --------------------------------------------------------------------- XDP */

/* Fills rec->head and returns 1 for a probe; 0 otherwise. */
static __always_inline int tap_xdp_parse(struct xdp_md *ctx, struct chronolink_tap_record *rec) {
  __u8 eth[CL_ETH_HLEN];
  if (bpf_xdp_load_bytes(ctx, 0, eth, CL_ETH_HLEN)) return 0;
  __u16 l3proto = be16_at(eth + 12);
  __u32 l3 = CL_ETH_HLEN;
  /* up to two VLAN tags (802.1ad outer, 802.1Q inner) */
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (l3proto != CL_ETH_P_8021Q && l3proto != CL_ETH_P_8021AD) break;
    __u8 tag[4];
    if (bpf_xdp_load_bytes(ctx, l3, tag, 4)) return 0;
    l3proto = be16_at(tag + 2);
    l3 += 4;
  }
  if (l3proto != CL_ETH_P_IP && l3proto != CL_ETH_P_IPV6) return 0;

  __u8 ip[CL_IPV6_HLEN];
  if (l3proto == CL_ETH_P_IP) {
    if (bpf_xdp_load_bytes(ctx, l3, ip, 20)) return 0;
  } else {
    if (bpf_xdp_load_bytes(ctx, l3, ip, CL_IPV6_HLEN)) return 0;
  }
  const int l4rel = udp_offset(ip, l3proto);
  if (l4rel < 20 || l4rel > 60) return 0;
  const __u32 l4 = l3 + l4rel;

  __u8 udp[CL_UDP_HLEN];
  if (bpf_xdp_load_bytes(ctx, l4, udp, CL_UDP_HLEN)) return 0;
  const int ours = udp_is_ours(udp);
  if (ours == 0) return 0;
  if (ours < 0 ||
      bpf_xdp_load_bytes(ctx, l4 + CL_UDP_HLEN, rec->head, CHRONOLINK_WIRE_KEY_BYTES) ||
      !head_is_ours(rec->head) ||
      bpf_xdp_load_bytes(ctx, l4 + CL_UDP_HLEN + CHRONOLINK_WIRE_MAC_OFF, rec->mac,
                         CHRONOLINK_WIRE_MAC_BYTES)) {
    count(CHRONOLINK_CNT_PARSE_SHORT);
    return 0;
  }
  rec->hook = CHRONOLINK_HOOK_XDP;
  rec->ifindex = ctx->ingress_ifindex;
  return 1;
}

SEC("xdp")
int chronolink_xdp(struct xdp_md *ctx) {
  struct chronolink_tap_record rec = {};
  if (tap_xdp_parse(ctx, &rec)) submit(&rec);
  return XDP_PASS;
}

/* Device-bound variant (loaded with prog_ifindex and
 * BPF_F_XDP_DEV_BOUND_ONLY for one device): also reads the NIC's RX
 * hardware timestamp. Only the loader decides where it runs. */
SEC("xdp")
int chronolink_xdp_hw(struct xdp_md *ctx) {
  struct chronolink_tap_record rec = {};
  if (tap_xdp_parse(ctx, &rec)) {
    __u64 hw = 0;
    if (bpf_xdp_metadata_rx_timestamp(ctx, &hw) == 0) rec.hw_rx_ns = hw;
    submit(&rec);
  }
  return XDP_PASS;
}

/* ------------------------------------------------ tp_btf/net_dev_start_xmit */

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(chronolink_dev_xmit, struct sk_buff *skb, struct net_device *dev) {
  if (tap_config.netns_ino != 0) {
    /* the tracepoint is global: keep only our own network namespace */
    const __u32 ino = BPF_CORE_READ(dev, nd_net.net, ns.inum);
    if (ino != tap_config.netns_ino) return 0;
  }
  const __u16 l3proto = bpf_ntohs(BPF_CORE_READ(skb, protocol));
  if (l3proto != CL_ETH_P_IP && l3proto != CL_ETH_P_IPV6) return 0;

  unsigned char *head = BPF_CORE_READ(skb, head);
  unsigned char *data = BPF_CORE_READ(skb, data);
  const __u32 nh = BPF_CORE_READ(skb, network_header);
  const __u32 len = BPF_CORE_READ(skb, len);
  const __u32 data_len = BPF_CORE_READ(skb, data_len);
  /* end of the linear part, as an offset from head */
  const __u64 linear_end = (__u64)(data - head) + (len - data_len);

  __u8 ip[CL_IPV6_HLEN];
  if (l3proto == CL_ETH_P_IP) {
    if (bpf_probe_read_kernel(ip, 20, head + nh)) return 0;
  } else {
    if (bpf_probe_read_kernel(ip, CL_IPV6_HLEN, head + nh)) return 0;
  }
  const int l4rel = udp_offset(ip, l3proto);
  if (l4rel < 20 || l4rel > 60) return 0;
  const __u64 l4 = (__u64)nh + l4rel;
  if (l4 + CL_UDP_HLEN > linear_end) return 0;

  __u8 udp[CL_UDP_HLEN];
  if (bpf_probe_read_kernel(udp, CL_UDP_HLEN, head + l4)) return 0;
  const int ours = udp_is_ours(udp);
  if (ours == 0) return 0;

  struct chronolink_tap_record rec = {};
  /* The whole probe, MAC included, must be in the linear part (it is for a
   * 144-byte UDP payload sent from a socket). */
  if (ours < 0 || l4 + CL_UDP_HLEN + CHRONOLINK_WIRE_SIZE > linear_end ||
      bpf_probe_read_kernel(rec.head, CHRONOLINK_WIRE_KEY_BYTES, head + l4 + CL_UDP_HLEN) ||
      !head_is_ours(rec.head) ||
      bpf_probe_read_kernel(rec.mac, CHRONOLINK_WIRE_MAC_BYTES,
                            head + l4 + CL_UDP_HLEN + CHRONOLINK_WIRE_MAC_OFF)) {
    count(CHRONOLINK_CNT_PARSE_SHORT);
    return 0;
  }
  rec.hook = CHRONOLINK_HOOK_DEV_XMIT;
  rec.ifindex = BPF_CORE_READ(dev, ifindex);
  rec.skb_tstamp_ns = BPF_CORE_READ(skb, tstamp);
  submit(&rec);
  return 0;
}
