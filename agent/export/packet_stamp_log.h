// Diagnostic log of every probe packet's stamps from every capture point
// (userspace, socket, eBPF hooks), before any source is chosen: one JSON
// line per packet and direction, written once the packet's stamps have had
// time to arrive. Used by tests to check causal order and coverage, and by
// people to see what each hook sees. Off unless --stamp-log is given.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "agent/capture/packet_key.h"
#include "agent/pair/probe_tuple.h"

namespace chronolink {

class PacketStampLog {
 public:
  PacketStampLog() = default;
  ~PacketStampLog();
  PacketStampLog(const PacketStampLog&) = delete;
  PacketStampLog& operator=(const PacketStampLog&) = delete;

  bool Open(const std::string& path, std::string* error);
  bool is_open() const { return file_ != nullptr; }

  void Add(const PacketKey& key, bool transmitted, const ProbeStamp& stamp, int64_t now_ns);
  // Writes packets first seen before now - settle (all, when settle < 0).
  void Flush(int64_t now_ns, int64_t settle_ns = 500'000'000);
  void Close();

  uint64_t lines() const { return lines_; }

 private:
  struct Entry {
    int64_t first_seen_ns = 0;
    std::array<int64_t, kNumStampSources> ns{};
    std::array<bool, kNumStampSources> has{};
  };
  using Id = std::pair<PacketKey, bool>;  // key, transmitted

  void Write(const Id& id, const Entry& e);

  std::FILE* file_ = nullptr;
  std::map<Id, Entry> entries_;
  std::deque<Id> order_;
  uint64_t lines_ = 0;
};

}  // namespace chronolink
