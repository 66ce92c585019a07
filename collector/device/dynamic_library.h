// A vendor library loaded at run time (libbpf-tools' compat.c: check, then
// choose): dlopen by a list of candidate names, or by the one path an
// environment variable names (odd installs, and tests of the no-library
// path), then every required symbol resolved into the caller's function
// table. Any failure is one line naming the library or the symbol that is
// missing and what to install, so a backend can pass it on unchanged.
//
// The handle is never dlclose'd: GPU runtimes register exit handlers and
// threads of their own, and unloading them under a live process is what
// crashes at exit. A loaded vendor library stays until the process ends.
// Not thread-safe; load from the owner's thread.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::collector {

// One required symbol and the function-table slot it goes into.
struct SymbolSlot {
  const char* name;
  void** slot;
};

// Casts a function-pointer field to the void** slot dlsym fills.
template <typename Fn>
void** SlotOf(Fn** field) {
  return reinterpret_cast<void**>(field);
}

struct LibrarySpec {
  std::string_view what;                // "libhsakmt (ROCm thunk)", for messages
  const char* env_override;             // "CHRONOLINK_HSAKMT_LIBRARY": when set, only this path is tried
  std::vector<const char*> candidates;  // dlopen names or paths, best first
  std::string_view install_hint;        // "apt-get install libhsakmt1"
};

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // Loads the library. False with *why naming what was tried.
  bool Open(const LibrarySpec& spec, std::string* why);

  // Resolves every symbol into its slot; false with *why naming the first
  // missing one (the slots are then all cleared).
  bool Resolve(std::initializer_list<SymbolSlot> symbols, std::string* why) const;

  // An optional symbol: nullptr when absent.
  void* Find(const char* name) const;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }  // the name or path that loaded

 private:
  void* handle_ = nullptr;
  std::string path_;
  std::string what_;
};

}  // namespace chronolink::collector
