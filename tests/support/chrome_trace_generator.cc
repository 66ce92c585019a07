#include "tests/support/chrome_trace_generator.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

namespace chronolink::trace::testing {

// ---------------------------------------------------------------------------
// Names

namespace {

constexpr std::string_view kFlavourNames[kChromeFlavours] = {"kineto_base", "object_absolute", "legacy_array",
                                                             "array_absolute"};

constexpr std::string_view kFeatureNames[] = {"object_form",
                                              "array_form",
                                              "kineto_base",
                                              "object_absolute",
                                              "legacy_array",
                                              "array_absolute",
                                              "empty_trace",
                                              "base_after_events",
                                              "base_after_start",
                                              "ph_X",
                                              "ph_B",
                                              "ph_E",
                                              "ph_i",
                                              "ph_I",
                                              "ph_C",
                                              "ph_M",
                                              "ph_s",
                                              "ph_t",
                                              "ph_f",
                                              "ph_b",
                                              "ph_n",
                                              "ph_e",
                                              "ph_P",
                                              "ph_O",
                                              "ph_N",
                                              "ph_D",
                                              "ph_unknown",
                                              "instant_scope_thread",
                                              "instant_scope_process",
                                              "instant_scope_global",
                                              "flow_bind_enclosing",
                                              "async_id",
                                              "async_id2_local",
                                              "async_id2_global",
                                              "async_scope",
                                              "process_name",
                                              "thread_name",
                                              "process_sort_index",
                                              "thread_sort_index",
                                              "process_labels",
                                              "metadata_ts",
                                              "metadata_ts_not_a_time",
                                              "end_without_name",
                                              "non_string_name",
                                              "counter_args",
                                              "nested_slices",
                                              "depth_5",
                                              "starts_with_parent",
                                              "ends_with_parent",
                                              "same_as_parent",
                                              "zero_duration",
                                              "touching_siblings",
                                              "begin_end_threads",
                                              "mixed_threads",
                                              "unsorted_slices",
                                              "integer_times",
                                              "fraction_digits_1",
                                              "fraction_digits_2",
                                              "fraction_digits_3",
                                              "fraction_digits_4",
                                              "fraction_digits_5",
                                              "fraction_digits_6",
                                              "sub_ps_digits",
                                              "sub_ps_halves",
                                              "trailing_zeros",
                                              "exponent_times",
                                              "negative_ts",
                                              "negative_zero",
                                              "absolute_six_decimals",
                                              "kineto_three_decimals",
                                              "pid_small_int",
                                              "pid_negative",
                                              "pid_huge_int",
                                              "pid_beyond_int64",
                                              "pid_beyond_uint64",
                                              "pid_float",
                                              "pid_float_spellings",
                                              "pid_string",
                                              "pid_empty_string",
                                              "pid_unicode",
                                              "tid_small_int",
                                              "tid_negative",
                                              "tid_huge_int",
                                              "tid_beyond_int64",
                                              "tid_beyond_uint64",
                                              "tid_float",
                                              "tid_float_spellings",
                                              "tid_string",
                                              "tid_empty_string",
                                              "tid_unicode",
                                              "tid_missing",
                                              "escape_quote",
                                              "escape_backslash",
                                              "escape_slash",
                                              "escape_backspace",
                                              "escape_form_feed",
                                              "escape_newline",
                                              "escape_return",
                                              "escape_tab",
                                              "escape_nul",
                                              "escape_control",
                                              "escape_unicode",
                                              "escape_upper_hex",
                                              "escape_surrogate_pair",
                                              "raw_utf8",
                                              "raw_utf8_four_byte",
                                              "raw_delete",
                                              "kineto_args",
                                              "nested_args",
                                              "empty_args",
                                              "arg_true",
                                              "arg_false",
                                              "arg_null",
                                              "arg_huge_int",
                                              "arg_float",
                                              "arg_exponent",
                                              "arg_string",
                                              "duplicate_arg_keys",
                                              "duplicate_event_keys",
                                              "duplicate_args_objects",
                                              "cat",
                                              "non_string_cat",
                                              "cname",
                                              "tts",
                                              "tdur",
                                              "sf",
                                              "stack",
                                              "id2",
                                              "scope",
                                              "unknown_key_object",
                                              "max_nesting",
                                              "top_string",
                                              "top_integer",
                                              "top_float",
                                              "top_bool",
                                              "top_null",
                                              "top_array",
                                              "top_object",
                                              "top_duplicate_keys",
                                              "stack_frames",
                                              "compact_text",
                                              "spaced_text",
                                              "newlines",
                                              "tabs",
                                              "carriage_returns"};
static_assert(std::size(kFeatureNames) == kChromeGenFeatureCount, "one name per ChromeGenFeature");

}  // namespace

std::string_view ChromeFlavourName(ChromeFlavour flavour) { return kFlavourNames[static_cast<size_t>(flavour)]; }

std::string_view ChromeGenFeatureName(ChromeGenFeature feature) {
  return kFeatureNames[static_cast<size_t>(feature)];
}

ChromeGenFeatures& ChromeGenFeatures::operator+=(const ChromeGenFeatures& other) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  return *this;
}

std::optional<TraceInstant> ExactStart(const GeneratedChromeTrace& trace, const GeneratedEvent& event) {
  if (!event.timed) return std::nullopt;
  TraceInstant t;
  if (__builtin_add_overflow(trace.origin_ns, event.ts_ns, &t.ns)) return std::nullopt;
  t.ps = event.ts_ps;
  return t;
}

std::optional<TraceInstant> ExactEnd(const GeneratedChromeTrace& trace, const GeneratedEvent& event) {
  const auto start = ExactStart(trace, event);
  if (!start || !event.has_dur) return start;
  return AddPs(*start, event.dur_ps);
}

// ---------------------------------------------------------------------------
// Numbers and strings as text

namespace {

using F = ChromeGenFeature;
using Ps = __int128;  // picoseconds: epoch µs in ps (1.8e21) pass int64
using U128 = unsigned __int128;

constexpr int64_t kTrimonthNs = 7'889'238'000'000'000;  // Kineto's base interval (_trimonths)

template <typename T, size_t N>
const T& Pick(GeneratorRandom& r, const T (&items)[N]) {
  return items[r.Below(N)];
}

// Log-uniform in [lo, hi] (0 <= lo <= hi), integers only: small values common.
int64_t LogUniform(GeneratorRandom& r, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const int bits = static_cast<int>(
      r.Between(std::bit_width(static_cast<uint64_t>(lo)), std::bit_width(static_cast<uint64_t>(hi))));
  const int64_t a = std::max<int64_t>(lo, bits == 0 ? 0 : int64_t{1} << (bits - 1));
  const int64_t b = std::min<int64_t>(hi, bits >= 63 ? hi : (int64_t{1} << bits) - 1);
  return r.Between(a, std::max(a, b));
}

Ps FloorDiv(Ps a, Ps b) {
  Ps q = a / b;
  if (a % b != 0 && (a < 0) != (b < 0)) --q;
  return q;
}

std::string DecimalDigits(U128 v) {
  std::string s;
  do {
    s.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  std::reverse(s.begin(), s.end());
  return s;
}

// A decimal number as written: ±digits × 10^-scale (scale < 0 for values
// such as 1e300).
struct Decimal {
  bool negative = false;
  U128 digits = 0;
  int scale = 0;
};

// The same value with the fewest fractional digits (12.500 -> 12.5).
Decimal Normalised(Decimal d) {
  while (d.scale > 0 && d.digits % 10 == 0) {
    d.digits /= 10;
    --d.scale;
  }
  return d;
}

// How a number is spelled; no choice changes its value.
struct Spelling {
  int extra_zeros = 0;          // trailing zeros past the last significant digit
  std::optional<int> exponent;  // written as mantissa e exponent
  bool upper_e = false;
  bool plus_sign = false;
  bool exponent_padded = false;  // 1e05
};

std::string Spell(const Decimal& d, const Spelling& s) {
  std::string digits = DecimalDigits(d.digits);
  digits.append(static_cast<size_t>(s.extra_zeros), '0');
  // The mantissa is digits × 10^-point.
  int point = d.scale + s.extra_zeros + s.exponent.value_or(0);
  if (point < 0) {
    digits.append(static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (static_cast<size_t>(point) >= digits.size()) digits.insert(0, point - digits.size() + 1, '0');
  const size_t int_len = digits.size() - static_cast<size_t>(point);
  size_t lead = 0;  // JSON allows no leading zeros in the integer part
  while (lead + 1 < int_len && digits[lead] == '0') ++lead;
  std::string out = d.negative ? "-" : "";
  out.append(digits, lead, int_len - lead);
  if (point > 0) {
    out += '.';
    out.append(digits, int_len, static_cast<size_t>(point));
  }
  if (s.exponent) {
    out += s.upper_e ? 'E' : 'e';
    if (*s.exponent < 0) {
      out += '-';
    } else if (s.plus_sign) {
      out += '+';
    }
    if (s.exponent_padded) out += '0';
    out += std::to_string(*s.exponent < 0 ? -*s.exponent : *s.exponent);
  }
  return out;
}

// The mantissa's point lands anywhere from 3 places past the last digit
// (1234000e-3) to 2 before the first (0.001234e4).
Spelling RandomSpelling(GeneratorRandom& r, const Decimal& d, double exponent_rate, double zeros_rate) {
  Spelling s;
  if (r.Chance(zeros_rate)) s.extra_zeros = static_cast<int>(r.Chance(0.1) ? r.Between(4, 12) : r.Between(1, 3));
  if (r.Chance(exponent_rate)) {
    const int len = static_cast<int>(DecimalDigits(d.digits).size()) + s.extra_zeros;
    s.exponent = static_cast<int>(r.Between(-3, len + 2)) - d.scale - s.extra_zeros;
    s.upper_e = r.Chance(0.3);
    s.plus_sign = r.Chance(0.3);
    s.exponent_padded = r.Chance(0.1);
  }
  return s;
}

// The code point at s[i] (valid UTF-8: every string here is) and its length.
std::pair<uint32_t, int> DecodeUtf8(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k])); };
  const uint32_t b = byte(0);
  if (b < 0x80) return {b, 1};
  if (b < 0xe0) return {((b & 0x1f) << 6) | (byte(1) & 0x3f), 2};
  if (b < 0xf0) return {((b & 0x0f) << 12) | ((byte(1) & 0x3f) << 6) | (byte(2) & 0x3f), 3};
  return {((b & 0x07) << 18) | ((byte(1) & 0x3f) << 12) | ((byte(2) & 0x3f) << 6) | (byte(3) & 0x3f), 4};
}

void AppendUnicodeEscape(uint32_t unit, bool upper, std::string* out) {
  const char* hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  *out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out->push_back(hex[(unit >> shift) & 0xf]);
}

