// Which backends the quorum faults run on, and what the other cells say instead: as the families
// the built backends declare (families.hpp) say, for every scheme the registry lists.
#include <gtest/gtest.h>

#include <span>

#include "dlock/registry.hpp"
#include "dlock_compare/families.hpp"
#include "dlock_compare/quorum.hpp"

namespace dlock::compare {
namespace {

constexpr fault masters_faults[] = {fault::masters_minority_lost, fault::master_restarted_empty,
                                    fault::masters_majority_lost};
constexpr fault ensemble_faults[] = {fault::ensemble_leader_lost, fault::ensemble_majority_lost};

// The family that runs `kind`'s faults: every build with the default backends has one of each.
const family& family_running(quorum_kind kind) {
  const auto* f = family_of_quorum(kind);
  EXPECT_NE(f, nullptr) << "no built backend declares quorum kind " << static_cast<int>(kind);
  static const family none{};
  return f != nullptr ? *f : none;
}

// Each scheme the registry lists gets, for a quorum fault of `kind`: nullopt when its family runs
// them, "no server" without a server, else a reason naming the other kind or "single server".
void expect_applicability(quorum_kind kind, fault f) {
  ASSERT_FALSE(default_registry().list().empty());
  for (const auto& info : default_registry().list()) {
    const auto* family = family_of_scheme(info.scheme);
    const auto why = quorum_not_applicable(info.scheme, f);
    if (family == nullptr || family->variable == nullptr)
      EXPECT_EQ(why, "no server") << info.scheme;
    else if (family->quorum == kind)
      EXPECT_EQ(why, std::nullopt) << info.scheme;
    else if (family->quorum == quorum_kind::none)
      EXPECT_EQ(why, "single server") << info.scheme;
    else
      EXPECT_NE(why, std::nullopt) << info.scheme << ": a family of the other quorum kind";
  }
}

// `faults` are the quorum faults of `kind`: run on the server (and variable) of the family that
// runs them, and said why not on every other scheme.
void expect_quorum_faults_of(quorum_kind kind, std::span<const fault> faults) {
  const auto& runs = family_running(kind);
  ASSERT_NE(runs.quorum_server, nullptr);
  ASSERT_NE(runs.quorum_variable, nullptr);
  for (const auto f : faults) {
    EXPECT_TRUE(is_quorum_fault(f));
    EXPECT_EQ(is_ensemble_fault(f), kind == quorum_kind::ensemble);
    EXPECT_STREQ(quorum_server(f), runs.quorum_server);
    EXPECT_STREQ(quorum_server_variable(f), runs.quorum_variable);
    expect_applicability(kind, f);
  }
}

TEST(QuorumFaults, MastersFaultsRunOnTheIndependentMastersFamilyOnlyAndSayWhyElsewhere) {
  expect_quorum_faults_of(quorum_kind::independent_masters, masters_faults);
}

TEST(QuorumFaults, EnsembleFaultsRunOnTheEnsembleFamilyOnlyAndSayWhyElsewhere) {
  EXPECT_NE(family_running(quorum_kind::ensemble).is_leader, nullptr)
      << "ensemble-leader-lost must ask a member whether it leads";
  expect_quorum_faults_of(quorum_kind::ensemble, ensemble_faults);
}

TEST(QuorumFaults, OtherFaultsAreNotQuorumFaults) {
  for (const auto f : {fault::healthy, fault::holder_kill, fault::server_restart}) {
    EXPECT_FALSE(is_quorum_fault(f));
    EXPECT_EQ(quorum_server(f), nullptr);
    for (const auto& info : default_registry().list()) EXPECT_EQ(quorum_not_applicable(info.scheme, f), std::nullopt);
  }
}

TEST(QuorumFaults, NamedLikeTheirColumns) {
  EXPECT_EQ(fault_named("masters-minority-lost"), fault::masters_minority_lost);
  EXPECT_EQ(fault_named("master-restarted-empty"), fault::master_restarted_empty);
  EXPECT_EQ(fault_named("masters-majority-lost"), fault::masters_majority_lost);
  EXPECT_EQ(fault_named("ensemble-leader-lost"), fault::ensemble_leader_lost);
  EXPECT_EQ(fault_named("ensemble-majority-lost"), fault::ensemble_majority_lost);
  for (const auto f : every_fault()) EXPECT_EQ(fault_named(to_string(f)), f) << to_string(f);
}

}  // namespace
}  // namespace dlock::compare
