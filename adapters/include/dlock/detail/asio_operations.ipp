// The asynchronous operations on Asio completion tokens, written once for both Asio flavours:
// dlock/asio.hpp includes this file with DLOCK_ASIO = ::asio (standalone Asio, per-operation
// cancellation slots) into namespace dlock, and dlock/boost_asio.hpp with DLOCK_ASIO =
// ::boost::asio (Boost 1.74, which has no cancellation slots) into namespace dlock::boost_asio.
// Not a header of its own: no include guard, on purpose.
//
// Every operation (async_release's exceptions are said at it):
//  - completes on the completion handler's associated executor (asio::bind_executor picks it), never
//    inside the initiating call, and keeps outstanding work on that executor until it has completed;
//  - holds no thread while it waits (dlock/detail/async_waiters.hpp);
//  - is canceled by a std::stop_token passed to it and, with standalone Asio, by the handler's
//    cancellation slot (bind_cancellation_slot, parallel_group, awaitable_operators' ||): a canceled
//    acquire completes with error::operation_aborted and an empty lease, and a grant that crossed the
//    cancellation is released, never handed to a caller who gave up.
// The lock, rw_lock or semaphore must outlive the operation. As Asio requires of every operation, a
// cancellation slot's signal is emitted on the handler's executor (where the slot is cleared).

namespace detail_asio {

// The cancellation of one wait, however it is asked for (stop token, cancellation slot), before or
// after the wait is queued.
class cancel_cell {
 public:
  void cancel() noexcept {
    ::dlock::detail::async_wait_handle handle;
    {
      std::lock_guard lock(mutex_);
      canceled_ = true;
      handle = handle_;
    }
    handle.cancel();  // outside the mutex: it may complete the wait, and the completion may free this cell's owner
  }
  bool canceled() noexcept {
    std::lock_guard lock(mutex_);
    return canceled_;
  }
  void attach(::dlock::detail::async_wait_handle handle) noexcept {
    bool canceled = false;
    {
      std::lock_guard lock(mutex_);
      handle_ = handle;
      canceled = canceled_;
    }
    if (canceled) handle.cancel();
  }

 private:
  std::mutex mutex_;
  bool canceled_ = false;
  ::dlock::detail::async_wait_handle handle_;
};

// How this flavour says "canceled": Asio's error::operation_aborted where it is a std::error_code
// (standalone Asio); ECANCELED in the system category on Boost, whose error_code is its own type.
inline std::error_code operation_aborted() noexcept {
#if DLOCK_ASIO_HAS_CANCELLATION_SLOTS
  return DLOCK_ASIO::error::operation_aborted;
#else
  return ::dlock::detail::canceled_error();
#endif
}

// Holds the cell alive through its cancel: the completion it may cause can destroy this object.
struct cancel_on_request {
  std::shared_ptr<cancel_cell> cell;
  void operator()() const noexcept {
    const auto keep = cell;
    keep->cancel();
  }
#if DLOCK_ASIO_HAS_CANCELLATION_SLOTS
  void operator()(DLOCK_ASIO::cancellation_type) const noexcept { (*this)(); }
#endif
};

// Holds the handler and the work on its executor until the engine delivers the result, then posts
// the handler with it to that executor.
template <class Handler, class... Results>
class posted_completion {
 public:
  explicit posted_completion(Handler handler)
      : handler_(std::move(handler)),
        work_(DLOCK_ASIO::prefer(DLOCK_ASIO::get_associated_executor(handler_),
                                 DLOCK_ASIO::execution::outstanding_work.tracked)) {}

  Handler& handler() noexcept { return handler_; }

  void deliver(Results... results) { deliver_keeping(nullptr, std::move(results)...); }

  // Posts the handler with the results; `kept` lives until the handler has run.
  // The work is released here, after post() returned: released by the handler instead, a run() that
  // then returned could let its io_context be destroyed while post() was still waking it.
  template <class Kept>
  void deliver_keeping(Kept kept, Results... results) {
    auto executor = DLOCK_ASIO::get_associated_executor(handler_);
    [[maybe_unused]] const auto work = std::move(work_);
    DLOCK_ASIO::post(executor, [handler = std::move(handler_), kept = std::move(kept),
                                results = std::make_tuple(std::move(results)...)]() mutable {
#if DLOCK_ASIO_HAS_CANCELLATION_SLOTS
      // Cleared here, on the handler's executor where it is emitted, before the handler runs.
      auto slot = DLOCK_ASIO::get_associated_cancellation_slot(handler);
      if (slot.is_connected()) slot.clear();
#endif
      std::apply([&](auto&&... r) { std::move(handler)(std::move(r)...); }, std::move(results));
      (void)kept;
    });
  }