// Characters that strings are seasoned with: every escape JSON has, raw
// UTF-8 of each length, and DEL, which JSON leaves unescaped.
const std::string kSpice[] = {"\"",
                              "\\",
                              "/",
                              "\b",
                              "\f",
                              "\n",
                              "\r",
                              "\t",
                              std::string(1, '\0'),
                              "\x01",
                              "\x1f",
                              "\x7f",
                              "\xc3\xa9" /* é */,
                              "\xe2\x82\xac" /* € */,
                              "\xe4\xb8\xad" /* 中 */,
                              "\xf0\x9f\x98\x80" /* 😀 */,
                              "\xf0\x9d\x84\x9e" /* 𝄞 */,
                              "\xc3\xbc" /* ü */};

// Pools of realistic text.
constexpr std::string_view kSliceNames[] = {
    "aten::add",
    "aten::mm",
    "aten::linear",
    "aten::empty",
    "aten::copy_",
    "cudaLaunchKernel",
    "cudaMemcpyAsync",
    "ProfilerStep#3",
    "record_param_comms",
    "c10d::allreduce_",
    "gloo:all_reduce",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, ...)",
    "model.py(12): forward",
    "torch/nn/modules/module.py(1501): _call_impl",
    "Optimizer.step#SGD.step",
    "Memcpy HtoD (Pageable -> Device)",
    "step 3",
    "region",
    "PyTorch Profiler (0)"};
constexpr std::string_view kSliceCats[] = {
    "cpu_op",          "cuda_runtime", "kernel", "user_annotation", "gpu_user_annotation",
    "python_function", "gpu_memcpy",   "Trace"};
constexpr std::string_view kPlainStrings[] = {"Spans",
                                              "Traces",
                                              "CPU functions",
                                              "python 4242",
                                              "GPU 0",
                                              " node_id:1, thread_id:9 ",
                                              "Trace PyTorch Profiler",
                                              "stream 7 ",
                                              "PyTorch Profiler",
                                              "thread 4243 (python)"};
constexpr std::string_view kUnicodeStrings[] = {"\xe8\xbf\x9b\xe7\xa8\x8b \xce\xb1" /* 进程 α */,
                                                "GPU \xf0\x9f\x9a\x80 0" /* GPU 🚀 0 */, "caf\xc3\xa9" /* café */,
                                                "\xe2\x9c\x93 done" /* ✓ done */};
constexpr std::string_view kArgKeys[] = {
    "alpha", "scale",           "path",   "flag", "none",
    "shape", "device",          "stream", "note", "\xc3\xa9t\xc3\xa9" /* été */,
    "",      "key with spaces", "nested"};
constexpr std::string_view kInstantNames[] = {"checkpoint", "Iteration Start: PyTorch Profiler",
                                              "Record Window End", "cudaDeviceSynchronize", "marker"};
constexpr std::string_view kCounterNames[] = {"Memory 0", "GPU 0 utilization", "ctr", "bytes in flight"};
constexpr std::string_view kUnknownPhs[] = {"Z", "R", "c", "(", ")", "V", "v", "S", "T", "F", "p", "zz", ""};

// Integers whose text is the test: 64-bit edges and beyond.
constexpr std::string_view kHugeIntegers[] = {
    "9223372036854775807",  "-9223372036854775808", "9223372036854775808",   "18446744073709551615",
    "18446744073709551616", "-9223372036854775809", "100000000000000000000", "123456789012345678901234567890"};
// Floats written as real producers and hand-written files do.
constexpr std::string_view kOddFloats[] = {"1e300",
                                           "-1e-300",
                                           "1.7976931348623157e308",
                                           "5e-324",
                                           "2.2250738585072014e-308",
                                           "0.1",
                                           "1.50",
                                           "2.5e9",
                                           "1e-07",
                                           "-0.0",
                                           "0.125",
                                           "1E+2",
                                           "1e-05",
                                           "0.30000000000000004",
                                           "1.0"};

// Kinds of pid and tid.
enum class IdKind {
  kSmallInt,
  kNegative,
  kHugeInt,
  kBeyondInt64,
  kBeyondUint64,
  kFloat,
  kString,
  kEmptyString,
  kUnicode,
  kMissing,
};

// Draw weights of the kinds above (kMissing is made on demand, not drawn).
constexpr int kIdKindWeights[] = {10, 1, 1, 1, 1, 1, 2, 1, 1};
constexpr int kIdKindWeightSum = 19;

F IdFeature(IdKind kind, bool pid) {
  if (kind == IdKind::kMissing) return F::kTidMissing;
  const int k = static_cast<int>(kind);
  return static_cast<F>(static_cast<int>(pid ? F::kPidSmallInt : F::kTidSmallInt) + (k >= 6 ? k + 1 : k));
}
static_assert(static_cast<int>(F::kPidFloat) - static_cast<int>(F::kPidSmallInt) == 5 &&
                  static_cast<int>(F::kPidString) - static_cast<int>(F::kPidSmallInt) == 7 &&
                  static_cast<int>(F::kTidUnicode) - static_cast<int>(F::kTidSmallInt) == 9,
              "IdFeature maps IdKind onto the pid/tid features in order, skipping *FloatSpellings");

// A pid or tid. Strings and floats are spelled afresh at each use (a
// different escape, 1e300 or 1.0e300), which names the same process or
// thread for the reader and for viewers alike.
struct IdSpec {
  IdSpec() = default;
  IdSpec(IdKind kind_, std::string text_, std::string identity_)
      : kind(kind_), text(std::move(text_)), identity(std::move(identity_)) {}

  IdKind kind = IdKind::kSmallInt;
  std::string text;      // integers: their decimal text; strings: the UTF-8 value
  Decimal value;         // floats
  std::string identity;  // how a viewer's JSON parser tells ids apart (numbers by double value)
  std::set<std::string> float_spellings;
};

// One event key: the key's UTF-8 text (quoted when written) and the value's
// JSON text.
struct Member {
  std::string key;
  std::string value;
};

// An event before it is written; times are exact ps from the document's
// origin, spelled when the event is written.
struct PlannedEvent {
  PlannedEvent() = default;
  PlannedEvent(std::string ph_, int process_, int thread_)
      : ph(std::move(ph_)), process(process_), thread(thread_) {}

  std::string ph;
  int process = 0;
  int thread = 0;  // index into the process's threads
  std::optional<Ps> ts;
  std::optional<Ps> dur;
  int depth = -1;
  int slice = -1;
  int parent_slice = -1;
  std::optional<std::string> name;  // UTF-8
  std::string name_json;            // a non-string name, when set
  std::vector<Member> fields;       // other event keys
  std::optional<std::vector<Member>> args;
  std::string metadata_ts;  // an M event's ts, verbatim ("" for none)
};

struct ThreadPlan {
  IdSpec tid;
  Ps grid = 1;                       // its slices lie on multiples of this many ps
  std::vector<PlannedEvent> events;  // file order within the thread
  std::vector<Ps> boundaries;        // slice starts and ends: where other events like to sit
};

// A process's threads: those with a tid first, then the one of its events
// without a tid (in the file only when such events are).
struct ProcessPlan {
  IdSpec pid;
  std::vector<ThreadPlan> threads;
  int tid_threads = 0;
  int no_tid_thread = 0;
  std::set<std::string> tid_identities;
};

enum class WsStyle { kCompact, kSpaced, kPretty, kRandom };
enum class Gap { kInside, kBeforeSeparator, kAfterSeparator };
enum class KeyOrder { kKineto, kLegacy, kShuffled };
enum class SliceMode { kX, kBeginEnd, kMixed };
enum class XOrder { kPre, kPost, kShuffled };

// How a document spells its times.
struct TimeStyle {
  bool kineto_three = false;  // "{}.{:03}" whenever the value is whole ns
  double exponent_rate = 0;
  double zeros_rate = 0;
  double sub_ps_rate = 0;
  double negative_zero_rate = 0;
};

struct SpelledTime {
  std::string text;
  bool sub_ps = false;
};

struct SliceContext {
  int process = 0;
  int thread = 0;
  int max_depth = 0;
  SliceMode mode = SliceMode::kX;
  bool post_order = false;
  int* budget = nullptr;
};

// Numbers processes and threads by first appearance, as the reader does.
void NumberProcessesAndThreads(GeneratedChromeTrace* trace, const std::vector<std::pair<int, int>>& plans) {
  std::map<int, int> process_index;
  std::vector<std::map<int, int>> thread_index;
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto [p, t] = plans[i];
    auto [pit, new_process] = process_index.emplace(p, static_cast<int>(process_index.size()));
    if (new_process) thread_index.emplace_back();
    auto& threads = thread_index[static_cast<size_t>(pit->second)];
    auto [tit, new_thread] = threads.emplace(t, static_cast<int>(threads.size()));
    trace->events[i].process_index = pit->second;
    trace->events[i].thread_index = tit->second;
  }
  trace->processes = static_cast<int>(process_index.size());
  for (const auto& threads : thread_index) trace->threads.push_back(static_cast<int>(threads.size()));
}

// ---------------------------------------------------------------------------
// The generator of one document

class DocumentGenerator {
 public:
  DocumentGenerator(GeneratorRandom& random, const ChromeGenOptions& options) : r_(random), options_(options) {}

  GeneratedChromeTrace Generate();

 private:
  // The document's flavour, time origin and spelling habits.
  void ChooseFlavourAndOrigin();
  int64_t KinetoBase();
  void ChooseStyles();

  // pids and tids
  void MakeProcesses();
  IdSpec NewId(bool pid, std::set<std::string>* taken);
  IdSpec DrawId(IdKind kind, bool pid);
  std::string IdText(IdSpec* id, bool pid);
  int TidThread(int process);
  std::pair<int, int> AnyThread(bool tid_required);

  // slices (X, B/E)
  void AddSlices(int budget);
  void GrowThread(int process, int thread, int budget);
  void EmitSlice(const SliceContext& c, Ps start, Ps end, int depth, int parent);
  std::vector<std::pair<Ps, Ps>> Spans(Ps lo, Ps hi, Ps grid, int count, bool in_parent);
  PlannedEvent SliceEvent(const SliceContext& c, std::string ph, Ps start, std::optional<Ps> dur, int depth);
  void CountUnsortedSlices(const ThreadPlan& t);

  // other events
  void AddOtherEvents(int budget);
  void AddInstant(int* budget);
  void AddCounter(int* budget);
  void AddFlow(int* budget);
  void AddAsync(int* budget);
  void AddSample(int* budget);
  void AddObjectLifecycle(int* budget);
  void AddUnknown(int* budget);
  void AddMetadata(int budget);
  void MetadataEvent(std::string name, int process, int thread, std::vector<Member> args);
  void Place(PlannedEvent e);
  Ps RandomInstant(int process, int thread, std::optional<Ps> not_before);
  void Decorate(PlannedEvent* e);
  std::vector<Member> KinetoArgs(std::string_view cat);
  std::vector<Member> RandomArgs(int max_members);

