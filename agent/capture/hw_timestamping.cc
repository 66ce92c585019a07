#include "agent/capture/hw_timestamping.h"

#include <linux/ethtool.h>
#include <linux/net_tstamp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace chronolink {

namespace {

class ControlSocket {
 public:
  ControlSocket() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) error_ = errno;
  }
  ~ControlSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  int fd() const { return fd_; }
  int error() const { return error_; }

  // ioctl on the interface with ifr_data = data; 0 or errno.
  int Ioctl(const std::string& ifname, unsigned long request, void* data) const {
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());  // size < IFNAMSIZ, checked
    ifr.ifr_data = static_cast<char*>(data);
    return ::ioctl(fd_, request, &ifr) == 0 ? 0 : errno;
  }

 private:
  int fd_ = -1;
  int error_ = 0;
};

std::string ErrText(const char* what, int err) {
  std::string s = std::string(what) + ": " + std::strerror(err);
  if (err == EPERM || err == EACCES) s += "; needs CAP_NET_ADMIN";
  return s;
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) return false;
  for (char c : name) {
    if (c == '/' || c == ':' || c == '\0' || c == ' ' || c == '\t' || c == '\n') return false;
  }
  return name != "." && name != "..";
}

std::string Capabilities(const HwTimestampingStatus& s) {
  std::string what = s.tx_hardware && s.rx_hardware ? "TX+RX"
                     : s.tx_hardware               ? "TX only"
                                                   : "RX only";
  if (s.phc_index >= 0) {
    what += ", PHC /dev/ptp" + std::to_string(s.phc_index);
  } else {
    what += ", no PHC";
  }
  return what;
}

std::string ConfigText(const HwTimestampingStatus& s) {
  std::string t = s.tx_type == HWTSTAMP_TX_OFF ? "TX off" : s.tx_type < 0 ? "TX ?" : "TX on";
  t += ", RX filter " + HwRxFilterName(s.rx_filter);
  if (!s.rx_all && s.rx_filter > HWTSTAMP_FILTER_NONE) t += " (probes get no RX hardware stamp)";
  return t;
}

std::string SoftwareOnlyText(const HwTimestampingStatus& s) {
  const uint32_t software = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE |
                            SOF_TIMESTAMPING_SOFTWARE;
  if (s.so_timestamping & software) return "driver reports software only";
  return "driver reports no timestamping";
}

void ApplyConfig(const hwtstamp_config& cfg, HwTimestampingStatus* s) {
  s->tx_type = cfg.tx_type;
  s->rx_filter = cfg.rx_filter;
  s->rx_all = cfg.rx_filter == HWTSTAMP_FILTER_ALL;
  s->enabled = cfg.tx_type != HWTSTAMP_TX_OFF || cfg.rx_filter != HWTSTAMP_FILTER_NONE;
}

// Steps shared by Detect and Enable. False when there is nothing more to do
// (bad name, no interface, no socket): the summary is final then.
bool Probe(const std::string& ifname, const ControlSocket& sock, HwTimestampingStatus* s,
           std::string* info_note) {
  s->ifname = ifname;
  if (!ValidName(ifname)) {
    s->error = EINVAL;
    s->summary = "'" + ifname + "': not a valid interface name";
    return false;
  }
  if (::if_nametoindex(ifname.c_str()) == 0) {
    s->error = errno == 0 ? ENODEV : errno;
    s->summary = ifname + ": no such interface";
    return false;
  }
  s->interface_found = true;
  if (sock.fd() < 0) {
    s->error = sock.error();
    s->summary = ifname + ": cannot open a control socket: " + std::strerror(sock.error());
    return false;
  }

  ethtool_ts_info info{};
  info.cmd = ETHTOOL_GET_TS_INFO;
  if (const int err = sock.Ioctl(ifname, SIOCETHTOOL, &info); err != 0) {
    s->error = err;
    *info_note = ErrText("ETHTOOL_GET_TS_INFO", err);
  } else {
    s->so_timestamping = info.so_timestamping;
    s->phc_index = info.phc_index;
    s->tx_types = info.tx_types;
    s->rx_filters = info.rx_filters;
    s->tx_hardware = (info.so_timestamping & SOF_TIMESTAMPING_TX_HARDWARE) != 0;
    s->rx_hardware = (info.so_timestamping & SOF_TIMESTAMPING_RX_HARDWARE) != 0;
    s->supported = (info.so_timestamping & SOF_TIMESTAMPING_RAW_HARDWARE) != 0 &&
                   (s->tx_hardware || s->rx_hardware);
    if (!s->supported) *info_note = SoftwareOnlyText(*s);
  }

  hwtstamp_config cfg{};
  if (sock.Ioctl(ifname, SIOCGHWTSTAMP, &cfg) == 0) ApplyConfig(cfg, s);
  return true;
}

}  // namespace

