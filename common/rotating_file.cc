#include "common/rotating_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "common/own_output_file.h"

namespace chronolink {

namespace fs = std::filesystem;

std::optional<RotatedName> ParseRotatedName(const std::string& name, const std::string& stem, const std::string& ext) {
  const std::string head = stem + ".";
  if (name.rfind(head, 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', head.size());
  if (dot == std::string::npos || dot == head.size() || dot - head.size() > 18) return std::nullopt;
  const std::string digits = name.substr(head.size(), dot - head.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  RotatedName r;
  r.index = std::stoull(digits);
  if (r.index == 0) return std::nullopt;
  const std::string rest = name.substr(dot);
  if (rest == ext) {
    r.state = RotatedName::State::kPlain;
  } else if (rest == ext + ".gz") {
    r.state = RotatedName::State::kCompressed;
  } else if (rest == ext + ".gz.tmp") {
    r.state = RotatedName::State::kCompressing;
  } else {
    return std::nullopt;
  }
  return r;
}

std::string RotatedFileName(const std::string& path, uint64_t n) {
  const fs::path p(path);
  char index[24];
  std::snprintf(index, sizeof index, "%06llu", static_cast<unsigned long long>(n));
  return (p.parent_path() / (p.stem().string() + "." + index + p.extension().string())).string();
}

std::vector<std::string> RotatedSet(const std::string& path) {
  const fs::path p(path);
  const std::string stem = p.stem().string(), ext = p.extension().string();
  if (ext != ".jsonl") return {path};
  std::map<uint64_t, std::string> rotated;
  std::error_code ec;
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::optional<RotatedName> r = ParseRotatedName(name, stem, ext);
    if (!r || r->state == RotatedName::State::kCompressing) continue;
    std::string& chosen = rotated[r->index];
    if (chosen.empty() || r->state == RotatedName::State::kCompressed) {
      chosen = (p.has_parent_path() ? (dir / name) : fs::path(name)).string();
    }
  }
  std::vector<std::string> set;
  for (auto& [n, file] : rotated) set.push_back(std::move(file));
  set.push_back(path);
  return set;
}

RotatingFile::RotatingFile() : gzip_(std::make_unique<BackgroundGzip>()) {}

RotatingFile::~RotatingFile() { Close(); }

bool RotatingFile::Open(const fs::path& path, FileRotation rotation, std::string* error) {
  Close();
  rotation_ = rotation;
  path_ = path.string();
  file_ = OpenOwnOutputForAppend(path_, error);
  if (file_ == nullptr) return false;
  std::error_code ec;
  bytes_ = static_cast<int64_t>(fs::file_size(path_, ec));
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string stem = path.stem().string(), ext = path.extension().string();
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::optional<RotatedName> r = ParseRotatedName(entry.path().filename().string(), stem, ext);
    if (!r) continue;
    last_index_ = std::max(last_index_, r->index);
    // GzipFileInPlace clears the .tmp a crash left beside it.
    if (r->state == RotatedName::State::kPlain && rotation_.compress) gzip_->Compress(entry.path());
  }
  return true;
}

bool RotatingFile::Append(std::string_view bytes, std::string* error) {
  if (file_ == nullptr) {
    *error = path_ + " is not open";
    return false;
  }
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    *error = "writing " + path_ + ": " + std::strerror(errno);
    return false;
  }
  bytes_ += static_cast<int64_t>(bytes.size());
  return true;
}

bool RotatingFile::Flush(std::string* error) {
  if (file_ != nullptr && std::fflush(file_) != 0) {
    *error = "flushing " + path_ + ": " + std::strerror(errno);
    return false;
  }
  if (const std::string failed = gzip_->TakeError(); !failed.empty()) {
    *error = "compressing a file rotated out of " + path_ + ": " + failed;
    return false;
  }
  return true;
}

bool RotatingFile::RotateIfFull(std::string* error) {
  if (file_ == nullptr || rotation_.max_bytes <= 0 || bytes_ < rotation_.max_bytes) return true;
  if (!Flush(error)) return false;
  std::fclose(file_);
  file_ = nullptr;
  const std::string full = RotatedFileName(path_, last_index_ + 1);
  if (std::rename(path_.c_str(), full.c_str()) != 0) {
    *error = "rotating " + path_ + " to " + full + ": " + std::strerror(errno);
    std::string reopen_error;
    file_ = OpenOwnOutputForAppend(path_, &reopen_error);
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

void RotatingFile::Close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (gzip_) gzip_->Drain();
}

}  // namespace chronolink
