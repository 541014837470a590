// The core's part of the reader-writer lock and the semaphore, with a test-local backend whose
// server faults the tests switch on: argument checks, refusals where not offered, the outage wait,
// stalled grants, the polling wait, the watchdog, and the registry's declared offer bits. What
// each backend's primitives do on its server is the conformance suite's (tests/conformance).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "test_backend.hpp"

namespace dlock::core_test {
namespace {

using namespace std::chrono_literals;

// Units taken per name: a reader 1, a writer `writer_units`, a permit 1. Faults as the table's.
struct pool_server : server_faults {
  std::mutex m;
  std::map<std::string, std::uint64_t> used;
  std::atomic<int> renewals{0};
};

class pool_lease final : public spi::lease_state {
 public:
  pool_lease(std::shared_ptr<pool_server> s, std::string name, std::uint64_t units, std::chrono::milliseconds ttl,
             bool stalled)
      : lease_state(name, ttl, stalled ? clock::now() - 1ms : validity_after(clock::now(), ttl)),
        s_(std::move(s)),
        units_(units) {}

 private:
  void do_release(std::error_code&) noexcept override {
    std::lock_guard g(s_->m);
    s_->used[name()] -= units_;
  }
  void do_renew(std::chrono::milliseconds, std::error_code&) noexcept override { ++s_->renewals; }
  std::shared_ptr<pool_server> s_;
  std::uint64_t units_;
};

std::unique_ptr<spi::lease_state> take(const std::shared_ptr<pool_server>& s, const std::string& name,
                                       std::uint64_t capacity, std::uint64_t units, std::chrono::milliseconds ttl,
                                       std::error_code& ec) {
  if (!s->reached(ec)) return nullptr;
  std::lock_guard g(s->m);
  auto& used = s->used[name];
  if (units > capacity - used) return nullptr;
  used += units;
  return std::make_unique<pool_lease>(s, name, units, ttl, s->stalls_grant());
}

constexpr std::uint64_t writer_units = 1'000'000;

class pool_rw_lock final : public rw_lock {
 public:
  pool_rw_lock(std::shared_ptr<pool_server> s, std::string name, capabilities caps, lock_options o)
      : rw_lock(std::move(name), caps, std::move(o)), s_(std::move(s)) {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override {
    return take(s_, std::string(name()), writer_units, side == access::read ? 1 : writer_units, options().ttl, ec);
  }
  std::shared_ptr<pool_server> s_;
};

class pool_semaphore final : public semaphore {
 public:
  pool_semaphore(std::shared_ptr<pool_server> s, std::string name, std::uint32_t max, capabilities caps, lock_options o)
      : semaphore(std::move(name), max, caps, std::move(o)), s_(std::move(s)) {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override {
    return take(s_, std::string(name()), max_count(), permits, options().ttl, ec);
  }
  std::shared_ptr<pool_server> s_;
};

constexpr capabilities pool_caps{capability::expiring, capability::renewable};

class pool_backend final : public backend {
 public:
  explicit pool_backend(primitive_caps offered = {pool_caps, pool_caps})
      : backend(capabilities{capability::expiring}, offered, lock_scope::process, {64}, quick(), "pool://"),
        server(std::make_shared<pool_server>()) {}
  std::shared_ptr<pool_server> server;

