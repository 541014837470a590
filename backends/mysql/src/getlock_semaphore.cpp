// mysql+getlock's semaphore (getlock_semaphore.hpp): an attempt walks the N slots from a random
// one, taking GET_LOCK(slot, 0) on a dedicated connection until it holds `permits` of them; short
// of that it gives back what it took (a miss). Waiters poll with the core's backoff: the server
// cannot queue one waiter on N locks at once.
#include "getlock_semaphore.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <stop_token>
#include <vector>

#include "dlock_sql/connection.hpp"
#include "dlock_sql/deadline.hpp"
#include "dlock_sql/pool.hpp"
#include "getlock_key.hpp"
#include "getlock_query.hpp"

namespace dlock::mysql {
namespace {

namespace sql = dlock::sql;

// SELECT (IS_USED_LOCK(?) = CONNECTION_ID()) + ... for `count` keys: how many are still ours.
std::string still_ours_sql(std::size_t count) {
  std::string q = "SELECT 0";
  for (std::size_t i = 0; i < count; ++i) q += " + COALESCE(IS_USED_LOCK(?) = CONNECTION_ID(), 0)";
  return q;
}

// Releases `keys` on `c` (best effort); false when one was not held by it.
bool release_all(sql::connection& c, const std::vector<std::string>& keys, std::error_code& ec,
                 const std::string& what) noexcept {
  bool all = true;
  for (const auto& k : keys) {
    const sql::param p{k};
    std::optional<long long> released;
    if (!query_scalar(c, release_lock_sql, std::span(&p, 1), released, ec, what)) return false;
    all = all && released == 1;
  }
  return all;
}

// Cuts the lease's connection when the lease is lost (its validity ran out unconfirmed, or a check
// failed): the server then frees the slots, so a lease that is no longer valid here holds nothing
// there either. shutdown, never close: the descriptor stays the connection's until it is dropped.
struct cut_when_lost {
  int fd;
  void operator()() const noexcept {
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
};

// The permits of one grant: GET_LOCK locks of distinct slots, held by the lease's own connection.
// "Renewing" is a liveness check (the connection answers and still holds every slot); a killed
// connection fails it and the watchdog fires lost. The lease's validity is local (start + ttl,
// moved by each check): once lost, its connection is cut (cut_when_lost).
class slots_lease final : public spi::lease_state {
 public:
  slots_lease(std::string name, std::chrono::milliseconds ttl, clock::time_point start, std::uint64_t token,
              sql::pool::handle conn, std::vector<std::string> keys)
      : lease_state(std::move(name), ttl, validity_after(start, ttl)),
        token_(token),
        conn_(std::move(conn)),
        keys_(std::move(keys)),
        check_sql_(still_ours_sql(keys_.size())),
        cut_(std::in_place, lost_token(), cut_when_lost{conn_->native_socket()}) {}
  // Not released: the connection ends, which frees the slots on the server.
  ~slots_lease() override {
    std::lock_guard lk(mutex_);
    cut_.reset();
    if (conn_) conn_.discard();
  }
  std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }

 private:
  void do_release(std::error_code& ec) noexcept override {
    std::lock_guard lk(mutex_);
    const std::string what = "releasing semaphore '" + name() + "'";
    if (!conn_) {
      set_error(ec, errc::not_owner, what + ": its connection was lost, and the server freed its slots then");
      return;
    }
    try {
      std::error_code failed;
      const bool all = release_all(*conn_, keys_, failed, what + " (RELEASE_LOCK)");
      cut_.reset();  // before the connection can go back to the pool (and serve someone else)
      if (failed || !conn_->usable()) {
        conn_.discard();
        set_error(ec, errc::not_owner, what + ": the connection was lost, and the server freed its slots with it");
      } else if (!all) {
        conn_ = {};
        set_error(ec, errc::not_owner, what + ": a slot was no longer held by this lease's connection");
      }
      conn_ = {};
    } catch (...) {
      cut_.reset();
      conn_.discard();
      set_error(ec, errc::backend_error, "out of memory");
    }
  }
  void do_renew(std::chrono::milliseconds, std::error_code& ec) noexcept override {
    std::lock_guard lk(mutex_);
    const std::string what = "checking semaphore '" + name() + "'";
    if (!conn_) {
      set_error(ec, errc::lock_lost, what + ": the lease's connection is gone");
      return;
    }
    try {
      std::vector<sql::param> ps(keys_.begin(), keys_.end());
      std::optional<long long> ours;
      if (!query_scalar(*conn_, check_sql_, ps, ours, ec, what + " (IS_USED_LOCK)")) {
        if (ec == errc::backend_unavailable) set_error(ec, errc::lock_lost, what + ": the lease's connection is gone");
        return;
      }
      if (ours != static_cast<long long>(keys_.size()))
        set_error(ec, errc::not_owner, what + ": the server no longer names this connection as holder of every slot");
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
    }
  }

