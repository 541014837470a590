// The reader-writer lock's and the semaphore's properties, on every backend, both ways: where a
// backend declares a primitive (or one of its capabilities) the property must hold, and where it
// does not, the primitive is refused clearly or the capability is shown absent.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include "shared_primitives.hpp"

namespace dlock::conformance {

TEST_P(SharedPrimitives, OfferedExactlyAsDeclared) {
  const dlock::backend_info* declared = nullptr;
  const auto infos = dlock::default_registry().list();
  for (const auto& info : infos)
    if (info.scheme == scheme_) declared = &info;
  ASSERT_NE(declared, nullptr);
  EXPECT_EQ(backend_->rw_caps().to_string(), declared->primitives.rw_lock.value_or(capabilities{}).to_string());
  EXPECT_EQ(backend_->semaphore_caps().to_string(),
            declared->primitives.semaphore.value_or(capabilities{}).to_string());
  EXPECT_EQ(has(capability::writer_preferred), offers_rw() && rw_has(capability::writer_preferred));

  std::error_code ec;
  auto r = backend_->make_rw_lock(dlock::testing::unique_name("offered-rw"), options(), ec);
  if (offers_rw()) {
    ASSERT_FALSE(ec) << dlock::last_error_message();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->caps().to_string(), backend_->rw_caps().to_string());
  } else {
    EXPECT_EQ(ec, make_error_code(errc::not_supported));
    EXPECT_NE(dlock::last_error_message().find("reader-writer"), std::string::npos) << dlock::last_error_message();
    EXPECT_FALSE(r);
    EXPECT_FALSE(dlock::default_registry().open(uri_, {capability::read_write}, ec));
    EXPECT_EQ(ec, make_error_code(errc::missing_capability)) << "open() did not refuse a required read_write";
  }
  auto s = backend_->make_semaphore(dlock::testing::unique_name("offered-sem"), 3, options(), ec);
  if (offers_semaphore()) {
    ASSERT_FALSE(ec) << dlock::last_error_message();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->caps().to_string(), backend_->semaphore_caps().to_string());
    EXPECT_EQ(s->max_count(), 3u);
  } else {
    EXPECT_EQ(ec, make_error_code(errc::not_supported));
    EXPECT_FALSE(s);
    EXPECT_FALSE(dlock::default_registry().open(uri_, {capability::semaphore}, ec));
    EXPECT_EQ(ec, make_error_code(errc::missing_capability)) << "open() did not refuse a required semaphore";
  }
}

TEST_P(SharedPrimitives, ReadersShareAndAWriterIsAlone) {
  if (refuses_rw()) return;
  const auto name = dlock::testing::unique_name("rw-share");
  auto a = rw(name), b = rw(name), w = rw(name), w2 = rw(name);
  auto ra = a->try_acquire_read();
  ASSERT_TRUE(ra) << "a reader of a free lock was refused";
  auto rb = b->try_acquire_read();
  EXPECT_TRUE(rb) << "a second reader was refused while only a reader held";
  EXPECT_FALSE(w->try_acquire_write()) << "a writer got in while readers held";
  EXPECT_FALSE(w->try_acquire_write_for(200ms)) << "a writer got in while readers held";
  ra.release();
  EXPECT_FALSE(w->try_acquire_write()) << "a writer got in while a reader still held";
  rb.release();
  auto wl = w->try_acquire_write_for(margin);
  ASSERT_TRUE(wl) << "the writer was refused after every reader released";
  EXPECT_FALSE(a->try_acquire_read()) << "a reader got in while a writer held";
  EXPECT_FALSE(w2->try_acquire_write()) << "a second writer got in while a writer held";
  wl.release();
  EXPECT_TRUE(a->try_acquire_read_for(margin)) << "a reader was refused after the writer released";
}

TEST_P(SharedPrimitives, ReadersTogetherWritersAloneAcrossThreads) {
  if (refuses_rw()) return;
  constexpr int threads = 6, iterations = 12;
  const auto name = dlock::testing::unique_name("rw-threads");
  occupancy inside;
  std::atomic<int> counter{0};
  const int errors = run_threads(threads, [&](int t) {
    auto lock = rw(name);
    const auto side = t % 3 == 0 ? access::write : access::read;
    for (int i = 0; i < iterations; ++i) {
      auto held = lock->acquire(side);
      rmw_turn(inside, counter, side, 2ms);
      held.release();
    }
  });
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(inside.violations.load(), 0) << "a writer was inside with someone else";
  EXPECT_EQ(counter.load(), 2 * iterations) << "lost updates: writers did not exclude each other";
}