  // the text
  std::vector<PlannedEvent*> FileOrder();
  void CountFloatSpellings();
  std::string EventText(const PlannedEvent& e, GeneratedEvent* out);
  std::string TopLevel(const std::string& events_array);
  std::string TopValue();
  SpelledTime SpellTime(Ps value, bool duration);
  int64_t SubPsNoise(Ps value, bool duration);
  std::string GapText(Gap at);
  std::string Quote(std::string_view s, double escape_rate);
  std::string Spiced(std::string_view base);
  std::string Object(const std::vector<Member>& members, double key_escape_rate);
  std::string Array(const std::vector<std::string>& values);
  std::string AnyValue(int depth);
  std::string AnyNumber();
  std::string Nested(int levels);
  std::string SmallInt(int64_t lo, int64_t hi) { return std::to_string(r_.Between(lo, hi)); }
  void CountWhitespace();

  void Count(F f, int64_t n = 1) { trace_.features[f] += n; }

  GeneratorRandom& r_;
  const ChromeGenOptions& options_;
  GeneratedChromeTrace trace_;

  Ps offset_ps_ = 0;  // the trace's start_ns, in ps from the origin
  Ps span_ps_ = 0;
  bool legacy_pure_ = false;  // only what the legacy profiler writes
  TimeStyle time_style_;
  WsStyle ws_ = WsStyle::kCompact;
  KeyOrder key_order_ = KeyOrder::kKineto;
  double escape_rate_ = 0;      // optional escapes in strings
  double key_escape_rate_ = 0;  // ... in keys ("p\u0068" is "ph")
  double spice_rate_ = 0;       // strings seasoned with kSpice
  double decoration_rate_ = 0;  // optional event keys
  double duplicate_rate_ = 0;
  bool used_max_nesting_ = false;
  int64_t next_fallback_id_ = 1'000'000;
  int next_slice_ = 0;
  std::vector<ProcessPlan> processes_;
  std::vector<PlannedEvent> metadata_first_;  // M events written before all others
  bool metadata_first_mode_ = false;
};

GeneratedChromeTrace DocumentGenerator::Generate() {
  ChooseFlavourAndOrigin();
  ChooseStyles();
  const bool empty = r_.Chance(0.01);
  const int budget = empty ? 0 : static_cast<int>(LogUniform(r_, 1, static_cast<int64_t>(options_.max_events)));
  if (empty) Count(F::kEmptyTrace);
  MakeProcesses();
  // Slices take most of the events; what one part leaves, the next gets.
  const int slice_budget = budget - budget * 2 / 5;
  AddSlices(slice_budget);
  int used = 0;
  for (const auto& p : processes_) {
    for (const auto& t : p.threads) used += static_cast<int>(t.events.size());
  }
  const int other_budget = std::max(0, budget - used - budget / 8);
  AddOtherEvents(other_budget);
  used = 0;
  for (const auto& p : processes_) {
    for (const auto& t : p.threads) used += static_cast<int>(t.events.size());
  }
  AddMetadata(budget - used);

  std::string events_array = "[";
  const std::vector<PlannedEvent*> order = FileOrder();
  std::vector<std::pair<int, int>> threads_in_order;
  for (const PlannedEvent* e : order) threads_in_order.emplace_back(e->process, e->thread);
  for (size_t i = 0; i < order.size(); ++i) {
    events_array += GapText(i == 0 ? Gap::kInside : Gap::kAfterSeparator);
    GeneratedEvent g;
    events_array += EventText(*order[i], &g);
    trace_.events.push_back(std::move(g));
    events_array += GapText(i + 1 == order.size() ? Gap::kInside : Gap::kBeforeSeparator);
    if (i + 1 < order.size()) events_array += ',';
  }
  events_array += ']';

  trace_.text = GapText(Gap::kInside);
  trace_.text += trace_.object_form ? TopLevel(events_array) : events_array;
  trace_.text += GapText(Gap::kInside);
  Count(trace_.object_form ? F::kObjectForm : F::kArrayForm);
  CountWhitespace();
  CountFloatSpellings();
  NumberProcessesAndThreads(&trace_, threads_in_order);
  return std::move(trace_);
}

void DocumentGenerator::CountFloatSpellings() {
  for (const auto& p : processes_) {
    if (p.pid.float_spellings.size() > 1) Count(F::kPidFloatSpellings);
    for (const auto& t : p.threads) {
      if (t.tid.float_spellings.size() > 1) Count(F::kTidFloatSpellings);
    }
  }
}

// --- flavour, origin, styles ---

void DocumentGenerator::ChooseFlavourAndOrigin() {
  const auto flavour =
      options_.flavour ? *options_.flavour : static_cast<ChromeFlavour>(r_.Below(kChromeFlavours));
  trace_.flavour = flavour;
  trace_.object_form = flavour == ChromeFlavour::kKinetoBase || flavour == ChromeFlavour::kObjectAbsolute;
  Count(static_cast<F>(static_cast<int>(F::kKinetoBase) + static_cast<int>(flavour)));
  const int64_t start = options_.start_ns;
  switch (flavour) {
    case ChromeFlavour::kKinetoBase:
      trace_.time_origin = ChromeTimeOrigin::kBaseTime;
      trace_.origin_ns = KinetoBase();
      trace_.base_ns = trace_.origin_ns;
      break;
    case ChromeFlavour::kObjectAbsolute:
    case ChromeFlavour::kArrayAbsolute:
      trace_.time_origin = ChromeTimeOrigin::kEpoch;
      trace_.origin_ns = 0;
      break;
    case ChromeFlavour::kLegacyArray:
      // The profiler starts a little before its first event, or (events of
      // other threads already running) a little after it: negative ts.
      trace_.time_origin = ChromeTimeOrigin::kUnstated;
      trace_.origin_ns = r_.Chance(0.15) ? start + r_.Between(1, std::max<int64_t>(1, options_.span_ns / 4))
                                         : start - r_.Between(0, 1'000'000'000);
      break;
  }
  offset_ps_ = static_cast<Ps>(start - trace_.origin_ns) * 1000;
  span_ps_ = static_cast<Ps>(options_.span_ns) * 1000;
}

// Kineto floors the wall clock to a 3-month interval; other bases are
// allowed too, even one after the first events (ts < 0; Kineto clamps
// those to 0, the format does not).
int64_t DocumentGenerator::KinetoBase() {
  const int64_t start = options_.start_ns;
  const uint64_t pick = r_.Below(10);
  if (pick <= 5) return start - start % kTrimonthNs;
  if (pick <= 7) return start - start % 1'000'000'000;
  if (pick == 8) return start - r_.Between(0, 1'000'000'000);
  Count(F::kBaseAfterStart);
  return start + r_.Between(1, std::max<int64_t>(1, options_.span_ns / 4));
}

void DocumentGenerator::ChooseStyles() {
  const ChromeFlavour f = trace_.flavour;
  legacy_pure_ = f == ChromeFlavour::kLegacyArray && r_.Chance(0.5);
  if (f == ChromeFlavour::kKinetoBase) {
    time_style_ = {.kineto_three = r_.Chance(0.85),
                   .exponent_rate = 0.02,
                   .zeros_rate = 0.05,
                   .sub_ps_rate = 0.02,
                   .negative_zero_rate = 0.05};
  } else if (f == ChromeFlavour::kLegacyArray) {
    // Python floats: repr digits, now and then past a picosecond, 1e-05.
    time_style_ = {.exponent_rate = 0.04, .zeros_rate = 0.05, .sub_ps_rate = 0.12, .negative_zero_rate = 0.1};
  } else {
    time_style_ = {.kineto_three = r_.Chance(0.3), .exponent_rate = 0.05, .zeros_rate = 0.1, .sub_ps_rate = 0.04};
  }
  if (r_.Chance(0.3)) {  // a wild document: every spelling often
    time_style_.kineto_three = false;
    time_style_.exponent_rate = 0.3;
    time_style_.zeros_rate = 0.3;
    time_style_.sub_ps_rate = 0.15;
    time_style_.negative_zero_rate = 0.3;
  }
  ws_ = legacy_pure_ ? WsStyle::kSpaced : static_cast<WsStyle>(r_.Below(4));
  key_order_ = legacy_pure_ ? KeyOrder::kLegacy : static_cast<KeyOrder>(r_.Below(3));
  escape_rate_ = r_.Chance(0.3) ? 0.3 : 0.02;
  key_escape_rate_ = r_.Chance(0.1) ? 0.2 : 0.0;
  spice_rate_ = legacy_pure_ ? 0.0 : r_.Chance(0.5) ? 0.15 : 0.03;
  decoration_rate_ = legacy_pure_ ? 0.0 : r_.Chance(0.5) ? 0.25 : 0.05;
  duplicate_rate_ = legacy_pure_ ? 0.0 : r_.Chance(0.3) ? 0.1 : 0.0;
  metadata_first_mode_ = r_.Chance(0.6);
}

// --- pids and tids ---

void DocumentGenerator::MakeProcesses() {
  std::set<std::string> pids;
  const int count = legacy_pure_ ? 1 : static_cast<int>(r_.Between(1, 4));
  for (int p = 0; p < count; ++p) {
    ProcessPlan plan;
    if (legacy_pure_ && r_.Chance(0.8)) {
      plan.pid = IdSpec(IdKind::kString, "CPU functions", "s:CPU functions");
      pids.insert(plan.pid.identity);
    } else {
      plan.pid = NewId(/*pid=*/true, &pids);
    }
    plan.tid_threads = static_cast<int>(r_.Between(1, 4));
    for (int t = 0; t < plan.tid_threads; ++t) {
      ThreadPlan thread;
      thread.tid = NewId(/*pid=*/false, &plan.tid_identities);
      plan.threads.push_back(std::move(thread));
    }
    ThreadPlan no_tid;
    no_tid.tid = DrawId(IdKind::kMissing, /*pid=*/false);
    plan.no_tid_thread = plan.tid_threads;
    plan.threads.push_back(std::move(no_tid));
    processes_.push_back(std::move(plan));
  }
}

// An id that no viewer confuses with one in `taken` (1e300 and 1.0e300 are
// one value; so are 2^53 and 2^53 + 1 as doubles), so the reader's
// processes and threads are a viewer's too.
IdSpec DocumentGenerator::NewId(bool pid, std::set<std::string>* taken) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    int64_t pick = static_cast<int64_t>(r_.Below(kIdKindWeightSum));
    int kind = 0;
    while (pick >= kIdKindWeights[kind]) pick -= kIdKindWeights[kind++];
    if (legacy_pure_ && kind != static_cast<int>(IdKind::kSmallInt)) {
      kind = r_.Chance(0.8) ? static_cast<int>(IdKind::kSmallInt) : static_cast<int>(IdKind::kString);
    }
    IdSpec id = DrawId(static_cast<IdKind>(kind), pid);
    if (taken->insert(id.identity).second) return id;
  }
  for (;;) {
    const std::string text = std::to_string(next_fallback_id_++);
    IdSpec id(IdKind::kSmallInt, text, "n:" + text);
    if (taken->insert(id.identity).second) return id;
  }
}

