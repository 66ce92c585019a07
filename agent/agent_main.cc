// chronolink-agent: the node agent. Everything lives in libchronolink; this
// file only parses the configuration and runs the loop.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "agent/config/agent_config.h"
#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/file_limit.h"

int main(int argc, char** argv) {
  std::string message;
  int exit_code = 0;
  auto config = chronolink::LoadAgentConfig(argc, argv, &message, &exit_code);
  if (!config) {
    std::fprintf(exit_code == 0 ? stdout : stderr, "%s\n", message.c_str());
    return exit_code;
  }
  auto logger = spdlog::stderr_color_mt("chronolink");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [node " + std::to_string(config->node_id) +
                      "] %v");
  spdlog::set_level(spdlog::level::from_str(config->log_level));

  for (const std::string& w : config->warnings) spdlog::warn("{}", w);
  spdlog::info("chronolink-agent {}; effective configuration: {}", chronolink::AgentVersionString(),
               chronolink::EffectiveConfigJson(*config));

  const chronolink::FileLimitChange files = chronolink::RaiseOpenFileLimit();
  if (!files.error.empty()) {
    spdlog::warn("open files: the limit stays at {} ({}); a leader needs one per node", files.before, files.error);
  } else if (files.after != files.before) {
    spdlog::info("open files: limit raised from {} to {} (a leader holds one connection per node)", files.before,
                 files.after);
  }

  chronolink::AgentRuntime runtime(std::move(*config));
  std::string error;
  if (!runtime.Start(&error)) {
    spdlog::error("cannot start: {}", error);
    return 1;
  }
  return runtime.Run();
}