  std::mutex mutex_;  // the connection: release and the liveness check may come from two threads
  std::uint64_t token_;
  sql::pool::handle conn_;
  std::vector<std::string> keys_;
  std::string check_sql_;
  std::optional<std::stop_callback<cut_when_lost>> cut_;
};

class getlock_semaphore final : public sql::deadline_semaphore {
 public:
  getlock_semaphore(const std::string& name, std::uint32_t max_count, capabilities caps, lock_options options,
                    std::shared_ptr<const getlock_backend::shared> shared)
      : deadline_semaphore(name, max_count, caps, std::move(options)),
        shared_(std::move(shared)),
        mutex_key_(getlock_key(name)) {
    keys_.reserve(max_count);
    for (std::uint32_t i = 0; i < max_count; ++i) keys_.push_back(semaphore_slot_key(name, i));
  }

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override {
    const auto start = clock::now();
    const std::string what = "acquiring semaphore '" + std::string(name()) + "'";
    try {
      auto h = shared_->connections->checkout_dedicated(ec);
      if (!h) return nullptr;
      // The name goes into the semaphores' table before any slot is taken (once per object: the
      // table keeps it), so a mutex that holds the name later finds it and counts the slots.
      if (!registered_.load()) {
        const sql::param ps[] = {mutex_key_, static_cast<std::int64_t>(max_count())};
        sql::result out;
        sql::sql_error err;
        if (!h->execute(shared_->register_sql, ps, out, err)) {
          if (!h->usable()) h.discard();
          sql::set_sql_error(ec, err, what + " (recording it in " + shared_->semaphores_table + ")");
          return nullptr;
        }
        registered_ = true;
      }
      thread_local std::minstd_rand random{std::random_device{}()};
      const std::uint32_t first = static_cast<std::uint32_t>(random() % max_count());
      std::vector<std::string> held;
      std::uint64_t token = 0;
      for (std::uint32_t i = 0; i < max_count() && held.size() < permits; ++i) {
        const auto& key = keys_[(first + i) % max_count()];
        const sql::param ps[] = {mutex_key_, key, std::string("0")};
        std::optional<long long> got;
        if (!query_scalar(*h, shared_->slot_sql, ps, got, ec, what + " (GET_LOCK)")) {
          h.discard();  // it may hold slots: the connection ends, and the server frees them
          return nullptr;
        }
        if (!got) {
          h.discard();
          set_error(ec, errc::backend_error, what + ": GET_LOCK returned NULL");
          return nullptr;
        }
        if (*got == -1) {  // the slot is ours, and the name is held as a mutex: give every slot back
          held.push_back(key);
          std::error_code ignored;
          if (!release_all(*h, held, ignored, what) || ignored) h.discard();
          set_error(ec, errc::name_conflict,
                    "lock '" + std::string(name()) +
                        "' is in use as a mutex (held on the server); a semaphore of the same name cannot be taken: "
                        "use another name");
          return nullptr;
        }
        if (*got > 0) {
          held.push_back(key);
          token = static_cast<std::uint64_t>(*got);  // the last NEXTVAL: read while holding every slot
        }
      }
      if (held.size() < permits) {  // a miss: give back what we took
        std::error_code ignored;
        if (!release_all(*h, held, ignored, what) || ignored) h.discard();
        return nullptr;
      }
      return std::make_unique<slots_lease>(std::string(name()), options().ttl, start, token, std::move(h),
                                           std::move(held));
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  std::shared_ptr<const getlock_backend::shared> shared_;
  std::string mutex_key_;
  std::vector<std::string> keys_;
  std::atomic<bool> registered_{false};
};

}  // namespace

std::string semaphore_slot_key(std::string_view name, std::uint32_t slot) {
  std::string input = std::to_string(slot);
  input.push_back('\0');
  input.append(name);
  return "%" + spi::sha256_hex(input).substr(0, 63);
}

std::unique_ptr<semaphore> make_getlock_semaphore(const std::string& name, std::uint32_t max_count, capabilities caps,
                                                  lock_options options,
                                                  std::shared_ptr<const getlock_backend::shared> shared) {
  return std::make_unique<getlock_semaphore>(name, max_count, caps, std::move(options), std::move(shared));
}

std::optional<std::uint32_t> semaphore_permits_held(dlock::sql::connection& c, std::string_view name,
                                                    std::uint32_t max_count, std::error_code& ec) noexcept {
  constexpr std::uint32_t per_statement = 256;
  try {
    std::uint32_t held = 0;
    for (std::uint32_t from = 0; from < max_count; from += per_statement) {
      const std::uint32_t count = std::min(per_statement, max_count - from);
      std::vector<sql::param> ps;
      ps.reserve(count);
      for (std::uint32_t i = 0; i < count; ++i) ps.emplace_back(semaphore_slot_key(name, from + i));
      std::string q = "SELECT 0";
      for (std::uint32_t i = 0; i < count; ++i) q += " + (IS_USED_LOCK(?) IS NOT NULL)";
      std::optional<long long> n;
      if (!query_scalar(c, q, ps, n, ec, "counting the permits held of semaphore '" + std::string(name) + "'"))
        return std::nullopt;
      held += static_cast<std::uint32_t>(n.value_or(0));
    }
    return held;
  } catch (...) {
    set_error(ec, errc::backend_error, "out of memory");
    return std::nullopt;
  }
}

}  // namespace dlock::mysql
