#include "dlock_compare/worker.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <stop_token>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_compare/fenced_resource.hpp"
#include "dlock_compare/history.hpp"

namespace dlock::compare {

namespace {

// One client of the run: the history it appends to and the fenced resource it writes through.
class client_loop {
 public:
  explicit client_loop(const worker_options& o) : o_(o), history_(o.history), fence_(o.fence) {}

  // One attempt: acquire, write, release. Returns whether it was granted.
  bool attempt(distributed_lock& lock, std::uint32_t n) {
    history_.append_now(o_.client, n, event_kind::acquire_started);
    std::error_code ec;
    auto lease = lock.try_acquire_for(o_.acquire_timeout, ec);
    if (ec || !lease) {
      history_.append_now(o_.client, n, ec ? event_kind::acquire_failed : event_kind::acquire_timed_out);
      if (ec) sleep_until(std::min(o_.stop_at, shared_clock::now() + o_.work));  // no hot loop on a dead server
      return false;
    }
    history_.append_now(o_.client, n, event_kind::granted, lease.fencing_token());
    write(lease, n);
    release(lease, n);
    return true;
  }

 private:
  // The critical section. lost_token is watched only while the section is under way: a
  // not_owner release marks the lease lost too, and that is recorded as the release's outcome.
  void write(const lease& held, std::uint32_t n) {
    const auto token = held.fencing_token();
    const std::stop_callback on_lost(held.lost_token(), [&, n] { record_lost(n, token); });
    const bool held_at_begin = held.held();
    if (!o_.stop_once_marker.empty() && !tried_to_stop_) {
      tried_to_stop_ = true;
      stop_if_first();
    }
    const auto admitted = fence_.admit(token);
    append_write_event(n, event_kind::write_begin, token, admitted.at, admitted.verdict, held_at_begin);
    std::this_thread::sleep_for(o_.work);
    append_write_event(n, event_kind::write_end, token, shared_clock::now(), fence_verdict::none, held.held());
  }

  // The first client of the run to get here (it creates the marker) names itself in it and stops.
  void stop_if_first() {
    const int fd = ::open(o_.stop_once_marker.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return;  // another client was first (or the folder is gone: then no pause either)
    const auto id = std::to_string(o_.client) + "\n";
    const bool named = ::write(fd, id.data(), id.size()) == static_cast<ssize_t>(id.size());
    ::close(fd);
    if (named) ::raise(SIGSTOP);  // resumed by the scenario, its ttl long gone
  }

  // Runs on whichever thread marks the lease lost (the watchdog's), where a throw would terminate.
  void record_lost(std::uint32_t n, std::optional<std::uint64_t> token) noexcept {
    try {
      history_.append_now(o_.client, n, event_kind::lost, token);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlock_compare_worker: client %u: the lost notification was not recorded: %s\n",
                   static_cast<unsigned>(o_.client), e.what());
    }
  }

  void append_write_event(std::uint32_t n, event_kind kind, std::optional<std::uint64_t> token, instant at,
                          fence_verdict verdict, bool held) {
    history_.append(make_event(kind, o_.client, n, at, token, verdict, held));
  }

  void release(lease& held, std::uint32_t n) {
    std::error_code ec;
    held.release(ec);
    const auto kind = !ec                     ? event_kind::released
                      : ec == errc::not_owner ? event_kind::release_not_owner
                                              : event_kind::release_failed;
    history_.append_now(o_.client, n, kind, held.fencing_token());
  }

  const worker_options& o_;
  bool tried_to_stop_ = false;
  history_writer history_;
  fenced_resource fence_;
};

}  // namespace

namespace {

worker_summary run_client(const worker_options& o) {
  auto backend = dlock::open(o.uri);
  auto lock = backend->make_lock(o.name);
  client_loop loop(o);
  worker_summary summary;
  sleep_until(o.start_at);
  for (std::uint32_t n = 0; shared_clock::now() < o.stop_at; ++n) {
    ++summary.attempts;
    summary.grants += loop.attempt(*lock, n);
  }
  return summary;
}

}  // namespace

worker_summary run_worker(const worker_options& o) {
  if (o.threads <= 1) return run_client(o);
  std::vector<worker_options> clients(o.threads, o);
  std::vector<worker_summary> summaries(o.threads);
  std::vector<std::exception_ptr> errors(o.threads);
  {
    std::vector<std::jthread> threads;
    for (std::uint32_t i = 0; i < o.threads; ++i) {
      clients[i].client = o.client + i;
      clients[i].threads = 1;
      threads.emplace_back([&, i] {
        try {
          summaries[i] = run_client(clients[i]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  worker_summary total;
  for (const auto& s : summaries) {
    total.attempts += s.attempts;
    total.grants += s.grants;
  }
  return total;
}

}  // namespace dlock::compare