std::string HwRxFilterName(int filter) {
  switch (filter) {
    case HWTSTAMP_FILTER_NONE: return "NONE";
    case HWTSTAMP_FILTER_ALL: return "ALL";
    case HWTSTAMP_FILTER_SOME: return "SOME";
    case HWTSTAMP_FILTER_PTP_V1_L4_EVENT: return "PTP_V1_L4_EVENT";
    case HWTSTAMP_FILTER_PTP_V1_L4_SYNC: return "PTP_V1_L4_SYNC";
    case HWTSTAMP_FILTER_PTP_V1_L4_DELAY_REQ: return "PTP_V1_L4_DELAY_REQ";
    case HWTSTAMP_FILTER_PTP_V2_L4_EVENT: return "PTP_V2_L4_EVENT";
    case HWTSTAMP_FILTER_PTP_V2_L4_SYNC: return "PTP_V2_L4_SYNC";
    case HWTSTAMP_FILTER_PTP_V2_L4_DELAY_REQ: return "PTP_V2_L4_DELAY_REQ";
    case HWTSTAMP_FILTER_PTP_V2_L2_EVENT: return "PTP_V2_L2_EVENT";
    case HWTSTAMP_FILTER_PTP_V2_L2_SYNC: return "PTP_V2_L2_SYNC";
    case HWTSTAMP_FILTER_PTP_V2_L2_DELAY_REQ: return "PTP_V2_L2_DELAY_REQ";
    case HWTSTAMP_FILTER_PTP_V2_EVENT: return "PTP_V2_EVENT";
    case HWTSTAMP_FILTER_PTP_V2_SYNC: return "PTP_V2_SYNC";
    case HWTSTAMP_FILTER_PTP_V2_DELAY_REQ: return "PTP_V2_DELAY_REQ";
    case HWTSTAMP_FILTER_NTP_ALL: return "NTP_ALL";
    case -1: return "?";
    default: return std::to_string(filter);
  }
}

HwTimestampingStatus DetectHwTimestamping(const std::string& ifname) {
  HwTimestampingStatus s;
  ControlSocket sock;
  std::string note;
  if (!Probe(ifname, sock, &s, &note)) return s;
  if (s.supported) {
    s.summary = ifname + ": hardware timestamping supported (" + Capabilities(s) + "), " +
                (s.tx_type < 0 ? std::string("configuration unknown")
                 : s.enabled   ? "on: " + ConfigText(s)
                               : std::string("currently off"));
  } else {
    s.summary = ifname + ": no hardware timestamping (" + note + ")";
  }
  return s;
}

HwTimestampingStatus EnableHwTimestamping(const std::string& ifname) {
  HwTimestampingStatus s;
  ControlSocket sock;
  std::string note;
  if (!Probe(ifname, sock, &s, &note)) return s;

  const bool already = s.rx_all && s.tx_type == HWTSTAMP_TX_ON;
  std::string set_note;
  if (!already) {
    const bool tx_known = s.tx_types != 0;
    const int tx = !tx_known || (s.tx_types & (1u << HWTSTAMP_TX_ON)) ? HWTSTAMP_TX_ON
                                                                        : HWTSTAMP_TX_OFF;
    // ALL first: the probes are not PTP packets. The PTP filters still give
    // TX stamps, and RX ones on NICs that stamp more than they filter.
    std::vector<int> filters;
    for (int f : {HWTSTAMP_FILTER_ALL, HWTSTAMP_FILTER_PTP_V2_EVENT,
                  HWTSTAMP_FILTER_PTP_V2_L4_EVENT, HWTSTAMP_FILTER_PTP_V1_L4_EVENT}) {
      if (s.rx_filters == 0 || (s.rx_filters & (1u << f))) filters.push_back(f);
    }
    if (filters.empty()) filters.push_back(HWTSTAMP_FILTER_NONE);  // TX stamps alone
    int err = 0;
    for (int f : filters) {
      hwtstamp_config cfg{};
      cfg.tx_type = tx;
      cfg.rx_filter = f;
      err = sock.Ioctl(ifname, SIOCSHWTSTAMP, &cfg);
      if (err == 0) {
        ApplyConfig(cfg, &s);  // the driver writes back what it did
        break;
      }
      // ERANGE / EINVAL: this combination is not supported, try the next
      // filter; anything else (EOPNOTSUPP, EPERM, ENODEV) ends it.
      if (err != ERANGE && err != EINVAL) break;
    }
    if (err != 0) {
      s.error = err;
      set_note = ErrText("SIOCSHWTSTAMP", err);
    }
  }

  if (s.supported) {
    if (s.enabled && set_note.empty()) {
      s.summary = ifname + ": hardware timestamping enabled (" + Capabilities(s) + "; " +
                  ConfigText(s) + ")";
    } else {
      s.summary = ifname + ": hardware timestamping supported (" + Capabilities(s) +
                  ") but not enabled (" + (set_note.empty() ? "TX off, RX filter NONE" : set_note) +
                  ")";
      if (s.enabled) s.summary += "; in force: " + ConfigText(s);
    }
  } else {
    s.summary = ifname + ": no hardware timestamping (" + note;
    if (!set_note.empty()) s.summary += "; " + set_note;
    s.summary += ")";
    if (set_note.empty() && s.enabled) {
      s.summary += "; SIOCSHWTSTAMP accepted " + ConfigText(s) +
                   ", but the driver reports no hardware stamps";
    }
  }
  return s;
}

}  // namespace chronolink
