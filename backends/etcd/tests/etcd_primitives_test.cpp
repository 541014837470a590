// etcd:// reader-writer lock and semaphore on the real server: their keys read with raw gateway requests (the
// layout of Go's contrib recipe RWMutex, and the semaphore's folder), keys put raw in that layout as a Go
// client would, the one-name rule with the mutex of the name, and the max_count every user must share.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/eventually.hpp"
#include "dlock_test/support.hpp"
#include "gateway.hpp"
#include "raw_etcd.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::etcd::base64_decode;
using dlock::etcd::base64_encode;
using dlock::etcd::int64_field;
using dlock::etcd::json;
using namespace dlock::etcd::testing;

// A key put raw with a lease of its own, as Go's recipe puts it (an empty value); revoked on destruction.
struct raw_key {
  dlock::etcd::gateway& gw;
  std::int64_t lease = 0;
  raw_key(dlock::etcd::gateway& g, const std::string& key) : gw(g) {
    lease = int64_field(gw.call("/v3/lease/grant", {{"TTL", "30"}}), "ID");
    gw.call("/v3/kv/put", {{"key", base64_encode(key)}, {"value", ""}, {"lease", std::to_string(lease)}});
  }
  ~raw_key() {
    try {
      gw.call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
    } catch (...) {
    }
  }
  raw_key(const raw_key&) = delete;
  raw_key& operator=(const raw_key&) = delete;
};

TEST(EtcdRwLayout, ReadersAndWritersPutNameSlashReadOrWriteSlashLeaseHexAndTheCreateRevisionFences) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-rw-layout");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto reader = backend->make_rw_lock(name);
  auto reading = reader->try_acquire_read();
  ASSERT_TRUE(reading);
  auto kvs = keys_under(gw, name + "/");
  ASSERT_EQ(kvs.size(), 1u);
  EXPECT_EQ(key_of(kvs[0]), name + "/read/" + hex(int64_field(kvs[0], "lease")));
  EXPECT_EQ(base64_decode(kvs[0].value("value", "")), reader->owner()) << "the value is the owner id";
  EXPECT_EQ(static_cast<std::uint64_t>(int64_field(kvs[0], "create_revision")), *reading.fencing_token());

  auto writer = backend->make_rw_lock(name);
  auto waiting = std::async(std::launch::async, [&] { return writer->try_acquire_write_for(60s); });
  ASSERT_TRUE(dlock::testing::eventually([&] { return keys_under(gw, name + "/").size() == 2; }));
  kvs = keys_under(gw, name + "/");
  EXPECT_EQ(key_of(kvs[1]), name + "/write/" + hex(int64_field(kvs[1], "lease")));
  reading.release();
  auto writing = waiting.get();
  ASSERT_TRUE(writing);
  EXPECT_EQ(static_cast<std::uint64_t>(int64_field(kvs[1], "create_revision")), *writing.fencing_token());
  writing.release();
  EXPECT_TRUE(keys_under(gw, name + "/").empty()) << "a release leaves no key";
}

// Go's RWMutex reads only the folders and the create revisions: a writer's key put raw under write/ keeps a
// dlock reader out, a reader's key under read/ keeps a dlock writer out and lets a dlock reader in.
TEST(EtcdRwLayout, KeysPutAsGosRecipePutsThemExcludeAsTheRecipeSays) {
  auto gw = raw();
  auto backend = dlock::open(uri() + "?ttl=5s");
  {
    const auto name = dlock::testing::unique_name("etcd-rw-go");
    raw_key go_writer(gw,
                      name + "/write/" + std::to_string(std::chrono::system_clock::now().time_since_epoch().count()));
    EXPECT_FALSE(backend->make_rw_lock(name)->try_acquire_read()) << "a reader got in beside a Go writer";
    EXPECT_FALSE(backend->make_rw_lock(name)->try_acquire_write()) << "a writer got in beside a Go writer";
    EXPECT_EQ(keys_under(gw, name + "/").size(), 1u) << "a refused try left its key";
  }
  {
    const auto name = dlock::testing::unique_name("etcd-rw-go");
    raw_key go_reader(gw,
                      name + "/read/" + std::to_string(std::chrono::system_clock::now().time_since_epoch().count()));
    EXPECT_TRUE(backend->make_rw_lock(name)->try_acquire_read()) << "a reader was kept out by a Go reader";
    EXPECT_FALSE(backend->make_rw_lock(name)->try_acquire_write()) << "a writer got in beside a Go reader";
    EXPECT_FALSE(backend->make_lock(name)->try_acquire()) << "a mutex got in beside a Go reader";
  }
}

