// dlopen by candidates or an environment override, dlsym into a table.
#include "collector/device/dynamic_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace chronolink::collector {

namespace {

std::string LastDlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

}  // namespace

bool DynamicLibrary::Open(const LibrarySpec& spec, std::string* why) {
  what_ = std::string(spec.what);
  const char* override_path = spec.env_override != nullptr ? std::getenv(spec.env_override) : nullptr;
  if (override_path != nullptr && override_path[0] != '\0') {
    handle_ = dlopen(override_path, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      *why = what_ + " not loadable from " + spec.env_override + "=" + override_path + " (" + LastDlError() +
             ")";
      return false;
    }
    path_ = override_path;
    return true;
  }
  std::string first_error;
  for (const char* name : spec.candidates) {
    handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      path_ = name;
      return true;
    }
    // The first candidate's error is the one a user recognises ("cannot
    // open shared object file"); later ones are fallback paths.
    if (first_error.empty()) first_error = LastDlError();
  }
  std::string tried;
  for (const char* name : spec.candidates) tried += (tried.empty() ? "" : ", ") + std::string(name);
  *why = what_ + " not found (tried " + tried + "; " + first_error + "): " + std::string(spec.install_hint) +
         ", or set " + spec.env_override;
  return false;
}

bool DynamicLibrary::Resolve(std::initializer_list<SymbolSlot> symbols, std::string* why) const {
  if (handle_ == nullptr) {
    *why = what_ + " is not loaded";
    return false;
  }
  for (const SymbolSlot& s : symbols) {
    *s.slot = dlsym(handle_, s.name);
    if (*s.slot == nullptr) {
      *why = what_ + " (" + path_ + ") lacks " + s.name + ": too old or not the expected library";
      for (const SymbolSlot& clear : symbols) *clear.slot = nullptr;
      return false;
    }
  }
  return true;
}

void* DynamicLibrary::Find(const char* name) const {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

}  // namespace chronolink::collector
