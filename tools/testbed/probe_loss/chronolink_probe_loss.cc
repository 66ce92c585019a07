// chronolink-probe-loss: attaches, reads and detaches the test bed's
// probe-loss tc filter (bpf/probe_loss.bpf.c) on one device's egress.
// Each subcommand prints one JSON object on stdout. Exit codes: 0 ok,
// 1 error, 2 usage. See docs/testbed.md "Probe loss".
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "tools/testbed/probe_loss/probe_loss_loader.h"

namespace {

using chronolink::testbed::ProbeLossTypeName;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

nlohmann::ordered_json TypesJson(uint32_t mask) {
  auto a = nlohmann::ordered_json::array();
  for (int slot = 1; slot < CHRONOLINK_LOSS_SLOTS; ++slot) {
    if (mask & (1u << slot)) a.push_back(ProbeLossTypeName(slot));
  }
  return a;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "chronolink-probe-loss: error: %s\n", what.c_str());
  return kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Drops a fraction of chronolink probe datagrams on one device's egress (test bed only; "
      "needs root). The filter stays attached after this program exits."};
  app.require_subcommand(1);
  std::string netns, device, types = "all", pin_root = chronolink::testbed::kProbeLossPinRoot;
  double fraction = -1;
  uint16_t port = 7319;
  app.add_option("--netns", netns,
                 "enter this network namespace (/run/netns/NAME, or a path) first; unlike `ip netns "
                 "exec` it keeps the host's /sys/fs/bpf, where the counters are pinned");
  app.add_option("--pin-root", pin_root, "bpffs directory of the counter pins")
      ->capture_default_str();

  CLI::App* attach = app.add_subcommand("attach", "attach (or replace) the filter on --dev egress");
  attach->add_option("--dev", device, "network device")->required();
  attach->add_option("--fraction", fraction, "fraction of the selected probes to drop, 0..1")
      ->required()
      ->check(CLI::Range(0.0, 1.0));
  attach->add_option("--port", port, "the agents' probe port (UDP, either side)")
      ->capture_default_str();
  attach->add_option("--types", types,
                     "comma-separated message types to drop: forward, reverse, followup, pilot, "
                     "or all")
      ->capture_default_str();

  CLI::App* stats = app.add_subcommand("stats", "print the counters of the filter on --dev");
  stats->add_option("--dev", device, "network device")->required();

  CLI::App* detach =
      app.add_subcommand("detach", "remove the filter on --dev and its pinned counters");
  detach->add_option("--dev", device, "network device")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  std::string error;
  uint32_t mask = 0, ppm = 0;
  // CLI::Range lets NaN through (every comparison with it is false).
  if (attach->parsed() && !chronolink::testbed::ProbeLossFractionToPpm(fraction, &ppm, &error)) {
    error = "--fraction: " + error;
  } else if (attach->parsed()) {
    chronolink::testbed::ParseProbeLossTypes(types, &mask, &error);
  }
  if (!error.empty()) {
    std::fprintf(stderr, "chronolink-probe-loss: %s\nRun with --help for more information.\n",
                 error.c_str());
    return kExitUsage;
  }
  if (!netns.empty() && !chronolink::testbed::EnterNetns(netns, &error)) return Fail(error);

  nlohmann::ordered_json j;
  j["device"] = device;
  if (!netns.empty()) j["netns"] = netns;
  if (attach->parsed()) {
    chronolink::testbed::ProbeLossConfig c;
    c.device = device;
    c.fraction = fraction;
    c.port = port;
    c.type_mask = mask;
    c.pin_root = pin_root;
    chronolink::testbed::ProbeLossAttachment a;
    if (!chronolink::testbed::AttachProbeLoss(c, &a, &error)) return Fail(error);
    j["ifindex"] = a.ifindex;
    j["prog_id"] = a.prog_id;
    j["fraction"] = fraction;
    j["port"] = port;
    j["types"] = TypesJson(mask);
    j["replaced"] = a.replaced;
    j["pin"] = a.pin_path.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(a.pin_path);
    if (!a.note.empty()) {
      j["note"] = a.note;
      std::fprintf(stderr, "chronolink-probe-loss: note: %s\n", a.note.c_str());
    }
  } else if (stats->parsed()) {
    chronolink::testbed::ProbeLossStats s;
    if (!chronolink::testbed::ReadProbeLossStats(device, pin_root, &s, &error)) return Fail(error);
    j["attached"] = s.attached;
    j["prog_id"] = s.prog_id;
    j["counters_from"] = s.counters_from;
    j["pin"] = s.pin_path.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s.pin_path);
    if (s.have_config) {
      j["fraction"] = s.config.drop_ppm / 1e6;
      j["port"] = s.config.udp_port;
      j["types"] = TypesJson(s.config.type_mask);
    }
    uint64_t seen = 0, dropped = 0;
    nlohmann::ordered_json by_type;
    for (int slot = 1; slot <= CHRONOLINK_LOSS_SLOTS; ++slot) {
      const int i = slot % CHRONOLINK_LOSS_SLOTS;  // "other" (slot 0) last
      by_type[ProbeLossTypeName(i)] = {{"seen", s.by_slot[i].seen},
                                       {"dropped", s.by_slot[i].dropped}};
      seen += s.by_slot[i].seen;
      dropped += s.by_slot[i].dropped;
    }
    j["seen"] = seen;
    j["dropped"] = dropped;
    j["by_type"] = by_type;
  } else {
    std::string what;
    if (!chronolink::testbed::DetachProbeLoss(device, pin_root, &what, &error)) return Fail(error);
    j["removed"] = what.empty() ? "nothing (no probe-loss filter or pin on this device)" : what;
  }
  std::cout << j.dump() << std::endl;
  return 0;
}
