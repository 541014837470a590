// The cases both Asio flavours pass (asio_test.cpp, boost_asio_test.cpp): ASYNC_NET is the Asio
// namespace, ASYNC_API the namespace of dlock's operations. On memory:// and file:// (real
// backends, in-process and cross-process); every networked backend runs the conformance suite's
// Async tests.

namespace {

using clock_type = std::chrono::steady_clock;

std::string unique(const std::string& what) {
  static std::atomic<int> n{0};
  return "async/" + what + "/" + std::to_string(::getpid()) + "/" + std::to_string(n++);
}

// use_future's value: standalone Asio takes a leading std::error_code as the error (the future
// throws it); Boost 1.74 only its own error_code, so there the future holds both.
[[maybe_unused]] dlock::lease lease_of(dlock::lease l) { return l; }
[[maybe_unused]] dlock::lease lease_of(std::tuple<std::error_code, dlock::lease> t) {
  EXPECT_FALSE(std::get<0>(t)) << std::get<0>(t).message();
  return std::move(std::get<1>(t));
}

// The file backend's folder, made when a test first opens it: a parameter (and so the test's
// name, which ctest lists) must not change from one process to the next.
std::string file_uri() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("dlock-async-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return "file://" + dir;
}

// The parameter is the embedded scheme: memory or file.
class AsyncAcquire : public ::testing::TestWithParam<std::string> {
 protected:
  std::shared_ptr<dlock::backend> backend_ = dlock::open(GetParam() == "file" ? file_uri() : GetParam() + "://");
};

INSTANTIATE_TEST_SUITE_P(Embedded, AsyncAcquire, ::testing::Values(std::string("memory"), std::string("file")),
                         [](const auto& info) { return info.param; });

// A free lock: the callback runs on the executor it was bound to, with a held lease, and never
// inside the initiating call; run() returns only once it ran (the operation kept the work).
TEST_P(AsyncAcquire, ACallbackGetsAHeldLeaseOnItsExecutor) {
  auto lock = backend_->make_lock(unique("callback"));
  ASYNC_NET::io_context io;
  bool called = false;
  ASYNC_API::async_acquire(*lock, 5s, ASYNC_NET::bind_executor(io, [&](std::error_code ec, dlock::lease held) {
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_TRUE(held.held());
    EXPECT_TRUE(io.get_executor().running_in_this_thread());
    called = true;
  }));
  EXPECT_FALSE(called);
  io.run();
  EXPECT_TRUE(called);
}

// Contended: the waiter completes once the holder releases, with the lock; until then nothing.
TEST_P(AsyncAcquire, AWaiterIsGrantedWhenTheHolderReleasesAndNotBefore) {
  const auto name = unique("handoff");
  auto holder = backend_->make_lock(name), waiter = backend_->make_lock(name);
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  ASYNC_NET::io_context io;
  auto work = ASYNC_NET::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto granted = ASYNC_API::async_acquire(*waiter, 30s, ASYNC_NET::use_future);
  EXPECT_EQ(granted.wait_for(300ms), std::future_status::timeout) << "granted while the holder held the lock";
  held.release();
  ASSERT_EQ(granted.wait_for(10s), std::future_status::ready);
  auto lease = lease_of(granted.get());
  EXPECT_TRUE(lease.held());
  work.reset();
  runner.join();
}

// An election's campaign, awaited: the candidate is elected when the leader resigns, with a greater
// term, and its leadership carries its own id. A stop request ends a campaign as it ends an acquire.
TEST(AsyncCampaign, ACandidateIsElectedWhenTheLeaderResignsAndAStopEndsACampaign) {
  auto backend = dlock::open("memory://");
  const auto name = unique("campaign");
  auto first = backend->make_election(name), second = backend->make_election(name);
  auto leading = first->try_campaign();
  ASSERT_TRUE(leading);
  ASYNC_NET::io_context io;
  std::optional<std::pair<std::error_code, dlock::leadership>> outcome;
  ASYNC_API::async_campaign(*second, 30s, ASYNC_NET::bind_executor(io, [&](std::error_code ec, dlock::leadership l) {
    outcome.emplace(ec, std::move(l));
  }));
  ASYNC_NET::steady_timer resign(io, 100ms);
  resign.async_wait([&](auto) {
    EXPECT_FALSE(outcome) << "elected while another candidate led";
    leading.resign();
  });
  io.run();
  ASSERT_TRUE(outcome);
  EXPECT_FALSE(outcome->first) << outcome->first.message();
  ASSERT_TRUE(outcome->second.leading());
  EXPECT_GT(outcome->second.term(), leading.term());
  EXPECT_EQ(outcome->second.id(), second->id());

  std::stop_source stop;
  std::optional<std::pair<std::error_code, dlock::leadership>> stopped;
  io.restart();
  ASYNC_API::async_campaign(*first, 30s, stop.get_token(),
                            ASYNC_NET::bind_executor(io, [&](std::error_code ec, dlock::leadership l) {
                              stopped.emplace(ec, std::move(l));
                            }));
  ASYNC_NET::steady_timer cancel(io, 100ms);
  cancel.async_wait([&](auto) { stop.request_stop(); });
  io.run();
  ASSERT_TRUE(stopped);
  EXPECT_TRUE(is_canceled(stopped->first)) << stopped->first.message();
  EXPECT_FALSE(stopped->second);
}

// A timeout completes with an empty lease and no error, as try_acquire_for.
TEST_P(AsyncAcquire, ATimeoutCompletesWithAnEmptyLeaseAndNoError) {
  const auto name = unique("timeout");
  auto holder = backend_->make_lock(name), waiter = backend_->make_lock(name);
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  ASYNC_NET::io_context io;
  std::optional<std::pair<std::error_code, dlock::lease>> outcome;
  ASYNC_API::async_acquire(*waiter, 200ms, ASYNC_NET::bind_executor(io, [&](std::error_code ec, dlock::lease l) {
    outcome.emplace(ec, std::move(l));
  }));
  io.run();  // until the handler ran: the operation keeps work on io
  ASSERT_TRUE(outcome);
  EXPECT_FALSE(outcome->first) << outcome->first.message();
  EXPECT_FALSE(outcome->second);
}

// A stop request ends the wait with operation_aborted and leaves nothing behind: once the holder
// releases, another contender is granted at once.
TEST_P(AsyncAcquire, AStopTokenCancelsTheWaitAndLeavesNothingBehind) {
  const auto name = unique("stop");
  auto holder = backend_->make_lock(name), waiter = backend_->make_lock(name), next = backend_->make_lock(name);
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  ASYNC_NET::io_context io;
  std::stop_source stop;
  std::optional<std::pair<std::error_code, dlock::lease>> outcome;
  ASYNC_API::async_acquire(
      *waiter, 30s, stop.get_token(),
      ASYNC_NET::bind_executor(io, [&](std::error_code ec, dlock::lease l) { outcome.emplace(ec, std::move(l)); }));
  ASYNC_NET::steady_timer settle(io, 200ms);
  settle.async_wait([&](auto) { stop.request_stop(); });
  const auto started = clock_type::now();
  io.run();  // until the handler ran
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(is_canceled(outcome->first)) << outcome->first.message();
  EXPECT_FALSE(outcome->second);
  EXPECT_LT(clock_type::now() - started, 10s);
  held.release();
  EXPECT_TRUE(next->try_acquire_for(5s)) << "the canceled waiter left something behind";
}

// A stop requested before the operation starts cancels it as well.
TEST_P(AsyncAcquire, AStopRequestedBeforeTheStartCancelsAtOnce) {
  auto lock = backend_->make_lock(unique("stopped-before"));
  std::stop_source stop;
  stop.request_stop();
  ASYNC_NET::io_context io;
  std::optional<std::error_code> result;
  ASYNC_API::async_acquire(*lock, 30s, stop.get_token(),
                           ASYNC_NET::bind_executor(io, [&](std::error_code ec, dlock::lease l) {
                             result = ec;
                             EXPECT_FALSE(l);
                           }));
  io.run();
  ASSERT_TRUE(result);
  EXPECT_TRUE(is_canceled(*result)) << result->message();
  EXPECT_TRUE(lock->try_acquire()) << "a canceled acquire kept the lock";
}

// The reader-writer lock and the semaphore, in the same shape: readers share, a writer waits for
// them; permits are counted.
TEST_P(AsyncAcquire, TheReaderWriterAndSemaphoreFormsWaitAndGrant) {
  const auto name = unique("rw");
  auto rw1 = backend_->make_rw_lock(name), rw2 = backend_->make_rw_lock(name), rw3 = backend_->make_rw_lock(name);
  auto reading = rw1->try_acquire_read();
  ASSERT_TRUE(reading);
  ASYNC_NET::io_context io;
  auto work = ASYNC_NET::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto second_reader = ASYNC_API::async_acquire_read(*rw2, 5s, ASYNC_NET::use_future);
  ASSERT_EQ(second_reader.wait_for(10s), std::future_status::ready);
  auto r2 = lease_of(second_reader.get());
  EXPECT_TRUE(r2.held()) << "readers share";
  auto writer = ASYNC_API::async_acquire_write(*rw3, 30s, ASYNC_NET::use_future);
  EXPECT_EQ(writer.wait_for(300ms), std::future_status::timeout) << "a writer beside readers";
  reading.release();
  r2.release();
  ASSERT_EQ(writer.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(lease_of(writer.get()).held());

  auto sem = backend_->make_semaphore(unique("sem"), 3);
  auto two = ASYNC_API::async_acquire(*sem, 2U, 5s, ASYNC_NET::use_future);
  ASSERT_EQ(two.wait_for(10s), std::future_status::ready);
  auto held_two = lease_of(two.get());
  EXPECT_TRUE(held_two.held());
  auto two_more = ASYNC_API::async_acquire(*sem, 2U, 30s, ASYNC_NET::use_future);
  EXPECT_EQ(two_more.wait_for(300ms), std::future_status::timeout) << "4 permits of 3";
  held_two.release();
  ASSERT_EQ(two_more.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(lease_of(two_more.get()).held());
  work.reset();
  runner.join();
}

// Many waiters on one name in one process: each is granted exactly once and never two at a time,
// and they hold no thread each (the engine runs a thread per line that must wait, the timer's and a
// few round-trip threads, not one per waiter).
TEST_P(AsyncAcquire, ManyWaitersOnOneNameAreGrantedOnceEachOneAtATimeWithoutAThreadEach) {
  const auto name = unique("many");
  constexpr int waiters = 300;
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  for (int i = 0; i < waiters; ++i) locks.push_back(backend_->make_lock(name));
  ASYNC_NET::io_context io;
  std::atomic<int> inside{0}, overlaps{0}, granted{0}, errors{0};
  std::vector<int> grants(waiters, 0);
  // Lines of earlier tests may still be winding down (a line's thread leaves after it was idle).
  const std::size_t threads_before = dlock::detail::async_engine_threads();
  std::size_t most_threads = 0;
  for (int i = 0; i < waiters; ++i) {
    ASYNC_API::async_acquire(*locks[i], 120s, ASYNC_NET::bind_executor(io, [&, i](std::error_code ec, dlock::lease l) {
      if (ec || !l) {
        ++errors;
        return;
      }
      if (inside.fetch_add(1) != 0) ++overlaps;
      ++grants[i];
      ++granted;
      most_threads = std::max(most_threads, dlock::detail::async_engine_threads());
      inside.fetch_sub(1);
      l.release();
    }));
  }
  io.run();
  EXPECT_EQ(granted.load(), waiters);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(std::count(grants.begin(), grants.end(), 1), waiters) << "each waiter granted exactly once";
  EXPECT_LE(most_threads, threads_before + 2 + dlock::detail::round_trip_threads)
      << "the engine ran a thread per waiter";
}

// The lease's loss can be awaited: a lease whose ttl ran out without renewal is lost, and the wait
// completes with lock_lost; an empty lease at once with invalid_argument.
// (memory://: its leases expire in-process; a file lock never expires.)
TEST(AsyncWaitLost, TheLossOfALeaseCanBeAwaited) {
  auto expiring = dlock::open("memory://?ttl=300ms&watchdog=false")->make_lock(unique("lost"));
  auto held = expiring->try_acquire();
  ASSERT_TRUE(held);
  ASYNC_NET::io_context io;
  std::optional<std::error_code> lost, empty;
  ASYNC_API::async_wait_lost(held, ASYNC_NET::bind_executor(io, [&](std::error_code ec) { lost = ec; }));
  dlock::lease nothing;
  ASYNC_API::async_wait_lost(nothing, ASYNC_NET::bind_executor(io, [&](std::error_code ec) { empty = ec; }));
  io.run();
  ASSERT_TRUE(lost);
  EXPECT_EQ(*lost, dlock::errc::lock_lost) << lost->message();
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, std::errc::invalid_argument);
}

// ... and the wait for it canceled by a stop token.
TEST_P(AsyncAcquire, AWaitForLossIsCanceledByItsStopToken) {
  auto lock = backend_->make_lock(unique("lost-stop"));
  auto held = lock->try_acquire();
  ASSERT_TRUE(held);
  ASYNC_NET::io_context io;
  std::stop_source stop;
  std::optional<std::error_code> result;
  ASYNC_API::async_wait_lost(held, stop.get_token(),
                             ASYNC_NET::bind_executor(io, [&](std::error_code ec) { result = ec; }));
  ASYNC_NET::post(io, [&] { stop.request_stop(); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_TRUE(is_canceled(*result)) << result->message();
  EXPECT_TRUE(held.held());
}

// A release without a round trip on the io_context's thread: the callback runs on its executor,
// never inside the initiating call, and the name is free by then; an empty lease completes with no
// error.
TEST_P(AsyncAcquire, AnAsyncReleaseFreesTheNameBeforeItCompletesOnItsExecutor) {
  const auto name = unique("release");
  auto lock = backend_->make_lock(name);
  auto other = backend_->make_lock(name);
  auto held = lock->try_acquire();
  ASSERT_TRUE(held);
  ASYNC_NET::io_context io;
  std::optional<std::error_code> released, empty;
  bool free_when_completed = false;
  ASYNC_API::async_release(std::move(held), ASYNC_NET::bind_executor(io, [&](std::error_code ec) {
                             EXPECT_TRUE(io.get_executor().running_in_this_thread());
                             released = ec;
                             free_when_completed = static_cast<bool>(other->try_acquire());
                           }));
  ASYNC_API::async_release(dlock::lease{}, ASYNC_NET::bind_executor(io, [&](std::error_code ec) { empty = ec; }));
  EXPECT_FALSE(released);
  io.run();
  ASSERT_TRUE(released);
  EXPECT_FALSE(*released) << released->message();
  EXPECT_TRUE(free_when_completed) << "the name was still held when the release completed";
  ASSERT_TRUE(empty);
  EXPECT_FALSE(*empty) << empty->message();
}

// No silent loss: releasing a lease whose ttl ran out and whose name went to another holder says
// so (not_owner), and leaves that holder's lock alone.
TEST(AsyncRelease, ALeaseNoLongerOursIsReportedNotOwnerAndTheNewHolderKeepsIt) {
  auto backend = dlock::open("memory://?ttl=200ms&watchdog=false");
  const auto name = unique("release-lost");
  auto expiring = backend->make_lock(name);
  auto held = expiring->try_acquire();
  ASSERT_TRUE(held);
  dlock::lock_options long_lived;
  long_lived.ttl = 20s;
  auto successor = backend->make_lock(name, long_lived);
  auto taken = successor->try_acquire_for(5s);
  ASSERT_TRUE(taken);
  ASYNC_NET::io_context io;
  std::optional<std::error_code> result;
  ASYNC_API::async_release(std::move(held), ASYNC_NET::bind_executor(io, [&](std::error_code ec) { result = ec; }));
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, dlock::errc::not_owner) << result->message();
  EXPECT_TRUE(taken.held());
  EXPECT_FALSE(backend->make_lock(name)->try_acquire()) << "the release freed another holder's lock";
}

// Chains of acquires and releases on one io_context thread, none making a round trip there: many
// at once, each name granted and released every time, and no thread for any of these names (they
// are never held when tried: the round-trip threads serve them all, and the deadline timer watches
// the first tries that wait for one).
TEST_P(AsyncAcquire, ChainsOfAsyncAcquiresAndReleasesEachTakeTheirNameEveryTime) {
  constexpr int chains = 16, rounds = 20;
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  for (int i = 0; i < chains; ++i) locks.push_back(backend_->make_lock(unique("chain")));
  const std::size_t threads_before = dlock::detail::async_engine_threads();
  ASYNC_NET::io_context io;
  std::atomic<int> completed{0}, failed{0};
  std::function<void(int, int)> take = [&](int i, int round) {
    ASYNC_API::async_acquire(*locks[static_cast<std::size_t>(i)], 5s,
                             ASYNC_NET::bind_executor(io, [&, i, round](std::error_code ec, dlock::lease l) {
                               if (ec || !l) {
                                 ++failed;
                                 return;
                               }
                               ASYNC_API::async_release(
                                   std::move(l), ASYNC_NET::bind_executor(io, [&, i, round](std::error_code rec) {
                                     if (rec) ++failed;
                                     ++completed;
                                     if (round + 1 < rounds) take(i, round + 1);
                                   }));
                             }));
  };
  for (int i = 0; i < chains; ++i) take(i, 0);
  io.run();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(completed.load(), chains * rounds);
  EXPECT_LE(dlock::detail::async_engine_threads(), threads_before + dlock::detail::round_trip_threads + 1)
      << "the engine ran a thread per name";
}

}  // namespace