 private:
  Handler handler_;
  std::decay_t<decltype(DLOCK_ASIO::prefer(std::declval<DLOCK_ASIO::associated_executor_t<Handler>>(),
                                           DLOCK_ASIO::execution::outstanding_work.tracked))>
      work_;
};

// Result: the lease itself, or a leadership of the candidate `candidate_id` (async_campaign).
template <class Handler, class Result>
class acquire_completion final : public ::dlock::detail::async_completion {
 public:
  acquire_completion(Handler handler, std::stop_token stop, std::shared_ptr<cancel_cell> cell, std::string candidate_id)
      : handler_(std::move(handler)), candidate_id_(std::move(candidate_id)) {
    if (stop.stop_possible()) on_stop_.emplace(std::move(stop), cancel_on_request{std::move(cell)});
  }
  void complete(std::error_code ec, lease granted) noexcept override {
    const auto reported = ec == ::dlock::detail::canceled_error() ? operation_aborted() : ec;
    if constexpr (std::is_same_v<Result, lease>)
      handler_.deliver(reported, std::move(granted));
    else
      handler_.deliver(reported, Result(std::move(granted), std::move(candidate_id_)));
  }

 private:
  posted_completion<Handler, std::error_code, Result> handler_;
  std::string candidate_id_;
  std::optional<std::stop_callback<cancel_on_request>> on_stop_;
};

template <class Handler>
void connect_slot([[maybe_unused]] Handler& handler, [[maybe_unused]] const std::shared_ptr<cancel_cell>& cell) {
#if DLOCK_ASIO_HAS_CANCELLATION_SLOTS
  auto slot = DLOCK_ASIO::get_associated_cancellation_slot(handler);
  if (slot.is_connected()) slot.template emplace<cancel_on_request>(cancel_on_request{cell});
#endif
}

template <class Result>
struct initiate_acquire {
  template <class Handler>
  void operator()(Handler&& handler, ::dlock::detail::line_key key, ::dlock::detail::blocking_acquire acquire,
                  std::chrono::steady_clock::time_point deadline, std::stop_token stop,
                  std::string candidate_id) const {
    auto cell = std::make_shared<cancel_cell>();
    connect_slot(handler, cell);
    auto done = std::make_unique<acquire_completion<std::decay_t<Handler>, Result>>(
        std::forward<Handler>(handler), stop, cell, std::move(candidate_id));
    // A stop requested before the start (its callback ran in `done`'s constructor) cancels without
    // a wait: queued, the wait could be granted before attach() passed the cancel on.
    if (cell->canceled()) {
      done->complete(::dlock::detail::canceled_error(), lease{});
      return;
    }
    cell->attach(::dlock::detail::start_async_wait(key, std::move(acquire), deadline, std::move(done)));
  }
};

template <class Result = lease, class CompletionToken>
auto start_acquire(::dlock::detail::line_key key, ::dlock::detail::blocking_acquire acquire,
                   std::chrono::steady_clock::time_point deadline, std::stop_token stop, CompletionToken&& token,
                   std::string candidate_id = {}) {
  return DLOCK_ASIO::async_initiate<CompletionToken, void(std::error_code, Result)>(
      initiate_acquire<Result>{}, token, key, std::move(acquire), deadline, std::move(stop), std::move(candidate_id));
}

// async_wait_lost: stop callbacks on the lease's lost token and on the caller's stop token; the first
// to fire completes. The watch owns itself until then, and the posted handler owns it after, so
// that no callback is destroyed while it runs.
template <class Handler>
class lost_watch {
 public:
  explicit lost_watch(Handler handler) : handler_(std::move(handler)) {}

