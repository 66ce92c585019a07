#include "agent/export/packet_stamp_log.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/own_output_file.h"

namespace chronolink {

namespace {
constexpr size_t kMaxEntries = 1 << 16;

const char* TypeName(MessageType t) {
  switch (t) {
    case MessageType::kForward: return "forward";
    case MessageType::kReverse: return "reverse";
    case MessageType::kFollowUp: return "followup";
    case MessageType::kClockRemap:
      return "clock_remap";
  }
  return "?";
}
}  // namespace

PacketStampLog::~PacketStampLog() { Close(); }

bool PacketStampLog::Open(const std::string& path, std::string* error) {
  file_ = OpenOwnOutputForAppend(path, error);  // never through a link another user planted
  if (file_ == nullptr) {
    *error = "stamp log: " + *error;
    return false;
  }
  return true;
}

void PacketStampLog::Add(const PacketKey& key, bool transmitted, const ProbeStamp& stamp,
                         int64_t now_ns) {
  if (file_ == nullptr || !stamp.present()) return;
  const Id id{key, transmitted};
  auto [it, inserted] = entries_.try_emplace(id);
  if (inserted) {
    it->second.first_seen_ns = now_ns;
    order_.push_back(id);
  }
  const int s = static_cast<int>(stamp.source);
  it->second.ns[s] = stamp.ns;
  it->second.has[s] = true;
  while (entries_.size() > kMaxEntries) {  // bounded even if Flush is never called
    auto old = entries_.find(order_.front());
    if (old != entries_.end()) {
      Write(old->first, old->second);
      entries_.erase(old);
    }
    order_.pop_front();
  }
}

void PacketStampLog::Write(const Id& id, const Entry& e) {
  nlohmann::ordered_json j;
  j["type"] = TypeName(id.first.type);
  j["direction"] = id.second ? "tx" : "rx";
  j["sender"] = id.first.sender;
  j["receiver"] = id.first.receiver;
  j["session"] = std::to_string(id.first.sender_epoch);
  j["seq"] = id.first.seq;
  j["index"] = id.first.index;
  nlohmann::ordered_json stamps = nlohmann::ordered_json::object();
  for (int s = 1; s < kNumStampSources; ++s) {
    if (e.has[s]) stamps[std::string(StampSourceName(static_cast<StampSource>(s)))] = e.ns[s];
  }
  j["stamps_ns"] = stamps;
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  ++lines_;
}

void PacketStampLog::Flush(int64_t now_ns, int64_t settle_ns) {
  if (file_ == nullptr) return;
  while (!order_.empty()) {
    auto it = entries_.find(order_.front());
    if (it != entries_.end()) {
      if (settle_ns >= 0 && now_ns - it->second.first_seen_ns < settle_ns) break;
      Write(it->first, it->second);
      entries_.erase(it);
    }
    order_.pop_front();
  }
  std::fflush(file_);
}

void PacketStampLog::Close() {
  if (file_ == nullptr) return;
  Flush(0, -1);
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace chronolink
