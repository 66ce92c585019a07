// rocprofv3 JSON -> records (rocprof_json.h): the element stream picks the
// agents, kernel symbols, kernel dispatches and memory copies of each
// process object; records are resolved against their process's agents and
// symbols once the whole file is read (the writer puts the tables first,
// but nothing in JSON promises an order).
#include "collector/importers/rocprof_json.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>

#include "collector/importers/json_element_stream.h"

namespace chronolink::collector {
namespace {

constexpr char kToolKey[] = "rocprofiler-sdk-tool";
constexpr uint64_t kAgentTypeGpu = 2;  // ROCPROFILER_AGENT_TYPE_GPU
// rocprofiler_memory_copy_operation_t
constexpr uint64_t kCopyHostToHost = 1, kCopyHostToDevice = 2, kCopyDeviceToHost = 3, kCopyDeviceToDevice = 4;

enum Section : int { kAgents = 0, kKernelSymbols = 1, kKernelDispatch = 2, kMemoryCopy = 3 };

struct Agent {
  uint64_t handle = 0;
  uint64_t type = 0;
  uint64_t node_id = 0;
  bool has_logical_type_id = false;
  uint64_t logical_type_id = 0;
};

// One process object's tables.
struct Process {
  std::vector<Agent> agents;
  std::map<uint64_t, std::string> kernel_names;
};

// A record read, awaiting its process's tables.
struct PendingRecord {
  RocprofRecord record;
  size_t process = 0;
  uint64_t number = 0;        // record number, for messages
  uint64_t agent_handle = 0;  // the GPU side
  uint64_t kernel_id = 0;
  bool is_kernel = false;
};

bool GetU64(const FlatElement& e, std::string_view key, uint64_t* out) {
  const FlatValue* v = e.Find(key);
  if (v == nullptr || v->kind != FlatValue::Kind::kUint) return false;
  *out = v->u;
  return true;
}

uint64_t U64Or0(const FlatElement& e, std::string_view key) {
  uint64_t v = 0;
  GetU64(e, key, &v);
  return v;
}

bool GetTimestamp(const FlatElement& e, std::string_view key, int64_t* out, std::string* why) {
  uint64_t v = 0;
  if (!GetU64(e, key, &v)) {
    *why = std::string(key) + " is missing or not a non-negative integer";
    return false;
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) {
    *why = std::string(key) + " " + std::to_string(v) + " is beyond int64 ns";
    return false;
  }
  *out = static_cast<int64_t>(v);
  return true;
}

std::string Dims(const FlatElement& e, const std::string& prefix) {
  uint64_t x = 0, y = 0, z = 0;
  if (!GetU64(e, prefix + ".x", &x)) return "";
  GetU64(e, prefix + ".y", &y);
  GetU64(e, prefix + ".z", &z);
  return std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z);
}

std::string DispatchDetails(const FlatElement& e) {
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : " ") + part; };
  if (const std::string g = Dims(e, "dispatch_info.grid_size"); !g.empty()) add("grid:" + g);
  if (const std::string b = Dims(e, "dispatch_info.workgroup_size"); !b.empty()) add("block:" + b);
  uint64_t v = 0;
  if (GetU64(e, "dispatch_info.group_segment_size", &v)) add("static_shared:" + std::to_string(v));
  if (GetU64(e, "dispatch_info.private_segment_size", &v)) add("scratch:" + std::to_string(v));
  return out;
}

class RocprofJsonSink : public ElementSink {
 public:
  RocprofJsonSink(const RocprofReadOptions& options, RocprofReadResult* result)
      : options_(options), result_(result) {}

  int Select(const std::vector<std::string>& path) override {
    // A process object: the elements of the top-level tool array.
    if (path.size() == 2 && path[0] == kToolKey) {
      processes_.emplace_back();
      seen_layout_ = true;
      return -1;
    }
    // The process object itself, or (bare) the document root.
    const size_t base = path.size() >= 2 && path[0] == kToolKey ? 2 : 0;
    if (base == 0 && processes_.empty()) processes_.emplace_back();
    const std::vector<std::string> rest(path.begin() + static_cast<long>(std::min(base, path.size())),
                                        path.end());
    const int section = SectionOf(rest);
    if (section >= 0) seen_layout_ = true;
    return section;
  }

