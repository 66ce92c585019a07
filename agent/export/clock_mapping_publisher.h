// Writes the node's clock mapping into its shared-memory page (layout and
// reader in include/chronolink/clock_mapping_page.h). One writer per page;
// readers never block it and never see a torn mapping. The page is the
// agent's own file, mode 0644: readers are other users, the only writer is
// the agent (docs/formats.md "Clock page").
#pragma once

#include <sys/types.h>

#include <string>

#include "agent/solve/global_solver.h"
#include "include/chronolink/clock_mapping_page.h"

namespace chronolink {

class ClockMappingPublisher {
 public:
  ClockMappingPublisher() = default;
  ~ClockMappingPublisher();
  ClockMappingPublisher(const ClockMappingPublisher&) = delete;
  ClockMappingPublisher& operator=(const ClockMappingPublisher&) = delete;

  // Creates (or reuses) the page at `path` (OpenOwnPage below) and marks it
  // not valid until the first Publish.
  bool Open(const std::string& path, uint32_t node_id, std::string* error);
  void Publish(const ClockMapping& mapping);
  // Marks the mapping invalid (e.g. at shutdown) and unmaps; the file stays
  // so readers see "not valid" rather than a vanished page.
  void Close();

 private:
  ClockMappingPage* page_ = nullptr;
};

constexpr mode_t kClockPageMode = 0644;

// Opens the page file read-write, creating it mode 0644 when missing. An
// existing file is reused only when it is the caller's own: a regular file
// (a symbolic link is not followed), owned by the effective uid, not
// writable by group or others, with one link. Anything else is refused with
// how to fix it. The descriptor, or -1 with a message.
int OpenOwnPage(const std::string& path, std::string* error);

// This node's page contents from its solution at reference instant T (on
// the cluster clock): the local instant of T becomes the page's reference,
// offset and drift flip sign (the solver gives node − cluster, the page
// cluster − local). Stale after valid_for_ns; the uncertainty grows by
// growth_ppt per ns away from the reference. An unreachable node gets an
// invalid mapping.
ClockMapping MappingFromSolution(const NodeSolution& s, int64_t t_ns, int64_t valid_for_ns,
                                 int64_t growth_ppt);

// The page at local instant `now_ns`, from `solved` (MappingFromSolution's:
// a line through the node's instant L0 of T) with what this node's own
// daemon did since put in (docs/formats.md "Clock page"). The leader mapped
// the solution with REALTIME − F at L0 and REALTIME's rate against F there
// (`then`, the solution's discipline): the line holds that rate. `now` is
// REALTIME − F and its rate at now_ns, from the agent's own samples: the
// page follows every change of rate since, and only the reference's
// discipline stays extrapolated. The uncertainty grows from L0 as before,
// and the mapping goes stale when the solved one does.
ClockMapping FollowOwnDiscipline(const ClockMapping& solved, const FitDiscipline& then, int64_t now_ns,
                                 const FitDiscipline& now);

}  // namespace chronolink
