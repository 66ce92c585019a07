/* SPDX-License-Identifier: GPL-2.0 */
/* Packet-header helpers shared by chronolink's tc/XDP programs (the tap,
 * bpf/probe_tap.bpf.c, and the test bed's probe-loss dropper,
 * bpf/probe_loss.bpf.c): both recognise a chronolink datagram by the same
 * rules, so the rules live once. Kernel side only (include after vmlinux.h).
 */
#pragma once

/* Not in vmlinux.h (they are #defines in the uapi headers). */
#define CL_ETH_P_IP 0x0800
#define CL_ETH_P_IPV6 0x86DD
#define CL_IPPROTO_UDP 17
#define CL_UDP_HLEN 8
#define CL_IPV6_HLEN 40
/* tcx: run the next program and then the classic tc filters. Classic
 * cls_bpf in direct-action mode reads the same -1 as TC_ACT_UNSPEC: "no
 * verdict, continue with the next filter", and a clsact qdisc that ends
 * with TC_ACT_UNSPEC lets the packet pass. So -1 is right for both. */
#define CL_TC_NEXT -1

static __always_inline __u16 be16_at(const __u8 *p) { return ((__u16)p[0] << 8) | p[1]; }
static __always_inline __u32 be32_at(const __u8 *p) {
  return ((__u32)p[0] << 24) | ((__u32)p[1] << 16) | ((__u32)p[2] << 8) | p[3];
}

/* Verdict on an IP header (first 40 bytes from the network header; for IPv4
 * only the first 20 are looked at). Returns the UDP header offset relative to
 * the network header, or -1 when the packet cannot be a chronolink datagram
 * (not UDP, a fragment, IPv6 extension headers). */
static __always_inline int udp_offset(const __u8 *ip, __u16 l3proto) {
  if (l3proto == CL_ETH_P_IP) {
    if ((ip[0] >> 4) != 4) return -1;
    const int ihl = ip[0] & 0x0F;
    if (ihl < 5) return -1;
    if (ip[9] != CL_IPPROTO_UDP) return -1;
    /* fragments (MF set or a non-zero offset) are never probes */
    if (be16_at(ip + 6) & 0x3FFF) return -1;
    return ihl * 4;
  }
  if (l3proto == CL_ETH_P_IPV6) {
    if ((ip[0] >> 4) != 6) return -1;
    if (ip[6] != CL_IPPROTO_UDP) return -1; /* no extension headers */
    return CL_IPV6_HLEN;
  }
  return -1;
}

/* The same for a tc program: the IP header loaded from the skb first. */
static __always_inline int skb_udp_offset(struct __sk_buff *skb, __u16 l3proto) {
  __u8 ip[CL_IPV6_HLEN];
  if (l3proto == CL_ETH_P_IP) {
    if (bpf_skb_load_bytes_relative(skb, 0, ip, 20, BPF_HDR_START_NET)) return -1;
  } else if (bpf_skb_load_bytes_relative(skb, 0, ip, CL_IPV6_HLEN, BPF_HDR_START_NET)) {
    return -1;
  }
  return udp_offset(ip, l3proto);
}
