// Host-clocks file -> per-domain tracks (host_clocks_loader.h).
#include "collector/importers/host_clocks_loader.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "collector/importers/line_reader.h"

namespace chronolink::collector {
namespace {

using Json = nlohmann::json;

// Limits a sample must meet. Beyond them no recorder writes, and within
// them every sum and product the tracks form stays far inside int64
// (host_domain_track.h): a hostile file cannot make the arithmetic wrap.
constexpr int64_t kMaxSampleErrorNs = 1'000'000;       // a bracket wider than 2 ms is no measurement
constexpr int64_t kMaxRefNs = int64_t{1} << 58;        // 9 years of uptime
constexpr int64_t kMaxAbsOffsetNs = int64_t{1} << 61;  // 73 years either way
constexpr int64_t kMinSpacingNs = 100'000;             // the recorder samples every >= 1 ms

bool IsBlank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

// An integer member; false with *why when absent, not an integer or beyond int64.
bool GetInt(const Json& j, const char* key, int64_t* out, std::string* why) {
  const auto it = j.find(key);
  if (it == j.end()) {
    *why = std::string(key) + " is missing";
    return false;
  }
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      *why = std::string(key) + " is beyond int64";
      return false;
    }
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (!it->is_number_integer()) {
    *why = std::string(key) + " is not an integer";
    return false;
  }
  *out = it->get<int64_t>();
  return true;
}

std::string GetStr(const Json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool ParseHeader(const Json& j, HostClocksHeader* h, std::string* why) {
  if (!j.is_object() || GetStr(j, "schema") != kHostClocksSchema) {
    *why = "the first line is not a host-clocks header (schema \"" + std::string(kHostClocksSchema) + "\")";
    return false;
  }
  h->schema = kHostClocksSchema;
  h->host = GetStr(j, "host");
  h->boot_id = GetStr(j, "boot_id");
  if (h->boot_id.empty()) {
    *why = "the header has no boot_id";
    return false;
  }
  std::string ignored;  // optional fields
  GetInt(j, "started_realtime_ns", &h->started_realtime_ns, &ignored);
  GetInt(j, "period_ns", &h->period_ns, &ignored);
  GetInt(j, "granularity_ns", &h->granularity_ns, &ignored);
  return true;
}

bool ParseSample(const Json& j, HostClockSample* s, std::string* why) {
  if (!j.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  if (!ParseHostClockDomain(GetStr(j, "domain"), &s->domain) || s->domain == HostClockDomain::kRealtime) {
    *why = "domain is not one of boottime, monotonic, monotonic_raw";
    return false;
  }
  if (!GetInt(j, "ref_ns", &s->ref_ns, why) || !GetInt(j, "offset_ns", &s->offset_ns, why) ||
      !GetInt(j, "error_ns", &s->error_ns, why) || !GetInt(j, "bracket_ns", &s->bracket_ns, why)) {
    return false;
  }
  if (s->ref_ns < 0 || s->error_ns < 0 || s->bracket_ns < 0) {
    *why = "ref_ns, error_ns and bracket_ns must not be negative";
    return false;
  }
  if (s->error_ns > kMaxSampleErrorNs) {
    *why = "error_ns is over 1 ms: not a bracketed measurement";
    return false;
  }
  if (s->ref_ns > kMaxRefNs || s->offset_ns > kMaxAbsOffsetNs || s->offset_ns < -kMaxAbsOffsetNs) {
    *why = "ref_ns or offset_ns out of range (ref beyond 2^58 ns, |offset| beyond 2^61 ns)";
    return false;
  }
  const __int128 realtime = static_cast<__int128>(s->ref_ns) + s->offset_ns;
  if (realtime < 0 || realtime > std::numeric_limits<int64_t>::max()) {
    *why = "ref_ns + offset_ns is not a REALTIME instant in int64";
    return false;
  }
  return true;
}

// Reads the lines into *out; false only for what fails the whole file.
class HostClocksParser {
 public:
  HostClocksParser(const HostClocksLoadOptions& o, HostClocksFile* out) : options_(o), out_(out) {}

  bool Run(LineReader* reader, std::string* error) {
    std::string line;
    bool truncated = false;
    while (reader->Next(&line, &truncated)) {
      if (IsBlank(line)) continue;
      ++out_->lines;
      if (!Line(line, truncated, reader->line_number(), error)) return false;
    }
    if (!reader->ok()) {
      *error = reader->error();
      return false;
    }
    return Finish(error);
  }

 private:
  bool Line(const std::string& line, bool truncated, uint64_t number, std::string* error) {
    if (truncated) return Bad(number, "longer than " + std::to_string(options_.max_line_bytes) + " bytes");
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!have_header_) {
      std::string why;
      if (j.is_discarded()) why = "the first line is not JSON";
      if (why.empty()) ParseHeader(j, &out_->header, &why);
      if (!why.empty()) {
        *error = "line " + std::to_string(number) + ": " + why + ": not a chronolink host-clocks file";
        return false;
      }
      have_header_ = true;
      return true;
    }
    if (j.is_discarded()) return Bad(number, "not JSON");
    if (j.is_object() && j.contains("schema")) return AnotherHeader(j, number, error);
    HostClockSample s;
    std::string why;
    if (!ParseSample(j, &s, &why)) return Bad(number, why);
    return Accept(s, number);
  }

  // An appended recording: fine from the same boot, refused from another.
  bool AnotherHeader(const Json& j, uint64_t number, std::string* error) {
    HostClocksHeader h;
    std::string why;
    if (!ParseHeader(j, &h, &why)) return Bad(number, why);
    if (h.boot_id != out_->header.boot_id) {
      *error = "line " + std::to_string(number) + ": a recording from another boot (" + h.boot_id +
               ") follows one from boot " + out_->header.boot_id + ": one file must hold one boot";
      return false;
    }
    return true;
  }

  bool Accept(const HostClockSample& s, uint64_t number) {
    auto& track = out_->tracks[static_cast<size_t>(s.domain)];
    if (!track) track = std::make_unique<HostDomainTrack>(s.domain, options_.track);
    if (track->size() > 0 && s.ref_ns - track->last_ref_ns() < kMinSpacingNs) {
      return Bad(number, "ref_ns is not 100 us or more after the previous " +
                             std::string(HostClockDomainName(s.domain)) + " sample's");
    }
    track->Add(s);
    ++out_->samples;
    return true;
  }

  bool Bad(uint64_t number, const std::string& why) {
    ++out_->bad_lines;
    if (out_->bad_line_numbers.size() < kMaxBadLineNumbers) out_->bad_line_numbers.push_back(number);
    if (out_->first_bad_reason.empty())
      out_->first_bad_reason = "line " + std::to_string(number) + ": " + why;
    return true;
  }

  bool Finish(std::string* error) {
    if (!have_header_) {
      *error = "empty: not a chronolink host-clocks file";
      return false;
    }
    const uint64_t bad = out_->bad_lines;
    if (bad >= options_.min_bad_to_fail &&
        static_cast<double>(bad) > options_.max_bad_fraction * static_cast<double>(out_->lines)) {
      *error = "mostly not host-clock samples: " + std::to_string(bad) + " of " +
               std::to_string(out_->lines) + " lines bad (" + out_->first_bad_reason + ")";
      return false;
    }
    if (out_->samples == 0) {
      *error = "no clock samples" + (bad > 0 ? " (" + out_->first_bad_reason + ")" : std::string());
      return false;
    }
    if (!options_.expected_boot_id.empty() && out_->header.boot_id != options_.expected_boot_id) {
      *error = "recorded on another boot (boot_id " + out_->header.boot_id + ", expected " +
               options_.expected_boot_id + "): its BOOTTIME and MONOTONIC restarted since";
      return false;
    }
    return true;
  }

  const HostClocksLoadOptions& options_;
  HostClocksFile* out_;
  bool have_header_ = false;
};

bool Load(LineReader* reader, const HostClocksLoadOptions& options, HostClocksFile* out, std::string* error) {
  *out = HostClocksFile{};
  if (!reader->ok()) {
    *error = reader->error();
    return false;
  }
  HostClocksParser parser(options, out);
  return parser.Run(reader, error);
}

}  // namespace

const HostDomainTrack* HostClocksFile::track(HostClockDomain d) const {
  const size_t i = static_cast<size_t>(d);
  return i < tracks.size() ? tracks[i].get() : nullptr;
}

bool LoadHostClocksFile(const std::filesystem::path& path, const HostClocksLoadOptions& options,
                        HostClocksFile* out, std::string* error) {
  LineReader reader(path, options.max_line_bytes);
  const bool opened = reader.ok();  // an open failure already names the file
  if (Load(&reader, options, out, error)) return true;
  if (opened) *error = path.string() + ": " + *error;
  return false;
}

bool ParseHostClocks(std::string_view bytes, const HostClocksLoadOptions& options, HostClocksFile* out,
                     std::string* error) {
  LineReader reader(bytes, options.max_line_bytes);
  return Load(&reader, options, out, error);
}

}  // namespace chronolink::collector
