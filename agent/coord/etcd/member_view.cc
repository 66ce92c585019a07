#include "agent/coord/etcd/member_view.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "agent/coord/peer_list.h"

namespace chronolink {

std::string EncodeMember(const Member& m) { return MemberToJson(m).dump(); }

bool DecodeMember(const std::string& text, Member* m) {
  return MemberFromJson(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false), m);
}

MemberView::MemberView(Member self, std::string prefix, MemberDecoder decode)
    : self_(std::move(self)), prefix_(std::move(prefix)), decode_(std::move(decode)) {
  members_[self_.id] = self_;
}

bool MemberView::IdOf(std::string_view key, uint32_t* id) const {
  if (key.size() <= prefix_.size() || key.substr(0, prefix_.size()) != prefix_) return false;
  const std::string_view text = key.substr(prefix_.size());
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *id);
  return ec == std::errc() && ptr == text.data() + text.size() && *id != 0;
}

bool MemberView::ApplyRead(const std::vector<EtcdKeyValue>& kvs, int64_t read_revision) {
  // etcd's revision went back (restored from a backup): what we remember of
  // its old history says nothing about the new one.
  if (read_revision < read_revision_) event_revisions_.clear();
  std::map<uint32_t, Member> members;
  for (const EtcdKeyValue& kv : kvs) {
    Member m;
    uint32_t id = 0;
    if (IdOf(kv.key, &id) && id != self_.id && decode_(kv, id, &m)) members[id] = m;
  }
  // Events applied above the read's revision are newer than it: they stand.
  for (const auto& [id, revision] : event_revisions_) {
    if (revision <= read_revision) continue;
    const auto held = members_.find(id);
    if (held != members_.end()) {
      members[id] = held->second;
    } else {
      members.erase(id);
    }
  }
  std::erase_if(event_revisions_, [&](const auto& entry) { return entry.second <= read_revision; });
  read_revision_ = read_revision;
  members[self_.id] = self_;
  if (members == members_) return false;
  members_ = std::move(members);
  return true;
}

bool MemberView::ApplyEvents(const std::vector<EtcdEvent>& events) {
  bool changed = false;
  for (const EtcdEvent& e : events) {
    uint32_t id = 0;
    if (!IdOf(e.kv.key, &id) || id == self_.id) continue;  // we are always a member to ourselves
    // The last read has it already (0: a revision the gateway left out).
    if (e.kv.mod_revision != 0 && e.kv.mod_revision <= read_revision_) continue;
    event_revisions_[id] = e.kv.mod_revision;
    Member m;
    // A refused put leaves no registration under the key: as a read would
    // see it, the member is gone (until it registers again).
    if (e.type == EtcdEvent::Type::kDelete || !decode_(e.kv, id, &m)) {
      changed |= members_.erase(id) > 0;
      continue;
    }
    auto [it, inserted] = members_.try_emplace(id, m);
    if (!inserted && it->second == m) continue;
    it->second = m;
    changed = true;
  }
  return changed;
}

}  // namespace chronolink
