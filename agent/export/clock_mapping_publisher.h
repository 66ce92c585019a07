// Writes the node's clock mapping into its shared-memory page (layout and
// reader in include/chronolink/clock_mapping_page.h). One writer per page;
// readers never block it and never see a torn mapping.
#pragma once

#include <string>

#include "include/chronolink/clock_mapping_page.h"

namespace chronolink {

class ClockMappingPublisher {
 public:
  ClockMappingPublisher() = default;
  ~ClockMappingPublisher();
  ClockMappingPublisher(const ClockMappingPublisher&) = delete;
  ClockMappingPublisher& operator=(const ClockMappingPublisher&) = delete;

  // Creates (or reuses) the page at `path`, readable by everyone, and marks
  // it not valid until the first Publish.
  bool Open(const std::string& path, uint32_t node_id, std::string* error);
  void Publish(const ClockMapping& mapping);
  // Marks the mapping invalid (e.g. at shutdown) and unmaps; the file stays
  // so readers see "not valid" rather than a vanished page.
  void Close();

 private:
  ClockMappingPage* page_ = nullptr;
};

}  // namespace chronolink
