# Precompiled headers for the product's libraries and programs. Most of
# their sources parse nlohmann-json and spdlog (with fmt) and the same
# standard headers: 35-45 % of a library file's compile time, and CI builds
# the libraries three times from scratch (natively, for arm64, and
# sanitized for the fuzz stage). Two holders precompile them once each: one
# -fPIC for the libraries, one -fPIE for the executables, since gcc ignores
# (silently) a header precompiled with other code generation flags. The
# unit tests have their own (tests/CMakeLists.txt), with gtest.
option(CHRONOLINK_PCH "Precompiled headers for the libraries and programs" ON)

set(CHRONOLINK_PCH_HEADERS <nlohmann/json.hpp> <spdlog/spdlog.h>
  <algorithm> <chrono> <cstdint> <cstring> <functional> <map> <memory> <mutex> <optional> <set> <string>
  <string_view> <thread> <unordered_map> <vector>)

if(CHRONOLINK_PCH)
  foreach(kind pic pie)
    add_library(chronolink_pch_${kind} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch/pch_holder.cc)
    target_link_libraries(chronolink_pch_${kind} PRIVATE spdlog::spdlog nlohmann_json::nlohmann_json)
    target_precompile_headers(chronolink_pch_${kind} PRIVATE ${CHRONOLINK_PCH_HEADERS})
  endforeach()
  # An object library is compiled -fPIC; executables -fPIE.
  set_target_properties(chronolink_pch_pie PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(chronolink_pch_pie PRIVATE -fPIE)
endif()

# Gives `target` (a library or an executable of C++ sources) the precompiled
# headers of its kind. It is compiled as the holder is, spdlog's definitions
# included (gcc ignores the header where they differ), so it links spdlog
# and nlohmann-json as the holders do.
function(chronolink_use_pch target)
  if(NOT CHRONOLINK_PCH)
    return()
  endif()
  target_link_libraries(${target} PRIVATE spdlog::spdlog nlohmann_json::nlohmann_json)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_precompile_headers(${target} REUSE_FROM chronolink_pch_pie)
  else()
    target_precompile_headers(${target} REUSE_FROM chronolink_pch_pic)
  endif()
endfunction()
