// etcd:// on the real server: the layout read with raw gateway requests (Go's concurrency.Mutex keys), and
// interoperability with Debian's `etcdctl lock` on the same names, both ways.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/support.hpp"
#include "dlock_test/tcp_proxy.hpp"
#include "etcd_lock.hpp"
#include "gateway.hpp"
#include "raw_etcd.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::etcd::base64_decode;
using dlock::etcd::base64_encode;
using dlock::etcd::int64_field;
using dlock::etcd::json;
using namespace dlock::etcd::testing;

std::string endpoints() {
  std::string list;
  for (const auto& h : dlock::uri::parse(uri()).hosts()) list += (list.empty() ? "" : ",") + h.to_string();
  return list;
}

TEST(EtcdLayout, TheHolderKeyIsNameSlashLeaseHexWithTheLeaseAndItsCreateRevisionIsTheFence) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-layout");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto lock = backend->make_lock(name);
  auto lease = lock->try_acquire();
  ASSERT_TRUE(lease);
  const auto kvs = keys_of(gw, name);
  ASSERT_EQ(kvs.size(), 1u);
  const auto lease_id = int64_field(kvs[0], "lease");
  EXPECT_EQ(base64_decode(kvs[0]["key"].get<std::string>()), name + "/" + hex(lease_id));
  EXPECT_EQ(base64_decode(kvs[0].value("value", "")), lock->owner()) << "the value is the owner id";
  EXPECT_EQ(static_cast<std::uint64_t>(int64_field(kvs[0], "create_revision")), *lease.fencing_token());
  // The lease's TTL is the ttl in whole seconds.
  const auto ttl = gw.call("/v3/lease/timetolive", {{"ID", std::to_string(lease_id)}});
  EXPECT_EQ(int64_field(ttl, "grantedTTL"), 5);
  lease.release();
  EXPECT_TRUE(keys_of(gw, name).empty());
  const auto gone = gw.call("/v3/lease/timetolive", {{"ID", std::to_string(lease_id)}});
  EXPECT_LE(int64_field(gone, "TTL"), 0) << "the lease is revoked with the release";
}

TEST(EtcdLayout, AFailedTryLeavesNoKeyAndAWaiterQueuesItsKeyBehindTheHolder) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-queue");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto holder = backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(holder);
  auto other = dlock::open(uri() + "?ttl=5s");
  EXPECT_FALSE(other->make_lock(name)->try_acquire());
  EXPECT_EQ(keys_of(gw, name).size(), 1u);
  auto waiter = std::async(std::launch::async, [&] { return other->make_lock(name)->try_acquire_for(60s); });
  ASSERT_TRUE(dlock::testing::eventually([&] { return keys_of(gw, name).size() == 2; }));
  const auto first_fence = *holder.fencing_token();
  holder.release();
  auto second = waiter.get();
  ASSERT_TRUE(second);
  EXPECT_GT(*second.fencing_token(), first_fence);
}

TEST(EtcdLayout, ANameWithASlashIsHashedSoItsKeysAreNotUnderTheShorterName) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-slash");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto longer = backend->make_lock(name + "/sub")->try_acquire();
  ASSERT_TRUE(longer);
  EXPECT_TRUE(keys_of(gw, name).empty());
  auto shorter = backend->make_lock(name)->try_acquire();
  EXPECT_TRUE(shorter) << "'" << name << "' is a lock of its own";
}

