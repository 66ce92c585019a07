// rocprof files -> device planes (rocprof_import.h).
#include "collector/importers/rocprof_import.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>

#include "collector/importers/rocprof_csv.h"
#include "collector/importers/rocprof_json.h"

namespace chronolink::collector {
namespace {

// The first non-blank byte of the file (0 for an empty file); false when it
// cannot be read.
bool FirstByte(const std::filesystem::path& path, char* out, std::string* error) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    *error = "cannot open " + path.string();
    return false;
  }
  *out = 0;
  for (int c = std::fgetc(f.get()); c != EOF; c = std::fgetc(f.get())) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    *out = static_cast<char>(c);  // a UTF-8 byte order mark reads as CSV, which strips it
    break;
  }
  return true;
}

// Queue handles are 64-bit; a line id holds 32: handles that do not fit
// are numbered per device in increasing order.
std::map<uint64_t, uint32_t> StreamIds(const std::vector<const RocprofRecord*>& records) {
  std::set<uint64_t> queues;
  for (const RocprofRecord* r : records) queues.insert(r->queue);
  std::map<uint64_t, uint32_t> ids;
  const bool fit = queues.empty() || *queues.rbegin() <= UINT32_MAX;
  uint32_t next = 0;
  for (uint64_t q : queues) ids[q] = fit ? static_cast<uint32_t>(q) : next++;
  return ids;
}

GpuActivity ToActivity(const RocprofRecord& r, uint32_t ordinal, uint32_t stream) {
  GpuActivity a;
  a.kind = r.kind;
  a.device = ordinal;
  a.stream = stream;
  a.correlation_id = r.correlation_id;
  a.start_device_ns = r.start_ns;  // the profiler's host clock: the conversion's domain
  a.end_device_ns = r.end_ns;
  a.name = r.name;
  a.details = r.details;
  a.bytes = r.bytes;
  return a;
}

GpuDeviceInfo ImportedDevice(uint32_t ordinal, const HostDomainConversion& conversion) {
  GpuDeviceInfo info;
  info.ordinal = ordinal;
  info.name = "AMD GPU " + std::to_string(ordinal) + " (rocprof import)";
  info.vendor = "AMD";
  std::string clock(conversion.domain_name());
  for (char& c : clock) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  info.clock = "host CLOCK_" + clock + " (the profiler's timestamps)";
  return info;
}

}  // namespace

bool ReadRocprofFile(const std::filesystem::path& path, const RocprofReadOptions& options,
                     std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error) {
  char first = 0;
  if (!FirstByte(path, &first, error)) return false;
  if (first == 0) {
    *error = path.string() + ": empty file";
    return false;
  }
  if (first == '{' || first == '[') return ReadRocprofJson(path, options, out, result, error);
  return ReadRocprofCsv(path, options, out, result, error);
}

std::vector<DeviceExport> RocprofDeviceExports(const std::vector<RocprofRecord>& records,
                                               const HostDomainConversion& conversion,
                                               std::map<uint64_t, uint32_t>* agent_ordinals) {
  // Agent ids numbered in increasing order over every file.
  std::set<uint64_t> agents;
  for (const RocprofRecord& r : records) {
    if (!r.ordinal_known) agents.insert(r.agent_id);
  }
  agent_ordinals->clear();
  uint32_t next = 0;
  for (uint64_t a : agents) (*agent_ordinals)[a] = next++;

  std::map<uint32_t, std::vector<const RocprofRecord*>> by_gpu;
  for (const RocprofRecord& r : records) {
    by_gpu[r.ordinal_known ? r.ordinal : agent_ordinals->at(r.agent_id)].push_back(&r);
  }
  std::vector<DeviceExport> out;
  for (const auto& [ordinal, gpu_records] : by_gpu) {
    DeviceExport d;
    d.info = ImportedDevice(ordinal, conversion);
    d.host_domain = &conversion;
    const std::map<uint64_t, uint32_t> streams = StreamIds(gpu_records);
    d.activity.reserve(gpu_records.size());
    for (const RocprofRecord* r : gpu_records)
      d.activity.push_back(ToActivity(*r, ordinal, streams.at(r->queue)));
    out.push_back(std::move(d));
  }
  return out;
}

bool ImportRocprof(const std::vector<std::filesystem::path>& files, const HostDomainConversion& conversion,
                   const RocprofReadOptions& options, trace::HostTrace* trace, RocprofImportResult* result,
                   std::string* error) {
  *result = RocprofImportResult{};
  std::vector<RocprofRecord> records;
  for (const std::filesystem::path& path : files) {
    RocprofFileResult f;
    f.path = path;
    if (!ReadRocprofFile(path, options, &records, &f.read, error)) return false;
    result->files.push_back(std::move(f));
  }
  for (size_t i = 0; i < records.size(); ++i) {
    result->first_ns = i == 0 ? records[i].start_ns : std::min(result->first_ns, records[i].start_ns);
    result->last_ns = i == 0 ? records[i].end_ns : std::max(result->last_ns, records[i].end_ns);
  }
  std::vector<DeviceExport> devices = RocprofDeviceExports(records, conversion, &result->agent_ordinals);
  records.clear();
  records.shrink_to_fit();  // the activity holds them now
  for (const DeviceExport& d : devices) result->events_per_gpu[d.info.ordinal] = d.activity.size();
  DeviceExportOptions eo;
  eo.backend = "rocprof import";
  eo.host_launch_events = false;  // kernel traces carry no host launch times
  return AppendDevicePlanes(devices, eo, trace, &result->exported, error);
}

}  // namespace chronolink::collector
