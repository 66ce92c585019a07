// The privilege drop's decisions and checks, as pure functions of the
// credentials (the drop itself runs in the agent: tests/integration/
// privilege_drop_test.cc reads a real agent's /proc/<pid>/status), and the
// user lookup against this machine's user database.
#include "agent/runtime/privileges.h"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <unistd.h>

#include <string>

namespace chronolink {
namespace {

constexpr uint64_t kAllCaps = (1ULL << 41) - 1;  // CAP_CHOWN .. CAP_CHECKPOINT_RESTORE

ProcessCredentials Root() {
  ProcessCredentials c;
  c.effective = c.permitted = c.bounding = kAllCaps;
  return c;
}

ProcessCredentials User(uid_t uid, gid_t gid) {
  ProcessCredentials c;
  c.ruid = c.euid = c.suid = uid;
  c.rgid = c.egid = c.sgid = gid;
  c.bounding = kAllCaps;
  return c;
}

RunAsTarget Nobody() {
  RunAsTarget t;
  t.uid = 65534;
  t.gid = 65534;
  t.user = "nobody (uid 65534)";
  t.group = "nogroup (gid 65534)";
  return t;
}

TEST(PrivilegeDropPlan, RootBecomesTheTargetWithAnEmptyBoundingSet) {
  const RunAsTarget nobody = Nobody();
  const DropPlan p = PlanPrivilegeDrop(Root(), &nobody, false, false);
  EXPECT_EQ(p.refusal, "");
  EXPECT_EQ(p.kind, DropPlan::Kind::kSwitchUser);
  EXPECT_EQ(p.target.uid, 65534u);
  EXPECT_TRUE(p.clear_bounding);
  // Root in any uid slot counts: a set-uid start (euid 0 only) must switch too.
  ProcessCredentials setuid = User(1000, 1000);
  setuid.euid = 0;
  setuid.effective = kAllCaps;
  EXPECT_EQ(PlanPrivilegeDrop(setuid, &nobody, false, false).kind, DropPlan::Kind::kSwitchUser);
}

TEST(PrivilegeDropPlan, RootWithoutSetuidCannotSwitchAndIsRefused) {
  ProcessCredentials c = Root();
  c.effective &= ~(1ULL << CAP_SETUID);
  const RunAsTarget nobody = Nobody();
  const DropPlan p = PlanPrivilegeDrop(c, &nobody, false, false);
  EXPECT_NE(p.refusal.find("without CAP_SETUID and CAP_SETGID"), std::string::npos) << p.refusal;
  EXPECT_NE(p.refusal.find("nobody"), std::string::npos) << p.refusal;
}

TEST(PrivilegeDropPlan, RootIsNeverATarget) {
  RunAsTarget root;
  root.user = "root (uid 0)";
  const DropPlan p = PlanPrivilegeDrop(Root(), &root, true, false);
  EXPECT_NE(p.refusal.find("never keeps uid 0"), std::string::npos) << p.refusal;
  // Nor is group root, named or a user's primary group.
  RunAsTarget root_group;
  root_group.uid = 65534;
  root_group.gid = 0;
  root_group.user = "nobody (uid 65534)";
  for (bool named : {true, false}) {
    const DropPlan g = PlanPrivilegeDrop(Root(), &root_group, false, named);
    EXPECT_NE(g.refusal.find("never keeps gid 0"), std::string::npos) << g.refusal;
  }
}

TEST(PrivilegeDropPlan, UnprivilegedStartKeepsItsIds) {
  // No capability at all: nothing to drop; the user is not even resolved.
  DropPlan p = PlanPrivilegeDrop(User(1000, 1000), nullptr, false, false);
  EXPECT_EQ(p.refusal, "");
  EXPECT_EQ(p.kind, DropPlan::Kind::kNothing);
  EXPECT_FALSE(p.clear_bounding);
  // Ambient capabilities (systemd AmbientCapabilities=, a container): dropped, ids kept.
  ProcessCredentials with_caps = User(1000, 1000);
  with_caps.effective = with_caps.permitted = with_caps.ambient = (1ULL << CAP_NET_ADMIN) | (1ULL << 39);
  p = PlanPrivilegeDrop(with_caps, nullptr, false, false);
  EXPECT_EQ(p.kind, DropPlan::Kind::kCapabilitiesOnly);
  // Asked for the user it already is: fine.
  RunAsTarget self;
  self.uid = 1000;
  self.gid = 1000;
  p = PlanPrivilegeDrop(User(1000, 1000), &self, true, true);
  EXPECT_EQ(p.refusal, "");
  EXPECT_EQ(p.kind, DropPlan::Kind::kNothing);
}

TEST(PrivilegeDropPlan, UnprivilegedStartAskedForAnotherUserIsRefused) {
  const RunAsTarget nobody = Nobody();
  DropPlan p = PlanPrivilegeDrop(User(1000, 1000), &nobody, true, false);
  EXPECT_NE(p.refusal.find("asked to run as user nobody (uid 65534)"), std::string::npos) << p.refusal;
  EXPECT_NE(p.refusal.find("started as uid 1000"), std::string::npos) << p.refusal;
  // Another group only.
  RunAsTarget other_group;
  other_group.uid = 1000;
  other_group.gid = 5;
  p = PlanPrivilegeDrop(User(1000, 1000), &other_group, false, true);
  EXPECT_NE(p.refusal, "");
  // The default user (not asked for) is no demand on an unprivileged start.
  p = PlanPrivilegeDrop(User(1000, 1000), &nobody, false, false);
  EXPECT_EQ(p.refusal, "");
}

TEST(PrivilegeDropCheck, EveryIdAndEverySetIsChecked) {
  const RunAsTarget nobody = Nobody();
  const DropPlan p = PlanPrivilegeDrop(Root(), &nobody, false, false);
  ProcessCredentials good = User(65534, 65534);
  good.bounding = 0;
  good.no_new_privs = true;
  good.dumpable = false;
  EXPECT_EQ(CheckDropped(good, p, Root()), "");
  auto expect_caught = [&](ProcessCredentials bad, const std::string& what) {
    const std::string diff = CheckDropped(bad, p, Root());
    EXPECT_NE(diff.find(what), std::string::npos) << what << " -> " << diff;
  };
  ProcessCredentials c = good;
  c.suid = 0;  // a saved uid 0 could setuid(0) back
  expect_caught(c, "uids are 65534/65534/0");
  c = good;
  c.egid = 0;
  expect_caught(c, "gids are");
  c = good;
  c.supplementary_groups = 1;
  expect_caught(c, "supplementary groups");
  c = good;
  c.permitted = 1ULL << CAP_SYS_TIME;
  expect_caught(c, "permitted capabilities");
  c = good;
  c.effective = 1;
  expect_caught(c, "effective capabilities");
  c = good;
  c.inheritable = 1;
  expect_caught(c, "inheritable capabilities");
  c = good;
  c.ambient = 1;
  expect_caught(c, "ambient capabilities");
  c = good;
  c.bounding = 1ULL << CAP_SYS_TIME;
  expect_caught(c, "bounding set");
  c = good;
  c.no_new_privs = false;
  expect_caught(c, "no_new_privs");
  c = good;
  c.dumpable = true;
  expect_caught(c, "dumpable");
  // Without CAP_SETPCAP at start the bounding set cannot be emptied, and is not asked to be.
  ProcessCredentials ambient = User(1000, 1000);
  ambient.effective = ambient.permitted = ambient.ambient = 1ULL << CAP_NET_ADMIN;
  const DropPlan caps_only = PlanPrivilegeDrop(ambient, nullptr, false, false);
  ProcessCredentials after = User(1000, 1000);
  after.no_new_privs = true;
  EXPECT_EQ(CheckDropped(after, caps_only, ambient), "");
  after.euid = 1001;
  EXPECT_NE(CheckDropped(after, caps_only, ambient).find("ids changed"), std::string::npos);
}

TEST(RunAsLookup, ResolvesNamesAndNumbersAndRefusesUnknownOnes) {
  RunAsTarget t;
  std::string error;
  ASSERT_TRUE(ResolveRunAs("nobody", "", &t, &error)) << error;
  EXPECT_EQ(t.uid, 65534u);
  EXPECT_EQ(t.gid, 65534u);  // nobody's primary group on Debian: nogroup
  EXPECT_EQ(t.user, "nobody (uid 65534)");
  EXPECT_EQ(t.group, "nogroup (gid 65534)");
  ASSERT_TRUE(ResolveRunAs("65534", "daemon", &t, &error)) << error;
  EXPECT_EQ(t.uid, 65534u);
  EXPECT_EQ(t.gid, 1u);
  // A uid without a passwd entry needs its group given.
  EXPECT_FALSE(ResolveRunAs("54321", "", &t, &error));
  EXPECT_NE(error.find("give --group"), std::string::npos) << error;
  ASSERT_TRUE(ResolveRunAs("54321", "54321", &t, &error)) << error;
  EXPECT_EQ(t.uid, 54321u);
  EXPECT_EQ(t.gid, 54321u);
  EXPECT_FALSE(ResolveRunAs("chronolink-nosuchuser", "", &t, &error));
  EXPECT_NE(error.find("no such user 'chronolink-nosuchuser'"), std::string::npos) << error;
  EXPECT_FALSE(ResolveRunAs("nobody", "chronolink-nosuchgroup", &t, &error));
  EXPECT_NE(error.find("no such group 'chronolink-nosuchgroup'"), std::string::npos) << error;
}

// This process's own credentials, read the way the drop reads them back.
TEST(RunAsLookup, ReadsThisProcessesCredentials) {
  const ProcessCredentials c = ReadCredentials();
  EXPECT_EQ(c.euid, geteuid());
  EXPECT_EQ(c.egid, getegid());
  EXPECT_EQ(CanSwitchUser(c), geteuid() == 0 || getuid() == 0);
  if (geteuid() == 0) {
    EXPECT_NE(c.bounding, 0u);
  }
}

}  // namespace
}  // namespace chronolink
