#include "agent/export/timebase_jsonl_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/own_output_file.h"

namespace chronolink {

std::string TimebaseKnotToJson(const TimebaseKnot& k, uint32_t node, uint64_t session, bool after_gap) {
  nlohmann::json j;
  j["schema"] = kTimebaseSchema;
  j["node"] = node;
  j["session"] = std::to_string(session);
  j["raw_ns"] = k.raw_ns;
  j["realtime_ns"] = k.realtime_ns;
  j["after_step"] = k.after_step;
  if (after_gap) j["after_gap"] = true;
  return j.dump();
}

TimebaseJsonlWriter::~TimebaseJsonlWriter() { Close(); }

bool TimebaseJsonlWriter::Open(const std::string& dir, uint32_t node, uint64_t session, std::string* error,
                               const std::string& file_name) {
  Close();
  path_ = (std::filesystem::path(dir) / file_name).string();
  file_ = OpenOwnOutputForAppend(path_, error);  // never through a link another user planted
  if (file_ == nullptr) return false;
  node_ = node;
  session_ = session;
  return true;
}

bool TimebaseJsonlWriter::WriteNew(const TimebaseKnots& knots, std::string* error) {
  if (file_ == nullptr) return true;
  for (const TimebaseKnot& k : knots.knots()) {
    if (k.raw_ns <= last_written_raw_ns_) continue;
    if (!WriteLine(TimebaseKnotToJson(k, node_, session_), error)) return false;
    last_written_raw_ns_ = k.raw_ns;
  }
  return Flush(error);
}

bool TimebaseJsonlWriter::WriteKnot(const TimebaseKnot& k, uint32_t node, uint64_t session, bool after_gap,
                                    std::string* error) {
  if (file_ == nullptr) return true;
  return WriteLine(TimebaseKnotToJson(k, node, session, after_gap), error);
}

bool TimebaseJsonlWriter::WriteLine(const std::string& json, std::string* error) {
  const std::string line = json + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) {
    *error = "cannot write " + path_ + ": " + std::strerror(errno);
    return false;
  }
  ++lines_;
  return true;
}

bool TimebaseJsonlWriter::Flush(std::string* error) {
  if (file_ != nullptr && std::fflush(file_) != 0) {
    *error = "cannot write " + path_ + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

void TimebaseJsonlWriter::Close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace chronolink
