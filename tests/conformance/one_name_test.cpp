// One name, one lock, on every backend: the mutex of a name counts as a writer of the name's
// reader-writer lock (each excludes the other's holders, both ways, and a waiter of either kind
// is woken by the other kind's release instead of sleeping out a ttl), and their fencing tokens
// are one rising sequence. A semaphore of the name never holds beside them: taking one while the
// name is held as the other is refused with errc::name_conflict, naming what the name is in use
// as, on every backend alike.
#include <atomic>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shared_primitives.hpp"

namespace dlock::conformance {

class OneName : public SharedPrimitives {
 protected:
  // Waiters that may only wake by the other kind's release, or by polling at their poll bound:
  // never by the holder's ttl running out (the ttl is longer than the whole wait).
  static constexpr auto long_ttl = 20s;
  static constexpr auto wait_bound = 12s;
  lock_options waiter_options() const {
    auto o = options(long_ttl);
    o.poll = {500ms, 2s};
    return o;
  }

  // Who holds in a case of the exclusion tests: a mutex or one side of the reader-writer lock.
  enum class kind { mutex, read, write };
  static const char* name_of(kind k) { return k == kind::mutex ? "mutex" : k == kind::read ? "reader" : "writer"; }
  // Takes `k` of `name` through objects kept by this fixture, waiting up to `timeout`.
  lease take(kind k, const std::string& name, std::chrono::milliseconds timeout, lock_options o) {
    if (k == kind::mutex) return keep(backend_->make_lock(name, std::move(o)))->try_acquire_for(timeout);
    return keep(rw(name, std::move(o)))
        ->try_acquire_until(k == kind::read ? access::read : access::write, distributed_lock::deadline_after(timeout));
  }
  lease take(kind k, const std::string& name) { return take(k, name, 0ms, options()); }
};

TEST_P(OneName, TheMutexExcludesReadersAndWritersOfItsName) {
  if (refuses_rw()) return;
  for (auto holder : {kind::mutex, kind::read, kind::write}) {
    for (auto rival : {kind::mutex, kind::read, kind::write}) {
      if (holder == kind::read && rival == kind::read) continue;  // readers share
      const auto name = dlock::testing::unique_name("one-name");
      auto held = take(holder, name);
      ASSERT_TRUE(held) << "a " << name_of(holder) << " of a free name was refused";
      std::error_code ec;
      auto rival_lease = [&] {
        if (rival == kind::mutex) return keep(make(name))->try_acquire(ec);
        return keep(rw(name))->try_acquire(rival == kind::read ? access::read : access::write, ec);
      }();
      EXPECT_FALSE(ec) << name_of(rival) << " beside a " << name_of(holder) << ": " << dlock::last_error_message();
      EXPECT_FALSE(rival_lease) << "a " << name_of(rival) << " got in while a " << name_of(holder)
                                << " of the same name held";
      rival_lease = lease{};
      held.release();
      EXPECT_TRUE(take(rival, name, margin, options()))
          << "the " << name_of(rival) << " was refused after the " << name_of(holder) << " released";
    }
  }
}

TEST_P(OneName, AWaiterOfEitherKindIsWokenByTheOthersRelease) {
  if (refuses_rw()) return;
  const std::pair<kind, kind> cases[] = {
      {kind::mutex, kind::read}, {kind::mutex, kind::write}, {kind::read, kind::mutex}, {kind::write, kind::mutex}};
  for (const auto& c : cases) {
    const kind holder = c.first, waiter = c.second;  // plain variables: clang 14 cannot capture bindings
    SCOPED_TRACE(std::string(name_of(waiter)) + " waiting behind a " + name_of(holder));
    const auto name = dlock::testing::unique_name("one-name-wake");
    auto held = take(holder, name, 0ms, options(long_ttl));
    ASSERT_TRUE(held);
    std::atomic<bool> done{false};
    lease granted;
    std::thread waiting([&] {
      granted = take(waiter, name, wait_bound, waiter_options());
      done = true;
    });
    std::this_thread::sleep_for(300ms);  // the waiter has tried once and is waiting
    EXPECT_FALSE(done.load()) << "the waiter was granted beside the holder";
    held.release();
    waiting.join();
    EXPECT_TRUE(granted) << "the waiter was not granted within " << wait_bound.count()
                         << " s of a release, with the holder's ttl at " << long_ttl.count()
                         << " s: it slept out the ttl instead of being woken";
  }
}

TEST_P(OneName, MutexWritersAndReadersAcrossThreads) {
  if (refuses_rw()) return;
  constexpr int threads = 6, iterations = 10;
  const auto name = dlock::testing::unique_name("one-name-threads");
  occupancy inside;
  std::atomic<int> counter{0};
  const int errors = run_threads(threads, [&](int t) {
    // Two threads use the mutex, two the write side, two the read side.
    const auto k = t % 3 == 0 ? kind::mutex : t % 3 == 1 ? kind::write : kind::read;
    auto mutex = make(name);
    auto rwl = rw(name);
    const auto side = k == kind::read ? access::read : access::write;
    for (int i = 0; i < iterations; ++i) {
      auto held = k == kind::mutex ? mutex->acquire() : rwl->acquire(side);
      rmw_turn(inside, counter, side, 1ms);
      held.release();
    }
  });
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(inside.violations.load(), 0) << "a mutex holder or a writer was inside with someone else";
  EXPECT_EQ(counter.load(), 4 * iterations) << "lost updates: the mutex and the writers did not exclude each other";
}

TEST_P(OneName, MutexWritersAndReadersAcrossProcesses) {
  if (refuses_rw()) return;
  const auto name = dlock::testing::unique_name("one-name-procs");
  if (backend_->scope() == lock_scope::process) {  // the negative: another process does not exclude
    dlock::testing::child_process holder({DLOCK_CONFORMANCE_WORKER, "hold", uri_, name});
    ASSERT_TRUE(holder.read_line(15s));
    EXPECT_TRUE(rw(name)->try_acquire_write()) << "a process-scoped lock excluded another process";
    return;
  }
  constexpr int iterations = 8;
  const auto dir = fresh_dir("dlock-one-name");
  { std::ofstream(dir / "counter") << 0 << '\n'; }
  std::vector<std::unique_ptr<dlock::testing::child_process>> children;
  for (const char* side : {"mutex", "write", "read", "read", "mutex"})
    children.push_back(std::make_unique<dlock::testing::child_process>(std::vector<std::string>{
        DLOCK_CONFORMANCE_WORKER, "rw-rmw", uri_, name, dir.string(), std::to_string(iterations), side}));
  ASSERT_NO_FATAL_FAILURE(expect_workers_succeed(children, 120s, "a worker met a conflicting holder inside (overlap)"));
  long total = 0;
  std::ifstream(dir / "counter") >> total;
  EXPECT_EQ(total, 3 * iterations) << "lost updates between mutex and writer processes";
  std::filesystem::remove_all(dir);
}

// A resource fenced by the name's tokens sees one rising sequence, whichever kind wrote.
TEST_P(OneName, FencingTokensRiseAcrossKinds) {
  if (refuses_rw()) return;
  if (!has(capability::fencing) || !rw_has(capability::fencing)) {
    auto held = take(kind::write, dlock::testing::unique_name("one-name-fence"));
    ASSERT_TRUE(held);
    EXPECT_EQ(held.fencing_token().has_value(), rw_has(capability::fencing));
    return;
  }
  const auto name = dlock::testing::unique_name("one-name-fence");
  std::optional<std::uint64_t> last;
  for (auto k : {kind::mutex, kind::write, kind::read, kind::mutex, kind::read, kind::write, kind::mutex}) {
    auto held = take(k, name);
    ASSERT_TRUE(held) << name_of(k);
    const auto token = held.fencing_token();
    ASSERT_TRUE(token) << name_of(k) << ": declared fencing, but no token";
    if (last) {
      EXPECT_GT(*token, *last) << "a " << name_of(k) << "'s token did not rise above the previous grant's";
    }
    last = token;
    held.release();
  }
}

// Semaphores: never beside a mutex or a reader-writer lock of the same name, and refused the same
// way on every backend (not a backend error, not a silent wait, not a grant).
TEST_P(OneName, ASemaphoreAndALockOfOneNameAreRefusedAsAConflict) {
  if (refuses_semaphore()) return;
  const auto expect_conflict = [&](std::error_code ec, const lease& l, const std::string& what, const char* in_use_as) {
    EXPECT_FALSE(l) << what << " was granted";
    EXPECT_EQ(ec, make_error_code(errc::name_conflict))
        << what << ": " << ec.message() << ": " << dlock::last_error_message();
    EXPECT_NE(dlock::last_error_message().find(std::string("in use as a ") + in_use_as), std::string::npos)
        << what << ": the message does not say what the name is in use as: " << dlock::last_error_message();
  };
  std::vector<kind> locks{kind::mutex};
  if (offers_rw()) locks.insert(locks.end(), {kind::read, kind::write});
  for (auto k : locks) {
    {  // the lock first: a semaphore of its name is refused, by a try and by a waiting acquire alike
      const auto name = dlock::testing::unique_name("one-name-sem");
      auto held = take(k, name);
      ASSERT_TRUE(held) << name_of(k);
      auto s = sem(name, 2);
      std::error_code ec;
      auto permit = s->try_acquire(ec);
      expect_conflict(ec, permit, std::string("a permit beside a ") + name_of(k),
                      k == kind::mutex ? "mutex" : "reader-writer lock");
      permit = s->try_acquire_for(margin, ec);
      expect_conflict(ec, permit, std::string("a waiting permit beside a ") + name_of(k),
                      k == kind::mutex ? "mutex" : "reader-writer lock");
      EXPECT_TRUE(held.held()) << "the " << name_of(k) << " lost its grant to a refused semaphore";
    }
    {  // the semaphore first: the lock is refused
      const auto name = dlock::testing::unique_name("one-name-sem");
      auto permit = keep(sem(name, 2))->try_acquire();
      ASSERT_TRUE(permit) << "a permit of a free semaphore was refused";
      std::error_code ec;
      lease l = k == kind::mutex ? keep(make(name))->try_acquire(ec)
                                 : keep(rw(name))->try_acquire(k == kind::read ? access::read : access::write, ec);
      expect_conflict(ec, l, std::string("a ") + name_of(k) + " beside a permit", "semaphore");
      EXPECT_TRUE(permit.held()) << "the permit was lost to a refused " << name_of(k);
    }
  }
}

// The rule holds for a set of names too, whether the backend takes the set in one step or member by
// member: a set with a name in use as a semaphore is refused as a conflict, by a try as by a wait,
// and none of its other names is left held.
TEST_P(OneName, ASetWithANameInUseAsASemaphoreIsRefusedAsAConflict) {
  if (refuses_semaphore()) return;
  const auto base = dlock::testing::unique_name("one-name-set");
  const std::vector<std::string> names{base + "-a", base + "-b", base + "-c"};
  auto permit = keep(sem(names[1], 2))->try_acquire_for(margin);
  ASSERT_TRUE(permit) << "a permit of a free semaphore was refused";
  auto set = backend_->make_multi_lock(names, options());
  for (const bool waiting : {false, true}) {
    std::error_code ec;
    auto held = waiting ? set->try_acquire_for(margin, ec) : set->try_acquire(ec);
    const char* how = waiting ? "a waiting set" : "a set's try";
    EXPECT_FALSE(held) << how << " was granted beside a permit of one of its names";
    EXPECT_EQ(ec, make_error_code(errc::name_conflict)) << how << ": " << dlock::last_error_message();
    for (const auto& n : {names[0], names[2]})
      EXPECT_TRUE(keep(make(n))->try_acquire()) << n << " was left held by " << how;
  }
  EXPECT_TRUE(permit.held()) << "the permit was lost to a refused set";
}

// Mutex and semaphore threads racing for one name, from two backend objects (so no local state
// of one object can order them): refusals are name_conflict, and no mutex holder ever overlaps a
// permit holder. Where no single atomic step can check, each side publishes, then looks, then
// withdraws: both may be refused, never both granted.
TEST_P(OneName, AMutexAndASemaphoreRacingForOneNameAreNeverBothGranted) {
  if (refuses_semaphore()) return;
  const auto name = dlock::testing::unique_name("one-name-race");
  std::error_code open_ec;
  const std::shared_ptr<backend> other = dlock::default_registry().open(uri_, {}, open_ec);
  ASSERT_TRUE(other) << open_ec.message();
  std::atomic<int> mutex_in{0}, permits_in{0}, overlaps{0}, errors{0}, mutexes{0}, permits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      const bool is_mutex = t < 3;
      const auto& from = t % 2 ? other : backend_;
      auto mutex = from->make_lock(name, options());
      auto semaphore = from->make_semaphore(name, 4, options());
      for (int i = 0; i < 40; ++i) {
        // Between tries each thread stays out a while (its own length), so the name is free of
        // one kind now and then and the other kind's threads race for it.
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + (i + t) % 3));
        std::error_code ec;
        auto l = is_mutex ? mutex->try_acquire(ec) : semaphore->try_acquire(ec);
        if (!l) {
          if (ec && ec != make_error_code(errc::name_conflict)) ++errors;
          continue;
        }
        auto& mine = is_mutex ? mutex_in : permits_in;
        const auto& theirs = is_mutex ? permits_in : mutex_in;
        ++mine;
        if (theirs.load()) ++overlaps;
        ++(is_mutex ? mutexes : permits);
        std::this_thread::sleep_for(1ms);
        --mine;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0) << "a mutex and a permit of one name were held at once";
  EXPECT_EQ(errors.load(), 0) << "a refusal other than name_conflict";
  // Which kind wins is the backend's: on redis a semaphore's count key keeps the name from mutexes
  // until it is deleted, so there the mutexes may never win.
  EXPECT_GT(mutexes.load() + permits.load(), 0) << "nothing was ever granted";
}

INSTANTIATE_TEST_SUITE_P(, OneName, ::testing::ValuesIn(dlock::testing::joined_targets()),
                         [](const ::testing::TestParamInfo<conformance_target>& info) { return info.param.label; });

}  // namespace dlock::conformance