std::string NumberIdentity(double v) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return "n:" + std::string(buf, end);
}

IdSpec DocumentGenerator::DrawId(IdKind kind, bool pid) {
  IdSpec id(kind, "", "");
  switch (kind) {
    case IdKind::kSmallInt: {
      static constexpr int64_t kPids[] = {0, 1, 2, 7, 4242, 12345, 100};
      static constexpr int64_t kTids[] = {0, 1, 7, 4243, 140213, 140299, 2};
      const int64_t v = r_.Chance(0.6) ? (pid ? Pick(r_, kPids) : Pick(r_, kTids)) : r_.Between(0, 1 << 22);
      id.text = std::to_string(v);
      break;
    }
    case IdKind::kNegative: {
      static constexpr int64_t kValues[] = {-1, -2, std::numeric_limits<int64_t>::min(), -4242};
      id.text = std::to_string(r_.Chance(0.7) ? Pick(r_, kValues) : -r_.Between(1, int64_t{1} << 40));
      break;
    }
    case IdKind::kHugeInt: {
      // Ids the reader numbers other pids/tids after stay clear of INT64_MAX
      // unless asked for (ChromeGenOptions::int64_max_ids).
      constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
      const int64_t top = options_.int64_max_ids ? kMax : kMax - 1024;
      id.text = std::to_string(r_.Chance(0.3) ? top : r_.Between((int64_t{1} << 53) + 1, top));
      break;
    }
    case IdKind::kBeyondInt64:
      id.text = std::to_string(r_.Chance(0.3) ? std::numeric_limits<uint64_t>::max()
                                              : (uint64_t{1} << 63) + r_.Below(uint64_t{1} << 63));
      break;
    case IdKind::kBeyondUint64: {
      // 21-30 digits: more than any 64-bit integer; JSON readers make it a float.
      std::string digits = std::to_string(r_.Between(1, 9));
      const int more = static_cast<int>(r_.Between(20, 29));
      for (int i = 0; i < more; ++i) digits.push_back(static_cast<char>('0' + r_.Below(10)));
      id.text = (r_.Chance(0.3) ? "-" : "") + digits;
      break;
    }
    case IdKind::kFloat: {
      static const Decimal kValues[] = {{false, 15, 1}, {true, 225, 2},       {false, 314159, 5},
                                        {false, 1, 3},  {false, 1, -300},     {false, 17976931348623157, -292},
                                        {false, 25, 8}, {false, 123456789, 3}};
      id.value = Pick(r_, kValues);
      id.identity = NumberIdentity(std::strtod(Spell(id.value, {}).c_str(), nullptr));
      return id;
    }
    case IdKind::kString:
      id.text = Spiced(Pick(r_, kPlainStrings));
      break;
    case IdKind::kEmptyString:
      id.text = "";
      break;
    case IdKind::kUnicode:
      id.text = Spiced(Pick(r_, kUnicodeStrings));
      break;
    case IdKind::kMissing:
      id.identity = "missing";
      return id;
  }
  const bool string_kind = kind == IdKind::kString || kind == IdKind::kEmptyString || kind == IdKind::kUnicode;
  id.identity = string_kind ? "s:" + id.text : NumberIdentity(std::strtod(id.text.c_str(), nullptr));
  return id;
}

std::string DocumentGenerator::IdText(IdSpec* id, bool pid) {
  Count(IdFeature(id->kind, pid));
  switch (id->kind) {
    case IdKind::kFloat: {
      std::string text = Spell(id->value, RandomSpelling(r_, id->value, 0.6, 0.3));
      // A huge float spelled without exponent or point is a JSON integer
      // past 64 bits: still the float to every reader, so still this id.
      id->float_spellings.insert(text);
      return text;
    }
    case IdKind::kString:
    case IdKind::kEmptyString:
    case IdKind::kUnicode:
      return Quote(id->text, escape_rate_);
    case IdKind::kMissing:
      return "";
    default:
      return id->text;
  }
}

int DocumentGenerator::TidThread(int process) {
  return static_cast<int>(r_.Below(static_cast<uint64_t>(processes_[static_cast<size_t>(process)].tid_threads)));
}

// A random process and one of its threads; without a tid now and then when
// the event's ph allows that (all but X, B, E).
std::pair<int, int> DocumentGenerator::AnyThread(bool tid_required) {
  const int process = static_cast<int>(r_.Below(processes_.size()));
  if (!tid_required && !legacy_pure_ && r_.Chance(0.15)) {
    return {process, processes_[static_cast<size_t>(process)].no_tid_thread};
  }
  return {process, TidThread(process)};
}

// --- slices ---

void DocumentGenerator::AddSlices(int budget) {
  std::vector<std::pair<int, int>> threads;
  for (size_t p = 0; p < processes_.size(); ++p) {
    for (int t = 0; t < processes_[p].tid_threads; ++t) threads.emplace_back(static_cast<int>(p), t);
  }
  // Budget shares in random proportions; some threads get none.
  std::vector<int> share(threads.size(), 0);
  for (int i = 0; i < budget; ++i) ++share[r_.Below(threads.size())];
  for (size_t i = 0; i < threads.size(); ++i) {
    if (share[i] > 0) GrowThread(threads[i].first, threads[i].second, share[i]);
  }
}