// The mutex's keys are in the same folder: a reader waits for a mutex holder (which Go's recipe reader would
// not see: it reads write/ only), and is woken by its release.
TEST(EtcdRwLayout, AReaderQueuesBehindTheMutexOfItsNameAndIsWokenByItsRelease) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-rw-mutex");
  auto backend = dlock::open(uri() + "?ttl=20s");
  auto held = backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto reader = backend->make_rw_lock(name);
  auto waiting = std::async(std::launch::async, [&] { return reader->try_acquire_read_for(60s); });
  ASSERT_TRUE(dlock::testing::eventually([&] { return keys_under(gw, name + "/read/").size() == 1; }));
  const auto fence = *held.fencing_token();
  held.release();
  auto reading = waiting.get();
  ASSERT_TRUE(reading) << "the reader was not woken by the mutex's release";
  EXPECT_GT(*reading.fencing_token(), fence);
}

TEST(EtcdRwLayout, AStoppedWaiterDeletesItsKey) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-rw-stop");
  auto backend = dlock::open(uri() + "?ttl=20s");
  auto reading = backend->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(reading);
  auto writer = backend->make_rw_lock(name);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto l = writer->acquire_write(stop.get_token(), ec);
    return ec;
  });
  ASSERT_TRUE(dlock::testing::eventually([&] { return keys_under(gw, name + "/write/").size() == 1; }));
  stop.request_stop();
  EXPECT_EQ(waiting.get(), std::make_error_code(std::errc::operation_canceled));
  EXPECT_TRUE(keys_under(gw, name + "/write/").empty()) << "the stopped writer's key stayed";
  EXPECT_TRUE(reading.held());
}

TEST(EtcdSemaphoreLayout, AnAcquireIsOneKeyUnderSemaphoreValuedWithItsPermitsAndMaxCount) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-sem-layout");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto s = backend->make_semaphore(name, 5);
  auto three = s->try_acquire(3);
  ASSERT_TRUE(three);
  const auto kvs = keys_under(gw, name + "/");
  ASSERT_EQ(kvs.size(), 1u);
  EXPECT_EQ(key_of(kvs[0]), name + "/semaphore/" + hex(int64_field(kvs[0], "lease")));
  const auto value = json::parse(base64_decode(kvs[0].value("value", "")));
  EXPECT_EQ(value.value("owner", ""), s->owner());
  EXPECT_EQ(value.value("permits", 0), 3);
  EXPECT_EQ(value.value("max_count", 0), 5);
  EXPECT_EQ(static_cast<std::uint64_t>(int64_field(kvs[0], "create_revision")), *three.fencing_token());
  const auto info = backend->inspect(name);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::permits);
  EXPECT_EQ(info.holders[0].count, 3u);
  EXPECT_EQ(info.holders[0].owner, s->owner());
  EXPECT_EQ(backend->list(name), std::vector<std::string>{name});
}

TEST(EtcdSemaphoreLayout, AnotherMaxCountForTheSameNameIsRefusedAndLeavesNoKey) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-sem-max");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto held = backend->make_semaphore(name, 2)->try_acquire();
  ASSERT_TRUE(held);
  std::error_code ec;
  auto other = backend->make_semaphore(name, 3)->try_acquire(ec);
  EXPECT_FALSE(other);
  EXPECT_EQ(ec, dlock::errc::name_conflict) << ec.message();
  EXPECT_NE(dlock::last_error_message().find("max_count 2"), std::string::npos) << dlock::last_error_message();
  EXPECT_EQ(keys_under(gw, name + "/").size(), 1u) << "the refused acquire left its key";
}