TEST_P(SharedPrimitives, ReadersTogetherWritersAloneAcrossProcesses) {
  if (refuses_rw()) return;
  const auto name = dlock::testing::unique_name("rw-procs");
  // Two reader processes hold at once (for a process-scoped backend: a writer in another process
  // is not excluded either).
  dlock::testing::child_process r1({DLOCK_CONFORMANCE_WORKER, "hold-read", uri_, name});
  const auto l1 = r1.read_line(15s);
  ASSERT_TRUE(l1 && l1->starts_with("acquired")) << "the first reader process did not acquire";
  if (backend_->scope() == lock_scope::process) {
    dlock::testing::child_process w({DLOCK_CONFORMANCE_WORKER, "hold-write", uri_, name});
    const auto lw = w.read_line(15s);
    EXPECT_TRUE(lw && lw->starts_with("acquired")) << "a process-scoped lock excluded another process";
    return;
  }
  dlock::testing::child_process r2({DLOCK_CONFORMANCE_WORKER, "hold-read", uri_, name});
  const auto l2 = r2.read_line(15s);
  EXPECT_TRUE(l2 && l2->starts_with("acquired")) << "a second reader process was kept out by a reader";
  auto writer = rw(name);
  EXPECT_FALSE(writer->try_acquire_write_for(300ms)) << "a writer got in while reader processes held";
  r1.kill_hard();
  r2.kill_hard();
  r1.wait(10s);
  r2.wait(10s);

  constexpr int readers = 3, writers = 2, iterations = 10;
  const auto dir = fresh_dir("dlock-rw");
  { std::ofstream(dir / "counter") << 0 << '\n'; }
  std::vector<std::unique_ptr<dlock::testing::child_process>> children;
  for (int p = 0; p < readers + writers; ++p)
    children.push_back(std::make_unique<dlock::testing::child_process>(
        std::vector<std::string>{DLOCK_CONFORMANCE_WORKER, "rw-rmw", uri_, name, dir.string(),
                                 std::to_string(iterations), p < writers ? "write" : "read"}));
  ASSERT_NO_FATAL_FAILURE(expect_workers_succeed(children, 120s, "a worker met a conflicting holder inside (overlap)"));
  long total = 0;
  std::ifstream(dir / "counter") >> total;
  EXPECT_EQ(total, writers * iterations) << "lost updates between writer processes";
  std::filesystem::remove_all(dir);
}

TEST_P(SharedPrimitives, WriterPreferenceExactlyAsDeclared) {
  if (refuses_rw()) return;
  const auto name = dlock::testing::unique_name("rw-pref");
  auto first = rw(name, options(10s)), writer = rw(name, options(10s)), late = rw(name, options(10s));
  auto reading = first->try_acquire_read();
  ASSERT_TRUE(reading);
  std::atomic<bool> writer_granted{false};
  lease written;
  std::thread waiting_writer([&] {
    written = writer->try_acquire_write_for(20s);
    writer_granted = static_cast<bool>(written);
  });
  // Let the writer reach its wait (queued on the server, or polling) before the late reader comes.
  std::this_thread::sleep_for(500ms);
  ASSERT_FALSE(writer_granted.load()) << "a writer got in while a reader held";
  auto late_reading = late->try_acquire_read_for(300ms);
  if (rw_has(capability::writer_preferred)) {
    EXPECT_FALSE(late_reading) << "declared writer_preferred, but a reader arriving while a writer waited got in";
  } else {
    EXPECT_TRUE(late_reading) << "not declared writer_preferred, but a reader was held back by a waiting writer "
                                 "(declare the capability)";
  }
  late_reading.release();
  reading.release();
  waiting_writer.join();
  EXPECT_TRUE(writer_granted.load()) << "the waiting writer was not granted once the readers left";
  if (written) {
    EXPECT_FALSE(late->try_acquire_read()) << "a reader got in while the writer held";
    written.release();
  }
}