void DocumentGenerator::GrowThread(int process, int thread, int budget) {
  ThreadPlan& t = processes_[static_cast<size_t>(process)].threads[static_cast<size_t>(thread)];
  // A grid per thread: Kineto's whole ns, whole µs, or every ps (6
  // decimals, the case doubles cannot hold at epoch scale).
  static constexpr int64_t kGrids[] = {1'000, 1, 1'000'000, 100, 10, 10'000, 1'000'000'000};
  t.grid = Pick(r_, kGrids);
  if (trace_.flavour == ChromeFlavour::kKinetoBase && t.grid < 1000 && r_.Chance(0.7)) t.grid = 1000;
  // Its window: the whole trace or a part of it, on the grid.
  Ps lo = offset_ps_, hi = offset_ps_ + span_ps_;
  if (r_.Chance(0.5)) {
    const Ps a = r_.Below(static_cast<uint64_t>(span_ps_ + 1)), b = r_.Below(static_cast<uint64_t>(span_ps_ + 1));
    lo = offset_ps_ + std::min(a, b);
    hi = offset_ps_ + std::max(a, b);
  }
  Ps glo = -FloorDiv(-lo, t.grid) * t.grid, ghi = FloorDiv(hi, t.grid) * t.grid;
  if (ghi < glo) {
    t.grid = 1;
    glo = lo;
    ghi = hi;
  }
  SliceContext c{
      .process = process, .thread = thread, .max_depth = static_cast<int>(r_.Between(0, 6)), .budget = &budget};
  const uint64_t mode = legacy_pure_ ? 0 : r_.Below(10);
  c.mode = mode <= 5 ? SliceMode::kX : mode <= 7 ? SliceMode::kBeginEnd : SliceMode::kMixed;
  const auto x_order = c.mode == SliceMode::kX ? static_cast<XOrder>(r_.Below(3)) : XOrder::kPre;
  c.post_order = x_order == XOrder::kPost;
  const size_t first = t.events.size();
  const int top = static_cast<int>(r_.Between(1, std::max(1, std::min(6, budget / 2))));
  for (const auto& [s, e] : Spans(glo, ghi, t.grid, top, /*in_parent=*/false)) {
    if (budget < 1) break;
    EmitSlice(c, s, e, 0, -1);
  }
  if (x_order == XOrder::kShuffled) {
    for (size_t i = t.events.size(); i > first + 1; --i) {
      std::swap(t.events[i - 1], t.events[first + r_.Below(i - first)]);
    }
  }
  if (c.mode == SliceMode::kBeginEnd) Count(F::kBeginEndThreads);
  if (c.mode == SliceMode::kMixed) Count(F::kMixedThreads);
  CountUnsortedSlices(t);
}

// `count` intervals in [lo, hi] on the grid, in order, not overlapping.
// Inside a parent they often hug its start or end, or are the parent's
// interval exactly; any may have zero length, neighbours often touch.
std::vector<std::pair<Ps, Ps>> DocumentGenerator::Spans(Ps lo, Ps hi, Ps grid, int count, bool in_parent) {
  const int64_t steps = static_cast<int64_t>((hi - lo) / grid);
  std::vector<int64_t> p(static_cast<size_t>(2 * count));
  for (auto& x : p) x = r_.Between(0, steps);
  std::sort(p.begin(), p.end());
  if (in_parent && r_.Chance(0.35)) p.front() = 0;
  if (in_parent && r_.Chance(0.35)) p.back() = steps;
  if (in_parent && count == 1 && r_.Chance(0.15)) p = {0, steps};
  for (int i = 0; i < count; ++i) {
    if (r_.Chance(0.12)) p[2 * i + 1] = p[2 * i];
    if (i + 1 < count && r_.Chance(0.3)) p[2 * i + 2] = p[2 * i + 1];
  }
  std::vector<std::pair<Ps, Ps>> spans;
  for (int i = 0; i < count; ++i) spans.emplace_back(lo + grid * p[2 * i], lo + grid * p[2 * i + 1]);
  return spans;
}

void DocumentGenerator::EmitSlice(const SliceContext& c, Ps start, Ps end, int depth, int parent) {
  ThreadPlan& t = processes_[static_cast<size_t>(c.process)].threads[static_cast<size_t>(c.thread)];
  const bool begin_end =
      (c.mode == SliceMode::kBeginEnd || (c.mode == SliceMode::kMixed && r_.Chance(0.5))) && *c.budget >= 2;
  *c.budget -= begin_end ? 2 : 1;
  t.boundaries.push_back(start);
  t.boundaries.push_back(end);
  if (end == start) Count(F::kZeroDuration);
  if (depth >= 1) Count(F::kNestedSlices);
  if (depth >= 5) Count(F::kDepth5);
  PlannedEvent open = SliceEvent(c, begin_end ? "B" : "X", start,
                                 begin_end ? std::nullopt : std::optional<Ps>(end - start), depth);
  open.slice = next_slice_++;
  open.parent_slice = parent;
  const std::string name = open.name.value_or("");
  const bool open_now = begin_end || !c.post_order;
  if (open_now) t.events.push_back(open);
  if (depth < c.max_depth && *c.budget >= 1 && r_.Chance(0.7 - 0.08 * depth)) {
    std::optional<Ps> previous_end;
    for (const auto& [s, e] : Spans(start, end, t.grid, static_cast<int>(r_.Between(1, 3)), /*in_parent=*/true)) {
      if (*c.budget < 1) break;
      if (s == start) Count(F::kStartsWithParent);
      if (e == end) Count(F::kEndsWithParent);
      if (s == start && e == end) Count(F::kSameAsParent);
      if (previous_end && *previous_end == s) Count(F::kTouchingSiblings);
      previous_end = e;
      EmitSlice(c, s, e, depth + 1, open.slice);
    }
  }
  if (begin_end) {
    PlannedEvent close = SliceEvent(c, "E", end, std::nullopt, depth);
    close.slice = open.slice;
    close.parent_slice = parent;
    if (r_.Chance(0.3)) {
      close.name.reset();  // an E needs no name: it closes the latest B
      Count(F::kEndWithoutName);
    } else {
      close.name = name;
    }
    t.events.push_back(std::move(close));
  }
  if (!open_now) t.events.push_back(std::move(open));
}

PlannedEvent DocumentGenerator::SliceEvent(const SliceContext& c, std::string ph, Ps start, std::optional<Ps> dur,
                                           int depth) {
  PlannedEvent e(std::move(ph), c.process, c.thread);
  e.ts = start;
  e.dur = dur;
  e.depth = depth;
  e.name = Spiced(Pick(r_, kSliceNames));
  if (legacy_pure_) {
    e.args.emplace();  // the legacy profiler writes "args": {}
    return e;
  }
  if (e.ph != "E" && r_.Chance(0.7)) {
    const std::string_view cat = Pick(r_, kSliceCats);
    e.fields.push_back({"cat", Quote(cat, escape_rate_)});
    Count(F::kCat);
    if (r_.Chance(0.7)) e.args = KinetoArgs(cat);
  }
  if (e.ph == "E" && r_.Chance(0.2)) e.args = RandomArgs(2);  // viewers merge E's args into the slice
  if (e.ph == "X" && r_.Chance(0.02)) {
    e.name.reset();
    e.name_json = AnyNumber();
    Count(F::kNonStringName);
  }
  Decorate(&e);
  return e;
}

void DocumentGenerator::CountUnsortedSlices(const ThreadPlan& t) {
  std::optional<Ps> last;
  for (const auto& e : t.events) {
    if (e.ph != "X") continue;
    if (last && *e.ts < *last) {
      Count(F::kUnsortedSlices);
      return;
    }
    last = e.ts;
  }
}

// --- other events ---

void DocumentGenerator::AddOtherEvents(int budget) {
  for (int round = 0; budget > 0 && round < 4 * static_cast<int>(options_.max_events) + 8; ++round) {
    if (legacy_pure_) {
      AddFlow(&budget);  // the legacy profiler's "s" events
      continue;
    }
    switch (r_.Below(9)) {
      case 0:
      case 1:
        AddInstant(&budget);
        break;
      case 2:
        AddCounter(&budget);
        break;
      case 3:
      case 4:
        AddFlow(&budget);
        break;
      case 5:
        AddAsync(&budget);
        break;
      case 6:
        AddSample(&budget);
        break;
      case 7:
        AddObjectLifecycle(&budget);
        break;
      default:
        AddUnknown(&budget);
        break;
    }
  }
}

// Other events go anywhere in their thread's sequence: only B/E order counts,
// and it is kept among themselves.
void DocumentGenerator::Place(PlannedEvent e) {
  auto& events = processes_[static_cast<size_t>(e.process)].threads[static_cast<size_t>(e.thread)].events;
  const size_t at = r_.Chance(0.5) ? events.size() : r_.Below(events.size() + 1);
  events.insert(events.begin() + static_cast<std::ptrdiff_t>(at), std::move(e));
}

// A time in the trace, often exactly a slice's start or end on the thread;
// at or after `not_before` when given.
Ps DocumentGenerator::RandomInstant(int process, int thread, std::optional<Ps> not_before) {
  const ThreadPlan& t = processes_[static_cast<size_t>(process)].threads[static_cast<size_t>(thread)];
  Ps v;
  if (!t.boundaries.empty() && r_.Chance(0.5)) {
    v = t.boundaries[r_.Below(t.boundaries.size())];
  } else {
    static constexpr int64_t kGrids[] = {1'000, 1, 1'000'000, 100};
    const Ps grid = Pick(r_, kGrids);
    const Ps lo = -FloorDiv(-offset_ps_, grid) * grid, hi = FloorDiv(offset_ps_ + span_ps_, grid) * grid;
    // A span shorter than the grid: its start, which every span has.
    v = hi < lo ? offset_ps_ : lo + grid * r_.Below(static_cast<uint64_t>((hi - lo) / grid) + 1);
  }
  if (not_before && v < *not_before) v = *not_before;
  return v;
}

void DocumentGenerator::AddInstant(int* budget) {
  const auto [process, thread] = AnyThread(false);
  PlannedEvent e(r_.Chance(0.25) ? "I" : "i", process, thread);
  e.ts = RandomInstant(process, thread, std::nullopt);
  e.name = Spiced(Pick(r_, kInstantNames));
  Count(e.ph == "i" ? F::kPhInstant : F::kPhInstantLegacy);
  if (r_.Chance(0.85)) {
    static constexpr std::string_view kScopes[] = {"t", "p", "g"};
    const size_t s = r_.Below(3);
    e.fields.push_back({"s", Quote(kScopes[s], escape_rate_)});
    Count(static_cast<F>(static_cast<int>(F::kInstantScopeThread) + static_cast<int>(s)));
  }
  if (r_.Chance(0.5)) e.fields.push_back({"cat", Quote("cpu_instant_event", escape_rate_)});
  if (r_.Chance(0.4)) e.args = RandomArgs(3);
  Decorate(&e);
  Place(std::move(e));
  *budget -= 1;
}

void DocumentGenerator::AddCounter(int* budget) {
  const auto [process, thread] = AnyThread(false);
  PlannedEvent e("C", process, thread);
  e.ts = RandomInstant(process, thread, std::nullopt);
  e.name = Spiced(Pick(r_, kCounterNames));
  e.args.emplace();
  const int series = static_cast<int>(r_.Between(1, 3));
  static constexpr std::string_view kSeries[] = {"allocated", "reserved", "value", "\xc3\xa9t\xc3\xa9"};
  for (int i = 0; i < series; ++i) {
    e.args->push_back(
        {std::string(Pick(r_, kSeries)), r_.Chance(0.5) ? SmallInt(0, int64_t{1} << 40) : AnyNumber()});
  }
  Count(F::kCounterArgs);
  if (r_.Chance(0.2)) e.fields.push_back({"id", SmallInt(0, 9)});
  if (r_.Chance(0.5)) e.fields.push_back({"cat", Quote("gpu_memory", escape_rate_)});
  Count(F::kPhC);
  Decorate(&e);
  Place(std::move(e));
  *budget -= 1;
}

// s, t..., f with one id: Kineto's ac2g launch -> kernel links, the legacy
// profiler's cpu_to_cuda.
void DocumentGenerator::AddFlow(int* budget) {
  const bool legacy = legacy_pure_ || trace_.flavour == ChromeFlavour::kLegacyArray;
  const int steps = *budget >= 3 && !legacy_pure_ ? static_cast<int>(r_.Between(0, std::min(2, *budget - 2))) : 0;
  const bool with_end = !legacy_pure_ && *budget >= 2;
  const std::string id = r_.Chance(0.7) ? SmallInt(0, 1 << 20) : Quote("0x" + std::to_string(r_.Below(4096)), 0);
  const std::string cat = legacy ? "cpu_to_cuda" : r_.Chance(0.7) ? "ac2g" : "flow";
  const std::string name = legacy_pure_ ? std::string(Pick(r_, kSliceNames)) : cat;
  std::optional<Ps> last;
  const int n = 1 + steps + (with_end ? 1 : 0);
  for (int i = 0; i < n; ++i) {
    const auto [process, thread] = AnyThread(legacy_pure_);
    const bool end = with_end && i == n - 1;
    PlannedEvent e(i == 0 ? "s" : end ? "f" : "t", process, thread);
    e.ts = RandomInstant(process, thread, last);
    last = e.ts;
    e.name = name;
    e.fields.push_back({"id", id});
    e.fields.push_back({"cat", Quote(cat, escape_rate_)});
    if (end && r_.Chance(0.6)) {
      e.fields.push_back({"bp", Quote("e", escape_rate_)});
      Count(F::kFlowBindEnclosing);
    }
    if (legacy_pure_) e.args.emplace();
    Count(i == 0 ? F::kPhFlowStart : end ? F::kPhFlowEnd : F::kPhFlowStep);
    Decorate(&e);
    Place(std::move(e));
  }
  *budget -= n;
}

// b, n..., e sharing cat, name, id (or id2) and scope.
void DocumentGenerator::AddAsync(int* budget) {
  if (*budget < 2) return AddInstant(budget);
  const int steps = static_cast<int>(r_.Between(0, std::min(2, *budget - 2)));
  std::vector<Member> shared;
  shared.push_back({"cat", Quote("async", escape_rate_)});
  switch (r_.Below(3)) {
    case 0:
      shared.push_back({"id", r_.Chance(0.5) ? SmallInt(0, 1 << 20) : Quote("0x1f", escape_rate_)});
      Count(F::kAsyncId);
      break;
    case 1:
      shared.push_back({"id2", Object({{"local", Quote("0x" + std::to_string(r_.Below(4096)), 0)}}, 0)});
      Count(F::kAsyncId2Local);
      Count(F::kId2);
      break;
    default:
      shared.push_back({"id2", Object({{"global", SmallInt(0, 1 << 30)}}, 0)});
      Count(F::kAsyncId2Global);
      Count(F::kId2);
      break;
  }
  if (r_.Chance(0.5)) {
    shared.push_back({"scope", Quote(Spiced("io"), escape_rate_)});
    Count(F::kAsyncScope);
    Count(F::kScope);
  }
  const std::string name = Spiced("load");
  std::optional<Ps> last;
  const int n = steps + 2;
  for (int i = 0; i < n; ++i) {
    const auto [process, thread] = AnyThread(false);
    PlannedEvent e(i == 0 ? "b" : i == n - 1 ? "e" : "n", process, thread);
    e.ts = RandomInstant(process, thread, last);
    last = e.ts;
    e.name = name;
    e.fields = shared;
    if (r_.Chance(0.3)) e.args = RandomArgs(2);
    Count(i == 0 ? F::kPhAsyncBegin : i == n - 1 ? F::kPhAsyncEnd : F::kPhAsyncInstant);
    Decorate(&e);
    Place(std::move(e));
  }
  *budget -= n;
}

void DocumentGenerator::AddSample(int* budget) {
  const auto [process, thread] = AnyThread(false);
  PlannedEvent e("P", process, thread);
  e.ts = RandomInstant(process, thread, std::nullopt);
  e.name = "sample";
  if (r_.Chance(0.5)) {
    e.fields.push_back({"sf", r_.Chance(0.7) ? SmallInt(1, 3) : Quote("2", escape_rate_)});
    Count(F::kSf);
  } else {
    e.fields.push_back({"stack", Array({Quote("main", escape_rate_), Quote(Spiced("f"), escape_rate_)})});
    Count(F::kStack);
  }
  if (r_.Chance(0.3)) e.fields.push_back({"weight", SmallInt(1, 10)});
  Count(F::kPhSample);
  Decorate(&e);
  Place(std::move(e));
  *budget -= 1;
}

// N, O..., D of one object id.
void DocumentGenerator::AddObjectLifecycle(int* budget) {
  if (*budget < 2) return AddSample(budget);
  const int snapshots = static_cast<int>(r_.Between(0, std::min(2, *budget - 2)));
  const std::string id = Quote("0x" + std::to_string(4096 + r_.Below(4096)), 0);
  const std::string name = Spiced("cc::LayerImpl");
  std::optional<Ps> last;
  const int n = snapshots + 2;
  for (int i = 0; i < n; ++i) {
    const auto [process, thread] = AnyThread(false);
    PlannedEvent e(i == 0 ? "N" : i == n - 1 ? "D" : "O", process, thread);
    e.ts = RandomInstant(process, thread, last);
    last = e.ts;
    e.name = name;
    e.fields.push_back({"id", id});
    if (e.ph == "O") {
      e.args = std::vector<Member>{{"snapshot", Object({{"layer", SmallInt(0, 9)}, {"bounds", AnyValue(2)}}, 0)}};
    }
    Count(i == 0 ? F::kPhObjectNew : i == n - 1 ? F::kPhObjectDelete : F::kPhObjectSnapshot);
    Decorate(&e);
    Place(std::move(e));
  }
  *budget -= n;
}

void DocumentGenerator::AddUnknown(int* budget) {
  const auto [process, thread] = AnyThread(false);
  PlannedEvent e(std::string(r_.Chance(0.5) ? "Z" : Pick(r_, kUnknownPhs)), process, thread);
  e.ts = RandomInstant(process, thread, std::nullopt);
  e.name = Spiced("future kind");
  if (r_.Chance(0.5)) e.args = RandomArgs(3);
  if (r_.Chance(0.3)) e.dur = RandomInstant(process, thread, e.ts) - *e.ts;
  Count(F::kPhUnknown);
  Decorate(&e);
  Place(std::move(e));
  *budget -= 1;
}

// Process and thread metadata, Kineto's kinds; their ts (Kineto writes one)
// is no time, so now and then it is one no time could be.
void DocumentGenerator::AddMetadata(int budget) {
  if (legacy_pure_) return;
  for (size_t p = 0; p < processes_.size() && budget > 0; ++p) {
    const int process = static_cast<int>(p);
    // Kineto writes process metadata with tid 0; without a tid is as good.
    auto process_thread = [&] { return r_.Chance(0.4) ? processes_[p].no_tid_thread : TidThread(process); };
    if (r_.Chance(0.7) && budget-- > 0) {
      MetadataEvent("process_name", process, process_thread(),
                    {{"name", Quote(Spiced(Pick(r_, kPlainStrings)), escape_rate_)}});
      Count(F::kProcessName);
    }
    if (r_.Chance(0.3) && budget-- > 0) {
      MetadataEvent("process_labels", process, process_thread(), {{"labels", Quote(Spiced("CPU"), escape_rate_)}});
      Count(F::kProcessLabels);
    }
    if (r_.Chance(0.4) && budget-- > 0) {
      MetadataEvent("process_sort_index", process, process_thread(), {{"sort_index", SmallInt(-5, 1 << 29)}});
      Count(F::kProcessSortIndex);
    }
    for (int t = 0; t < processes_[p].tid_threads && budget > 0; ++t) {
      if (r_.Chance(0.6) && budget-- > 0) {
        MetadataEvent("thread_name", process, t, {{"name", Quote(Spiced(Pick(r_, kPlainStrings)), escape_rate_)}});
        Count(F::kThreadName);
      }
      if (r_.Chance(0.4) && budget-- > 0) {
        MetadataEvent("thread_sort_index", process, t, {{"sort_index", SmallInt(0, 1 << 20)}});
        Count(F::kThreadSortIndex);
      }
    }
  }
}

void DocumentGenerator::MetadataEvent(std::string name, int process, int thread, std::vector<Member> args) {
  PlannedEvent e("M", process, thread);
  e.name = std::move(name);
  e.args = std::move(args);
  Count(F::kPhM);
  if (r_.Chance(trace_.flavour == ChromeFlavour::kKinetoBase ? 0.8 : 0.3)) {
    Count(F::kMetadataTs);
    static constexpr std::string_view kNoTimes[] = {"1e300", "-99999999999999999999999",
                                                    "99999999999999999999999e9"};
    if (r_.Chance(0.1)) {
      e.metadata_ts = Pick(r_, kNoTimes);
      Count(F::kMetadataTsNotATime);
    } else {
      e.metadata_ts = SpellTime(offset_ps_, false).text;
    }
  }
  if (options_.duplicate_metadata_names && r_.Chance(0.05) && e.args && !e.args->empty()) {
    // The same arg twice: JSON's last one is what a viewer shows.
    e.args->insert(e.args->begin(), {e.args->front().key, Quote(Spiced("earlier"), escape_rate_)});
    Count(F::kDuplicateArgKeys);
  }
  if (metadata_first_mode_) {
    metadata_first_.push_back(std::move(e));
  } else {
    Place(std::move(e));
  }
}

// Optional keys real producers add: cname, thread times, stack frames,
// id2/scope, unknown keys, a non-string cat, and more args.
void DocumentGenerator::Decorate(PlannedEvent* e) {
  if (r_.Chance(decoration_rate_)) {
    static constexpr std::string_view kColours[] = {"good", "bad", "terrible", "thread_state_running",
                                                    "generic_work"};
    e->fields.push_back({"cname", Quote(Pick(r_, kColours), escape_rate_)});
    Count(F::kCname);
  }
  if (r_.Chance(decoration_rate_)) {
    e->fields.push_back({"tts", SpellTime(static_cast<Ps>(r_.Below(uint64_t{1} << 40)), true).text});
    Count(F::kTts);
    if (e->ph == "X") {
      e->fields.push_back({"tdur", SpellTime(static_cast<Ps>(r_.Below(uint64_t{1} << 30)), true).text});
      Count(F::kTdur);
    }
  }
  if (r_.Chance(decoration_rate_ / 2)) {
    e->fields.push_back({"sf", r_.Chance(0.5) ? SmallInt(1, 3) : Quote("2", escape_rate_)});
    Count(F::kSf);
  }
  if (r_.Chance(decoration_rate_ / 2)) {
    e->fields.push_back({"stack", Array({Quote("0x7f00", 0), Quote(Spiced("main"), escape_rate_)})});
    Count(F::kStack);
  }
  if (r_.Chance(decoration_rate_ / 4)) {
    e->fields.push_back({"id2", Object({{"global", Quote("0xabc", 0)}}, key_escape_rate_)});
    e->fields.push_back({"scope", Quote(Spiced("scope"), escape_rate_)});
    Count(F::kId2);
    Count(F::kScope);
  }
  if (r_.Chance(decoration_rate_ / 2)) {
    e->fields.push_back({Spiced("unknown_key"), Object({{"x", AnyValue(2)}, {"y", "null"}}, key_escape_rate_)});
    Count(F::kUnknownKeyObject);
  }
  if (r_.Chance(decoration_rate_ / 8)) {
    e->fields.push_back({"cat", AnyValue(1)});  // the last cat wins; a viewer may ignore a non-string one
    Count(F::kNonStringCat);
  }
  if (e->ph != "C" && r_.Chance(decoration_rate_)) {  // a counter's args stay numbers
    if (!e->args) e->args.emplace();
    for (auto& m : RandomArgs(4)) e->args->push_back(std::move(m));
  }
  if (!used_max_nesting_ && e->ph != "C" && r_.Chance(0.003)) {
    // One value exactly as deep as the reader allows: 64 levels, counting
    // the document's own containers and the args object.
    used_max_nesting_ = true;
    if (!e->args) e->args.emplace();
    e->args->push_back({"deep", Nested(trace_.object_form ? 60 : 61)});
    Count(F::kMaxNesting);
  }
}

std::vector<Member> DocumentGenerator::KinetoArgs(std::string_view cat) {
  Count(F::kKinetoArgs);
  const std::string external_id = SmallInt(0, 1 << 20);
  if (cat == "cpu_op") {
    if (r_.Chance(0.2)) {  // a collective (PyTorch's saveNcclMeta keys)
      return {{"External id", external_id},
              {"Collective name", Quote("allreduce", escape_rate_)},
              {"dtype", Quote("Float", 0)},
              {"In msg nelems", SmallInt(1, 1 << 24)},
              {"Out msg nelems", SmallInt(1, 1 << 24)},
              {"Group size", SmallInt(1, 64)},
              {"In split size", Quote("[]", 0)},
              {"Out split size", Quote("[]", 0)},
              {"Global rank start", "0"},
              {"Global rank stride", "1"},
              {"Process Group Name", Quote("0", 0)},
              {"Process Group Description", Quote("default_pg", 0)},
              {"Process Group Ranks", Quote("[0, 1, 2, 3]", 0)},
              {"Rank", SmallInt(0, 3)},
              {"Seq", SmallInt(0, 1000)},
              {"Comms Id", SmallInt(0, int64_t{1} << 62)},
              {"Is asynchronized op", r_.Chance(0.5) ? "true" : "false"}};
    }
    return {{"External id", external_id},
            {"Record function id", "0"},
            {"Ev Idx", SmallInt(0, 999)},
            {"Input Dims", Array({Array({"2", "3"}), Array({"2", "3"}), Array({})})},
            {"Input type", Array({Quote("float", 0), Quote("float", 0), Quote("Scalar", 0)})},
            {"Input Strides", Array({Array({"3", "1"}), Array({})})},
            {"Concrete Inputs", Array({Quote("", 0), Quote("1", 0)})},
            {"Fwd thread id", "0"},
            {"Sequence number", SmallInt(-1, 999)}};
  }
  if (cat == "cuda_runtime")
    return {{"External id", external_id}, {"cbid", "211"}, {"correlation", SmallInt(1, 1 << 20)}};
  if (cat == "kernel" || cat == "gpu_memcpy") {
    return {{"External id", external_id},
            {"queued", "0"},
            {"device", SmallInt(0, 7)},
            {"context", "1"},
            {"stream", SmallInt(0, 64)},
            {"correlation", SmallInt(1, 1 << 20)},
            {"registers per thread", SmallInt(8, 255)},
            {"shared memory", "0"},
            {"blocks per SM", "0.0"},
            {"warps per SM", r_.Chance(0.5) ? "0.0" : "12.5"},
            {"grid", Array({"4", "1", "1"})},
            {"block", Array({"640", "1", "1"})},
            {"est. achieved occupancy %", "0"}};
  }
  if (cat == "python_function") {
    return {{"Python parent id", SmallInt(0, 999)}, {"Python id", SmallInt(0, 999)}, {"Python thread", "0"}};
  }
  return {{"External id", external_id}};
}

std::vector<Member> DocumentGenerator::RandomArgs(int max_members) {
  std::vector<Member> args;
  const int n = static_cast<int>(r_.Between(0, max_members));
  for (int i = 0; i < n; ++i) args.push_back({Spiced(Pick(r_, kArgKeys)), AnyValue(3)});
  if (n > 0 && r_.Chance(duplicate_rate_)) {
    args.push_back({args.front().key, AnyValue(1)});
    Count(F::kDuplicateArgKeys);
  }
  return args;
}

// --- the text ---

// Threads' sequences merged into one file order (each thread's order
// kept): interleaved at random, or thread after thread.
std::vector<PlannedEvent*> DocumentGenerator::FileOrder() {
  std::vector<PlannedEvent*> order;
  for (auto& e : metadata_first_) order.push_back(&e);
  std::vector<std::pair<ThreadPlan*, size_t>> cursors;
  for (auto& p : processes_) {
    for (auto& t : p.threads) {
      if (!t.events.empty()) cursors.emplace_back(&t, 0);
    }
  }
  const bool sequential = r_.Chance(0.3);
  while (!cursors.empty()) {
    const size_t i = sequential ? 0 : r_.Below(cursors.size());
    auto& [thread, next] = cursors[i];
    order.push_back(&thread->events[next++]);
    if (next == thread->events.size()) cursors.erase(cursors.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return order;
}

std::string DocumentGenerator::EventText(const PlannedEvent& e, GeneratedEvent* out) {
  ProcessPlan& p = processes_[static_cast<size_t>(e.process)];
  ThreadPlan& t = p.threads[static_cast<size_t>(e.thread)];
  out->ph = e.ph;
  out->name = e.name;
  out->depth = e.depth;
  out->slice = e.slice;
  out->parent_slice = e.parent_slice;
  out->pid_json = IdText(&p.pid, true);
  out->tid_json = IdText(&t.tid, false);
  if (e.ph == "X") Count(F::kPhX);
  if (e.ph == "B") Count(F::kPhB);
  if (e.ph == "E") Count(F::kPhE);

  // Members in Kineto's order; reordered below.
  std::vector<Member> m;
  m.push_back({"ph", Quote(e.ph, escape_rate_)});
  if (e.name) m.push_back({"name", Quote(*e.name, escape_rate_)});
  if (!e.name_json.empty()) m.push_back({"name", e.name_json});
  m.push_back({"pid", out->pid_json});
  if (!out->tid_json.empty()) m.push_back({"tid", out->tid_json});
  if (e.ts) {
    const SpelledTime ts = SpellTime(*e.ts, false);
    m.push_back({"ts", ts.text});
    out->has_ts = out->timed = true;
    out->ts_ns = static_cast<int64_t>(FloorDiv(*e.ts, 1000));
    out->ts_ps = static_cast<int32_t>(*e.ts - FloorDiv(*e.ts, 1000) * 1000);
    out->sub_ps_digits = ts.sub_ps;
  } else if (!e.metadata_ts.empty()) {
    m.push_back({"ts", e.metadata_ts});
    out->has_ts = true;
  }
  if (e.dur) {
    const SpelledTime dur = SpellTime(*e.dur, true);
    m.push_back({"dur", dur.text});
    out->has_dur = true;
    out->dur_ps = static_cast<int64_t>(*e.dur);
    out->sub_ps_digits = out->sub_ps_digits || dur.sub_ps;
  }
  for (const auto& f : e.fields) m.push_back(f);
  if (e.args) m.push_back({"args", Object(*e.args, key_escape_rate_)});
  if (e.args && e.args->empty()) Count(F::kEmptyArgs);

  if (key_order_ == KeyOrder::kLegacy) {
    // name, ph, ts, dur, tid, pid, then the rest (export_chrome_trace's order)
    static const std::vector<std::string> kOrder = {"name", "ph", "ts", "dur", "tid", "pid"};
    std::stable_sort(m.begin(), m.end(), [](const Member& a, const Member& b) {
      auto rank = [](const std::string& k) { return std::find(kOrder.begin(), kOrder.end(), k) - kOrder.begin(); };
      return rank(a.key) < rank(b.key);
    });
  } else if (key_order_ == KeyOrder::kShuffled) {
    for (size_t i = m.size(); i > 1; --i) std::swap(m[i - 1], m[r_.Below(i)]);
  }
  // A key written twice: JSON's last one wins, for the reader as for
  // viewers; but of two args objects the reader keeps every member (docs/
  // chrome-trace.md), so a counter's, which must stay numbers, has one.
  if (r_.Chance(duplicate_rate_)) {
    const size_t which = r_.Below(m.size());
    if (m[which].key == "args" && e.ph == "C") {
      // no second args object
    } else if (m[which].key == "args") {
      m.insert(m.begin() + static_cast<std::ptrdiff_t>(r_.Below(which + 1)),
               {"args", Object(RandomArgs(2), key_escape_rate_)});
      Count(F::kDuplicateArgsObjects);
    } else {
      m.insert(m.begin() + static_cast<std::ptrdiff_t>(r_.Below(which + 1)), {m[which].key, AnyValue(1)});
      Count(F::kDuplicateEventKeys);
    }
  }
  return Object(m, key_escape_rate_);
}

// The object form: Kineto's keys (or a tool's), keys of every JSON type,
// traceEvents anywhere among them, the base before or after it.
std::string DocumentGenerator::TopLevel(const std::string& events_array) {
  std::vector<Member> top;
  if (trace_.flavour == ChromeFlavour::kKinetoBase) {
    top.push_back({"schemaVersion", "1"});
    top.push_back({"deviceProperties", Array({Object({{"id", "0"},
                                                      {"name", Quote("NVIDIA H100", 0)},
                                                      {"totalGlobalMem", "85031714816"},
                                                      {"computeMajor", "9"},
                                                      {"clockRate", "1.98e6"}},
                                                     key_escape_rate_)})});
    top.push_back({"distributedInfo", Object({{"backend", Quote("nccl", 0)},
                                              {"rank", "1"},
                                              {"world_size", "4"},
                                              {"pg_count", "1"},
                                              {"pg_config", Array({Object({{"pg_name", Quote("0", 0)},
                                                                           {"pg_desc", Quote("default_pg", 0)},
                                                                           {"pg_size", "4"},
                                                                           {"ranks", Array({"0", "1", "2", "3"})}},
                                                                          key_escape_rate_)})},
                                              {"nccl_version", Quote("2.21.5", 0)}},
                                             key_escape_rate_)});
    top.push_back({"record_shapes", "1"});
    top.push_back({"with_stack", "false"});
    top.push_back({"cuda_runtime_version", r_.Chance(0.5) ? "null" : "12040"});
    top.push_back({"displayTimeUnit", Quote(r_.Chance(0.8) ? "ms" : "ns", 0)});
  } else if (r_.Chance(0.5)) {
    top.push_back({"displayTimeUnit", Quote("ns", 0)});
    top.push_back({"otherData", Object({{"version", Quote(Spiced("My Application v1.0"), escape_rate_)}}, 0)});
  }
  if (r_.Chance(0.2)) {
    top.push_back(
        {"stackFrames",
         Object(
             {{"1", Object({{"category", Quote("python", 0)}, {"name", Quote("main", 0)}}, 0)},
              {"2",
               Object({{"category", Quote("python", 0)}, {"name", Quote("f", 0)}, {"parent", Quote("1", 0)}}, 0)}},
             key_escape_rate_)});
    Count(F::kStackFrames);
  }
  const int extra = static_cast<int>(r_.Between(0, 4));
  static constexpr std::string_view kTopKeys[] = {"metadata",
                                                  "samples",
                                                  "controllerTraceDataKey",
                                                  "x_custom",
                                                  "\xc3\xa9l\xc3\xa9ment" /* élément */,
                                                  "unicode \xe2\x9c\x93",
                                                  "",
                                                  "traceName"};
  for (int i = 0; i < extra; ++i) top.push_back({Spiced(Pick(r_, kTopKeys)), TopValue()});
  if (!top.empty() && r_.Chance(0.1)) {
    const Member& again = top[r_.Below(top.size())];
    top.push_back({again.key, TopValue()});
    Count(F::kTopDuplicateKeys);
  }
  if (!used_max_nesting_ && r_.Chance(0.01)) {
    used_max_nesting_ = true;
    top.push_back({"deep", Nested(63)});  // 64 levels with the document's object
    Count(F::kMaxNesting);
  }
  std::vector<Member> members = top;
  size_t events_at = r_.Below(members.size() + 1);
  members.insert(members.begin() + static_cast<std::ptrdiff_t>(events_at), {"traceEvents", events_array});
  if (trace_.base_ns) {
    const bool after = r_.Chance(0.2);
    const size_t at = after ? events_at + 1 + r_.Below(members.size() - events_at) : r_.Below(events_at + 1);
    members.insert(members.begin() + static_cast<std::ptrdiff_t>(at),
                   {"baseTimeNanoseconds", std::to_string(*trace_.base_ns)});
    if (after) Count(F::kBaseAfterEvents);
  }
  return Object(members, key_escape_rate_);
}

std::string DocumentGenerator::TopValue() {
  switch (r_.Below(7)) {
    case 0:
      Count(F::kTopString);
      return Quote(Spiced("/tmp/rank1.pt.trace.json"), escape_rate_);
    case 1:
      Count(F::kTopInteger);
      return r_.Chance(0.3) ? std::string(Pick(r_, kHugeIntegers)) : SmallInt(-9, 99);
    case 2:
      Count(F::kTopFloat);
      return std::string(Pick(r_, kOddFloats));
    case 3:
      Count(F::kTopBool);
      return r_.Chance(0.5) ? "true" : "false";
    case 4:
      Count(F::kTopNull);
      return "null";
    case 5:
      Count(F::kTopArray);
      return Array({AnyValue(2), AnyValue(2)});
    default:
      Count(F::kTopObject);
      return Object({{"k", AnyValue(3)}, {Spiced("v"), AnyValue(2)}}, key_escape_rate_);
  }
}

// `value` ps as decimal µs, spelled one of the ways JSON allows. The reader
// gets `value` back exactly: sub-ps digits are noise that its rounding
// removes.
SpelledTime DocumentGenerator::SpellTime(Ps value, bool duration) {
  Ps fs = value * 1000;  // 9 fractional digits of a µs
  bool sub_ps = false;
  if (r_.Chance(time_style_.sub_ps_rate)) {
    fs += SubPsNoise(value, duration);
    sub_ps = true;
    Count(F::kSubPsDigits);
  }
  Decimal d = Normalised({fs < 0, static_cast<U128>(fs < 0 ? -fs : fs), 9});
  if (fs == 0 && r_.Chance(time_style_.negative_zero_rate)) {
    d.negative = true;
    Count(F::kNegativeZero);
  }
  Spelling s;
  if (time_style_.kineto_three && !sub_ps && d.scale <= 3 && !r_.Chance(0.05)) {
    s.extra_zeros = 3 - d.scale;  // "{}.{:03}"
    Count(F::kKinetoThreeDecimals);
  } else {
    s = RandomSpelling(r_, d, time_style_.exponent_rate, time_style_.zeros_rate);
  }
  if (!duration && value < 0) Count(F::kNegativeTs);
  if (s.exponent) Count(F::kExponentTimes);
  if (s.extra_zeros > 0) Count(F::kTrailingZeros);
  if (!sub_ps && d.scale == 0 && s.extra_zeros == 0 && !s.exponent) Count(F::kIntegerTimes);
  if (!sub_ps && d.scale >= 1 && d.scale <= 6) {
    Count(static_cast<F>(static_cast<int>(F::kFractionDigits1) + d.scale - 1));
  }
  if (!duration && !sub_ps && d.scale == 6 && trace_.time_origin == ChromeTimeOrigin::kEpoch) {
    Count(F::kAbsoluteSixDecimals);
  }
  return {Spell(d, s), sub_ps};
}

// Noise below a picosecond, in fs, that the reader's rounding (to the
// nearest ps, halves away from zero) takes back to `value`: less than half
// a ps either way, or exactly half a ps towards zero, which rounds away.
int64_t DocumentGenerator::SubPsNoise(Ps value, bool duration) {
  if (value != 0 && r_.Chance(0.2)) {
    Count(F::kSubPsHalves);
    return value > 0 ? -500 : 500;
  }
  static constexpr int64_t kUnits[] = {1, 10, 100};  // 9, 8 or 7 fractional digits
  const int64_t unit = Pick(r_, kUnits);
  const int64_t lo = duration && value == 0 ? 1 : -(499 / unit);  // a duration stays >= 0
  const int64_t k = r_.Between(lo, 499 / unit);
  return (k == 0 ? 1 : k) * unit;
}

std::string DocumentGenerator::GapText(Gap at) {
  switch (ws_) {
    case WsStyle::kCompact:
      return "";
    case WsStyle::kSpaced:
      return at == Gap::kAfterSeparator ? " " : "";
    case WsStyle::kPretty:
      return at == Gap::kBeforeSeparator ? "" : "\n  ";
    case WsStyle::kRandom:
      break;
  }
  static constexpr char kWhitespace[] = {' ', '\t', '\n', '\r'};
  std::string gap;
  const int n = r_.Chance(0.5) ? 0 : static_cast<int>(r_.Between(1, 3));
  for (int i = 0; i < n; ++i) gap.push_back(Pick(r_, kWhitespace));
  return gap;
}

// `s` (UTF-8) as a JSON string: what must be escaped is, and at
// `escape_rate` what may be (\/, \u00e9, surrogate pairs) is too.
std::string DocumentGenerator::Quote(std::string_view s, double escape_rate) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto [cp, len] = DecodeUtf8(s, i);
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
      Count(cp == '"' ? F::kEscapeQuote : F::kEscapeBackslash);
    } else if (cp < 0x20) {
      static constexpr std::pair<uint32_t, char> kShort[] = {
          {'\b', 'b'}, {'\f', 'f'}, {'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}};
      const auto it = std::find_if(std::begin(kShort), std::end(kShort), [&](auto p) { return p.first == cp; });
      if (it != std::end(kShort) && r_.Chance(0.7)) {
        out += '\\';
        out += it->second;
        Count(static_cast<F>(static_cast<int>(F::kEscapeBackspace) + (it - std::begin(kShort))));
      } else {
        const bool upper = r_.Chance(0.3);
        AppendUnicodeEscape(cp, upper, &out);
        Count(cp == 0 ? F::kEscapeNul : F::kEscapeControl);
        if (upper && (cp & 0xf) >= 0xa) Count(F::kEscapeUpperHex);
      }
    } else if (escape_rate > 0 && r_.Chance(escape_rate)) {
      const bool upper = r_.Chance(0.3);
      if (cp == '/' && r_.Chance(0.5)) {
        out += "\\/";
        Count(F::kEscapeSlash);
      } else if (cp < 0x10000) {
        AppendUnicodeEscape(cp, upper, &out);
        if (cp >= 0x80) Count(F::kEscapeUnicode);
        if (upper) Count(F::kEscapeUpperHex);
      } else {
        const uint32_t v = cp - 0x10000;
        AppendUnicodeEscape(0xd800 + (v >> 10), upper, &out);
        AppendUnicodeEscape(0xdc00 + (v & 0x3ff), upper, &out);
        Count(F::kEscapeSurrogatePair);
      }
    } else {
      out.append(s, i, static_cast<size_t>(len));
      if (len > 1) Count(F::kRawUtf8);
      if (len == 4) Count(F::kRawUtf8FourByte);
      if (cp == 0x7f) Count(F::kRawDelete);
    }
    i += static_cast<size_t>(len);
  }
  return out + "\"";
}

// `base` with, now and then, characters of kSpice inserted between its
// code points.
std::string DocumentGenerator::Spiced(std::string_view base) {
  std::string s(base);
  if (!r_.Chance(spice_rate_)) return s;
  const int n = static_cast<int>(r_.Between(1, 4));
  for (int i = 0; i < n; ++i) {
    size_t at = r_.Below(s.size() + 1);
    while (at < s.size() && (static_cast<uint8_t>(s[at]) & 0xc0) == 0x80) ++at;  // not inside a code point
    s.insert(at, Pick(r_, kSpice));
  }
  return s;
}

std::string DocumentGenerator::Object(const std::vector<Member>& members, double key_escape_rate) {
  std::string out = "{";
  for (size_t i = 0; i < members.size(); ++i) {
    out += GapText(i == 0 ? Gap::kInside : Gap::kAfterSeparator);
    out += Quote(members[i].key, key_escape_rate);
    out += GapText(Gap::kBeforeSeparator);
    out += ':';
    out += GapText(Gap::kAfterSeparator);
    out += members[i].value;
    out += GapText(i + 1 == members.size() ? Gap::kInside : Gap::kBeforeSeparator);
    if (i + 1 < members.size()) out += ',';
  }
  return out + "}";
}

std::string DocumentGenerator::Array(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    out += GapText(i == 0 ? Gap::kInside : Gap::kAfterSeparator);
    out += values[i];
    out += GapText(i + 1 == values.size() ? Gap::kInside : Gap::kBeforeSeparator);
    if (i + 1 < values.size()) out += ',';
  }
  return out + "]";
}

// Any JSON value, nested at most `depth` more levels.
std::string DocumentGenerator::AnyValue(int depth) {
  switch (r_.Below(depth > 0 ? 10 : 8)) {
    case 0:
      return SmallInt(0, 100'000);
    case 1:
      return SmallInt(-100'000, -1);
    case 2:
      Count(F::kArgHugeInt);
      return std::string(Pick(r_, kHugeIntegers));
    case 3:
      return AnyNumber();
    case 4:
      Count(F::kArgString);
      return Quote(Spiced(Pick(r_, kPlainStrings)), escape_rate_);
    case 5:
      Count(F::kArgTrue);
      return "true";
    case 6:
      Count(F::kArgFalse);
      return "false";
    case 7:
      Count(F::kArgNull);
      return "null";
    case 8: {
      Count(F::kNestedArgs);
      std::vector<std::string> items(r_.Below(4));
      for (auto& v : items) v = AnyValue(depth - 1);
      return Array(items);
    }
    default: {
      Count(F::kNestedArgs);
      std::vector<Member> members(r_.Below(4));
      for (auto& m : members) m = {Spiced(Pick(r_, kArgKeys)), AnyValue(depth - 1)};
      if (!members.empty() && r_.Chance(0.2)) {
        members.push_back({members.front().key, AnyValue(0)});
        Count(F::kDuplicateArgKeys);
      }
      return Object(members, key_escape_rate_);
    }
  }
}

// A number in any spelling JSON has, within what parsers hold as a double.
std::string DocumentGenerator::AnyNumber() {
  if (r_.Chance(0.3)) {
    const std::string_view v = Pick(r_, kOddFloats);
    Count(v.find_first_of("eE") != std::string_view::npos ? F::kArgExponent : F::kArgFloat);
    return std::string(v);
  }
  Decimal d{r_.Chance(0.3), static_cast<U128>(LogUniform(r_, 0, int64_t{1} << 62)),
            static_cast<int>(r_.Between(-5, 12))};
  const Spelling s = RandomSpelling(r_, d, 0.3, 0.2);
  std::string text = Spell(d, s);
  if (s.exponent) {
    Count(F::kArgExponent);
  } else if (text.find('.') != std::string::npos) {
    Count(F::kArgFloat);
  }
  return text;
}

// A value exactly `levels` containers deep.
std::string DocumentGenerator::Nested(int levels) {
  std::string open, close;
  for (int i = 0; i < levels; ++i) {
    if (r_.Chance(0.5)) {
      open += '[';
      close.insert(0, "]");
    } else {
      open += "{\"k\":";
      close.insert(0, "}");
    }
  }
  return open + "0" + close;
}

void DocumentGenerator::CountWhitespace() {
  // Raw tabs and newlines are never inside a string: they are whitespace.
  if (ws_ == WsStyle::kCompact) Count(F::kCompactText);
  if (ws_ == WsStyle::kSpaced) Count(F::kSpacedText);
  if (trace_.text.find('\n') != std::string::npos) Count(F::kNewlines);
  if (trace_.text.find('\t') != std::string::npos) Count(F::kTabs);
  if (trace_.text.find('\r') != std::string::npos) Count(F::kCarriageReturns);
}

void CheckOptions(const ChromeGenOptions& o) {
  if (o.start_ns < 100'000'000'000'000'000 || o.start_ns > 4'000'000'000'000'000'000) {
    throw std::invalid_argument("ChromeGenOptions::start_ns must lie in [1e17, 4e18]");
  }
  if (o.span_ns < 1 || o.span_ns > 10'000'000'000'000) {
    throw std::invalid_argument("ChromeGenOptions::span_ns must lie in [1, 1e13]");
  }
  if (o.max_events < 1 || o.max_events > 10'000'000) {
    throw std::invalid_argument("ChromeGenOptions::max_events must lie in [1, 1e7]");
  }
}

}  // namespace

GeneratedChromeTrace GenerateChromeTrace(GeneratorRandom& random, const ChromeGenOptions& options) {
  CheckOptions(options);
  DocumentGenerator generator(random, options);
  return generator.Generate();
}

}  // namespace chronolink::trace::testing
