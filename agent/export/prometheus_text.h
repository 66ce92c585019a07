// Builds Prometheus text exposition format (version 0.0.4): HELP and TYPE
// once per metric family, then its samples with escaped label values.
#pragma once

#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace chronolink {

class PrometheusText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // type: "counter" or "gauge".
  void Family(const std::string& name, const std::string& help, const std::string& type);
  void Sample(const std::string& name, const Labels& labels, double value);
  std::string str() const { return out_.str(); }

  static std::string Escape(const std::string& v);

 private:
  std::ostringstream out_;
  std::set<std::string> declared_;
};

}  // namespace chronolink