  static lock_options quick() {
    lock_options o;
    o.ttl = 1s;
    o.poll = {1ms, 5ms};
    return o;
  }

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options o) override {
    return std::make_unique<test_lock>(std::make_shared<table>(), std::move(name), caps(), std::move(o));
  }
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options o) override {
    return std::make_unique<pool_rw_lock>(server, std::move(name), rw_caps(), std::move(o));
  }
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max, lock_options o) override {
    return std::make_unique<pool_semaphore>(server, std::move(name), max, semaphore_caps(), std::move(o));
  }
};

TEST(SharedPrimitivesCore, TheOfferBitsFollowTheDeclaredPrimitives) {
  pool_backend both;
  EXPECT_TRUE(both.caps().has(capability::read_write));
  EXPECT_TRUE(both.caps().has(capability::semaphore));
  EXPECT_FALSE(both.caps().has(capability::writer_preferred));
  EXPECT_EQ(both.rw_caps(), pool_caps);
  pool_backend preferring({pool_caps.with(capability::writer_preferred), std::nullopt});
  EXPECT_TRUE(preferring.caps().has(capability::writer_preferred));
  EXPECT_FALSE(preferring.caps().has(capability::semaphore));
  EXPECT_EQ(preferring.semaphore_caps(), capabilities{});
  EXPECT_EQ(capabilities::parse("read_write|semaphore|writer_preferred"),
            (capabilities{capability::read_write, capability::semaphore, capability::writer_preferred}));
}

TEST(SharedPrimitivesCore, ABackendWithoutThemRefusesClearly) {
  test_backend plain(capabilities{capability::expiring});
  std::error_code ec;
  EXPECT_FALSE(plain.make_rw_lock("x", ec));
  EXPECT_EQ(ec, make_error_code(errc::not_supported));
  EXPECT_NE(last_error_message().find("reader-writer lock"), std::string::npos) << last_error_message();
  EXPECT_NE(last_error_message().find("read_write"), std::string::npos) << last_error_message();
  EXPECT_FALSE(plain.make_semaphore("x", 3, ec));
  EXPECT_EQ(ec, make_error_code(errc::not_supported));
  EXPECT_NE(last_error_message().find("semaphore"), std::string::npos) << last_error_message();
  EXPECT_THROW((void)plain.make_rw_lock("x"), dlock::error);
}

TEST(SharedPrimitivesCore, NamesAndCountsAreCheckedBeforeTheBackend) {
  pool_backend b;
  std::error_code ec;
  EXPECT_FALSE(b.make_rw_lock("", ec));
  EXPECT_EQ(ec, make_error_code(errc::invalid_name));
  EXPECT_FALSE(b.make_semaphore(std::string(65, 'x'), 2, ec));
  EXPECT_EQ(ec, make_error_code(errc::invalid_name));
  EXPECT_FALSE(b.make_semaphore("s", 0, ec));
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
  EXPECT_NE(last_error_message().find("max_count"), std::string::npos) << last_error_message();
  EXPECT_FALSE(b.make_semaphore("s", max_semaphore_count + 1, ec));
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
  auto s = b.make_semaphore("s", 2);
  EXPECT_FALSE(s->try_acquire(3, ec));
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
  EXPECT_THROW((void)s->acquire(0), dlock::error);
  EXPECT_EQ(b.server->attempts.load(), 0) << "a bad permit count reached the server";
  auto o = pool_backend::quick();
  o.ttl = 0ms;
  EXPECT_FALSE(b.make_rw_lock("r", o, ec));
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
}

TEST(SharedPrimitivesCore, AnOutageInsideTheWaitIsWaitedOutAndReportedOnlyPastTheDeadline) {
  pool_backend b;
  auto rw = b.make_rw_lock("outage");
  b.server->unavailable_attempts = 3;
  EXPECT_TRUE(rw->try_acquire_write_for(5s)) << "a short outage inside the wait failed the acquire";
  b.server->unavailable_attempts = 1'000'000;
  std::error_code ec;
  auto s = b.make_semaphore("outage", 2);
  EXPECT_FALSE(s->try_acquire_for(100ms, ec));
  EXPECT_EQ(ec, make_error_code(errc::backend_unavailable));
  b.server->unavailable_attempts = 0;
}

TEST(SharedPrimitivesCore, AGrantWithoutValidityLeftIsGivenBack) {
  pool_backend b;
  auto s = b.make_semaphore("stalled", 1);
  b.server->stalled_grants = 1;
  auto held = s->try_acquire_for(2s);
  ASSERT_TRUE(held) << "the wait did not go on after a stalled grant";
  EXPECT_GT(held.remaining(), 0ms);
  EXPECT_EQ(b.server->used["stalled"], 1u) << "the stalled grant was not given back";
}

TEST(SharedPrimitivesCore, ThePollingWaitGetsWhatIsReleasedMeanwhile) {
  pool_backend b;
  auto rw = b.make_rw_lock("poll");
  auto reader = rw->try_acquire_read();
  ASSERT_TRUE(reader);
  EXPECT_FALSE(rw->try_acquire_write()) << "a writer got in past a reader";
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    reader.release();
  });
  EXPECT_TRUE(rw->try_acquire_write_for(5s));
  releaser.join();
  auto s = b.make_semaphore("poll", 2);
  auto both = s->acquire(2);
  EXPECT_FALSE(s->try_acquire_for(30ms)) << "a permit past the count";
  std::error_code ec;
  both.release(ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(s->acquire(ec));
}

TEST(SharedPrimitivesCore, TheWatchdogRenewsRenewablePrimitives) {
  pool_backend b;
  auto o = pool_backend::quick();
  o.ttl = 150ms;
  auto s = b.make_semaphore("renewed", 1, o);
  auto held = s->acquire();
  std::this_thread::sleep_for(400ms);
  EXPECT_GE(b.server->renewals.load(), 2) << "the watchdog did not renew a renewable semaphore lease";
  EXPECT_TRUE(held.held());
}

TEST(SharedPrimitivesCore, OpenRequiringAPrimitiveNamesTheSchemesThatHaveIt) {
  registry r;
  r.add({.scheme = "plain",
         .caps = {capability::expiring},
         .scope = lock_scope::process,
         .example_uri = "plain://",
         .summary = "p",
         .parameters = {},
         .open = [](const uri&, const lock_options& o) {
           return std::make_shared<test_backend>(capabilities{capability::expiring}, o);
         }});
  r.add({.scheme = "pools",
         .caps = {capability::expiring},
         .primitives = {pool_caps, pool_caps},
         .scope = lock_scope::process,
         .example_uri = "pools://",
         .summary = "q",
         .parameters = {},
         .open = [](const uri&, const lock_options&) { return std::make_shared<pool_backend>(); }});
  std::error_code ec;
  EXPECT_FALSE(r.open("plain://", {capability::semaphore}, ec));
  EXPECT_EQ(ec, make_error_code(errc::missing_capability));
  EXPECT_NE(last_error_message().find("pools"), std::string::npos) << last_error_message();
  auto opened = r.open("pools://", {capability::read_write, capability::semaphore}, ec);
  EXPECT_FALSE(ec) << last_error_message();
  ASSERT_TRUE(opened);
  EXPECT_TRUE(opened->caps().has(capability::semaphore));
}

}  // namespace
}  // namespace dlock::core_test
