// libFuzzer target for the coordination messages (agent/coord/
// cluster_messages.h), the leader's peer list (peer_list.h) and the etcd
// member record (member_view.h): JSON that
// agents and the leader send each other over the channel or through etcd.
// Every input is given to each decoder (the grouped window batch too). Invariants: no crash, hang or
// sanitizer report (deep nesting included); a refusal says why; what a
// decoder accepts satisfies its field rules, encodes to JSON that decodes
// to the same value, and encodes again to the same bytes (the encoding is
// canonical); a member is accepted only with the very id and port its JSON
// gives (no wrap-around, no fractions).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "agent/coord/etcd/member_view.h"
#include "agent/coord/peer_list.h"

namespace {

using chronolink::NodeSolution;
using chronolink::OffsetsSnapshot;
using chronolink::WindowSummary;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "cluster_messages_fuzz invariant violated: %s\n", what);
  std::abort();
}

bool Same(const WindowSummary& a, const WindowSummary& b) {
  return a.estimate.node == b.estimate.node && a.estimate.peer == b.estimate.peer &&
         a.estimate.x0_ns == b.estimate.x0_ns && a.estimate.beta_ns == b.estimate.beta_ns &&
         a.estimate.alpha == b.estimate.alpha && a.estimate.uncertainty_ns == b.estimate.uncertainty_ns &&
         a.estimate.shared_ns == b.estimate.shared_ns && a.session == b.session &&
         a.window_start_ns == b.window_start_ns && a.estimator == b.estimator;
}

bool Same(const NodeSolution& a, const NodeSolution& b) {
  return a.node == b.node && a.reachable == b.reachable && a.offset_ns == b.offset_ns && a.drift == b.drift &&
         a.uncertainty_ns == b.uncertainty_ns && a.residual_ns == b.residual_ns && a.component == b.component &&
         a.edges_used == b.edges_used;
}

bool Same(const OffsetsSnapshot& a, const OffsetsSnapshot& b) {
  if (a.leader != b.leader || a.sequence != b.sequence || a.reference_instant_ns != b.reference_instant_ns ||
      a.reference_node != b.reference_node || a.recomputed != b.recomputed || a.nodes.size() != b.nodes.size())
    return false;
  for (size_t i = 0; i < a.nodes.size(); ++i)
    if (!Same(a.nodes[i], b.nodes[i])) return false;
  return true;
}

void CheckSummary(const WindowSummary& w) {
  if (w.estimate.node == w.estimate.peer) Fail("summary of a node with itself accepted");
  if (!std::isfinite(w.estimate.beta_ns) || !std::isfinite(w.estimate.alpha) ||
      !std::isfinite(w.estimate.uncertainty_ns))
    Fail("non-finite number accepted");
  if (std::fabs(w.estimate.alpha) > 0.01) Fail("alpha beyond 10000 ppm accepted");
  if (w.estimate.uncertainty_ns < 0) Fail("negative uncertainty accepted");
  if (w.estimate.shared_ns &&
      !(std::isfinite(*w.estimate.shared_ns) && *w.estimate.shared_ns >= 0 &&
        *w.estimate.shared_ns <= w.estimate.uncertainty_ns))
    Fail("a shared part outside [0, uncertainty] accepted");
}

void Summary(std::string_view text) {
  WindowSummary w;
  std::string error;
  if (!chronolink::DecodeWindowSummary(text, &w, &error)) {
    if (error.empty()) Fail("a refused summary without a message");
    return;
  }
  CheckSummary(w);
  const std::string once = chronolink::EncodeWindowSummary(w);
  WindowSummary again;
  if (!chronolink::DecodeWindowSummary(once, &again, &error)) Fail("a re-encoded summary is refused");
  if (!Same(w, again)) Fail("a re-encoded summary decodes differently");
  if (chronolink::EncodeWindowSummary(again) != once) Fail("summary encoding is not canonical");
}

void Batch(std::string_view text) {
  std::vector<WindowSummary> batch;
  std::string error;
  if (!chronolink::DecodeWindowSummaries(text, &batch, &error)) {
    if (error.empty()) Fail("a refused batch without a message");
    return;
  }
  for (const WindowSummary& w : batch) CheckSummary(w);
  const std::string once = chronolink::EncodeWindowSummaries(batch);
  std::vector<WindowSummary> again;
  if (!chronolink::DecodeWindowSummaries(once, &again, &error)) Fail("a re-encoded batch is refused");
  if (again.size() != batch.size()) Fail("a re-encoded batch changes size");
  for (size_t i = 0; i < batch.size(); ++i)
    if (!Same(batch[i], again[i])) Fail("a re-encoded batch decodes differently");
}

