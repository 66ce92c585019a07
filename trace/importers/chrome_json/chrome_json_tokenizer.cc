#include "trace/importers/chrome_json/chrome_json_tokenizer.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "trace/importers/chrome_json/json_text.h"

namespace chronolink::trace {
namespace {

constexpr std::string_view kTraceEvents = "traceEvents";

// Where the value being read goes.
enum class Context : uint8_t { kTopObject, kEventsArray, kEvent, kArgs };

class ChromeSaxHandler {
 public:
  ChromeSaxHandler(ByteCursor* cursor, ChromeEventSink* sink) : cursor_(cursor), sink_(sink) {}

  // --- nlohmann SAX interface ---
  bool null() { return Json([](JsonTextBuilder* b) { b->Null(); }); }
  bool boolean(bool v) { return Json([v](JsonTextBuilder* b) { b->Boolean(v); }); }
  bool number_integer(int64_t v) {
    if (capturing_) return Captured([v](JsonTextBuilder* b) { b->Int(v); });
    JsonScalar* s = Slot();
    if (s == nullptr) return false;
    s->kind = JsonScalar::Kind::kInt;
    s->i = v;
    return AfterValue();
  }
  bool number_unsigned(uint64_t v) {
    if (capturing_) return Captured([v](JsonTextBuilder* b) { b->Uint(v); });
    JsonScalar* s = Slot();
    if (s == nullptr) return false;
    s->kind = JsonScalar::Kind::kUint;
    s->u = v;
    return AfterValue();
  }
  bool number_float(double v, const std::string& text) {
    if (capturing_) return Captured([&text](JsonTextBuilder* b) { b->NumberText(text); });
    JsonScalar* s = Slot();
    if (s == nullptr) return false;
    s->kind = JsonScalar::Kind::kDouble;
    s->d = v;
    s->text = text;
    return AfterValue();
  }
  bool string(std::string& v) {
    if (capturing_) return Captured([&v](JsonTextBuilder* b) { b->String(v); });
    JsonScalar* s = Slot();
    if (s == nullptr) return false;
    s->kind = JsonScalar::Kind::kString;
    s->text.swap(v);
    return AfterValue();
  }
  bool binary(nlohmann::json::binary_t&) { return Fail("binary values are not JSON"); }
  bool key(std::string& k) {
    if (capturing_) {
      capture_.Key(k);
      return true;
    }
    key_.swap(k);
    return true;
  }
  bool start_object(std::size_t) {
    if (!Deeper()) return false;
    if (capturing_) {
      capture_.StartObject();
      return true;
    }
    if (stack_.empty()) {
      sink_->OnForm(/*object_form=*/true);
      return Push(Context::kTopObject);
    }
    switch (stack_.back()) {
      case Context::kTopObject:
        if (key_ == kTraceEvents) return Fail("\"traceEvents\" is an object, expected an array of events");
        return StartCapture([](JsonTextBuilder* b) { b->StartObject(); });
      case Context::kEventsArray:
        event_.Reset(event_count_++, cursor_->Offset());
        in_event_ = true;
        return Push(Context::kEvent);
      case Context::kEvent:
        if (key_ == "args") {
          event_.has_args_object = true;
          return Push(Context::kArgs);
        }
        return StartCapture([](JsonTextBuilder* b) { b->StartObject(); });
      case Context::kArgs:
        return StartCapture([](JsonTextBuilder* b) { b->StartObject(); });
    }
    return Fail("internal: unknown context");
  }
  bool end_object() {
    --depth_;
    if (capturing_) return Captured([](JsonTextBuilder* b) { b->EndObject(); });
    const Context ended = stack_.back();
    stack_.pop_back();
    if (ended == Context::kTopObject && !saw_trace_events_) {
      return Fail("not a trace: the object has no \"traceEvents\" array");
    }
    if (ended != Context::kEvent) return true;
    std::string why;
    if (!sink_->OnEvent(event_, &why)) return Fail(why);
    in_event_ = false;
    return true;
  }
  bool start_array(std::size_t) {
    if (!Deeper()) return false;
    if (capturing_) {
      capture_.StartArray();
      return true;
    }
    if (stack_.empty()) {
      sink_->OnForm(/*object_form=*/false);
      saw_trace_events_ = true;
      return Push(Context::kEventsArray);
    }
    switch (stack_.back()) {
      case Context::kTopObject:
        if (key_ == kTraceEvents) {
          saw_trace_events_ = true;
          return Push(Context::kEventsArray);
        }
        return StartCapture([](JsonTextBuilder* b) { b->StartArray(); });
      case Context::kEventsArray:
        return Fail(ElementName(event_count_) + " is an array, expected an event object");
      case Context::kEvent:
      case Context::kArgs:
        return StartCapture([](JsonTextBuilder* b) { b->StartArray(); });
    }
    return Fail("internal: unknown context");
  }
  bool end_array() {
    --depth_;
    if (capturing_) return Captured([](JsonTextBuilder* b) { b->EndArray(); });
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& ex) {
    // Only the first error counts: a sink refusal also surfaces here.
    if (error_.empty()) {
      std::string what = ex.what();
      if (const auto p = what.find("] "); what.rfind("[json.exception", 0) == 0 && p != std::string::npos) {
        what.erase(0, p + 2);
      }
      error_ = "byte " + std::to_string(position) + ": " + what;
    }
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  // Booleans and null are JSON text wherever they appear.
  template <typename F>
  bool Json(F&& emit) {
    if (capturing_) return Captured(emit);
    JsonScalar* s = Slot();
    if (s == nullptr) return false;
    capture_.Clear();
    emit(&capture_);
    s->kind = JsonScalar::Kind::kJson;
    s->text.swap(capture_.MutableText());
    return AfterValue();
  }

  // The destination of a value read in the current context, or null after
  // reporting why a value is not allowed there.
  JsonScalar* Slot() {
    if (stack_.empty()) {
      Fail("not a trace: the document is a single value, expected an array of events or an "
           "object with \"traceEvents\"");
      return nullptr;
    }
    switch (stack_.back()) {
      case Context::kTopObject:
        if (key_ == kTraceEvents) {
          Fail("\"traceEvents\" is not an array");
          return nullptr;
        }
        top_value_.key.swap(key_);
        top_value_.value = JsonScalar{};
        return &top_value_.value;
      case Context::kEventsArray:
        Fail(ElementName(event_count_) + " is not an object");
        return nullptr;
      case Context::kEvent:
        return EventSlot();
      case Context::kArgs: {
        JsonMember* m = event_.AddArg();
        m->key.swap(key_);
        return &m->value;
      }
    }
    return nullptr;
  }

  JsonScalar* EventSlot() {
    if (key_ == "name") return &event_.name;
    if (key_ == "ph") return &event_.ph;
    if (key_ == "ts") return &event_.ts;
    if (key_ == "dur") return &event_.dur;
    if (key_ == "pid") return &event_.pid;
    if (key_ == "tid") return &event_.tid;
    JsonMember* m = event_.AddField();
    m->key.swap(key_);
    return &m->value;
  }

  bool AfterValue() {
    if (stack_.back() != Context::kTopObject) return true;
    std::string why;
    if (!sink_->OnTopLevel(top_value_, &why)) return Fail(why);
    return true;
  }

  template <typename F>
  bool StartCapture(F&& emit) {
    capture_slot_ = Slot();
    if (capture_slot_ == nullptr) return false;
    capture_.Clear();
    emit(&capture_);
    capturing_ = true;
    return true;
  }

  template <typename F>
  bool Captured(F&& emit) {
    emit(&capture_);
    if (capture_.Depth() > 0) return true;
    capturing_ = false;
    capture_slot_->kind = JsonScalar::Kind::kJson;
    capture_slot_->text.swap(capture_.MutableText());
    return AfterValue();
  }

  bool Push(Context c) {
    stack_.push_back(c);
    return true;
  }

  // Depth counted as in a bare array: inside the events of the object form
  // its top object does not count, so that a document written back in the
  // other form (a legacy array given a base becomes an object) reads back.
  bool Deeper() {
    ++depth_;
    const bool in_object_events =
        stack_.size() >= 2 && stack_[0] == Context::kTopObject && stack_[1] == Context::kEventsArray;
    if (depth_ - (in_object_events ? 1 : 0) <= kMaxDepth) return true;
    return Fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
  }

  static std::string ElementName(uint64_t index) {
    return "traceEvents[" + std::to_string(index) + "]";
  }

  bool Fail(const std::string& what) {
    if (error_.empty()) {
      error_ = "byte " + std::to_string(cursor_->Offset()) + ": " +
               (in_event_ ? ElementName(event_.index) + ": " : std::string()) + what;
    }
    return false;
  }

  ByteCursor* cursor_;
  ChromeEventSink* sink_;
  std::vector<Context> stack_;
  int depth_ = 0;
  std::string key_;
  PendingEvent event_;
  bool in_event_ = false;
  uint64_t event_count_ = 0;
  bool saw_trace_events_ = false;
  JsonMember top_value_;
  JsonTextBuilder capture_;
  bool capturing_ = false;
  JsonScalar* capture_slot_ = nullptr;
  std::string error_;
};

}  // namespace

std::string JsonScalar::ToJsonText() const {
  std::string out;
  switch (kind) {
    case Kind::kAbsent: return "null";
    case Kind::kInt: AppendJsonInt(i, &out); break;
    case Kind::kUint: AppendJsonUint(u, &out); break;
    case Kind::kDouble: return text;
    case Kind::kString: AppendJsonString(text, &out); break;
    case Kind::kJson: return text;
  }
  return out;
}

void PendingEvent::Reset(uint64_t new_index, uint64_t offset) {
  index = new_index;
  start_offset = offset;
  for (JsonScalar* s : {&name, &ph, &ts, &dur, &pid, &tid}) s->kind = JsonScalar::Kind::kAbsent;
  has_args_object = false;
  n_args_ = 0;
  n_fields_ = 0;
}

JsonMember* PendingEvent::Add(std::vector<JsonMember>* v, size_t* n) {
  if (*n == v->size()) v->emplace_back();
  JsonMember* m = &(*v)[(*n)++];
  m->value.kind = JsonScalar::Kind::kAbsent;
  return m;
}

bool TokenizeChromeJson(ByteCursor* cursor, ChromeEventSink* sink, std::string* error) {
  ChromeSaxHandler handler(cursor, sink);
  return SaxParseCursor(cursor, &handler, error);
}

}  // namespace chronolink::trace