// A waiter of 2 permits queued before a later 1-permit acquire: the line is kept in create-revision order,
// so the later acquire waits too even though one permit is free.
TEST(EtcdSemaphoreLayout, PermitsAreGrantedInTheOrderOfTheKeys) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-sem-order");
  auto backend = dlock::open(uri() + "?ttl=20s");
  auto s = backend->make_semaphore(name, 2);
  auto first = s->try_acquire();
  ASSERT_TRUE(first);
  auto waiting = std::async(std::launch::async, [&] { return s->try_acquire_for(60s, 2); });
  ASSERT_TRUE(dlock::testing::eventually([&] { return keys_under(gw, name + "/semaphore/").size() == 2; }));
  EXPECT_FALSE(s->try_acquire()) << "a later acquire overtook a queued one";
  const auto before = backend->inspect(name);
  ASSERT_EQ(before.holders.size(), 1u);
  ASSERT_EQ(before.waiters.size(), 1u);
  EXPECT_EQ(before.waiters[0].kind, dlock::hold_kind::permits);
  first.release();
  auto both = waiting.get();
  ASSERT_TRUE(both);
  EXPECT_FALSE(s->try_acquire()) << "a permit beyond max_count";
}

// One name, one lock: the semaphore's keys and the mutex's are in one folder, and each refuses the other.
TEST(EtcdSemaphoreLayout, AMutexHolderRefusesASemaphoreAndTheSemaphoreLeavesNoKey) {
  auto gw = raw();
  const auto name = dlock::testing::unique_name("etcd-sem-mutex");
  auto backend = dlock::open(uri() + "?ttl=5s");
  auto held = backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  std::error_code ec;
  auto permit = backend->make_semaphore(name, 2)->try_acquire_for(200ms, ec);
  EXPECT_FALSE(permit);
  EXPECT_EQ(ec, dlock::errc::name_conflict) << ec.message();
  EXPECT_TRUE(keys_under(gw, name + "/semaphore/").empty()) << "the refused semaphore left its key";
  held.release();
  auto later = backend->make_semaphore(name, 2)->try_acquire();
  ASSERT_TRUE(later);
  auto mutex = backend->make_lock(name)->try_acquire(ec);
  EXPECT_FALSE(mutex);
  EXPECT_EQ(ec, dlock::errc::name_conflict) << ec.message();
  EXPECT_EQ(keys_under(gw, name + "/").size(), 1u) << "the refused mutex left its key";
}

TEST(EtcdInspection, ReadersAreHoldersOfKindReadAndAForceReleaseRemovesThemAll) {
  const auto name = dlock::testing::unique_name("etcd-rw-inspect");
  auto backend = dlock::open(uri() + "?ttl=20s");
  auto a = backend->make_rw_lock(name)->try_acquire_read();
  auto b = backend->make_rw_lock(name)->try_acquire_read();
  ASSERT_TRUE(a && b);
  auto writer = backend->make_rw_lock(name);
  auto waiting = std::async(std::launch::async, [&] { return writer->try_acquire_write_for(60s); });
  ASSERT_TRUE(dlock::testing::eventually([&] { return backend->inspect(name).waiters.size() == 1; }));
  const auto info = backend->inspect(name);
  ASSERT_EQ(info.holders.size(), 2u);
  EXPECT_EQ(info.holders[0].kind, dlock::hold_kind::read);
  EXPECT_EQ(info.holders[1].kind, dlock::hold_kind::read);
  EXPECT_EQ(info.waiters[0].kind, dlock::hold_kind::write);
  EXPECT_EQ(info.waiters[0].owner, writer->owner());
  EXPECT_EQ(backend->force_release(name).size(), 2u);
  auto writing = waiting.get();
  ASSERT_TRUE(writing) << "the writer was not granted once both readers were removed";
  std::error_code ec;
  a.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner) << "a removed reader's release said nothing";
}

}  // namespace
