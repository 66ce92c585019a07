// The chronolink-collect subcommands, one file each: its flags and the
// function that runs it with them, returning the exit code. The flags are
// bound to the command line in chronolink_collect.cc alone, so that CLI11 is
// compiled once.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "collector/config/collector_options.h"

namespace chronolink::collector::cli {

// A subcommand's error: "chronolink-collect <command>: <message>" on
// stderr; returns `code`, the exit code to return with.
inline int FailCommand(std::string_view command, int code, const std::string& message) {
  std::fprintf(stderr, "chronolink-collect %.*s: %s\n", static_cast<int>(command.size()), command.data(),
               message.c_str());
  return code;
}

// devices_command.cc
struct DevicesFlags {
  bool json = false;
  std::vector<std::string> settings;  // for the simulated backend
};
int RunDevices(const DevicesFlags& f);

// run_command.cc
struct RunFlags {
  OptionTexts options;
  std::string config_file;
  double duration_s = 0;
  std::string logdir = ".";
  std::string run;
  std::string append_to;
  std::string out;
  std::string truth;
  std::string status_json;
  double checkpoint_s = 30;
  double page_wait_s = 15;
  std::vector<std::string> command;
};
int RunCollect(const RunFlags& f);

// import_rocprof_command.cc
struct ImportRocprofFlags {
  std::vector<std::string> files;
  std::string host_clocks;
  std::string clock_domain = "boottime";
  std::string logdir = ".";
  std::string run;
  std::string host;
  bool allow_other_boot = false;
  bool force = false;
  double max_extrapolation_ms = 1000;
};
int RunImportRocprof(const ImportRocprofFlags& f);

// host_clocks_command.cc
struct HostClocksFlags {
  std::string out;
  double period_ms = 100;
  double duration_s = 0;
  int reads = 7;
  double max_bracket_us = 50;
  std::vector<std::string> command;
};
int RunHostClocks(const HostClocksFlags& f);

}  // namespace chronolink::collector::cli
