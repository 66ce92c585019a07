/* Records shared by the eBPF timestamp tap (bpf/probe_tap.bpf.c) and the
 * agent (agent/capture/bpf_tap.*). Plain C with fixed-width types so both
 * clang -target bpf and g++ compile it; layout changes need both sides
 * rebuilt together (they are, by one CMake build). */
#ifndef CHRONOLINK_BPF_PROBE_TAP_H_
#define CHRONOLINK_BPF_PROBE_TAP_H_

#ifdef __bpf__
/* BPF side: types come from vmlinux.h or linux/types.h. */
#else
#include <linux/types.h>
#endif

/* Where a record was taken. */
enum chronolink_tap_hook {
  CHRONOLINK_HOOK_TC_EGRESS = 1,   /* tc/tcx egress classifier */
  CHRONOLINK_HOOK_TC_INGRESS = 2,  /* tc/tcx ingress classifier */
  CHRONOLINK_HOOK_XDP = 3,         /* XDP on the receiving device */
  CHRONOLINK_HOOK_DEV_XMIT = 4,    /* tp_btf/net_dev_start_xmit: handed to the driver */
};

/* Probe-packet byte offsets inside the UDP payload (wire format v1,
 * docs/protocol.md). Multi-byte fields are big-endian on the wire; the BPF
 * side copies them raw and the agent converts. */
#define CHRONOLINK_WIRE_MAGIC_OFF 0
#define CHRONOLINK_WIRE_VERSION_OFF 4
#define CHRONOLINK_WIRE_TYPE_OFF 5
#define CHRONOLINK_WIRE_CLUSTER_OFF 8
#define CHRONOLINK_WIRE_SENDER_OFF 12
#define CHRONOLINK_WIRE_RECEIVER_OFF 16
#define CHRONOLINK_WIRE_EPOCH_OFF 20
#define CHRONOLINK_WIRE_SEQ_OFF 36
#define CHRONOLINK_WIRE_INDEX_OFF 44
#define CHRONOLINK_WIRE_KEY_BYTES 45 /* bytes [0, 45) hold everything the key needs */
#define CHRONOLINK_WIRE_MAC_OFF 128  /* keyed BLAKE2b over bytes [0, 128) */
#define CHRONOLINK_WIRE_MAC_BYTES 16
#define CHRONOLINK_WIRE_SIZE 144

/* One stamp of one probe packet at one hook. The header bytes alone are
 * public and predictable (the epoch travels in clear, sequence numbers
 * count up): anyone can send a datagram with a real packet's head. The MAC
 * is what binds a record to one authentic packet: the agent uses a record
 * only for a datagram that passed the MAC check and carries these MAC bytes
 * (docs/bpf-tap.md "Binding stamps to authentic packets"). */
struct chronolink_tap_record {
  __u32 hook;          /* enum chronolink_tap_hook */
  __u32 ifindex;       /* device the packet passed */
  __u64 mono_ns;       /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
  __u64 tai_ns;        /* bpf_ktime_get_tai_ns(): CLOCK_TAI */
  __u64 skb_tstamp_ns; /* skb->tstamp where the hook has one (0 otherwise) */
  __u64 hw_rx_ns;      /* NIC RX hardware stamp (device-bound XDP), 0 if none */
  __u8 head[CHRONOLINK_WIRE_KEY_BYTES]; /* first payload bytes: magic .. index */
  __u8 pad[3];
  __u8 mac[CHRONOLINK_WIRE_MAC_BYTES]; /* payload bytes [128, 144): the packet's MAC, raw */
};

/* Read-only configuration, set by the loader before load (rodata). */
struct chronolink_tap_config {
  __u16 udp_port;   /* the agent's probe port (host order) */
  __u16 pad;
  __u32 magic;      /* host order */
  __u32 cluster_id; /* host order */
  __u32 netns_ino;  /* dev_xmit only: keep devices of this network namespace
                       (inode of /proc/self/ns/net); 0 = every namespace.
                       tp_btf/net_dev_start_xmit is global, and ifindex alone
                       is ambiguous across namespaces. */
};

/* Per-CPU counters the BPF side keeps (array map `tap_counters`). */
enum chronolink_tap_counter {
  CHRONOLINK_CNT_SEEN = 0,          /* probe packets recognised */
  CHRONOLINK_CNT_RINGBUF_FULL = 1,  /* records dropped: ring buffer full */
  CHRONOLINK_CNT_PARSE_SHORT = 2,   /* UDP to our port but too short / not ours */
  CHRONOLINK_CNT_MAX = 3,
};

#endif /* CHRONOLINK_BPF_PROBE_TAP_H_ */
