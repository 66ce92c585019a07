#include "agent/export/prometheus_text.h"

#include <cmath>
#include <cstdio>

namespace chronolink {

void PrometheusText::Family(const std::string& name, const std::string& help,
                            const std::string& type) {
  if (!declared_.insert(name).second) return;
  out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

std::string PrometheusText::Escape(const std::string& v) {
  std::string e;
  for (char c : v) {
    if (c == '\\') e += "\\\\";
    else if (c == '"') e += "\\\"";
    else if (c == '\n') e += "\\n";
    else e += c;
  }
  return e;
}

void PrometheusText::Sample(const std::string& name, const Labels& labels, double value) {
  out_ << name;
  if (!labels.empty()) {
    out_ << '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      out_ << (i ? "," : "") << labels[i].first << "=\"" << Escape(labels[i].second) << '"';
    }
    out_ << '}';
  }
  char buf[64];
  if (std::isnan(value)) std::snprintf(buf, sizeof(buf), "NaN");
  else std::snprintf(buf, sizeof(buf), "%.17g", value);
  out_ << ' ' << buf << '\n';
}

}  // namespace chronolink
