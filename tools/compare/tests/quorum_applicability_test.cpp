// Which backends the quorum faults run on, and what the other cells say instead.
#include <gtest/gtest.h>

#include "dlock_compare/quorum.hpp"

namespace dlock::compare {
namespace {

TEST(QuorumFaults, RedlockFaultsRunOnRedlockOnlyAndSayWhyElsewhere) {
  for (const auto f : {fault::masters_minority_lost, fault::master_restarted_empty, fault::masters_majority_lost}) {
    EXPECT_TRUE(is_quorum_fault(f));
    EXPECT_FALSE(is_ensemble_fault(f));
    EXPECT_STREQ(quorum_server(f), "redlock");
    EXPECT_STREQ(quorum_server_variable(f), "DLOCK_REDLOCK_URI");
    EXPECT_EQ(quorum_not_applicable("redlock", f), std::nullopt);
    EXPECT_EQ(quorum_not_applicable("redis", f), "single server");
    EXPECT_EQ(quorum_not_applicable("postgres+advisory", f), "single server");
    EXPECT_EQ(quorum_not_applicable("memory", f), "no server");
    EXPECT_NE(quorum_not_applicable("zookeeper", f), std::nullopt);
  }
}

TEST(QuorumFaults, EnsembleFaultsRunOnZookeeperOnlyAndSayWhyElsewhere) {
  for (const auto f : {fault::ensemble_leader_lost, fault::ensemble_majority_lost}) {
    EXPECT_TRUE(is_quorum_fault(f));
    EXPECT_TRUE(is_ensemble_fault(f));
    EXPECT_STREQ(quorum_server(f), "zookeeper-ensemble");
    EXPECT_STREQ(quorum_server_variable(f), "DLOCK_ZOOKEEPER_ENSEMBLE_URI");
    EXPECT_EQ(quorum_not_applicable("zookeeper", f), std::nullopt);
    EXPECT_EQ(quorum_not_applicable("memcached", f), "single server");
    EXPECT_EQ(quorum_not_applicable("file", f), "no server");
    EXPECT_NE(quorum_not_applicable("redlock", f), std::nullopt);
  }
}

TEST(QuorumFaults, OtherFaultsAreNotQuorumFaults) {
  for (const auto f : {fault::healthy, fault::holder_kill, fault::server_restart}) {
    EXPECT_FALSE(is_quorum_fault(f));
    EXPECT_EQ(quorum_server(f), nullptr);
    EXPECT_EQ(quorum_not_applicable("redis", f), std::nullopt);
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