TEST(EtcdInterop, ADlockHolderKeepsEtcdctlLockWaitingUntilItReleases) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-interop");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto lease = backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(lease);
  dlock::testing::child_process etcdctl(
      {"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + endpoints(), "lock", name, "echo", "granted"});
  // etcdctl queued its own key behind ours and waits.
  ASSERT_TRUE(dlock::testing::eventually([&] { return keys_of(gw, name).size() == 2; }));
  EXPECT_EQ(int64_field(keys_of(gw, name)[0], "create_revision"), static_cast<std::int64_t>(*lease.fencing_token()));
  lease.release();
  EXPECT_EQ(etcdctl.read_line(60s), std::optional<std::string>("granted"));
  EXPECT_EQ(etcdctl.wait(60s), std::optional<int>(0));
}

TEST(EtcdInterop, AnEtcdctlHolderKeepsDlockWaitingAndItsLeavingWakesDlock) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-interop");
  dlock::testing::child_process etcdctl(
      {"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + endpoints(), "lock", name});
  const auto held = etcdctl.read_line(60s);  // etcdctl prints its key once it holds
  ASSERT_TRUE(held);
  EXPECT_EQ(held->rfind(name + "/", 0), 0u) << *held;
  auto backend = dlock::open(uri() + "?ttl=5s");
  EXPECT_FALSE(backend->make_lock(name)->try_acquire());
  auto waiter = std::async(std::launch::async, [&] { return backend->make_lock(name)->try_acquire_for(120s); });
  ASSERT_TRUE(dlock::testing::eventually([&] { return keys_of(gw, name).size() == 2; }));
  ASSERT_EQ(::kill(etcdctl.pid(), SIGINT), 0);  // etcdctl closes its session: its lease and key go
  auto lease = waiter.get();
  ASSERT_TRUE(lease);
  EXPECT_EQ(keys_of(gw, name).size(), 1u);
}

// inspect names a Go holder, which stores no owner, by its lease (as in its key), and a dlock waiter by its
// owner id; force_release revokes the holder's lease, which a Go session notices: etcdctl lock exits.
TEST(EtcdInspection, AnEtcdctlHolderIsShownByItsLeaseAndABreakEndsItsSession) {
  const auto name = dlock::testing::unique_name("etcd-break");
  dlock::testing::child_process etcdctl(
      {"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + endpoints(), "lock", "--ttl=3", name});
  const auto held = etcdctl.read_line(60s);
  ASSERT_TRUE(held);
  ASSERT_EQ(held->rfind(name + "/", 0), 0u) << *held;
  const auto lease_hex = held->substr(name.size() + 1);
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto lock = backend->make_lock(name);
  auto waiter = std::async(std::launch::async, [&] { return lock->try_acquire_for(120s); });
  ASSERT_TRUE(dlock::testing::eventually([&] { return backend->inspect(name).waiters.size() == 1; }));
  const auto info = backend->inspect(name);
  EXPECT_TRUE(info.held);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, lease_hex);
  EXPECT_TRUE(info.holders[0].ttl_left);
  EXPECT_TRUE(info.holders[0].fencing_token);
  EXPECT_EQ(info.waiters[0].owner, lock->owner());
  EXPECT_EQ(backend->list(name), std::vector<std::string>{name});

  const auto removed = backend->force_release(name);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].owner, lease_hex);
  EXPECT_EQ(etcdctl.wait(60s), std::optional<int>(1)) << "etcdctl did not end with 'session expired'";
  auto lease = waiter.get();
  ASSERT_TRUE(lease);
  const auto after = backend->inspect(name);
  ASSERT_EQ(after.holders.size(), 1u);
  EXPECT_EQ(after.holders[0].owner, lock->owner());
  EXPECT_EQ(after.holders[0].fencing_token, lease.fencing_token());
}

// Through a link that delivers nothing, a waiting acquire ends at its deadline (plus deadline_grace
// for a request sent just before it), not at the command_timeout of the request in flight.
TEST(EtcdDeadline, AWaitThroughASilentLinkEndsByItsDeadlineNotTheCommandTimeout) {
  const auto target = dlock::uri::parse(uri());
  dlock::testing::tcp_proxy proxy(target.hosts().front().host, target.hosts().front().port_or(2379));
  auto backend = dlock::open(dlock::testing::through(uri(), proxy) + "?ttl=5s&command_timeout=60s");
  auto lock = backend->make_lock(dlock::testing::unique_name("etcd-silent"));
  proxy.partition();
  proxy.reset_connections();
  auto waiting = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto l = lock->try_acquire_for(1s, ec);
    return std::pair{std::move(l), ec};
  });
  ASSERT_EQ(waiting.wait_for(30s), std::future_status::ready) << "the wait went on towards command_timeout (60 s)";
  auto [got, ec] = waiting.get();
  EXPECT_FALSE(got);
  EXPECT_EQ(ec, dlock::errc::backend_unavailable) << ec.message();
  proxy.heal();
}

// Go's concurrency.Election keeps the Mutex's layout (`<name>/<lease id>`, the lowest create
// revision leads): `etcdctl elect NAME PROPOSAL` and a dlock election of NAME elect one leader.
TEST(EtcdInterop, ADlockLeaderKeepsEtcdctlElectWaitingUntilItResigns) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-elect");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto leading = backend->make_election(name)->try_campaign();
  ASSERT_TRUE(leading);
  dlock::testing::child_process etcdctl(
      {"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + endpoints(), "elect", name, "from-etcdctl"});
  ASSERT_TRUE(dlock::testing::eventually([&] { return keys_of(gw, name).size() == 2; }));
  const auto term = leading.term();
  leading.resign();
  const auto elected = etcdctl.read_line(60s);  // etcdctl prints its key, then its proposal, once elected
  ASSERT_TRUE(elected);
  EXPECT_EQ(elected->rfind(name + "/", 0), 0u) << *elected;
  EXPECT_EQ(etcdctl.read_line(5s), std::optional<std::string>("from-etcdctl"));
  auto vote = backend->make_election(name);
  EXPECT_FALSE(vote->try_campaign()) << "a dlock candidate was elected while etcdctl led";
  EXPECT_EQ(vote->leader().id, "from-etcdctl") << "the leader's id is its proposal, as Go's Election::Leader reads it";
  ASSERT_EQ(::kill(etcdctl.pid(), SIGINT), 0);  // etcdctl resigns: its lease and key go
  auto next = vote->campaign_for(60s);
  ASSERT_TRUE(next);
  EXPECT_GT(next.term(), term);
}

TEST(EtcdInput, AnUnknownParameterIsRefused) { EXPECT_THROW((void)dlock::open(uri() + "?no_such=1"), dlock::error); }

}  // namespace
