// Cancellation, on every backend: a stop request on a waiting acquire's std::stop_token ends the
// wait with std::errc::operation_canceled and an empty lease, and leaves nothing behind: no waiter
// entry on the server (a queue slot, a sequential node, a waiter row, a waiting session) keeps the
// next contender out, and a grant that crossed the stop request is given back at once. The leases
// here have a long ttl (20 s), so that anything left behind keeps the name for far longer than the
// bounds below, which are correctness bounds for a loaded machine, not speed claims (how soon a
// stop ends a wait is measured by the cancellation benchmark).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <future>
#include <iostream>
#include <random>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>

#include "dlock_test/tcp_proxy.hpp"
#include "shared_primitives.hpp"

namespace dlock::conformance {
namespace {

constexpr auto long_ttl = 20s;
// How long a stopped wait may take to end, or the next contender to be granted: far below the ttl.
constexpr auto bound = 3s;
const std::error_code canceled = std::make_error_code(std::errc::operation_canceled);

// How many cancel-versus-release races a test runs (DLOCK_CANCEL_RACES, default 100: the
// benchmark's measurement runs 1,000).
int races() {
  const char* n = std::getenv("DLOCK_CANCEL_RACES");
  return n && std::atoi(n) > 0 ? std::atoi(n) : 100;
}

// A test's first grant, `acquire(wait)`, waited for through a server younger than a ttl (a Redis
// that just started grants nothing for a ttl: wait_after_restart).
template <class Acquire>
lease granted_once_ready(Acquire acquire) {
  return acquire(long_ttl + 2 * bound);
}

// Runs `wait(stop, ec)` on a thread of its own, asks it to stop once it had `settle` to start
// waiting, and returns its lease and error.
template <class Wait>
std::pair<lease, std::error_code> stopped_wait(Wait wait, std::chrono::milliseconds settle = 300ms) {
  std::stop_source source;
  auto waiting = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto l = wait(source.get_token(), ec);
    return std::pair{std::move(l), ec};
  });
  // A stop that comes before the wait began ends it as well: the settle time only lets this test
  // stop a wait in progress most of the time, never decides its outcome.
  std::this_thread::sleep_for(settle);
  const auto asked = clock::now();
  source.request_stop();
  if (waiting.wait_until(asked + bound) != std::future_status::ready) {
    ADD_FAILURE() << "the wait did not end within " << bound.count() << " s of the stop request";
  }
  auto outcome = waiting.get();  // blocks if it never ends: the test's timeout reports it
  std::cout << "[ stopped  ] the wait ended " << std::chrono::duration<double, std::milli>(clock::now() - asked).count()
            << " ms after the stop request (at most; the benchmark measures it)\n";
  return outcome;
}

}  // namespace

class Cancellation : public SharedPrimitives {
 protected:
  std::string who_holds(const std::string& name) const;
};

TEST_P(Cancellation, AStopEndsAWaitingAcquireAndTheNextContenderIsGrantedAtOnce) {
  const auto name = dlock::testing::unique_name("cancel-wait");
  auto holder = make(name, options(long_ttl)), waiter = make(name, options(long_ttl)),
       next = make(name, options(long_ttl));
  auto held = granted_once_ready([&](auto wait) { return holder->try_acquire_for(wait); });
  ASSERT_TRUE(held);
  for (const bool forever : {false, true}) {
    SCOPED_TRACE(forever ? "acquire(stop, ec)" : "try_acquire_for(30 s, stop, ec)");
    auto [got, ec] = stopped_wait([&](std::stop_token stop, std::error_code& e) {
      return forever ? waiter->acquire(std::move(stop), e) : waiter->try_acquire_for(30s, std::move(stop), e);
    });
    EXPECT_FALSE(got) << "a stopped wait returned a lease while the lock was held";
    EXPECT_EQ(ec, canceled) << ec.message() << ": " << dlock::last_error_message();
  }
  held.release();
  // A waiter entry left behind (a queue slot, a node, a row, a waiting session) would keep `next`
  // out until it expired, 20 s from now.
  EXPECT_TRUE(next->try_acquire_for(bound)) << "the stopped waiters left something that keeps the lock";
}

