#include "agent/export/offsets_jsonl_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/own_output_file.h"

namespace chronolink {

namespace {
nlohmann::ordered_json NullableNumber(bool present, double v) {
  return present ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}
}  // namespace

std::string OffsetLineJson(const NodeSolution& s, const OffsetLineContext& c) {
  nlohmann::ordered_json j;
  j["schema"] = kOffsetSchema;
  j["node"] = s.node;
  j["reference"] = c.reference_node ? nlohmann::ordered_json(*c.reference_node)
                                    : nlohmann::ordered_json("mean");
  j["t_ns"] = c.reference_instant_ns;
  j["offset_ns"] = NullableNumber(s.reachable, s.offset_ns);
  j["drift"] = NullableNumber(s.reachable, s.drift);
  j["uncertainty_ns"] = NullableNumber(s.reachable, s.uncertainty_ns);
  j["residual_ns"] = NullableNumber(s.reachable, s.residual_ns);
  j["reachable"] = s.reachable;
  j["component"] = s.component;
  j["edges_used"] = s.edges_used;
  if (c.leader) j["leader"] = *c.leader;
  if (c.recomputed) j["recomputed"] = true;
  if (!c.method.empty() && c.method != "global") j["method"] = c.method;
  return j.dump();
}

std::string RotatedOffsetsName(const std::string& current, uint64_t n) {
  const std::filesystem::path p(current);
  char index[24];
  std::snprintf(index, sizeof index, "%06llu", static_cast<unsigned long long>(n));
  return (p.parent_path() / (p.stem().string() + "." + index + p.extension().string())).string();
}


OffsetsJsonlWriter::OffsetsJsonlWriter() : gzip_(std::make_unique<BackgroundGzip>()) {}

OffsetsJsonlWriter::~OffsetsJsonlWriter() { Close(); }

bool OffsetsJsonlWriter::Open(const std::string& dir, std::string* error, OffsetsRotation rotation) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create output directory " + dir + ": " + ec.message();
    return false;
  }
  rotation_ = rotation;
  path_ = (std::filesystem::path(dir) / "offsets.jsonl").string();
  file_ = OpenOwnOutputForAppend(path_, error);  // never through a link another user planted
  if (file_ == nullptr) return false;
  bytes_ = static_cast<int64_t>(std::filesystem::file_size(path_, ec));
  // Numbering goes on from the rotated files there; one a crash left
  // uncompressed is compressed now (GzipFileInPlace clears a leftover .tmp).
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::optional<RotatedName> r = ParseRotatedName(entry.path().filename().string(), "offsets", ".jsonl");
    if (!r) continue;
    last_index_ = std::max(last_index_, r->index);
    if (r->state == RotatedName::State::kPlain && rotation_.compress) gzip_->Compress(entry.path());
  }
  return true;
}

bool OffsetsJsonlWriter::Write(const OffsetsSnapshot& snapshot, std::string* error) {
  if (file_ == nullptr) {
    *error = "offsets.jsonl is not open";
    return false;
  }
  OffsetLineContext c;
  c.reference_instant_ns = snapshot.reference_instant_ns;
  c.reference_node = snapshot.reference_node;
  c.leader = snapshot.leader;
  c.recomputed = snapshot.recomputed;
  for (const NodeSolution& s : snapshot.nodes) {
    const std::string line = OffsetLineJson(s, c) + "\n";
    if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) {
      *error = "writing " + path_ + ": " + std::strerror(errno);
      return false;
    }
    ++lines_;
    bytes_ += static_cast<int64_t>(line.size());
  }
  if (std::fflush(file_) != 0) {
    *error = "flushing " + path_ + ": " + std::strerror(errno);
    return false;
  }
  if (const std::string failed = gzip_->TakeError(); !failed.empty()) {
    *error = "compressing a rotated offsets file: " + failed;
    return false;
  }
  if (rotation_.max_bytes > 0 && bytes_ >= rotation_.max_bytes) return Rotate(error);
  return true;
}

// Whole instants only: the file is full after a snapshot's last line.
bool OffsetsJsonlWriter::Rotate(std::string* error) {
  std::fclose(file_);
  file_ = nullptr;
  const std::string full = RotatedOffsetsName(path_, last_index_ + 1);
  if (std::rename(path_.c_str(), full.c_str()) != 0) {
    *error = "rotating " + path_ + " to " + full + ": " + std::strerror(errno);
    file_ = OpenOwnOutputForAppend(path_, error);
    return false;
  }
  ++last_index_;
  ++rotated_;
  bytes_ = 0;
  file_ = OpenOwnOutputForAppend(path_, error);
  if (file_ == nullptr) return false;
  if (rotation_.compress) gzip_->Compress(full);
  return true;
}

void OffsetsJsonlWriter::Close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (gzip_) gzip_->Drain();
}

}  // namespace chronolink
