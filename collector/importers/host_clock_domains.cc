// Host clock-domain recording (host_clock_domains.h).
#include "collector/importers/host_clock_domains.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "clock/clock_bracket.h"
#include "clock/clock_reader.h"
#include "common/own_output_file.h"

namespace chronolink::collector {

std::string_view HostClockDomainName(HostClockDomain d) {
  switch (d) {
    case HostClockDomain::kBoottime:
      return "boottime";
    case HostClockDomain::kMonotonic:
      return "monotonic";
    case HostClockDomain::kMonotonicRaw:
      return "monotonic_raw";
    case HostClockDomain::kRealtime:
      return "realtime";
  }
  return "unknown";
}

bool ParseHostClockDomain(std::string_view name, HostClockDomain* out) {
  for (HostClockDomain d : {HostClockDomain::kBoottime, HostClockDomain::kMonotonic,
                            HostClockDomain::kMonotonicRaw, HostClockDomain::kRealtime}) {
    if (name == HostClockDomainName(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

clockid_t HostClockId(HostClockDomain d) {
  switch (d) {
    case HostClockDomain::kBoottime:
      return CLOCK_BOOTTIME;
    case HostClockDomain::kMonotonic:
      return CLOCK_MONOTONIC;
    case HostClockDomain::kMonotonicRaw:
      return CLOCK_MONOTONIC_RAW;
    case HostClockDomain::kRealtime:
      return CLOCK_REALTIME;
  }
  return CLOCK_REALTIME;
}

ClockDomain ToClockDomain(HostClockDomain d) {
  switch (d) {
    case HostClockDomain::kBoottime:
      return ClockDomain::kBoottime;
    case HostClockDomain::kMonotonic:
      return ClockDomain::kMonotonic;
    case HostClockDomain::kMonotonicRaw:
      return ClockDomain::kMonotonicRaw;
    case HostClockDomain::kRealtime:
      return ClockDomain::kNodeRealtime;
  }
  return ClockDomain::kNodeRealtime;
}

// ---------------------------------------------------------------------------
// HostClockRecorder

HostClockRecorder::HostClockRecorder(const HostClockRecorderOptions& options, ClockReadFn read)
    : options_(options), read_(read ? std::move(read) : ClockReadFn(ReadClockNs)) {
  options_.reads_per_sample = std::max(1, options_.reads_per_sample);
  if (options_.read_granularity_ns >= 0) {
    granularity_ns_ = options_.read_granularity_ns;
    return;
  }
  int64_t g = 1;
  for (clockid_t id : {CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW}) {
    timespec res{};
    if (clock_getres(id, &res) == 0) g = std::max(g, TimespecToNs(res));
  }
  granularity_ns_ = g;
}

bool HostClockRecorder::Bracket(HostClockDomain domain, HostClockSample* out) {
  const clockid_t id = HostClockId(domain);
  const TightestBracket tightest = TightestOfReads(options_.reads_per_sample, read_, id, CLOCK_REALTIME);
  if (tightest.width_ns() > options_.max_bracket_ns) return false;  // also: no valid bracket at all
  const BracketOffset o = tightest.OffsetAtMidpoint(granularity_ns_);
  out->domain = domain;
  out->ref_ns = o.ref_ns;
  out->offset_ns = o.offset_ns;
  out->error_ns = o.error_ns;
  out->bracket_ns = o.bracket_ns;
  return true;
}

std::vector<HostClockSample> HostClockRecorder::Measure() {
  std::vector<HostClockSample> out;
  for (HostClockDomain d : kRecordedDomains) {
    HostClockSample s;
    ++measured_;
    if (Bracket(d, &s)) {
      out.push_back(s);
    } else {
      ++rejected_;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// The file

std::string HeaderLine(const HostClocksHeader& h) {
  nlohmann::ordered_json j;
  j["schema"] = h.schema;
  j["host"] = h.host;
  j["boot_id"] = h.boot_id;
  j["started_realtime_ns"] = h.started_realtime_ns;
  j["period_ns"] = h.period_ns;
  j["granularity_ns"] = h.granularity_ns;
  return j.dump() + "\n";
}

std::string SampleLine(const HostClockSample& s) {
  nlohmann::ordered_json j;
  j["domain"] = HostClockDomainName(s.domain);
  j["ref_ns"] = s.ref_ns;
  j["offset_ns"] = s.offset_ns;
  j["error_ns"] = s.error_ns;
  j["bracket_ns"] = s.bracket_ns;
  return j.dump() + "\n";
}

HostClocksWriter::~HostClocksWriter() {
  if (fd_ >= 0) ::close(fd_);
}

bool HostClocksWriter::Open(const std::filesystem::path& path, const HostClocksHeader& header,
                            std::string* error) {
  // Streamed as it is recorded (a crash keeps what was written), so not
  // through a temporary file; never through a link another user planted.
  fd_ = OpenOwnOutput(path, OwnOutputMode::kTruncate, error);
  if (fd_ < 0) return false;
  path_ = path;
  return WriteLine(HeaderLine(header), error);
}

bool HostClocksWriter::WriteLine(const std::string& line, std::string* error) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;  // a signal that ends the recording: finish the line first
    if (n <= 0) {
      *error = "cannot write " + path_.string() + ": " + std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool HostClocksWriter::Write(const HostClockSample& sample, std::string* error) {
  if (fd_ < 0) {
    *error = "host-clocks file not open";
    return false;
  }
  if (!WriteLine(SampleLine(sample), error)) return false;
  ++samples_written_;
  return true;
}

bool HostClocksWriter::Close(std::string* error) {
  if (fd_ < 0) return true;
  bool ok = true;
  if (::fsync(fd_) != 0 && errno != EINVAL) {
    *error = "cannot sync " + path_.string() + ": " + std::strerror(errno);
    ok = false;
  }
  if (::close(fd_) != 0 && ok) {
    *error = "cannot close " + path_.string() + ": " + std::strerror(errno);
    ok = false;
  }
  fd_ = -1;
  return ok;
}

bool CurrentBootId(std::string* boot_id, std::string* error) {
  constexpr char kPath[] = "/proc/sys/kernel/random/boot_id";
  std::ifstream in(kPath);
  std::string id;
  if (!in || !std::getline(in, id)) {
    *error = std::string("cannot read ") + kPath;
    return false;
  }
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r' || id.back() == ' ')) id.pop_back();
  if (id.empty()) {
    *error = std::string(kPath) + " is empty";
    return false;
  }
  *boot_id = id;
  return true;
}

}  // namespace chronolink::collector
