// BpfTap when chronolink is built without the eBPF tap (CHRONOLINK_WITH_BPF
// off, or clang/bpftool/libbpf missing at configure time): Open() says so and
// the agent runs on SO_TIMESTAMPING alone. InterfacesTowards() lives in
// netlink_query.cc and works either way.
#include "agent/capture/bpf_tap.h"

namespace chronolink {

namespace {
constexpr char kNoBpf[] =
    "chronolink was built without the eBPF tap (CHRONOLINK_WITH_BPF=OFF or missing "
    "clang/bpftool/libbpf)";
}  // namespace

struct BpfTap::Impl {};

BpfTap::BpfTap() : impl_(std::make_unique<Impl>()) {}
BpfTap::~BpfTap() = default;

bool BpfTap::Open(const BpfTapOptions&, std::string* error) {
  if (error != nullptr) *error = kNoBpf;
  return false;
}
void BpfTap::Close() { attachments_.clear(); }
bool BpfTap::is_open() const { return false; }
int BpfTap::Consume(const RecordSink&) { return 0; }
BpfTapCounters BpfTap::counters() const { return {}; }
std::vector<uint32_t> BpfTap::ProgramIds() const { return {}; }

int BpfTap::RemoveStaleHooks(int, std::string* log) {
  if (log != nullptr) *log = kNoBpf;
  return 0;
}

std::vector<BpfHookInfo> BpfTap::ListHooks(int, std::string* error) {
  if (error != nullptr) *error = kNoBpf;
  return {};
}

}  // namespace chronolink
