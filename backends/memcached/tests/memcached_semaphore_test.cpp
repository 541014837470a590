// memcached://'s semaphore against a real server (DLOCK_MEMCACHED_URI): N slot items, each taken,
// renewed and released as the mutex's item. Each test reads the slots directly with raw
// libmemcached, so it does not trust the code under test.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "capabilities.hpp"
#include "client_pool.hpp"
#include "dlock/dlock.hpp"
#include "dlock_test/permit_census.hpp"
#include "dlock_test/support.hpp"
#include "memcached_semaphore.hpp"

using namespace std::chrono_literals;
namespace mc = dlock::memcached;

namespace {

using dlock::testing::unique_name;

std::string server_uri() { return dlock::testing::server_uri("DLOCK_MEMCACHED_URI"); }

std::shared_ptr<dlock::backend> open_backend(std::string_view query = "ttl=2s&restart_delay=off") {
  return dlock::open(server_uri() + "?" + std::string(query));
}

dlock::lock_options without_watchdog(std::chrono::milliseconds ttl) {
  dlock::lock_options o;
  o.ttl = ttl;
  o.watchdog = false;
  return o;
}

// The slot items of a semaphore, read and written directly.
struct raw_slots {
  mc::memc_ptr m = mc::make_handle(dlock::uri::parse(server_uri()), 2s, 2s);
  mc::semaphore_keys keys;
  explicit raw_slots(std::string_view name) : keys(mc::semaphore_keys_for("dlock:", name)) {}

  std::optional<mc::item> get(std::uint32_t i) {
    const auto k = keys.slot(i);
    memcached_return_t rc;
    auto it = mc::gets(m.get(), k, k.lock, rc);
    EXPECT_TRUE(rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND) << memcached_strerror(m.get(), rc);
    return it;
  }
  int present(std::uint32_t n) {
    int count = 0;
    for (std::uint32_t i = 0; i < n; ++i) count += get(i).has_value();
    return count;
  }
  // The first slot present, as an operator would find it.
  std::optional<std::uint32_t> first_present(std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i)
      if (get(i)) return i;
    return std::nullopt;
  }
  void erase(std::uint32_t i) {
    const auto k = keys.slot(i);
    memcached_delete_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), 0);
  }
  void set(std::uint32_t i, std::string_view value) {
    const auto k = keys.slot(i);
    ASSERT_EQ(memcached_set_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), value.data(),
                                   value.size(), 30, 0),
              MEMCACHED_SUCCESS);
  }
};

}  // namespace

TEST(memcached_semaphore, DeclaresTheMutexSetAndNoReaderWriterLock) {
  auto b = open_backend();
  EXPECT_TRUE(b->caps().has(dlock::capability::semaphore));
  EXPECT_FALSE(b->caps().has(dlock::capability::read_write));
  EXPECT_EQ(b->semaphore_caps(), mc::memcached_caps);
  std::error_code ec;
  EXPECT_FALSE(b->make_rw_lock("x", ec));
  EXPECT_EQ(ec, dlock::errc::not_supported);
}

