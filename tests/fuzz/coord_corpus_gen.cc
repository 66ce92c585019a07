// Writes the seed corpora of cluster_messages_fuzz, etcd_value_fuzz and
// etcd_gateway_fuzz with the real encoders (and, for etcd's answers, in the
// gateway's own format): `coord_corpus_gen tests/fuzz/corpus`. Not a fuzz
// target; keys and ids match those the targets use.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "agent/coord/etcd/etcd_gateway.h"
#include "agent/coord/etcd/etcd_value_codec.h"
#include "agent/coord/etcd/member_view.h"
#include "agent/coord/peer_list.h"

namespace {

using nlohmann::json;
using namespace chronolink;
namespace gw = chronolink::etcd_gateway;

bool g_ok = true;

void Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    g_ok = false;
    return;
  }
  g_ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && g_ok;
  g_ok = std::fclose(f) == 0 && g_ok;
}

ClusterKey FuzzKey() {  // etcd_value_fuzz's Key(0x5A)
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0x5A ^ (i * 13));
  return k;
}

WindowSummary Summary(uint32_t node, uint32_t peer, int64_t x0) {
  WindowSummary w;
  w.estimate = EdgeEstimate{node, peer, x0, -1234.5, 2.5e-6, 38.25};
  w.session = 0xF00DF00DF00Dull;
  w.window_start_ns = x0 - 1'000'000'000;
  w.estimator = "max_margin";
  return w;
}

OffsetsSnapshot Snapshot(int64_t t) {
  OffsetsSnapshot s;
  s.leader = 1;
  s.sequence = 5;
  s.reference_instant_ns = t;
  s.nodes = {NodeSolution{1, true, 0, 0, 0, 1.5, 0, 2},
             NodeSolution{3, true, -812.25, 1.5e-7, 21.0, 3.0, 0, 2},
             NodeSolution{4, false, 0, 0, 0, 0, 1, 0}};
  return s;
}

// etcd_value_fuzz's raw-value input: mode 0, the value, then the one-byte
// choices it reads from the end.
std::string RawValueInput(const std::string& value, int choice, uint32_t member_id, int64_t lease) {
  std::string in(1, '\0');
  in += value;
  in += static_cast<char>(lease + 1);
  in += static_cast<char>(choice);
  in += static_cast<char>(member_id - 1);
  return in;
}

json GatewayKv(const std::string& key, const std::string& value, int64_t rev, int64_t lease) {
  json kv{{"key", gw::Base64(key)}, {"create_revision", std::to_string(rev)},
          {"mod_revision", std::to_string(rev)}, {"version", "1"}, {"value", gw::Base64(value)}};
  if (lease != 0) kv["lease"] = std::to_string(lease);
  return kv;
}

json Header(int64_t rev) {
  return json{{"cluster_id", "14841639068965178418"}, {"member_id", "10276657743932975437"},
              {"revision", std::to_string(rev)}, {"raft_term", "2"}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const int64_t now = 1'700'000'000'000'000'000;  // etcd_value_fuzz's kNow

  // cluster_messages_fuzz: one of each message.
  const std::string cm = root + "/cluster_messages";
  const std::vector<WindowSummary> batch = {Summary(1, 2, now), Summary(1, 3, now + 7)};
  Write(cm, "window_summary.json", EncodeWindowSummary(batch[0]));
  Write(cm, "window_batch.json", EncodeWindowSummaries(batch));
  Write(cm, "window_batch_grouped.json", EncodeWindowBatch(batch));
  Write(cm, "offsets_snapshot.json", EncodeOffsetsSnapshot(Snapshot(now)));
  Write(cm, "member.json", EncodeMember(Member{3, "10.77.1.3", 7319}));
  Write(cm, "peer_list.json",
        EncodePeerList(
            PeerList{1, {Member{2, "10.77.1.2", 7319}, Member{3, "10.77.1.3", 7319}, Member{6, "fd00:77::6", 7319}}}));

  // etcd_value_fuzz: authentic values of each kind, as agents 3 and 1 write them.
  const std::string ev = root + "/etcd_value";
  EtcdValueCodec self(FuzzKey(), "/chronolink/fuzz/", 3);
  EtcdValueCodec leader(FuzzKey(), "/chronolink/fuzz/", 1);
  Write(ev, "member.bin", RawValueInput(self.SealMember(Member{3, "10.77.1.3", 7319}, 2, now), 0, 3, 2));
  Write(ev, "leader.bin", RawValueInput(leader.SealLeader(2, now), 1, 1, 2));
  Write(ev, "graph.bin",
        RawValueInput(leader.SealGraph(R"({"leader":1,"members":[1,3],"k":1,"edges":[[1,3]]})", 2, now), 2, 1, 2));
  Write(ev, "key_holder.bin", std::string("\x01") + R"({"id":3,"address":"x","port":1})" + "\x01\x02\x02\x00\x01");
  Write(ev, "codec_round_trip.bin", std::string("\x02") + "0123456789abcdef0123456789abcdef0123456789");

  // etcd_gateway_fuzz: answers as etcd 3.4's gateway writes them.
  const std::string eg = root + "/etcd_gateway";
  const std::string member_key = "/chronolink/fuzz/members/3";
  Write(eg, "range.json",
        json{{"header", Header(42)},
             {"kvs", json::array({GatewayKv(member_key, EncodeMember(Member{3, "10.77.1.3", 7319}), 40, 7587)})},
             {"count", "1"}}.dump());
  Write(eg, "range_more.json",
        json{{"header", Header(42)}, {"kvs", json::array({GatewayKv("/chronolink/fuzz/a", "", 3, 0)})},
             {"more", true}, {"count", "2"}}.dump());
  Write(eg, "lease_grant.json", json{{"header", Header(43)}, {"ID", "7587861111111111"}, {"TTL", "10"}}.dump());
  Write(eg, "keepalive.json",
        json{{"result", {{"header", Header(43)}, {"ID", "7587861111111111"}, {"TTL", "9"}}}}.dump());
  Write(eg, "txn_failed.json",
        json{{"header", Header(44)},
             {"responses", json::array({json{{"response_range",
                                              {{"header", Header(44)},
                                               {"kvs", json::array({GatewayKv(member_key, "x", 40, 1)})},
                                               {"count", "1"}}}}})}}.dump());
  Write(eg, "error.json", R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
  const std::string created = json{{"result", {{"header", Header(45)}, {"created", true}}}}.dump();
  const std::string events =
      json{{"result",
            {{"header", Header(46)},
             {"events", json::array({json{{"kv", GatewayKv(member_key, "v", 46, 9)}},
                                     json{{"type", "DELETE"}, {"kv", {{"key", gw::Base64(member_key)},
                                                                      {"mod_revision", "46"}}}}})},
             {"fragment", true}}}}.dump();
  Write(eg, "watch_stream.json", created + "\n" + events + "\n");
  Write(eg, "watch_compacted.json",
        json{{"result", {{"header", Header(47)}, {"canceled", true}, {"compact_revision", "30"}}}}.dump());
  Write(eg, "endpoint.txt", "http://[::1]:2379");
  if (!g_ok) return 1;
  return 0;
}
