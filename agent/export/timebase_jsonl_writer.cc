#include "agent/export/timebase_jsonl_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>


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
                               const std::string& file_name, FileRotation rotation) {
  Close();
  if (!file_.Open(std::filesystem::path(dir) / file_name, rotation, error)) return false;
  // Appending to a file another run wrote: its knots are not this encoder's.
  columns_.Restart();
  columns_rotations_ = file_.rotations();
  node_ = node;
  session_ = session;
  return true;
}

bool TimebaseJsonlWriter::WriteNew(const TimebaseKnots& knots, std::string* error) {
  if (!file_.is_open()) return true;
  for (const TimebaseKnot& k : knots.knots()) {
    if (k.raw_ns <= last_written_raw_ns_) continue;
    if (!WriteLine(TimebaseKnotToJson(k, node_, session_), error)) return false;
    last_written_raw_ns_ = k.raw_ns;
  }
  return Flush(error);
}

bool TimebaseJsonlWriter::WriteKnot(const TimebaseKnot& k, uint32_t node, uint64_t session, bool after_gap,
                                    std::string* error) {
  if (!file_.is_open()) return true;
  return WriteLine(TimebaseKnotToJson(k, node, session, after_gap), error);
}

bool TimebaseJsonlWriter::WriteKnots(std::span<const RelayedKnot> knots, bool columns, std::string* error) {
  if (!file_.is_open()) return true;
  if (!columns) {
    for (const RelayedKnot& k : knots) {
      if (!WriteKnot(k.knot, k.node, k.session, k.after_gap, error)) return false;
    }
  } else if (!knots.empty()) {
    // A new file (rotated since the last line) must not lean on the last one.
    if (file_.rotations() != columns_rotations_) {
      columns_.Restart();
      columns_rotations_ = file_.rotations();
    }
    if (!WriteLine(columns_.Line(knots), error)) return false;
  }
  return Flush(error);
}

bool TimebaseJsonlWriter::WriteLine(const std::string& json, std::string* error) {
  if (!file_.Append(json + "\n", error)) return false;
  ++lines_;
  return true;
}

bool TimebaseJsonlWriter::Flush(std::string* error) {
  if (!file_.is_open()) return true;
  return file_.Flush(error) && file_.RotateIfFull(error);
}

void TimebaseJsonlWriter::Close() { file_.Close(); }

}  // namespace chronolink
