// The agent's option table (internal to agent/config). The parsing of one
// option's value is the options library's (options/option_values.h), which
// the collector's table uses too, so that a value means the same to both.
// The option reference is docs/configuration.md; keep the two in step.
#pragma once

#include <span>

#include "options/option_values.h"

namespace chronolink::config_internal {

using options::DidYouMean;
using options::EditDistance;
using options::EnvName;
using options::FormatNsAs;
using options::Kind;
using options::kEnvPrefix;
using options::ParseJsonValue;
using options::ParseText;
using options::Payload;
using options::Spec;
using options::Trim;

inline constexpr std::string_view kConfigEnv = "CHRONOLINK_CONFIG";

// --help sections, in the order their first option appears.
inline constexpr const char* kGeneral = "General";
inline constexpr const char* kProbing = "Probing";
inline constexpr const char* kEstimation = "Estimation";
inline constexpr const char* kCapture = "Timestamp capture";
inline constexpr const char* kCluster = "Cluster";
inline constexpr const char* kTestOnly = "Test only (refused without --test-mode)";

// Every option, in --help order.
std::span<const Spec> Specs();

// The config file's nested objects ("probe", "estimation", ...).
std::span<const char* const> FileSections();

}  // namespace chronolink::config_internal
