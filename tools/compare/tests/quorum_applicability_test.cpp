// Which backends the quorum faults run on, and what the other cells say instead: as the families
// the built backends declare (families.hpp) say, for every scheme the registry lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "dlock/registry.hpp"
#include "dlock_compare/families.hpp"
#include "dlock_compare/quorum.hpp"

namespace dlock::compare {
namespace {

constexpr fault masters_faults[] = {fault::masters_minority_lost, fault::master_restarted_empty,
                                    fault::masters_majority_lost};
constexpr fault ensemble_faults[] = {fault::ensemble_leader_lost, fault::ensemble_majority_lost};

// The families that run `kind`'s faults: every build with the default backends has at least one of each.
std::vector<const family*> families_running(quorum_kind kind) {
  auto found = families_of_quorum(kind);
  EXPECT_FALSE(found.empty()) << "no built backend declares quorum kind " << static_cast<int>(kind);
  return found;
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

// `faults` are the quorum faults of `kind`: each scheme of a family that runs them runs them on
// that family's own server (and variable), no scheme of another family has one, and every other
// scheme is said why not.
void expect_quorum_faults_of(quorum_kind kind, std::span<const fault> faults) {
  const auto runs = families_running(kind);
  for (const auto* family : runs) {
    ASSERT_NE(family->quorum_server, nullptr) << family->prefix;
    ASSERT_NE(family->quorum_variable, nullptr) << family->prefix;
  }
  for (const auto f : faults) {
    EXPECT_TRUE(is_quorum_fault(f));
    EXPECT_EQ(is_ensemble_fault(f), kind == quorum_kind::ensemble);
    for (const auto& info : default_registry().list()) {
      const auto* family = family_of_scheme(info.scheme);
      const bool runs_it = family != nullptr && family->quorum == kind;
      EXPECT_STREQ(quorum_server(info.scheme, f), runs_it ? family->quorum_server : nullptr) << info.scheme;
      EXPECT_STREQ(quorum_server_variable(info.scheme, f), runs_it ? family->quorum_variable : nullptr) << info.scheme;
    }
    expect_applicability(kind, f);
  }
}

TEST(QuorumFaults, MastersFaultsRunOnTheIndependentMastersFamilyOnlyAndSayWhyElsewhere) {
  expect_quorum_faults_of(quorum_kind::independent_masters, masters_faults);
}

TEST(QuorumFaults, EnsembleFaultsRunOnTheEnsembleFamiliesOnlyAndSayWhyElsewhere) {
  for (const auto* family : families_running(quorum_kind::ensemble)) {
    EXPECT_NE(family->is_leader, nullptr)
        << family->prefix << ": ensemble-leader-lost must ask a member whether it leads";
    EXPECT_NE(family->ensemble_session, nullptr)
        << family->prefix << ": the ensemble faults are timed from its session";
  }
  expect_quorum_faults_of(quorum_kind::ensemble, ensemble_faults);
}

// Several families run the ensemble faults, each on its own ensemble: the scheme picks it.
TEST(QuorumFaults, EachEnsembleFamilyRunsOnItsOwnEnsemble) {
  for (const auto* family : families_running(quorum_kind::ensemble)) {
    const std::string scheme(family->prefix);
    for (const auto f : ensemble_faults) {
      EXPECT_STREQ(quorum_server(scheme, f), family->quorum_server) << scheme;
      EXPECT_STREQ(quorum_server_variable(scheme, f), family->quorum_variable) << scheme;
    }
    if (family->ensemble_session != nullptr) {
      EXPECT_EQ(ensemble_session(scheme, std::chrono::seconds(1)), family->ensemble_session(std::chrono::seconds(1)));
    }
  }
  std::vector<std::string> servers;
  for (const auto* family : families_running(quorum_kind::ensemble)) servers.emplace_back(family->quorum_server);
  std::ranges::sort(servers);
  EXPECT_EQ(std::ranges::adjacent_find(servers), servers.end()) << "two families name one ensemble";
}

TEST(QuorumFaults, OtherFaultsAreNotQuorumFaults) {
  for (const auto f : {fault::healthy, fault::holder_kill, fault::server_restart}) {
    EXPECT_FALSE(is_quorum_fault(f));
    for (const auto& info : default_registry().list()) {
      EXPECT_EQ(quorum_server(info.scheme, f), nullptr) << info.scheme;
      EXPECT_EQ(quorum_not_applicable(info.scheme, f), std::nullopt);
    }
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
