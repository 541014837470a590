// etcd:// on the three-member cluster, with a member stopped (on servers of its own: every client of a
// server sees its faults): requests go to the members that answer.
#include <gtest/gtest.h>

#include <chrono>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"

namespace {

using namespace std::chrono_literals;

std::string cluster_uri() { return dlock::testing::server_uri("DLOCK_ETCD_CLUSTER_URI"); }

TEST(EtcdCluster, WithTheFirstMemberOfTheUriStoppedTheOthersGrantRenewAndRelease) {
  auto backend = dlock::open(cluster_uri() + "?ttl=3s");
  const auto name = dlock::testing::unique_name("etcd-failover");
  auto before = backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(before);
  dlock::testing::stopped_server down("etcd-cluster.1");
  ASSERT_TRUE(down.stopped());
  // The holder's keep-alive goes to a member that answers.
  std::error_code ec;
  before.renew(3s, ec);
  EXPECT_FALSE(ec) << dlock::last_error_message();
  // A second owner is refused, then granted once the holder releases, through the members left.
  auto other = backend->make_lock(name);
  EXPECT_FALSE(other->try_acquire());
  const auto first_fence = *before.fencing_token();
  before.release();
  auto after = other->try_acquire_for(30s);
  ASSERT_TRUE(after);
  EXPECT_GT(*after.fencing_token(), first_fence);
}

TEST(EtcdCluster, OpeningWithTheFirstMemberDownConnectsToAnother) {
  dlock::testing::stopped_server down("etcd-cluster.1");
  ASSERT_TRUE(down.stopped());
  auto backend = dlock::open(cluster_uri() + "?ttl=3s");
  EXPECT_TRUE(backend->make_lock(dlock::testing::unique_name("etcd-open"))->try_acquire());
}

}  // namespace
