#pragma once
// Every waiting acquire a SQL backend offers (the mutex's, the reader-writer lock's read and write,
// the semaphore's) ends by its deadline plus a bound, whatever the server does (deadline.hpp), on a
// real server reached through a tcp_proxy: it accepts new connections and never answers them (the
// pool must open one inside the acquire), it stops answering on the connections it has, it refuses
// connections. The bound asserted is deadline + 2 s: a correctness bound, never a speed claim.
// And a stop request ends each of them, with a deadline far off, while it is still connecting
// (the server accepts and never answers): operation_canceled well before connect_timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "dlock_test/tcp_proxy.hpp"

namespace dlock::sql_testing {

using namespace std::chrono_literals;

using dlock::testing::through;

// One waiting acquire, on its own thread (a hang guard: a form stuck on the server fails the test
// instead of blocking it until the link heals).
struct timed_acquire {
  std::string form;
  std::future<std::pair<std::chrono::milliseconds, std::error_code>> result;
};

// `one_at_a_time`: each form finishes before the next starts (the connections it opens are then
// opened one at a time, so each finds its socket without asking the server: mysql's
// new_socket_to, which a proxy in front of the server would otherwise leave the only way).
// `stop`: the stop token each acquire takes (an empty one: nothing stops them).
inline std::vector<timed_acquire> start_acquires(const std::shared_ptr<dlock::backend>& b, const std::string& name,
                                                 std::chrono::milliseconds wait, bool one_at_a_time = false,
                                                 std::stop_token stop = {}) {
  std::vector<timed_acquire> out;
  const auto start = [&](std::string form, auto acquire) {
    if (one_at_a_time && !out.empty()) out.back().result.wait();
    out.push_back({std::move(form), std::async(std::launch::async, [acquire, wait, stop] {
                     std::error_code ec;
                     const auto begin = std::chrono::steady_clock::now();
                     auto l = acquire(wait, stop, ec);
                     const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - begin);
                     if (l) ec = make_error_code(errc::invalid_argument);  // granted through a silent link: wrong
                     return std::make_pair(took, ec);
                   })});
  };
  auto lock = std::shared_ptr<dlock::distributed_lock>(b->make_lock(name));
  start("mutex", [lock](auto w, std::stop_token s, std::error_code& ec) { return lock->try_acquire_for(w, s, ec); });
  if (b->caps().has(capability::read_write)) {
    auto rw = std::shared_ptr<dlock::rw_lock>(b->make_rw_lock(name + "-rw"));
    start("read", [rw](auto w, std::stop_token s, std::error_code& ec) { return rw->try_acquire_read_for(w, s, ec); });
    auto rw2 = std::shared_ptr<dlock::rw_lock>(b->make_rw_lock(name + "-rw2"));
    start("write",
          [rw2](auto w, std::stop_token s, std::error_code& ec) { return rw2->try_acquire_write_for(w, s, ec); });
  }
  if (b->caps().has(capability::semaphore)) {
    auto sem = std::shared_ptr<dlock::semaphore>(b->make_semaphore(name + "-sem", 3));
    start("semaphore",
          [sem](auto w, std::stop_token s, std::error_code& ec) { return sem->try_acquire_for(w, s, ec); });
  }
  return out;
}

// Waits for each (hang guard 30 s) and checks the bound; `heal` runs once every result is in or
// the guard gave up, so a stuck acquire can finish before its future is destroyed.
template <class Heal>
void expect_within(std::vector<timed_acquire>& acquires, std::chrono::milliseconds wait, const char* fault, Heal heal) {
  constexpr auto slack = 2s;
  for (auto& a : acquires) {
    if (a.result.wait_for(30s) != std::future_status::ready) {
      ADD_FAILURE() << fault << ": the " << a.form << " acquire with a " << wait.count()
                    << " ms deadline still ran after 30 s";
      continue;
    }
    const auto [took, ec] = a.result.get();
    EXPECT_LE(took, wait + slack) << fault << ": the " << a.form << " acquire took " << took.count() << " ms with a "
                                  << wait.count() << " ms deadline";
    EXPECT_EQ(ec, dlock::errc::backend_unavailable) << fault << ": " << a.form << ": " << ec.message();
  }
  heal();
  for (auto& a : acquires)
    if (a.result.valid()) a.result.wait();
}

// `uri`: the scheme's URI on the real server; `query`: what each backend of the test adds.
inline void expect_acquires_end_by_their_deadline(const std::string& uri) {
  constexpr auto wait = 1000ms;
  const auto target = dlock::uri::parse(uri);
  const auto host = target.hosts().front().host;
  const auto port = target.hosts().front().port_or(0);
  {  // accepts, never answers: the idle connection is gone, so the pool opens one in the acquire
    dlock::testing::tcp_proxy proxy(host, port);
    auto b = dlock::open(through(uri, proxy));
    proxy.partition();
    proxy.reset_connections();
    auto acquires = start_acquires(b, dlock::testing::unique_name("deadline-accepts"), wait);
    expect_within(acquires, wait, "a server that accepts and never answers", [&] { proxy.heal(); });
  }
  {  // stops answering on the connections the backend has (and on new ones)
    dlock::testing::tcp_proxy proxy(host, port);
    auto b = dlock::open(through(uri, proxy));
    const auto name = dlock::testing::unique_name("deadline-silent");
    {  // connections for every form, opened one at a time, given back to the pool
      auto warm = start_acquires(b, name + "-warm", wait, true);
      for (auto& a : warm) a.result.get();
    }
    proxy.partition();
    auto acquires = start_acquires(b, name, wait);
    expect_within(acquires, wait, "a server that stops answering", [&] { proxy.heal(); });
  }
  {  // refuses: the proxy is gone, with every connection through it
    std::optional<dlock::testing::tcp_proxy> proxy(std::in_place, host, port);
    auto b = dlock::open(through(uri, *proxy));
    proxy.reset();
    auto acquires = start_acquires(b, dlock::testing::unique_name("deadline-refused"), wait);
    expect_within(acquires, wait, "a server that refuses connections", [] {});
  }
}

// A stop request ends every form while its connection is being opened (the server accepts and
// never answers; connect_timeout 10 s, the deadline 20 s): operation_canceled, within the same
// correctness bound as a deadline's, counted from the stop.
inline void expect_a_stop_ends_acquires_still_connecting(const std::string& uri) {
  constexpr auto wait = 20s;
  constexpr auto stop_after = 300ms;
  constexpr auto slack = 2s;
  const auto target = dlock::uri::parse(uri);
  dlock::testing::tcp_proxy proxy(target.hosts().front().host, target.hosts().front().port_or(0));
  auto b = dlock::open(dlock::testing::with_query(through(uri, proxy), "connect_timeout=10s"));
  proxy.partition();
  proxy.reset_connections();
  std::stop_source stop;
  auto acquires = start_acquires(b, dlock::testing::unique_name("stop-connecting"), wait, false, stop.get_token());
  std::this_thread::sleep_for(stop_after);  // each form is inside its connect by now
  stop.request_stop();
  for (auto& a : acquires) {
    if (a.result.wait_for(30s) != std::future_status::ready) {
      ADD_FAILURE() << "the " << a.form << " acquire still ran 30 s after a stop request";
      continue;
    }
    const auto [took, ec] = a.result.get();
    EXPECT_LE(took, stop_after + slack) << "the " << a.form << " acquire ended " << (took - stop_after).count()
                                        << " ms after the stop request";
    EXPECT_EQ(ec, std::errc::operation_canceled) << a.form << ": " << ec.message();
  }
  proxy.heal();
}

}  // namespace dlock::sql_testing