// A stop request ends a waiting acquire whose servers accept connections and never answer (their
// connections cut, so the acquire opens one, or the backend waits on one that stays silent): at
// once, not after a connect or command timeout. A URI of several servers (a ZooKeeper ensemble,
// an etcd cluster, Redlock's masters, a memcached ring) has each silenced behind a proxy of its own.
TEST_P(Cancellation, AStopEndsAnAcquireWhoseServerNeverAnswers) {
  if (backend_->scope() != lock_scope::network) GTEST_SKIP() << "no server: the lock lives on this machine";
  if (hooks() && hooks()->data_servers_announced)
    GTEST_SKIP() << "the URI names servers that announce where the locks live: proxies in front of them do not "
                 << "stand between the client and the locks (the backend's own tests cut those links)";
  const auto target = dlock::uri::parse(uri_);
  auto proxies = dlock::testing::proxies_for(uri_);
  // I/O timeouts far beyond the bound, where the scheme has them: ending at one is not ending at
  // the stop request. A backend that declares it cannot cut a silent command gets a short
  // command_timeout, its declared end.
  auto uri = dlock::testing::through(uri_, proxies);
  const auto info = dlock::default_registry().find(target.scheme());
  ASSERT_TRUE(info);
  const bool waits_out_commands = hooks() && hooks()->stop_waits_out_a_silent_command;
  for (const std::string key : {"connect_timeout", "command_timeout", "session_timeout"}) {
    if (std::ranges::find(info->parameters, key) == info->parameters.end() || target.get(key)) continue;
    uri = dlock::testing::with_query(uri, key + (waits_out_commands && key == "command_timeout" ? "=1s" : "=20s"));
  }
  auto through_proxies = dlock::open(uri);
  auto waiter = through_proxies->make_lock(dlock::testing::unique_name("cancel-silent"), options(long_ttl));
  for (auto& p : proxies) {
    p->partition();
    p->reset_connections();
  }
  auto [got, ec] = stopped_wait(
      [&](std::stop_token stop, std::error_code& e) { return waiter->try_acquire_for(30s, std::move(stop), e); });
  EXPECT_FALSE(got) << "granted through links that deliver nothing";
  EXPECT_EQ(ec, canceled) << ec.message() << ": " << dlock::last_error_message();
  for (auto& p : proxies) p->heal();
}

// What the server says of `name`, for a failure's message: whose grant was left behind.
std::string Cancellation::who_holds(const std::string& name) const {
  std::error_code ec;
  const auto info = backend_->inspect(name, ec);
  if (ec) return "the server cannot say who holds it (" + ec.message() + ")";
  std::string out = info.held ? "held by" : "not held now";
  for (const auto& h : info.holders)
    out += " '" + h.owner + "'" + (h.ttl_left ? " (" + std::to_string(h.ttl_left->count()) + " ms left)" : "");
  return out;
}

TEST_P(Cancellation, TheThrowingFormsThrowOperationCanceled) {
  const auto name = dlock::testing::unique_name("cancel-throw");
  auto holder = make(name, options(long_ttl)), waiter = make(name, options(long_ttl));
  auto held = granted_once_ready([&](auto wait) { return holder->try_acquire_for(wait); });
  ASSERT_TRUE(held);
  auto [got, ec] = stopped_wait([&](std::stop_token stop, std::error_code& e) {
    try {
      return waiter->acquire(std::move(stop));
    } catch (const std::system_error& thrown) {
      e = thrown.code();
      EXPECT_NE(std::string(thrown.what()).find(name), std::string::npos) << thrown.what();
      return lease{};
    }
  });
  EXPECT_FALSE(got);
  EXPECT_EQ(ec, canceled) << ec.message();
}

TEST_P(Cancellation, AStopAlreadyRequestedEndsTheWaitWithoutAGrant) {
  const auto name = dlock::testing::unique_name("cancel-early");
  auto waiter = make(name, options(long_ttl)), next = make(name, options(long_ttl));
  ASSERT_TRUE(granted_once_ready([&](auto wait) { return next->try_acquire_for(wait); }));  // released at once
  std::stop_source source;
  source.request_stop();
  std::error_code ec;
  EXPECT_FALSE(waiter->try_acquire_for(10s, source.get_token(), ec)) << "granted after the stop request";
  EXPECT_EQ(ec, canceled) << ec.message();
  EXPECT_TRUE(next->try_acquire()) << "a wait stopped before it began left the lock taken";
}