  static int SectionOf(const std::vector<std::string>& rest) {
    if (rest == std::vector<std::string>{"agents", "[]"}) return kAgents;
    if (rest == std::vector<std::string>{"kernel_symbols", "[]"}) return kKernelSymbols;
    if (rest == std::vector<std::string>{"buffer_records", "kernel_dispatch", "[]"}) return kKernelDispatch;
    if (rest == std::vector<std::string>{"buffer_records", "memory_copy", "[]"}) return kMemoryCopy;
    return -1;
  }

  bool OnElement(int section, const FlatElement& e, std::string* error) override {
    Process& p = processes_.back();
    switch (section) {
      case kAgents:
        return OnAgent(e, &p);
      case kKernelSymbols:
        return OnSymbol(e, &p);
      case kKernelDispatch:
      case kMemoryCopy:
        return OnRecord(section, e, error);
      default:
        return true;
    }
  }

  // Resolves agents and kernel names; appends the valid records.
  bool Finish(std::vector<RocprofRecord>* out, std::string* error);

 private:
  bool OnAgent(const FlatElement& e, Process* p) {
    Agent a;
    if (!GetU64(e, "id.handle", &a.handle) || !GetU64(e, "type", &a.type))
      return true;  // not an agent we can use
    a.node_id = U64Or0(e, "node_id");
    a.has_logical_type_id = GetU64(e, "logical_node_type_id", &a.logical_type_id);
    p->agents.push_back(a);
    return true;
  }

  bool OnSymbol(const FlatElement& e, Process* p) {
    uint64_t id = 0;
    if (!GetU64(e, "kernel_id", &id)) return true;
    for (const char* key :
         {"formatted_kernel_name", "demangled_kernel_name", "truncated_kernel_name", "kernel_name"}) {
      const FlatValue* v = e.Find(key);
      if (v != nullptr && v->kind == FlatValue::Kind::kString && !v->s.empty()) {
        p->kernel_names[id] = v->s;
        return true;
      }
    }
    return true;
  }

  bool OnRecord(int section, const FlatElement& e, std::string* error) {
    ++result_->rows;
    PendingRecord pr;
    pr.process = processes_.size() - 1;
    pr.number = result_->rows;
    std::string why;
    bool skip = false;
    const bool ok = section == kKernelDispatch ? ReadDispatch(e, &pr, &why) : ReadCopy(e, &pr, &skip, &why);
    if (!ok) {
      result_->Refuse(pr.number, why);
      return true;
    }
    if (skip) {
      ++result_->skipped;
      return true;
    }
    if (pending_.size() >= options_.max_records) {
      *error = "more than " + std::to_string(options_.max_records) + " records: refusing to hold them all";
      return false;
    }
    pending_.push_back(std::move(pr));
    return true;
  }

  static bool ReadCommon(const FlatElement& e, RocprofRecord* r, std::string* why) {
    if (!GetTimestamp(e, "start_timestamp", &r->start_ns, why) ||
        !GetTimestamp(e, "end_timestamp", &r->end_ns, why) || !CheckSpan(r->start_ns, r->end_ns, why)) {
      return false;
    }
    r->correlation_id = U64Or0(e, "correlation_id.internal");
    r->thread_id = U64Or0(e, "thread_id");
    return true;
  }

  static bool ReadDispatch(const FlatElement& e, PendingRecord* pr, std::string* why) {
    RocprofRecord& r = pr->record;
    if (!ReadCommon(e, &r, why)) return false;
    if (!GetU64(e, "dispatch_info.agent_id.handle", &pr->agent_handle)) {
      *why = "dispatch_info.agent_id.handle is missing";
      return false;
    }
    r.kind = ActivityKind::kKernel;
    r.queue = U64Or0(e, "dispatch_info.queue_id.handle");
    pr->kernel_id = U64Or0(e, "dispatch_info.kernel_id");
    pr->is_kernel = true;
    r.details = DispatchDetails(e);
    return true;
  }

