#include "agent/coord/etcd/leader_view.h"

#include <algorithm>

namespace chronolink {

bool LeaderView::ApplyRead(const std::optional<LeaderClaim>& claim, int64_t read_revision) {
  if (read_revision < read_revision_) applied_revision_ = 0;  // etcd went back in time
  read_revision_ = read_revision;
  if (read_revision < applied_revision_) return false;
  claim_ = claim;
  applied_revision_ = read_revision;
  return true;
}

bool LeaderView::ApplyChange(const std::optional<LeaderClaim>& claim, int64_t mod_revision) {
  if (mod_revision != 0 && mod_revision < applied_revision_) return false;
  claim_ = claim;
  applied_revision_ = std::max(applied_revision_, mod_revision);
  return true;
}

}  // namespace chronolink
