// Detection (and enabling) of NIC hardware timestamping for one interface:
// ETHTOOL_GET_TS_INFO through SIOCETHTOOL for the capabilities and the PHC,
// SIOCGHWTSTAMP for the current configuration, SIOCSHWTSTAMP to turn on TX
// stamps and an RX filter (ALL, else the PTP filters). Never throws, never
// blocks: every outcome, including "no such interface" and "no permission",
// ends up in a one-line summary for the log.
#pragma once

#include <cstdint>
#include <string>

namespace chronolink {

struct HwTimestampingStatus {
  // The driver reports SOF_TIMESTAMPING_RAW_HARDWARE and TX and/or RX
  // hardware stamps.
  bool supported = false;
  // The interface stamps in hardware now: TX on or an RX filter set.
  bool enabled = false;
  int phc_index = -1;   // /dev/ptpN of the NIC clock, -1 when none
  std::string summary;  // one line, starts with the interface name

  // Details.
  std::string ifname;
  bool interface_found = false;
  uint32_t so_timestamping = 0;  // SOF_TIMESTAMPING_* capability bits
  uint32_t tx_types = 0;         // bit (1 << HWTSTAMP_TX_*) per supported TX mode
  uint32_t rx_filters = 0;       // bit (1 << HWTSTAMP_FILTER_*) per supported filter
  bool tx_hardware = false;      // SOF_TIMESTAMPING_TX_HARDWARE
  bool rx_hardware = false;      // SOF_TIMESTAMPING_RX_HARDWARE
  int tx_type = -1;              // HWTSTAMP_TX_* in force (-1: unknown)
  int rx_filter = -1;            // HWTSTAMP_FILTER_* in force (-1: unknown)
  // Every received packet gets a hardware stamp (filter ALL). With a PTP-only
  // filter the probes, which are not PTP, get none on most NICs.
  bool rx_all = false;
  int error = 0;  // errno of the step that failed last, 0 if none
};

// Reads the capabilities and the current configuration; changes nothing and
// needs no privilege. `enabled` reports the configuration in force.
HwTimestampingStatus DetectHwTimestamping(const std::string& ifname);

// Detects, then configures TX on and RX filter ALL (falling back to the PTP
// V2 / V1 event filters the driver advertises) with SIOCSHWTSTAMP, which
// needs CAP_NET_ADMIN. The setting is device wide and stays after exit, as
// with ptp4l or hwstamp_ctl.
HwTimestampingStatus EnableHwTimestamping(const std::string& ifname);

// "ALL", "PTP_V2_EVENT", ... for a HWTSTAMP_FILTER_* value.
std::string HwRxFilterName(int filter);

}  // namespace chronolink