namespace {
// `threads` threads, each with its own backend, take one permit of a semaphore of `n` ten times.
void never_more_than_n_and_n_is_reached(std::uint32_t n, int threads_count) {
  const auto name = unique_name("sem-n");
  dlock::testing::permit_census census(static_cast<int>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_count; ++t) {
    threads.emplace_back([&] {
      // Each thread its own backend: its own connections, as separate processes would have.
      auto sem = open_backend("ttl=5s&restart_delay=off&poll=1ms..20ms")->make_semaphore(name, n);
      for (int i = 0; i < 10; ++i) {
        auto permit = sem->acquire();
        census.hold(5ms);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(census.over(), 0) << "more than " << n << " permits held at once";
  EXPECT_EQ(census.most(), static_cast<int>(n)) << "never reached " << n;
  EXPECT_EQ(raw_slots(name).present(n), 0) << "every slot item deleted at release";
}
// One name, one lock: the mutex and the semaphore of one name refuse each other (name_conflict),
// saying what the name is in use as, and leave nothing behind; a name whose mutex and semaphore
// keys hash to different groups (a long name) too.
TEST(memcached_semaphore, AMutexAndASemaphoreOfOneNameRefuseEachOther) {
  for (const auto& name : {unique_name("one-name"), unique_name("one-name-long-") + std::string(200, 'x')}) {
    SCOPED_TRACE(name.size());
    auto a = open_backend(), b = open_backend();
    std::error_code ec;
    {
      auto mutex = a->make_lock(name)->try_acquire();
      ASSERT_TRUE(mutex);
      EXPECT_FALSE(b->make_semaphore(name, 3)->try_acquire_for(1s, ec));
      EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
      EXPECT_NE(dlock::last_error_message().find("in use as a mutex"), std::string::npos)
          << dlock::last_error_message();
      EXPECT_EQ(raw_slots(name).present(3), 0) << "the refused semaphore left a permit behind";
    }
    {
      auto permit = a->make_semaphore(name, 3)->try_acquire(2);
      ASSERT_TRUE(permit);
      EXPECT_FALSE(b->make_lock(name)->try_acquire_for(1s, ec));
      EXPECT_EQ(ec, dlock::errc::name_conflict) << dlock::last_error_message();
      EXPECT_NE(dlock::last_error_message().find("in use as a semaphore (2 permits held"), std::string::npos)
          << dlock::last_error_message();
      mc::memc_ptr m = mc::make_handle(dlock::uri::parse(server_uri()), 2s, 2s);
      const auto k = mc::keys_for("dlock:", name);
      memcached_return_t rc;
      EXPECT_FALSE(mc::gets(m.get(), k, k.lock, rc)) << "the refused mutex left its item behind";
    }
    EXPECT_TRUE(b->make_lock(name)->try_acquire()) << "once no permit is held, the name is a mutex again";
  }
}

// The semaphore's record of the name may be evicted (or deleted): the next permit writes it again
// before it looks for the mutex, so a mutex taken afterwards still sees the permit.
TEST(memcached_semaphore, ALostRecordIsWrittenAgainByTheNextPermit) {
  const auto name = unique_name("one-name-record");
  auto b = open_backend();
  ASSERT_TRUE(b->make_semaphore(name, 2)->try_acquire());
  mc::memc_ptr m = mc::make_handle(dlock::uri::parse(server_uri()), 2s, 2s);
  const auto k = mc::keys_for("dlock:", name);
  memcached_return_t rc;
  ASSERT_TRUE(mc::gets(m.get(), k, k.semaphores, rc)) << "a permit records the name";
  memcached_delete_by_key(m.get(), k.group.data(), k.group.size(), k.semaphores.data(), k.semaphores.size(), 0);
  auto permit = b->make_semaphore(name, 2)->try_acquire();
  ASSERT_TRUE(permit);
  const auto record = mc::gets(m.get(), k, k.semaphores, rc);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->value, "2");
  std::error_code ec;
  EXPECT_FALSE(b->make_lock(name)->try_acquire(ec));
  EXPECT_EQ(ec, dlock::errc::name_conflict);
}

// A mutex and a semaphore racing for one name: conformance
// OneName.AMutexAndASemaphoreRacingForOneNameAreNeverBothGranted.

}  // namespace

TEST(memcached_semaphore, NeverMoreThanNHoldAndNIsReached) { never_more_than_n_and_n_is_reached(3, 8); }

// Above scan_above slots an acquire reads the slots first, then adds only free ones.
TEST(memcached_semaphore, NeverMoreThanNHoldAndNIsReachedWithTheSlotsReadFirst) {
  never_more_than_n_and_n_is_reached(12, 16);
}

TEST(memcached_semaphore, ALargeSemaphoreGrantsExactlyItsPermits) {
  const auto name = unique_name("sem-large");
  auto sem = open_backend()->make_semaphore(name, 40);
  std::vector<dlock::lease> held;
  for (int i = 0; i < 40; ++i) {
    held.push_back(sem->try_acquire());
    ASSERT_TRUE(held.back()) << "permit " << i;
  }
  EXPECT_FALSE(sem->try_acquire());
  EXPECT_EQ(raw_slots(name).present(40), 40);
  held[17].release();
  auto again = sem->try_acquire();
  EXPECT_TRUE(again) << "the freed slot is found";
  EXPECT_FALSE(sem->try_acquire(2));
}

TEST(memcached_semaphore, AnAcquireTakesAllItsPermitsOrNoneAndEachSlotCarriesTheToken) {
  const auto name = unique_name("sem-all");
  auto sem = open_backend()->make_semaphore(name, 3);
  auto two = sem->try_acquire(2);
  ASSERT_TRUE(two);
  raw_slots raw(name);
  EXPECT_EQ(raw.present(3), 2);
  EXPECT_FALSE(sem->try_acquire(2)) << "one permit is free";
  EXPECT_EQ(raw.present(3), 2) << "the failed acquire gave back the slot it took";
  auto one = sem->try_acquire();
  EXPECT_TRUE(one);
  EXPECT_EQ(raw.present(3), 3);
  two.release();
  EXPECT_EQ(raw.present(3), 1);
}

TEST(memcached_semaphore, AReleaseFindingASlotReplacedSaysNotOwnerAndLeavesTheOtherItem) {
  const auto name = unique_name("sem-replaced");
  auto sem = open_backend()->make_semaphore(name, 1, without_watchdog(10s));
  auto held = sem->try_acquire();
  ASSERT_TRUE(held);
  raw_slots raw(name);
  raw.erase(0);
  raw.set(0, "someone-else");
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
  ASSERT_TRUE(raw.get(0));
  EXPECT_EQ(raw.get(0)->value, "someone-else") << "the CAS-guarded release left the other owner's item";
}

TEST(memcached_semaphore, AnUnrenewedHolderExpiresAndItsPermitComesBack) {
  const auto name = unique_name("sem-expiry");
  auto b = open_backend("ttl=1s&restart_delay=off");
  auto held = b->make_semaphore(name, 1, without_watchdog(1s))->try_acquire();
  ASSERT_TRUE(held);
  auto other = b->make_semaphore(name, 1);
  EXPECT_FALSE(other->try_acquire());
  EXPECT_TRUE(other->try_acquire_for(5s)) << "the slot item expired with its ttl";
  std::error_code ec;
  held.release(ec);
  EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(memcached_semaphore, RenewalKeepsEverySlotPastTheTtlAndAnOutOfBandDeleteFiresLost) {
  const auto name = unique_name("sem-lost");
  auto sem = open_backend()->make_semaphore(name, 3);  // ttl 2s, watchdog on
  auto held = sem->try_acquire(2);
  ASSERT_TRUE(held);
  std::this_thread::sleep_for(3500ms);
  raw_slots raw(name);
  EXPECT_EQ(raw.present(3), 2) << "the watchdog renewed both slots past the 2 s ttl";
  EXPECT_FALSE(held.lost_token().stop_requested());
  raw.erase(*raw.first_present(3));
  const auto deadline = std::chrono::steady_clock::now() + 4s;
  while (!held.lost_token().stop_requested() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(held.lost_token().stop_requested()) << "a permit deleted out of band is found at the next renewal";
}

TEST(memcached_semaphore, FencingTokensIncreasePerGrant) {
  const auto name = unique_name("sem-fence");
  auto sem = open_backend()->make_semaphore(name, 2);
  std::uint64_t previous = 0;
  for (int i = 0; i < 5; ++i) {
    auto a = sem->try_acquire();
    auto b = sem->try_acquire();
    ASSERT_TRUE(a && b);
    EXPECT_GT(*a.fencing_token(), previous);
    EXPECT_GT(*b.fencing_token(), *a.fencing_token());
    previous = *b.fencing_token();
  }
}

TEST(memcached_semaphore, KeysNeverMeetTheMutexKeysOrEachOther) {
  // A mutex named like a slot, and semaphores whose names end like a slot suffix.
  const auto base = unique_name("sem-keys");
  auto b = open_backend();
  auto mutex = b->make_lock(base + "#permit0")->try_acquire();
  auto sem = b->make_semaphore(base, 1)->try_acquire();
  auto sem2 = b->make_semaphore(base + "#permit1", 1)->try_acquire();
  EXPECT_TRUE(mutex && sem && sem2);
  const auto k = mc::semaphore_keys_for("dlock:", base);
  EXPECT_NE(k.slot(0).lock, mc::keys_for("dlock:", base + "#permit0").lock);
  EXPECT_NE(k.fence, mc::keys_for("dlock:", base).fence);
  // A long name is hashed so that every slot key fits memcached's 250 bytes.
  const auto long_keys = mc::semaphore_keys_for("dlock:", std::string(400, 'x'));
  EXPECT_LE(long_keys.slot(dlock::max_semaphore_count - 1).lock.size(), mc::max_key_bytes);
}