// One object is one owner, but many threads may use it at once (the adapters share one object
// between a process's threads): each acquire is a grant of its own, released by its own lease.
TEST_P(SharedPrimitives, OneObjectServesManyThreadsAtOnce) {
  constexpr int threads = 3;
  const auto run_together = [](const std::function<lease()>& take, std::atomic<int>& together) {
    std::atomic<int> holding{0};
    std::vector<std::thread> spawned;
    for (int t = 0; t < threads; ++t)
      spawned.emplace_back([&] {
        auto held = take();
        if (!held) return;
        ++holding;
        const auto until = clock::now() + margin;
        while (holding.load() < threads && clock::now() < until) std::this_thread::sleep_for(1ms);
        if (holding.load() == threads) ++together;
        std::this_thread::sleep_for(20ms);  // everyone sees the count before anyone leaves
        std::error_code ec;
        held.release(ec);
        EXPECT_FALSE(ec) << "releasing one thread's grant: " << dlock::last_error_message();
      });
    for (auto& s : spawned) s.join();
  };
  if (offers_rw()) {
    const auto name = dlock::testing::unique_name("rw-one-object");
    auto shared_object = rw(name);
    std::atomic<int> together{0};
    run_together([&] { return shared_object->try_acquire_read_for(margin); }, together);
    EXPECT_EQ(together.load(), threads) << "threads reading through one object did not all hold at once";
    EXPECT_TRUE(shared_object->try_acquire_write_for(margin)) << "every read was released, yet no write";
  } else {
    EXPECT_TRUE(refuses_rw());
  }
  if (offers_semaphore()) {
    const auto name = dlock::testing::unique_name("sem-one-object");
    auto shared_object = sem(name, threads);
    std::atomic<int> together{0};
    run_together([&] { return shared_object->try_acquire_for(margin); }, together);
    EXPECT_EQ(together.load(), threads) << "threads taking permits through one object did not all hold at once";
    EXPECT_TRUE(shared_object->try_acquire_for(margin, threads)) << "every permit was given back, yet not all free";
  } else {
    EXPECT_TRUE(refuses_semaphore());
  }
}

TEST_P(SharedPrimitives, KilledReaderAndWriterProcessesFreeTheLock) {
  if (refuses_rw()) return;
  const auto ttl = 1000ms;
  if (backend_->scope() == lock_scope::process) {  // the negative: another process does not exclude
    const auto name = dlock::testing::unique_name("rw-killed");
    dlock::testing::child_process holder({DLOCK_CONFORMANCE_WORKER, "hold-write", uri_, name});
    ASSERT_TRUE(holder.read_line(15s));
    EXPECT_TRUE(rw(name)->try_acquire_write()) << "a process-scoped lock excluded another process";
    return;
  }
  for (const char* mode : {"hold-read", "hold-write"}) {
    const auto name = dlock::testing::unique_name("rw-killed");
    dlock::testing::child_process holder({DLOCK_CONFORMANCE_WORKER, mode, uri_, name, std::to_string(ttl.count())});
    const auto line = holder.read_line(15s);
    ASSERT_TRUE(line && line->starts_with("acquired")) << mode << ": the holder process did not acquire";
    auto writer = rw(name);
    EXPECT_FALSE(writer->try_acquire_write()) << mode << ": a writer got in while another process held";
    holder.kill_hard();
    holder.wait(10s);
    if (rw_has(capability::expiring)) {
      EXPECT_TRUE(writer->try_acquire_write_for(ttl + margin))
          << mode << ": declared expiring, but the dead holder's grant stayed";
    } else {
      std::this_thread::sleep_for(2 * ttl);
      EXPECT_FALSE(writer->try_acquire_write()) << mode << ": not declared expiring, but the dead holder's grant freed";
    }
  }
}

TEST_P(SharedPrimitives, SemaphoreReachesNAndNeverMore) {
  if (refuses_semaphore()) return;
  const auto name = dlock::testing::unique_name("sem-n");
  std::vector<std::unique_ptr<semaphore>> users;
  for (int i = 0; i < 5; ++i) users.push_back(sem(name, 3));
  std::vector<lease> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(users[i]->try_acquire());
    EXPECT_TRUE(held.back()) << "permit " << i + 1 << " of 3 was refused";
  }
  EXPECT_FALSE(users[3]->try_acquire()) << "a fourth permit of 3 was granted";
  EXPECT_FALSE(users[3]->try_acquire_for(200ms)) << "a fourth permit of 3 was granted";
  held[0].release();
  auto fourth = users[3]->try_acquire_for(margin);
  EXPECT_TRUE(fourth) << "a permit given back was not granted again";
  // Several permits at once: all or none.
  held[1].release();
  fourth.release();
  auto two = users[4]->try_acquire(2);  // held[2] keeps the third
  EXPECT_TRUE(two) << "2 permits refused with 2 free of 3";
  EXPECT_FALSE(users[0]->try_acquire(1)) << "a permit granted with all 3 taken";
  held[2].release();
  EXPECT_FALSE(users[0]->try_acquire(2)) << "2 permits granted with 1 free";
  EXPECT_TRUE(users[0]->try_acquire(1)) << "1 permit refused with 1 free";
}

