#include "agent/runtime/run_as.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <vector>

#include "agent/runtime/output_handover.h"

namespace chronolink {

bool PlanRunAs(const AgentConfig& config, RunAsPlan* out, std::string* error) {
  out->before = ReadCredentials();
  const bool explicit_target = config.run_as_user_explicit || config.run_as_group_explicit;
  // An unprivileged start with no --user/--group needs no user database.
  RunAsTarget target;
  const bool resolve = CanSwitchUser(out->before) || explicit_target;
  if (resolve && !ResolveRunAs(config.run_as_user, config.run_as_group, &target, error)) return false;
  out->drop = PlanPrivilegeDrop(out->before, resolve ? &target : nullptr, config.run_as_user_explicit,
                                config.run_as_group_explicit);
  if (!out->drop.refusal.empty()) {
    *error = "privilege drop impossible: " + out->drop.refusal;
    return false;
  }
  return true;
}

namespace {

// True when `file` lies directly in `dir` (neither need exist yet).
bool DirectlyIn(const std::string& file, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec1, ec2;
  const fs::path parent = fs::weakly_canonical(fs::absolute(fs::path(file)).parent_path(), ec1);
  const fs::path d = fs::weakly_canonical(fs::absolute(fs::path(dir)), ec2);
  return !ec1 && !ec2 && parent == d;
}

}  // namespace

bool PrepareFilesForRunAs(const AgentConfig& config, const RunAsPlan& plan, std::string* error) {
  if (!plan.switches_user()) return true;
  std::vector<std::string> own = AgentOutputFileNames();
  std::vector<std::string> kept;
  // A stamp log written straight into the output directory is the agent's
  // too; a clock page placed there stays as it was created (root's).
  const std::string& log = config.capture.stamp_log_path;
  if (!log.empty() && DirectlyIn(log, config.output_dir)) own.push_back(std::filesystem::path(log).filename());
  const std::string& page = config.cluster_settings.clock_page_path;
  if (!page.empty() && DirectlyIn(page, config.output_dir)) kept.push_back(std::filesystem::path(page).filename());
  const RunAsTarget& t = plan.drop.target;
  return HandOverOutputDir(config.output_dir, own, kept, t.uid, t.gid, t.user, error);
}

bool CarryOutRunAs(const RunAsPlan& plan, std::string* error) {
  if (!DropPrivileges(plan.drop, error)) return false;
  spdlog::info("{}", DescribeDrop(plan.drop, plan.before));
  return true;
}

std::string RunAsFileHint(const RunAsPlan& plan) {
  if (!plan.switches_user()) return "";
  return " (the agent writes it as user " + plan.drop.target.user +
         " after dropping its privileges: that user needs write access to it and search access to every "
         "directory above it)";
}

}  // namespace chronolink
