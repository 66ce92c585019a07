// The C API (include/chronolink/collector.h) over collector::Collector. No
// exception crosses it: anything thrown inside becomes an error return.
#include "include/chronolink/collector.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "collector/api/collector.h"
#include "collector/api/status_json.h"
#include "trace/exporters/xspace_writer.h"

struct chronolink_collector {
  std::unique_ptr<chronolink::collector::Collector> impl;
};

namespace {

using chronolink::collector::Collector;

int Fail(char* err, size_t err_len, const std::string& message) {
  if (err != nullptr && err_len > 0) {
    const size_t n = std::min(err_len - 1, message.size());
    std::memcpy(err, message.data(), n);
    err[n] = '\0';
  }
  return 0;
}

template <typename F>
int Guarded(char* err, size_t err_len, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Fail(err, err_len, std::string("chronolink collector: internal error: ") + e.what());
  } catch (...) {
    return Fail(err, err_len, "chronolink collector: internal error");
  }
}

char* CopyOut(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace

extern "C" {

int chronolink_collector_api_version(void) { return CHRONOLINK_COLLECTOR_API_VERSION; }

chronolink_collector* chronolink_collector_create(const char* options_json, char* err, size_t err_len) {
  chronolink_collector* out = nullptr;
  Guarded(err, err_len, [&] {
    chronolink::collector::OptionSources sources;
    if (options_json != nullptr) sources.options_json = options_json;
    chronolink::collector::CollectorOptions options;
    std::vector<std::string> warnings;
    std::string error;
    if (!chronolink::collector::LoadCollectorOptions(sources, &options, &warnings, &error)) {
      return Fail(err, err_len, error);
    }
    auto impl = Collector::Create(options, &error);
    if (!impl) return Fail(err, err_len, error);
    out = new chronolink_collector{std::move(impl)};
    return 1;
  });
  return out;
}

void chronolink_collector_destroy(chronolink_collector* c) {
  try {
    delete c;
  } catch (...) {
  }
}

int chronolink_collector_start(chronolink_collector* c, char* err, size_t err_len) {
  if (c == nullptr) return Fail(err, err_len, "null collector");
  return Guarded(err, err_len, [&] {
    std::string error;
    return c->impl->Start(&error) ? 1 : Fail(err, err_len, error);
  });
}

void chronolink_collector_stop(chronolink_collector* c) {
  if (c == nullptr) return;
  try {
    c->impl->Stop();
  } catch (...) {
  }
}

int chronolink_collector_stop_mapped(chronolink_collector* c) {
  if (c == nullptr) return -1;
  try {
    switch (c->impl->ReadStopMapping().state) {
      case chronolink::collector::Collector::StopMapping::kMapped: return 1;
      case chronolink::collector::Collector::StopMapping::kPending: return 0;
      case chronolink::collector::Collector::StopMapping::kNever: return -1;
    }
  } catch (...) {
  }
  return -1;
}

int chronolink_collector_export_xspace(chronolink_collector* c, const void* in, size_t in_len, void** out,
                                       size_t* out_len, char* err, size_t err_len) {
  if (c == nullptr || out == nullptr || out_len == nullptr) return Fail(err, err_len, "null argument");
  if (in == nullptr && in_len != 0) return Fail(err, err_len, "null input with a non-zero length");
  return Guarded(err, err_len, [&] {
    if (in_len > INT32_MAX) return Fail(err, err_len, "the input XSpace is 2 GiB or more");
    chronolink::trace::HostTrace trace;
    if (in_len > 0 && !trace.space->ParseFromArray(in, static_cast<int>(in_len))) {
      return Fail(err, err_len, "the input is not a serialized XSpace");
    }
    chronolink::collector::DeviceExportStats stats;
    std::string error, bytes;
    if (!c->impl->ExportTo(&trace, &stats, &error)) return Fail(err, err_len, error);
    if (!chronolink::trace::SerializeXSpace(*trace.space, &bytes, &error)) return Fail(err, err_len, error);
    void* p = std::malloc(bytes.size() == 0 ? 1 : bytes.size());
    if (p == nullptr) return Fail(err, err_len, "out of memory");
    std::memcpy(p, bytes.data(), bytes.size());
    *out = p;
    *out_len = bytes.size();
    return 1;
  });
}

int chronolink_collector_write_run(chronolink_collector* c, const char* logdir, const char* run, char* err,
                                   size_t err_len) {
  if (c == nullptr || logdir == nullptr || run == nullptr) return Fail(err, err_len, "null argument");
  return Guarded(err, err_len, [&] {
    std::filesystem::path path;
    chronolink::collector::DeviceExportStats stats;
    std::string error;
    return c->impl->WriteRun(logdir, run, &path, &stats, &error) ? 1 : Fail(err, err_len, error);
  });
}

uint64_t chronolink_collector_region_begin(chronolink_collector* c, uint32_t device, void* stream,
                                           const char* name, char* err, size_t err_len) {
  if (c == nullptr || name == nullptr) return static_cast<uint64_t>(Fail(err, err_len, "null argument"));
  uint64_t id = 0;
  Guarded(err, err_len, [&] {
    std::string why;
    id = c->impl->BeginRegion(device, stream, name, &why);
    return id != 0 ? 1 : Fail(err, err_len, why);
  });
  return id;
}

int chronolink_collector_hsa_dispatch(chronolink_collector* c, uint32_t device, uint64_t agent_handle,
                                      uint64_t signal_handle, uint32_t queue, const char* name, char* err,
                                      size_t err_len) {
  if (c == nullptr || name == nullptr) return Fail(err, err_len, "null argument");
  return Guarded(err, err_len, [&] {
    std::string why;
    const chronolink::collector::HsaDispatch d{device, agent_handle, signal_handle, queue, name};
    return c->impl->TimeHsaDispatch(d, &why) ? 1 : Fail(err, err_len, why);
  });
}

int chronolink_collector_region_end(chronolink_collector* c, uint64_t region, char* err, size_t err_len) {
  if (c == nullptr) return Fail(err, err_len, "null collector");
  return Guarded(err, err_len, [&] {
    std::string why;
    return c->impl->EndRegion(region, &why) ? 1 : Fail(err, err_len, why);
  });
}

char* chronolink_collector_status_json(chronolink_collector* c) {
  if (c == nullptr) return nullptr;
  try {
    return CopyOut(chronolink::collector::StatusJson(c->impl->Status()).dump());
  } catch (...) {
    return nullptr;
  }
}

void chronolink_collector_free(void* p) { std::free(p); }

}  // extern "C"