TEST_P(SharedPrimitives, SemaphorePermitCountsAreChecked) {
  if (refuses_semaphore()) return;
  std::error_code ec;
  auto s = sem(dlock::testing::unique_name("sem-args"), 2);
  auto l = s->try_acquire(3, ec);
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument)) << "3 permits of 2 accepted";
  EXPECT_NE(dlock::last_error_message().find("2"), std::string::npos) << dlock::last_error_message();
  l = s->try_acquire(0, ec);
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument)) << "0 permits accepted";
  auto none = backend_->make_semaphore("sem-zero", 0, ec);
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument)) << "a semaphore of 0 permits was made";
  EXPECT_FALSE(none);
}

TEST_P(SharedPrimitives, SemaphoreNeverExceedsNAcrossThreads) {
  if (refuses_semaphore()) return;
  constexpr int threads = 8, iterations = 10;
  constexpr std::uint32_t max = 3;
  const auto name = dlock::testing::unique_name("sem-threads");
  std::atomic<int> inside{0}, max_inside{0};
  const int errors = run_threads(threads, [&](int) {
    auto s = sem(name, max);
    for (int i = 0; i < iterations; ++i) {
      auto held = s->acquire();
      raise_to(max_inside, ++inside);
      std::this_thread::sleep_for(1ms);
      --inside;
      held.release();
    }
  });
  EXPECT_EQ(errors, 0);
  EXPECT_LE(max_inside.load(), static_cast<int>(max)) << "more holders than permits";
}

TEST_P(SharedPrimitives, SemaphoreNeverExceedsNAcrossProcesses) {
  if (refuses_semaphore()) return;
  if (backend_->scope() == lock_scope::process) return;  // shown by KilledSemaphoreHolderGivesItsPermitsBack
  constexpr int processes = 5, iterations = 10;
  const auto name = dlock::testing::unique_name("sem-procs");
  const auto dir = fresh_dir("dlock-sem");
  std::vector<std::unique_ptr<dlock::testing::child_process>> children;
  for (int p = 0; p < processes; ++p)
    children.push_back(std::make_unique<dlock::testing::child_process>(std::vector<std::string>{
        DLOCK_CONFORMANCE_WORKER, "permits", uri_, name, "2", dir.string(), std::to_string(iterations)}));
  ASSERT_NO_FATAL_FAILURE(
      expect_workers_succeed(children, 120s, "a worker counted more holders than permits (overlap)"));
  std::filesystem::remove_all(dir);
}

TEST_P(SharedPrimitives, KilledSemaphoreHolderGivesItsPermitsBack) {
  if (refuses_semaphore()) return;
  const auto ttl = 1000ms;
  const auto name = dlock::testing::unique_name("sem-killed");
  if (backend_->scope() == lock_scope::process) {  // the negative: another process does not exclude
    dlock::testing::child_process holder({DLOCK_CONFORMANCE_WORKER, "hold-permits", uri_, name, "1", "1"});
    ASSERT_TRUE(holder.read_line(15s));
    EXPECT_TRUE(sem(name, 1)->try_acquire()) << "a process-scoped semaphore excluded another process";
    return;
  }
  dlock::testing::child_process holder(
      {DLOCK_CONFORMANCE_WORKER, "hold-permits", uri_, name, "2", "2", std::to_string(ttl.count())});
  const auto line = holder.read_line(15s);
  ASSERT_TRUE(line && line->starts_with("acquired")) << "the holder process did not acquire 2 of 2 permits";
  auto s = sem(name, 2);
  EXPECT_FALSE(s->try_acquire()) << "a permit was granted while another process held both";
  holder.kill_hard();
  holder.wait(10s);
  if (semaphore_has(capability::expiring)) {
    EXPECT_TRUE(s->try_acquire_for(ttl + margin, 2)) << "declared expiring, but the dead holder's permits stayed taken";
  } else {
    std::this_thread::sleep_for(2 * ttl);
    EXPECT_FALSE(s->try_acquire()) << "not declared expiring, but the dead holder's permits came back";
  }
}

