// Reads the few XStats validate needs by name (hlo_op, hlo_module,
// step_num, Kineto's "Collective name", "Process Group Name", "Seq",
// "Src Rank"/"Dst Rank", the Chrome importer's category) from an event or
// its metadata, whatever value type the producer chose: XProf interns
// strings as ref_value, Kineto writes ranks as numbers or strings, and the
// Chrome importer keeps JSON numbers as int, uint or double. Built once per
// plane; read-only afterwards, so one reader per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "proto/xplane.pb.h"

namespace chronolink::trace {

// docs/chrome-trace.md: the description of a stat metadata entry that only
// holds an interned string value (a ref_value target), never a key.
inline constexpr std::string_view kInternedStringDescription = "chrome:ref";

class StatReader {
 public:
  explicit StatReader(const xspace::XPlane& plane);

  // Whether the plane declares a stat of this name at all (a cheap way to
  // skip per-event lookups on planes that cannot have it).
  bool Declares(std::string_view name) const;

  // The named stat of `event`, else of its metadata; as text (numbers in
  // decimal, a ref_value as the referenced stat metadata's name).
  std::optional<std::string> String(const xspace::XEvent& event, std::string_view name) const;
  // As an integer: int/uint that fit int64, an integral double, or a
  // decimal string (quotes tolerated).
  std::optional<int64_t> Int(const xspace::XEvent& event, std::string_view name) const;

  // For per-event loops: the stat's id on this plane (nullopt when the
  // plane never declares it), the stat of `event` or its metadata with that
  // id, and a string stat's text without a copy (str_value or ref_value;
  // valid while the plane is).
  std::optional<int64_t> Id(std::string_view name) const;
  const xspace::XStat* Find(const xspace::XEvent& event, int64_t id) const;
  static const xspace::XStat* FindIn(const google::protobuf::RepeatedPtrField<xspace::XStat>& stats,
                                     int64_t id);
  std::optional<std::string_view> View(const xspace::XStat& stat) const;

  // The same for the plane's own stats (XPlane.stats).
  std::optional<std::string> PlaneString(std::string_view name) const;
  std::optional<int64_t> PlaneInt(std::string_view name) const;

 private:
  const xspace::XStat* FindByName(const xspace::XEvent& event, std::string_view name) const;
  std::optional<std::string> AsString(const xspace::XStat& stat) const;
  std::optional<int64_t> AsInt(const xspace::XStat& stat) const;

  // Looked up by string_view without building a std::string per event.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  const xspace::XPlane& plane_;
  std::unordered_map<std::string, int64_t, NameHash, std::equal_to<>> ids_;  // stat name -> id
};

}  // namespace chronolink::trace
