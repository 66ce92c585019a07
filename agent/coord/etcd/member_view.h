// The etcd backend's member list (docs/cluster.md "etcd"). Two sources feed
// it side by side: full reads of members/ (at start and after every watch
// reconnect or resync) and the watch's events. Each read reflects etcd at
// its own revision, each event at its own; merging them by revision keeps
// the list from going back in time:
//  - an event at or below the last read's revision is already in that read
//    and is ignored (a watch replaying from a compaction delivers such);
//  - an event the watch applied above a read's revision stands against that
//    read (a member that registered, or left, while the read was under way).
// Values are decoded (and, in the agent, authenticated) by a decoder the
// owner gives: a put it refuses leaves no registration under its key, so
// that member is gone, in a read and in the watch alike.
// This node is always a member of its own view. Not thread-safe: the owner
// locks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/coord/coordinator.h"
#include "agent/coord/etcd/etcd_gateway.h"

namespace chronolink {

// The value stored under members/<id>: {"id", "address", "port"}.
std::string EncodeMember(const Member& m);
// False for anything but a complete member with a non-zero id and port.
bool DecodeMember(const std::string& text, Member* m);

// The member of a put under members/<id>; false refuses it (the decoder
// counts and reports why).
using MemberDecoder = std::function<bool(const EtcdKeyValue& kv, uint32_t id, Member* out)>;

class MemberView {
 public:
  // prefix: the members/ key prefix, "<etcd prefix>members/".
  MemberView(Member self, std::string prefix, MemberDecoder decode);

  // A read of every key under the prefix, at etcd revision read_revision.
  // True if the list changed.
  bool ApplyRead(const std::vector<EtcdKeyValue>& kvs, int64_t read_revision);
  // Watch events in revision order. True if the list changed.
  bool ApplyEvents(const std::vector<EtcdEvent>& events);

  const std::map<uint32_t, Member>& members() const { return members_; }

 private:
  // The member id of a key under the prefix; false for any other key.
  bool IdOf(std::string_view key, uint32_t* id) const;

  const Member self_;
  const std::string prefix_;
  const MemberDecoder decode_;
  std::map<uint32_t, Member> members_;
  int64_t read_revision_ = 0;  // of the last read: everything at or below it is in members_
  // Per id, the revision of a watch event applied above read_revision_.
  std::map<uint32_t, int64_t> event_revisions_;
};

}  // namespace chronolink