// Expiry without renewal, the lost signal, not_owner on release, renewal and fencing: the same
// properties as the mutex's, for a write lease, a read lease and a semaphore lease.
class LeaseProperties : public SharedPrimitives {
 protected:
  struct subject {
    std::string what;
    capabilities caps;
    // Takes the grant under test; `rival` takes a conflicting one.
    std::function<lease(lock_options)> take;
    std::function<lease(std::chrono::milliseconds)> rival;
  };
  std::vector<subject> subjects() {
    std::vector<subject> out;
    if (offers_rw()) {
      for (auto side : {access::read, access::write}) {
        const auto name = dlock::testing::unique_name("lease-rw");
        out.push_back({std::string(to_string(side)) + " lease", backend_->rw_caps(),
                       [this, name, side](lock_options o) { return keep(rw(name, std::move(o)))->try_acquire(side); },
                       [this, name](std::chrono::milliseconds t) { return keep(rw(name))->try_acquire_write_for(t); }});
      }
    }
    if (offers_semaphore()) {
      const auto name = dlock::testing::unique_name("lease-sem");
      out.push_back({"semaphore lease", backend_->semaphore_caps(),
                     [this, name](lock_options o) { return keep(sem(name, 1, std::move(o)))->try_acquire(); },
                     [this, name](std::chrono::milliseconds t) { return keep(sem(name, 1))->try_acquire_for(t); }});
    }
    return out;
  }
};

TEST_P(LeaseProperties, ExpiryLostSignalAndNotOwnerExactlyAsDeclared) {
  for (auto& s : subjects()) {
    SCOPED_TRACE(s.what);
    const auto ttl = 600ms;
    auto held = s.take(options(ttl, false));
    ASSERT_TRUE(held);
    const auto* h = dlock::testing::find_hooks(scheme_);
    const bool kept_alive = h && h->validity_kept_alive;  // a session keeps it, not a ttl
    if (!s.caps.has(capability::expiring) || held.valid_until() == clock::time_point::max() || kept_alive) {
      std::this_thread::sleep_for(2 * ttl);
      EXPECT_FALSE(s.rival(0ms)) << "a grant without ttl expiry was taken from a live holder";
      EXPECT_FALSE(held.lost_token().stop_requested()) << "lost fired for a live grant";
      continue;
    }
    std::this_thread::sleep_until(held.valid_until());
    EXPECT_TRUE(s.rival(ttl + margin)) << "the unrenewed grant did not expire";
    if (s.caps.has(capability::lost_notification)) {
      EXPECT_TRUE(dlock::testing::fires_within(held.lost_token(), margin)) << "validity ran out but lost did not fire";
    }
    std::error_code ec;
    held.release(ec);
    EXPECT_EQ(ec, make_error_code(errc::not_owner)) << "a release after the grant went to another said nothing";
  }
}

TEST_P(LeaseProperties, RenewalExactlyAsDeclared) {
  for (auto& s : subjects()) {
    SCOPED_TRACE(s.what);
    const auto ttl = 600ms;
    auto held = s.take(options(ttl, true));
    ASSERT_TRUE(held);
    if (!s.caps.has(capability::renewable)) {
      std::error_code ec;
      held.renew(ttl, ec);
      EXPECT_TRUE(ec) << "renew succeeded on a primitive not declared renewable";
      continue;
    }
    // The watchdog renews: three ttls later it is still ours and nobody else got in.
    EXPECT_FALSE(s.rival(3 * ttl)) << "the watchdog did not keep the grant past its ttl";
    EXPECT_TRUE(held.held()) << "the renewed lease is not held";
    held.renew(ttl);
    held.release();
    EXPECT_TRUE(s.rival(margin)) << "not free after release";
  }
}

TEST_P(LeaseProperties, FencingExactlyAsDeclared) {
  for (auto& s : subjects()) {
    SCOPED_TRACE(s.what);
    std::optional<std::uint64_t> last;
    for (int i = 0; i < 3; ++i) {
      auto held = s.take(options(5s));
      ASSERT_TRUE(held);
      const auto token = held.fencing_token();
      if (!s.caps.has(capability::fencing)) {
        EXPECT_FALSE(token) << "a token from a primitive not declared fencing";
        continue;
      }
      ASSERT_TRUE(token) << "declared fencing, but no token";
      if (last) {
        EXPECT_GT(*token, *last) << "fencing tokens did not increase";
      }
      last = token;
      held.release();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(, SharedPrimitives, ::testing::ValuesIn(dlock::testing::joined_targets()),
                         [](const ::testing::TestParamInfo<conformance_target>& info) { return info.param.label; });
INSTANTIATE_TEST_SUITE_P(, LeaseProperties, ::testing::ValuesIn(dlock::testing::joined_targets()),
                         [](const ::testing::TestParamInfo<conformance_target>& info) { return info.param.label; });

}  // namespace dlock::conformance
