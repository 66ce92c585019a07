// Which trace events are collectives, from their names alone: XLA op names
// (`all-reduce.17`, `all-gather-start.2`, `send-done.1`), NCCL/RCCL kernel
// names (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`), PyTorch's `c10d::*`,
// `gloo:*`, `nccl:*` record functions and `record_param_comms` (whose
// collective is named by its "Collective name" arg). Each recognised name
// gets a family (what the report counts), an op identity (part of the match
// key) and what the op implies about happens-before across its ranks.
// Pure string functions (docs/validate.md lists every rule); thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace chronolink::trace {

// What a collective's semantics let validate conclude across its ranks.
enum class Dependency {
  kAllRanks,      // no rank can finish before every rank has started (all-reduce,
                  // all-gather, reduce-scatter, all-to-all, barrier)
  kRooted,        // only root <-> others (broadcast, reduce, gather, scatter)
  kNeighbour,     // each rank waits for its source only (collective-permute)
  kSend,          // the sending half of a point-to-point transfer
  kRecv,          // the receiving half
  kPointToPoint,  // a transfer whose direction the name does not say (NCCL SendRecv)
  kUnknown,       // a collective whose kind the name does not say (NCCL Generic)
};

// Who wrote the event: decides whether its span covers the rendezvous
// (SpanCoversRendezvous) and how its match key is formed.
enum class Producer {
  kXla,         // XLA op (name, display name or `hlo_op` stat)
  kNcclKernel,  // ncclDevKernel_* / ncclKernel_* (NCCL and RCCL)
  kGloo,        // PyTorch gloo:* (recorded around the gloo work's run)
  kTorchNccl,   // PyTorch nccl:* (ProcessGroupNCCL's record function)
  kC10d,        // PyTorch c10d::* dispatcher ops
  kParamComms,  // PyTorch/Kineto record_param_comms
};

// Async XLA ops come in halves: `all-reduce-start` ... `all-reduce-done`
// (and `send` ... `send-done`); the op spans start's begin to done's end.
enum class AsyncPhase { kWhole, kStart, kDone };

struct CollectiveName {
  std::string family;  // "xla:all-reduce", "gloo:all_reduce", "nccl-kernel:AllReduce", ...
  std::string op;      // identity within the family: the XLA instruction's start name
                       // ("all-reduce-start.3"), the kernel's name, the event's name
  std::string suffix;  // XLA numeric suffix (".3", or ""), pairs -start with -done
  Dependency dependency = Dependency::kUnknown;
  Producer producer = Producer::kXla;
  AsyncPhase phase = AsyncPhase::kWhole;
};

// XLA op names: a collective opcode with an optional -start/-done and an
// optional numeric suffix. Anything else (fusions, `all-reduce-fusion`,
// metadata-decorated names) is nullopt.
std::optional<CollectiveName> ClassifyXlaOpName(std::string_view name);

// NCCL/RCCL kernel names, with or without a leading "void " and a
// parameter list: `void ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)`.
std::optional<CollectiveName> ClassifyNcclKernelName(std::string_view name);

// PyTorch event names: `c10d::allreduce_`, `gloo:all_reduce`, `nccl:all_reduce`.
// `record_param_comms` is not classified here (its args name the collective).
std::optional<CollectiveName> ClassifyTorchName(std::string_view name);

// record_param_comms by its "Collective name" arg (`allreduce`,
// `_allgather_base`, `send`, ...; quotes tolerated); an empty name gives the
// family `record_param_comms`. `wait` and `init` are not collectives: nullopt.
std::optional<CollectiveName> ClassifyParamComms(std::string_view collective_name);

// Every name rule in turn: XLA, NCCL kernel, PyTorch.
std::optional<CollectiveName> ClassifyEventName(std::string_view name);

inline constexpr std::string_view kParamCommsEventName = "record_param_comms";

// Whether an event's span necessarily covers the cross-rank rendezvous, so
// that happens-before can be checked on it. Device-side executions do (the
// kernel spins until its peers' data arrives) and so does gloo's worker run;
// CPU-side launches and enqueues (c10d::*, nccl:* and record_param_comms on
// a host thread, XLA ops on the host of a program that has devices) return
// before the peers join and are matched for skew only.
bool SpanCoversRendezvous(Producer producer, bool on_device, bool trace_has_device_planes);

// Display names for the report.
std::string_view DependencyName(Dependency dependency);

}  // namespace chronolink::trace