// The race the stop token exists for: the holder releases at the moment the waiter is stopped, so
// that the grant and the stop cross. Whichever wins, nothing is left: a waiter that got the lock
// holds a valid lease, and one that was stopped leaves the lock free for the next at once.
TEST_P(Cancellation, AStopThatCrossesAGrantNeverLeavesTheLockTaken) {
  const auto name = dlock::testing::unique_name("cancel-race");
  auto holder = make(name, options(long_ttl)), waiter = make(name, options(long_ttl)),
       next = make(name, options(long_ttl));
  std::mt19937 random(std::random_device{}());
  int granted = 0, stopped = 0;
  const int n = races();
  for (int i = 0; i < n && !HasFailure(); ++i) {
    auto held = i == 0 ? granted_once_ready([&](auto wait) { return holder->try_acquire_for(wait); })
                       : holder->try_acquire_for(bound);
    ASSERT_TRUE(held) << "race " << i << ": the lock was not free at its start";
    std::stop_source source;
    std::atomic<bool> started{false};
    auto waiting = std::async(std::launch::async, [&] {
      std::error_code ec;
      started = true;
      auto l = waiter->try_acquire_for(30s, source.get_token(), ec);
      return std::pair{std::move(l), ec};
    });
    while (!started) std::this_thread::yield();
    // Into the wait, then the release and the stop back to back, in either order.
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 3000));
    if (random() % 2) {
      held.release();
      source.request_stop();
    } else {
      source.request_stop();
      held.release();
    }
    ASSERT_EQ(waiting.wait_for(bound), std::future_status::ready) << "race " << i << ": the stopped wait went on";
    auto [got, ec] = waiting.get();
    if (got) {
      ++granted;
      EXPECT_FALSE(ec) << ec.message();
      EXPECT_TRUE(got.held()) << "race " << i << ": a lease returned as the stop came is not held";
      got.release();
    } else {
      ++stopped;
      EXPECT_EQ(ec, canceled) << "race " << i << ": " << ec.message();
    }
    auto after = next->try_acquire_for(bound);
    EXPECT_TRUE(after) << "race " << i << ": the lock stayed taken after a " << (got ? "granted" : "stopped")
                       << " waiter (a grant left behind); " << who_holds(name) << "; the holder is '" << holder->owner()
                       << "', the waiter '" << waiter->owner() << "'";
  }
  std::cout << "[ races   ] " << n << ": " << granted << " granted before the stop, " << stopped << " stopped\n";
}

TEST_P(Cancellation, AStopEndsTheReaderWriterAndSemaphoreWaits) {
  if (offers_rw()) {
    const auto name = dlock::testing::unique_name("cancel-rw");
    auto writer = rw(name, options(long_ttl)), reader = rw(name, options(long_ttl)), next = rw(name, options(long_ttl));
    auto written = granted_once_ready([&](auto wait) { return writer->try_acquire_write_for(wait); });
    ASSERT_TRUE(written);
    auto [read, read_ec] = stopped_wait([&](std::stop_token stop, std::error_code& e) {
      return reader->try_acquire_read_for(30s, std::move(stop), e);
    });
    EXPECT_FALSE(read);
    EXPECT_EQ(read_ec, canceled) << read_ec.message();
    auto [wrote, write_ec] = stopped_wait(
        [&](std::stop_token stop, std::error_code& e) { return reader->acquire_write(std::move(stop), e); });
    EXPECT_FALSE(wrote);
    EXPECT_EQ(write_ec, canceled) << write_ec.message();
    written.release();
    EXPECT_TRUE(next->try_acquire_write_for(bound)) << "a stopped reader-writer wait left the lock taken";
  }
  if (offers_semaphore()) {
    const auto name = dlock::testing::unique_name("cancel-sem");
    auto full = sem(name, 2, options(long_ttl)), waiter = sem(name, 2, options(long_ttl)),
         next = sem(name, 2, options(long_ttl));
    auto both = granted_once_ready([&](auto wait) { return full->try_acquire_for(wait, 2); });
    ASSERT_TRUE(both);
    auto [one, ec] = stopped_wait(
        [&](std::stop_token stop, std::error_code& e) { return waiter->try_acquire_for(30s, std::move(stop), 1, e); });
    EXPECT_FALSE(one);
    EXPECT_EQ(ec, canceled) << ec.message();
    both.release();
    EXPECT_TRUE(next->try_acquire_for(bound, 2)) << "a stopped semaphore wait left a permit taken";
  }
}

INSTANTIATE_TEST_SUITE_P(, Cancellation, ::testing::ValuesIn(dlock::testing::joined_targets()),
                         [](const ::testing::TestParamInfo<conformance_target>& info) { return info.param.label; });

}  // namespace dlock::conformance
