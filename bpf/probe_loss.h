/* Records shared by the test bed's probe-loss program (bpf/probe_loss.bpf.c)
 * and its loader (tools/testbed/probe_loss/). Plain C with fixed-width
 * types so both clang -target bpf and g++ compile it; both sides are rebuilt
 * together by one CMake build. */
#ifndef CHRONOLINK_BPF_PROBE_LOSS_H_
#define CHRONOLINK_BPF_PROBE_LOSS_H_

#ifdef __bpf__
/* BPF side: types come from vmlinux.h. */
#else
#include <linux/types.h>
#endif

/* Message types at payload offset 5 (docs/protocol.md, wire format v1). */
#define CHRONOLINK_LOSS_TYPE_FORWARD 1
#define CHRONOLINK_LOSS_TYPE_REVERSE 2
#define CHRONOLINK_LOSS_TYPE_FOLLOWUP 3
#define CHRONOLINK_LOSS_TYPE_PILOT 4
/* Counter slots: one per type, slot 0 for a datagram with our magic but a
 * type outside 1..4 (never dropped). */
#define CHRONOLINK_LOSS_SLOTS 5
/* Every type: bit (1 << type). */
#define CHRONOLINK_LOSS_ALL_TYPES 0x1E
/* The shortest chronolink datagram is the 16-byte pilot. */
#define CHRONOLINK_LOSS_MIN_PAYLOAD 16
#define CHRONOLINK_LOSS_TYPE_OFF 5

/* Read-only configuration, set by the loader before load (rodata). */
struct chronolink_loss_config {
  __u16 udp_port;  /* the agents' probe port (host order), either side of the datagram */
  __u16 pad;
  __u32 magic;     /* host order */
  __u32 drop_ppm;  /* drop this many per million of the selected datagrams */
  __u32 type_mask; /* bit (1 << type) selects a message type */
};

/* Per-CPU counters, one value per slot of the array map `loss_counters`. */
struct chronolink_loss_count {
  __u64 seen;    /* chronolink datagrams of this type that passed the hook */
  __u64 dropped; /* of them, dropped (TC_ACT_SHOT) */
};

#endif /* CHRONOLINK_BPF_PROBE_LOSS_H_ */
