#include "trace/validate/collective_names.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace chronolink::trace {
namespace {

struct XlaOpcode {
  std::string_view name;
  Dependency dependency;
  bool point_to_point;  // send/recv: `send` is the start half, `send-done` the done
};

// A ragged all-to-all may send nothing to some ranks, so a rank waits only
// for those it receives from: the same guarantee as collective-permute.
constexpr std::array<XlaOpcode, 9> kXlaOpcodes{{
    {"all-reduce", Dependency::kAllRanks, false},
    {"all-gather", Dependency::kAllRanks, false},
    {"reduce-scatter", Dependency::kAllRanks, false},
    {"all-to-all", Dependency::kAllRanks, false},
    {"ragged-all-to-all", Dependency::kNeighbour, false},
    {"collective-permute", Dependency::kNeighbour, false},
    {"collective-broadcast", Dependency::kRooted, false},
    {"send", Dependency::kSend, true},
    {"recv", Dependency::kRecv, true},
}};

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// "all-reduce.17" -> {"all-reduce", ".17"}; no numeric suffix -> {name, ""}.
std::pair<std::string_view, std::string_view> SplitNumericSuffix(std::string_view name) {
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos || !AllDigits(name.substr(dot + 1))) return {name, {}};
  return {name.substr(0, dot), name.substr(dot)};
}

std::optional<AsyncPhase> XlaPhase(std::string_view body, const XlaOpcode& op) {
  if (!body.starts_with(op.name)) return std::nullopt;
  const std::string_view rest = body.substr(op.name.size());
  if (rest.empty()) return op.point_to_point ? AsyncPhase::kStart : AsyncPhase::kWhole;
  if (rest == "-done") return AsyncPhase::kDone;
  if (rest == "-start" && !op.point_to_point) return AsyncPhase::kStart;
  return std::nullopt;
}

// Lower case without underscores: `_allgather_base_` -> "allgatherbase",
// `all_reduce` -> "allreduce", so PyTorch's spellings compare as one.
std::string Normalise(std::string_view op) {
  std::string out;
  for (unsigned char c : op) {
    if (c != '_') out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out;
}

// The order matters: "reducescatter" before "reduce", "allgather" before "gather".
Dependency TorchDependency(std::string_view op) {
  const std::string n = Normalise(op);
  for (std::string_view p : {"allreduce", "allgather", "reducescatter", "alltoall", "barrier"}) {
    if (n.starts_with(p)) return Dependency::kAllRanks;
  }
  for (std::string_view p : {"monitoredbarrier", "broadcast", "reduce", "gather", "scatter"}) {
    if (n.starts_with(p)) return Dependency::kRooted;
  }
  if (n.starts_with("send")) return Dependency::kSend;
  if (n.starts_with("recv")) return Dependency::kRecv;
  return Dependency::kUnknown;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '"')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<CollectiveName> ClassifyXlaOpName(std::string_view name) {
  const auto [body, suffix] = SplitNumericSuffix(name);
  for (const XlaOpcode& op : kXlaOpcodes) {
    const auto phase = XlaPhase(body, op);
    if (!phase) continue;
    CollectiveName out;
    out.family = "xla:" + std::string(op.name);
    out.op = std::string(name);
    out.suffix = std::string(suffix);
    out.dependency = op.dependency;
    out.producer = Producer::kXla;
    out.phase = *phase;
    return out;
  }
  return std::nullopt;
}

std::optional<CollectiveName> ClassifyNcclKernelName(std::string_view name) {
  if (name.starts_with("void ")) name.remove_prefix(5);
  name = name.substr(0, name.find('('));
  std::string_view rest;
  for (std::string_view prefix : {"ncclDevKernel_", "ncclKernel_"}) {
    if (name.starts_with(prefix)) rest = name.substr(prefix.size());
  }
  if (rest.empty()) return std::nullopt;
  const std::string_view op = rest.substr(0, rest.find('_'));
  CollectiveName out;
  out.family = "nccl-kernel:" + std::string(op);
  out.op = std::string(name);
  out.producer = Producer::kNcclKernel;
  if (op == "AllReduce" || op == "AllGather" || op == "ReduceScatter") {
    out.dependency = Dependency::kAllRanks;
  } else if (op == "Broadcast" || op == "Reduce") {
    out.dependency = Dependency::kRooted;
  } else if (op == "SendRecv") {
    out.dependency = Dependency::kPointToPoint;
  } else {
    out.dependency = Dependency::kUnknown;  // Generic, and kinds newer than this list
  }
  return out;
}

std::optional<CollectiveName> ClassifyTorchName(std::string_view name) {
  struct Prefix {
    std::string_view text;
    Producer producer;
  };
  constexpr std::array<Prefix, 3> kPrefixes{{
      {"c10d::", Producer::kC10d},
      {"gloo:", Producer::kGloo},
      {"nccl:", Producer::kTorchNccl},
  }};
  for (const Prefix& p : kPrefixes) {
    if (!name.starts_with(p.text) || name.size() == p.text.size()) continue;
    CollectiveName out;
    out.family = std::string(name);
    out.op = std::string(name);
    out.dependency = TorchDependency(name.substr(p.text.size()));
    out.producer = p.producer;
    return out;
  }
  return std::nullopt;
}

std::optional<CollectiveName> ClassifyParamComms(std::string_view collective_name) {
  const std::string_view op = Trim(collective_name);
  if (op == "wait" || op == "init") return std::nullopt;
  CollectiveName out;
  out.family = op.empty() ? std::string(kParamCommsEventName)
                          : std::string(kParamCommsEventName) + ":" + std::string(op);
  out.op = out.family;
  out.dependency = op.empty() ? Dependency::kUnknown : TorchDependency(op);
  out.producer = Producer::kParamComms;
  return out;
}

std::optional<CollectiveName> ClassifyEventName(std::string_view name) {
  if (auto xla = ClassifyXlaOpName(name)) return xla;
  if (auto nccl = ClassifyNcclKernelName(name)) return nccl;
  return ClassifyTorchName(name);
}

bool SpanCoversRendezvous(Producer producer, bool on_device, bool trace_has_device_planes) {
  switch (producer) {
    case Producer::kXla:
      // On the host of a program with devices an XLA op is the launch; a
      // program without devices runs its collectives on host threads.
      return on_device || !trace_has_device_planes;
    case Producer::kGloo:
      return true;  // recorded around the work's run on a gloo worker thread
    case Producer::kNcclKernel:
    case Producer::kTorchNccl:
    case Producer::kParamComms:
      return on_device;  // on a host thread: the enqueue, not the transfer
    case Producer::kC10d:
      return false;  // returns a Work before the peers join
  }
  return false;
}

std::string_view DependencyName(Dependency dependency) {
  switch (dependency) {
    case Dependency::kAllRanks: return "all ranks";
    case Dependency::kRooted: return "rooted";
    case Dependency::kNeighbour: return "neighbour";
    case Dependency::kSend: return "send";
    case Dependency::kRecv: return "recv";
    case Dependency::kPointToPoint: return "point-to-point";
    case Dependency::kUnknown: return "unknown";
  }
  return "unknown";
}

}  // namespace chronolink::trace
