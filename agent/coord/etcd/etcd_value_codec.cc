#include "agent/coord/etcd/etcd_value_codec.h"

#include <spdlog/spdlog.h>

#include <charconv>

#include "agent/coord/etcd/member_view.h"
#include "common/quoted_text.h"

namespace chronolink {

namespace {

constexpr int64_t kLogEveryNs = 60'000'000'000;

std::optional<EtcdRefusal> FromSeal(SealResult r) {
  switch (r) {
    case SealResult::kOk: return std::nullopt;
    case SealResult::kUnsealed: return EtcdRefusal::kUnsealed;
    case SealResult::kBadMac: return EtcdRefusal::kBadMac;
  }
  return EtcdRefusal::kUnsealed;
}

bool ParseNodeId(std::string_view text, uint32_t* id) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *id);
  return ec == std::errc() && ptr == text.data() + text.size() && *id != 0;
}

}  // namespace

std::string_view EtcdRefusalName(EtcdRefusal r) {
  switch (r) {
    case EtcdRefusal::kUnsealed: return "unsealed";
    case EtcdRefusal::kBadMac: return "bad_mac";
    case EtcdRefusal::kWrongWriter: return "wrong_writer";
    case EtcdRefusal::kNotLeaseBound: return "not_lease_bound";
    case EtcdRefusal::kMalformed: return "malformed";
    case EtcdRefusal::kCount: break;
  }
  return "unknown";
}

EtcdValueCodec::EtcdValueCodec(const ClusterKey& key, std::string prefix, uint32_t self)
    : seal_(key), prefix_(std::move(prefix)), self_(self) {}

std::optional<uint32_t> EtcdValueCodec::MemberIdOf(std::string_view key) const {
  const std::string members = MembersPrefix();
  uint32_t id = 0;
  if (!key.starts_with(members) || !ParseNodeId(key.substr(members.size()), &id)) return std::nullopt;
  return id;
}

std::string EtcdValueCodec::SealNow(const std::string& key, int64_t lease, uint64_t seq, int64_t now_ns,
                                    std::string_view body) {
  return seal_.Seal(key, SealHeader{self_, lease, seq, now_ns}, body);
}

std::string EtcdValueCodec::SealMember(const Member& self, int64_t lease, int64_t now_ns) {
  return SealNow(MemberKey(self.id), lease, ++seq_, now_ns, EncodeMember(self));
}

std::string EtcdValueCodec::SealLeader(int64_t lease, int64_t now_ns) {
  return SealNow(LeaderKey(), lease, ++seq_, now_ns, std::to_string(self_));
}

std::string EtcdValueCodec::SealGraph(std::string_view body, int64_t lease, int64_t now_ns) {
  return SealNow(GraphKey(), lease, ++seq_, now_ns, body);
}

std::optional<EtcdRefusal> EtcdValueCodec::OpenBound(const EtcdKeyValue& kv, SealHeader* header,
                                                     std::string_view* body) const {
  if (auto refused = FromSeal(seal_.Open(kv.key, kv.value, header, body))) return refused;
  // The value says which lease it lives under; etcd says which it does.
  if (header->term == 0 || kv.lease != header->term) return EtcdRefusal::kNotLeaseBound;
  return std::nullopt;
}

std::optional<EtcdRefusal> EtcdValueCodec::OpenMember(const EtcdKeyValue& kv, uint32_t id, Member* out) const {
  SealHeader h;
  std::string_view body;
  if (auto refused = OpenBound(kv, &h, &body)) return refused;
  if (h.writer != id) return EtcdRefusal::kWrongWriter;
  Member m;
  if (!DecodeMember(std::string(body), &m)) return EtcdRefusal::kMalformed;
  if (m.id != id) return EtcdRefusal::kWrongWriter;
  *out = std::move(m);
  return std::nullopt;
}

std::optional<EtcdRefusal> EtcdValueCodec::OpenLeader(const EtcdKeyValue& kv, LeaderClaim* out) const {
  SealHeader h;
  std::string_view body;
  if (auto refused = OpenBound(kv, &h, &body)) return refused;
  uint32_t id = 0;
  if (!ParseNodeId(body, &id)) return EtcdRefusal::kMalformed;
  if (id != h.writer) return EtcdRefusal::kWrongWriter;  // nobody elects another node
  *out = LeaderClaim{id, h.term};
  return std::nullopt;
}

void EtcdRefusalLog::Note(EtcdRefusal reason, std::string_view key, int64_t now_ns) {
  const size_t i = static_cast<size_t>(reason);
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[i];
  if (last_logged_ns_[i] != 0 && now_ns - last_logged_ns_[i] < kLogEveryNs) {
    ++unlogged_[i];
    return;
  }
  // The key is the etcd writer's choice: quoted, so that a newline or an
  // escape sequence in it cannot forge a log line or drive the terminal.
  const std::string excerpt = QuotedText(key);
  if (unlogged_[i] > 0) {
    spdlog::warn("etcd: refused the value at {} ({}; {} more refused for this reason since the last report)",
                 excerpt, EtcdRefusalName(reason), unlogged_[i]);
  } else {
    spdlog::warn("etcd: refused the value at {} ({})", excerpt, EtcdRefusalName(reason));
  }
  last_logged_ns_[i] = now_ns;
  unlogged_[i] = 0;
}

std::array<uint64_t, static_cast<size_t>(EtcdRefusal::kCount)> EtcdRefusalLog::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

uint64_t EtcdRefusalLog::total() const {
  uint64_t sum = 0;
  for (uint64_t c : counts()) sum += c;
  return sum;
}

}  // namespace chronolink