  static bool ReadCopy(const FlatElement& e, PendingRecord* pr, bool* skip, std::string* why) {
    RocprofRecord& r = pr->record;
    if (!ReadCommon(e, &r, why)) return false;
    uint64_t op = 0;
    GetU64(e, "operation", &op);
    const char* side = nullptr;
    switch (op) {
      case kCopyHostToHost:
        *skip = true;
        return true;
      case kCopyHostToDevice:
        r.kind = ActivityKind::kMemcpyHtoD;
        side = "dst_agent_id.handle";
        break;
      case kCopyDeviceToHost:
        r.kind = ActivityKind::kMemcpyDtoH;
        side = "src_agent_id.handle";
        break;
      case kCopyDeviceToDevice:
        r.kind = ActivityKind::kMemcpyDtoD;
        side = "src_agent_id.handle";
        break;
      default:
        *why = "memory copy operation " + std::to_string(op) + " is not a known direction";
        return false;
    }
    if (!GetU64(e, side, &pr->agent_handle)) {
      *why = std::string(side) + " is missing";
      return false;
    }
    r.bytes = U64Or0(e, "bytes");
    return true;
  }

  bool ResolveGpu(const Process& p, PendingRecord* pr, std::string* why) const;

  const RocprofReadOptions& options_;
  RocprofReadResult* result_;
  std::vector<Process> processes_;
  std::vector<PendingRecord> pending_;
  bool seen_layout_ = false;  // a process object or one of the tables was found
};

// The GPU ordinal of an agent handle in its process's table.
bool RocprofJsonSink::ResolveGpu(const Process& p, PendingRecord* pr, std::string* why) const {
  RocprofRecord& r = pr->record;
  if (p.agents.empty()) {
    r.agent_id = pr->agent_handle;  // no table: the import numbers agents by id
    return true;
  }
  const auto it = std::find_if(p.agents.begin(), p.agents.end(),
                               [pr](const Agent& a) { return a.handle == pr->agent_handle; });
  if (it == p.agents.end() || it->type != kAgentTypeGpu) {
    *why = "agent " + std::to_string(pr->agent_handle) + " is not a GPU in the agents table";
    return false;
  }
  uint64_t ordinal = 0;
  if (it->has_logical_type_id) {
    ordinal = it->logical_type_id;
  } else {
    for (const Agent& a : p.agents) ordinal += a.type == kAgentTypeGpu && a.node_id < it->node_id ? 1 : 0;
  }
  if (ordinal > 0xFFFF) {
    *why = "GPU index " + std::to_string(ordinal) + " out of range";
    return false;
  }
  r.ordinal_known = true;
  r.ordinal = static_cast<uint32_t>(ordinal);
  return true;
}

bool RocprofJsonSink::Finish(std::vector<RocprofRecord>* out, std::string* error) {
  if (!seen_layout_) {
    *error =
        "not rocprofv3 JSON output: no \"rocprofiler-sdk-tool\" process objects, agents or buffer_records";
    return false;
  }
  for (PendingRecord& pr : pending_) {
    const Process& p = processes_[pr.process];
    std::string why;
    if (!ResolveGpu(p, &pr, &why)) {
      result_->Refuse(pr.number, why);
      continue;
    }
    if (pr.is_kernel) {
      const auto name = p.kernel_names.find(pr.kernel_id);
      pr.record.name = name != p.kernel_names.end() ? name->second : "kernel " + std::to_string(pr.kernel_id);
    }
    out->push_back(std::move(pr.record));
    ++result_->accepted;
  }
  pending_.clear();
  return result_->Acceptable(options_, error);
}

bool ReadJson(trace::ByteCursor* cursor, const RocprofReadOptions& options, std::vector<RocprofRecord>* out,
              RocprofReadResult* result, std::string* error) {
  *result = RocprofReadResult{};
  result->format = RocprofFormat::kV3Json;
  result->unit = "record";
  RocprofJsonSink sink(options, result);
  JsonStreamLimits limits;
  limits.max_string_bytes = options.max_string_bytes;
  if (!StreamJsonElements(cursor, limits, &sink, error)) return false;
  return sink.Finish(out, error);
}

}  // namespace

bool ReadRocprofJson(const std::filesystem::path& path, const RocprofReadOptions& options,
                     std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) {
    *error = "cannot open " + path.string();
    return false;
  }
  trace::ByteCursor cursor(file.get());
  if (ReadJson(&cursor, options, out, result, error)) return true;
  *error = path.string() + ": " + *error;
  return false;
}

bool ParseRocprofJson(std::string_view bytes, const RocprofReadOptions& options,
                      std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error) {
  trace::ByteCursor cursor(bytes);
  return ReadJson(&cursor, options, out, result, error);
}

}  // namespace chronolink::collector