  static void start(Handler handler, std::shared_ptr<::dlock::spi::lease_state> state, std::stop_token stop) {
    auto watch = std::make_shared<lost_watch>(std::move(handler));
    watch->state_ = std::move(state);
    watch->keep_alive_ = watch;
    if (!watch->state_) {  // an empty lease: nothing to lose
      watch->finish(std::make_error_code(std::errc::invalid_argument));
      return;
    }
#if DLOCK_ASIO_HAS_CANCELLATION_SLOTS
    auto slot = DLOCK_ASIO::get_associated_cancellation_slot(watch->handler_.handler());
    if (slot.is_connected()) slot.template emplace<cancel_watch>(cancel_watch{watch});
#endif
    // A token already stopped runs its callback inside emplace; `watch` keeps *this alive meanwhile.
    if (stop.stop_possible()) watch->on_stop_.emplace(std::move(stop), finish_with{watch.get(), true});
    watch->on_lost_.emplace(watch->state_->lost_token(), finish_with{watch.get(), false});
  }

 private:
  struct finish_with {
    lost_watch* watch;
    bool canceled;
    void operator()() const noexcept { watch->finish(canceled ? operation_aborted() : watch->state_->lost_reason()); }
  };
  struct cancel_watch {
    std::shared_ptr<lost_watch> watch;
    void operator()() const noexcept { watch->finish(operation_aborted()); }
#if DLOCK_ASIO_HAS_CANCELLATION_SLOTS
    void operator()(DLOCK_ASIO::cancellation_type) const noexcept { (*this)(); }
#endif
  };

  // The first call delivers; it must be its last touch of *this (the posted handler may free it).
  void finish(std::error_code ec) noexcept {
    if (finished_.exchange(true)) return;
    handler_.deliver_keeping(std::move(keep_alive_), ec);
  }

  posted_completion<Handler, std::error_code> handler_;
  std::shared_ptr<::dlock::spi::lease_state> state_;
  std::shared_ptr<lost_watch> keep_alive_;
  std::atomic<bool> finished_{false};
  std::optional<std::stop_callback<finish_with>> on_stop_;
  std::optional<std::stop_callback<finish_with>> on_lost_;
};

struct initiate_wait_lost {
  template <class Handler>
  void operator()(Handler&& handler, std::shared_ptr<::dlock::spi::lease_state> state, std::stop_token stop) const {
    lost_watch<std::decay_t<Handler>>::start(std::forward<Handler>(handler), std::move(state), std::move(stop));
  }
};

// async_release: the engine's round-trip thread releases, then the handler is posted with the result.
template <class Handler>
class release_completion final : public ::dlock::detail::release_completion {
 public:
  explicit release_completion(Handler handler) : handler_(std::move(handler)) {}
  void complete(std::error_code ec) noexcept override { handler_.deliver(ec); }

 private:
  posted_completion<Handler, std::error_code> handler_;
};

struct initiate_release {
  template <class Handler>
  void operator()(Handler&& handler, lease held) const {
    ::dlock::detail::start_async_release(
        std::move(held), std::make_unique<release_completion<std::decay_t<Handler>>>(std::forward<Handler>(handler)));
  }
};

inline unsigned access_kind(access side) noexcept { return side == access::read ? 1U : 2U; }

}  // namespace detail_asio