// The grouped form: what it accepts re-encodes to a batch that decodes to
// the same summaries (their knots may only grow: a window's share the union).
void GroupedBatch(std::string_view text) {
  std::vector<WindowSummary> batch;
  std::string error;
  if (!chronolink::DecodeWindowBatch(text, &batch, &error)) {
    if (error.empty()) Fail("a refused grouped batch without a message");
    return;
  }
  for (const WindowSummary& w : batch) CheckSummary(w);
  std::vector<WindowSummary> again;
  if (!chronolink::DecodeWindowBatch(chronolink::EncodeWindowBatch(batch), &again, &error))
    Fail("a re-encoded grouped batch is refused");
  if (again.size() != batch.size()) Fail("a re-encoded grouped batch changes size");
  for (const WindowSummary& w : batch) {
    bool found = false;
    for (const WindowSummary& a : again) found = found || (Same(w, a) && a.prober_clock == w.prober_clock);
    if (!found) Fail("a re-encoded grouped batch lost or changed a summary");
  }
}

void Snapshot(std::string_view text) {
  OffsetsSnapshot s;
  std::string error;
  if (!chronolink::DecodeOffsetsSnapshot(text, &s, &error)) {
    if (error.empty()) Fail("a refused snapshot without a message");
    return;
  }
  for (const NodeSolution& n : s.nodes) {
    if (n.reachable && (!std::isfinite(n.offset_ns) || !std::isfinite(n.drift) ||
                        !std::isfinite(n.uncertainty_ns) || !std::isfinite(n.residual_ns)))
      Fail("non-finite solution accepted");
    (void)s.Find(n.node);
  }
  const std::string once = chronolink::EncodeOffsetsSnapshot(s);
  OffsetsSnapshot again;
  if (!chronolink::DecodeOffsetsSnapshot(once, &again, &error)) Fail("a re-encoded snapshot is refused");
  if (!Same(s, again)) Fail("a re-encoded snapshot decodes differently");
  if (chronolink::EncodeOffsetsSnapshot(again) != once) Fail("snapshot encoding is not canonical");
}

void Member(std::string_view text) {
  chronolink::Member m;
  if (!chronolink::DecodeMember(std::string(text), &m)) return;
  if (m.id == 0 || m.port == 0 || m.address.empty()) Fail("incomplete member accepted");
  // The very numbers the JSON gives: a member that says port 72855 is not
  // at port 7319.
  const auto j = nlohmann::json::parse(text);
  const auto& id = j.at("id");
  const auto& port = j.at("port");
  if (!id.is_number_unsigned() || id.get<uint64_t>() != m.id) Fail("member id is not the JSON's integer");
  if (!port.is_number_unsigned() || port.get<uint64_t>() != m.port) Fail("member port is not the JSON's integer");
  chronolink::Member again;
  if (!chronolink::DecodeMember(chronolink::EncodeMember(m), &again) || !(again == m))
    Fail("a re-encoded member decodes differently");
}

// A peer list the decoder takes is whole and in order (a follower probes
// every member of it), and encodes canonically.
void Peers(std::string_view text) {
  chronolink::PeerList list;
  std::string error;
  if (!chronolink::DecodePeerList(text, &list, &error)) {
    if (error.empty()) Fail("a refused peer list without a message");
    return;
  }
  if (list.leader == 0) Fail("a peer list without a leader accepted");
  if (list.peers.size() > chronolink::kMaxPeerListSize) Fail("an oversized peer list accepted");
  for (size_t i = 0; i < list.peers.size(); ++i) {
    const chronolink::Member& m = list.peers[i];
    if (m.id == 0 || m.port == 0 || m.address.empty() || m.address.size() > chronolink::kMaxMemberAddressBytes)
      Fail("an incomplete peer accepted");
    if (i > 0 && !(list.peers[i - 1].id < m.id)) Fail("peer ids not strictly increasing accepted");
  }
  const std::string once = chronolink::EncodePeerList(list);
  chronolink::PeerList again;
  if (!chronolink::DecodePeerList(once, &again, &error)) Fail("a re-encoded peer list is refused");
  if (!(again == list)) Fail("a re-encoded peer list decodes differently");
  if (chronolink::EncodePeerList(again) != once) Fail("peer list encoding is not canonical");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Summary(text);
  Batch(text);
  GroupedBatch(text);
  Snapshot(text);
  Member(text);
  Peers(text);
  return 0;
}