// Waits up to `timeout` for the lock. Completes with (error_code, lease): a held lease; an empty lease
// and no error at the timeout (as try_acquire_for); error::operation_aborted and an empty lease when
// canceled; the backend's error otherwise.
template <class Rep, class Period, class CompletionToken>
auto async_acquire(distributed_lock& lock, std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                   CompletionToken&& token) {
  return detail_asio::start_acquire(
      {lock.waiting_line(), 0},
      [&lock](std::chrono::steady_clock::time_point until, std::stop_token s, std::error_code& ec) {
        return lock.try_acquire_until(until, std::move(s), ec);
      },
      distributed_lock::deadline_after(timeout), std::move(stop), std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire(distributed_lock& lock, std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  return async_acquire(lock, timeout, std::stop_token{}, std::forward<CompletionToken>(token));
}

// The reader-writer lock's sides, in the same shape. Waiters of one rw_lock object share a line: a
// service waits on one object per name (as on one mutex object per request: those share theirs).
template <class Rep, class Period, class CompletionToken>
auto async_acquire(rw_lock& lock, access side, std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                   CompletionToken&& token) {
  return detail_asio::start_acquire(
      {&lock, detail_asio::access_kind(side)},
      [&lock, side](std::chrono::steady_clock::time_point until, std::stop_token s, std::error_code& ec) {
        return lock.try_acquire_until(side, until, std::move(s), ec);
      },
      distributed_lock::deadline_after(timeout), std::move(stop), std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire(rw_lock& lock, access side, std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  return async_acquire(lock, side, timeout, std::stop_token{}, std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire_read(rw_lock& lock, std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  return async_acquire(lock, access::read, timeout, std::stop_token{}, std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire_read(rw_lock& lock, std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                        CompletionToken&& token) {
  return async_acquire(lock, access::read, timeout, std::move(stop), std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire_write(rw_lock& lock, std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  return async_acquire(lock, access::write, timeout, std::stop_token{}, std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire_write(rw_lock& lock, std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                         CompletionToken&& token) {
  return async_acquire(lock, access::write, timeout, std::move(stop), std::forward<CompletionToken>(token));
}

// The semaphore: `permits` (1 to max_count()) together, or none.
template <class Rep, class Period, class CompletionToken>
auto async_acquire(semaphore& sem, std::uint32_t permits, std::chrono::duration<Rep, Period> timeout,
                   std::stop_token stop, CompletionToken&& token) {
  return detail_asio::start_acquire(
      {&sem, permits},
      [&sem, permits](std::chrono::steady_clock::time_point until, std::stop_token s, std::error_code& ec) {
        return sem.try_acquire_until(until, std::move(s), permits, ec);
      },
      distributed_lock::deadline_after(timeout), std::move(stop), std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire(semaphore& sem, std::uint32_t permits, std::chrono::duration<Rep, Period> timeout,
                   CompletionToken&& token) {
  return async_acquire(sem, permits, timeout, std::stop_token{}, std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire(semaphore& sem, std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  return async_acquire(sem, 1U, timeout, std::stop_token{}, std::forward<CompletionToken>(token));
}
template <class Rep, class Period, class CompletionToken>
auto async_acquire(semaphore& sem, std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                   CompletionToken&& token) {
  return async_acquire(sem, 1U, timeout, std::move(stop), std::forward<CompletionToken>(token));
}

// Campaigns up to `timeout` in the election (election::campaign_for, asynchronously). Completes with
// (error_code, leadership): elected; an empty leadership and no error at the timeout (another
// candidate leads); error::operation_aborted when canceled; the backend's error otherwise.
template <class Rep, class Period, class CompletionToken>
auto async_campaign(election& vote, std::chrono::duration<Rep, Period> timeout, std::stop_token stop,
                    CompletionToken&& token) {
  distributed_lock& lock = vote.lock();
  return detail_asio::start_acquire<leadership>(
      {lock.waiting_line(), 0},
      [&lock](std::chrono::steady_clock::time_point until, std::stop_token s, std::error_code& ec) {
        return lock.try_acquire_until(until, std::move(s), ec);
      },
      distributed_lock::deadline_after(timeout), std::move(stop), std::forward<CompletionToken>(token),
      std::string(vote.id()));
}
template <class Rep, class Period, class CompletionToken>
auto async_campaign(election& vote, std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  return async_campaign(vote, timeout, std::stop_token{}, std::forward<CompletionToken>(token));
}

// Completes with (error_code) once the lease is lost: errc::lock_lost (renewal failed, validity ran
// out, the session died) or errc::not_owner; error::operation_aborted when canceled;
// errc::invalid_argument at once for an empty lease. A lease released by its holder is not lost:
// cancel the wait then. The lease may be moved meanwhile; the wait follows its grant.
template <class CompletionToken>
auto async_wait_lost(const lease& held, std::stop_token stop, CompletionToken&& token) {
  return DLOCK_ASIO::async_initiate<CompletionToken, void(std::error_code)>(detail_asio::initiate_wait_lost{}, token,
                                                                            held.state(), std::move(stop));
}
template <class CompletionToken>
auto async_wait_lost(const lease& held, CompletionToken&& token) {
  return async_wait_lost(held, std::stop_token{}, std::forward<CompletionToken>(token));
}

// Releases the lease without a round trip on the caller's thread (lease::release makes one, and an
// io_context thread that makes it serves nothing meanwhile). Completes with (error_code) once the
// server has answered: no error when released (or for an empty lease), errc::not_owner when the
// lock was no longer this lease's (it expired and went to someone else: the work done under it
// was not protected), or the backend's error (the lock then ends at its ttl). A release is not
// canceled: a stop token or cancellation slot would leave the lock held until its ttl, so none is
// taken.
template <class CompletionToken>
auto async_release(lease held, CompletionToken&& token) {
  return DLOCK_ASIO::async_initiate<CompletionToken, void(std::error_code)>(detail_asio::initiate_release{}, token,
                                                                            std::move(held));
}
