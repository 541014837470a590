#include "advisory_primitives.hpp"

#include <random>
#include <vector>

#include "capabilities.hpp"
#include "dlock_sql/deadline.hpp"
#include "dlock_sql/params.hpp"
#include "pg_connection.hpp"

namespace dlock::pg {
namespace {

using clock = std::chrono::steady_clock;

class advisory_rw_lock final : public rw_lock {
 public:
  advisory_rw_lock(std::shared_ptr<advisory_state> st, std::string name, lock_options o)
      : rw_lock(std::move(name), postgres_advisory_primitives.rw_lock.value_or(capabilities{}), std::move(o)),
        st_(std::move(st)),
        key_(advisory_key::of(std::string(this->name()))) {}

 private:
  static advisory_kind kind_of(access side) {
    return side == access::read ? advisory_kind::reader : advisory_kind::writer;
  }
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override {
    return acquire_advisory_key(st_, key_, kind_of(side), options(), false, clock::now(), ec);
  }
  // A blocking wait on the server for both sides: that is what makes a waiting writer hold back
  // the readers that come after it (polled try-locks would not queue).
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return sql::wait_out_outages(deadline, options().poll, ec, [&](clock::time_point d, std::error_code& e) {
      return acquire_advisory_key(st_, key_, kind_of(side), options(), true, d, e);
    });
  }

  std::shared_ptr<advisory_state> st_;
  advisory_key key_;  // the mutex's key and local reservation of the same name
};

// "{1,-2,3}": an int4[] parameter in its text form.
std::string array_text(const std::vector<std::int32_t>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "}";
}

// "{1,3}" (array_agg of the ordinals taken) or NULL (none): the 1-based ordinals.
std::vector<std::size_t> ordinals_of(const std::optional<std::string>& text) {
  std::vector<std::size_t> out;
  if (!text) return out;
  std::size_t value = 0;
  bool digits = false;
  for (char c : *text) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + static_cast<std::size_t>(c - '0');
      digits = true;
    } else if (digits) {
      out.push_back(value);
      value = 0;
      digits = false;
    }
  }
  if (digits) out.push_back(value);
  return out;
}

class advisory_semaphore final : public sql::deadline_semaphore {
 public:
  advisory_semaphore(std::shared_ptr<advisory_state> st, std::string name, std::uint32_t max_count, lock_options o)
      : deadline_semaphore(std::move(name), max_count, postgres_advisory_primitives.semaphore.value_or(capabilities{}),
                           std::move(o)),
        st_(std::move(st)),
        key_(advisory_key::of(std::string(this->name()))) {
    slots_.reserve(max_count);
    for (std::uint32_t i = 0; i < max_count; ++i) slots_.push_back(semaphore_slot_key(this->name(), i));
  }

 private:
  // Slots per statement: enough for any usual N in one round trip, few enough to keep the
  // statement small for a large N.
  static constexpr std::size_t chunk = 256;
  // A statement that could not publish the semaphore mark (a mutex or rw lock of the name was
  // probing it at that instant) is sent again, at most this many times, then the attempt misses.
  static constexpr int publish_attempts = 3;

  static std::string reservation_of(std::int64_t slot_key) { return "slot:" + std::to_string(slot_key); }

  std::vector<sql::param> unlock_params(const std::vector<std::int64_t>& keys) const {
    std::vector<std::int32_t> hi, lo;
    for (auto k : keys) hi.push_back(high_of(k)), lo.push_back(low_of(k));
    return {array_text(hi), array_text(lo), std::int64_t{high_of(key_.semaphore_mark)},
            std::int64_t{low_of(key_.semaphore_mark)}};
  }

  // Gives the slots and the mark back on the session (under its mutex); a session that cannot is
  // ended (the server frees them with it).
  void unlock_slots(sql::session& s, const std::vector<std::int64_t>& keys) noexcept {
    if (!s.conn()) return;
    try {
      const auto ps = unlock_params(keys);
      sql::result out;
      sql::sql_error err;
      if (s.conn()->usable() && s.conn()->execute(st_->slots_unlock_sql, ps, out, err)) return;
    } catch (...) {
    }
    s.end();
  }

  // Starting at a random slot (so that acquirers spread over the slots instead of all trying slot
  // 0 first), the slots this process does not hold are tried in chunks, on one session (a try
  // never waits, so it may be a shared one), until `permits` are taken: all on that session, so
  // one lease gives them back in one statement and loses them together.
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override {
    try {
      // The mark first in this process too: a session that holds the name's k for a mutex or
      // rw lease of this process would not see it in its probe, so then the attempt takes a
      // session of its own.
      if (st_->share->reserve_beside(key_.mark_text, true) == sql::session_share::beside::failed) {
        set_error(ec, errc::backend_error, "out of memory");
        return nullptr;
      }
      sql::key_reservation mark(st_->share.get(), key_.mark_text, true);
      const auto deadline = clock::now() + st_->connections->options().checkout_timeout;
      // try_slots gets a copy of the session's pointer: the one here must keep the session alive
      // until the lock on its mutex is released. A failed try drops its copy, and when that was
      // the last one (a session of our own, or a shared one ended and dropped meanwhile) the
      // mutex would be unlocked after the session was freed.
      if (!st_->share->reserved(key_.key_text)) {
        auto picked = st_->share->pick(deadline, ec);
        if (!picked.s) return nullptr;
        return try_slots(picked.s, permits, mark, ec);
      }
      auto h = st_->connections->checkout_dedicated(deadline, ec);
      if (!h) return nullptr;
      auto own = std::make_shared<sql::session>(std::move(h));
      std::lock_guard lk(own->mutex());
      return try_slots(own, permits, mark, ec);
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  // Under s->mutex().
  std::unique_ptr<spi::lease_state> try_slots(std::shared_ptr<sql::session> session, std::uint32_t permits,
                                              sql::key_reservation& mark, std::error_code& ec) {
    auto& s = *session;
    const std::uint32_t n = max_count();
    thread_local std::minstd_rand random{std::random_device{}()};
    const std::uint32_t first = static_cast<std::uint32_t>(random() % n);
    const std::string what = "acquiring semaphore " + describe(name());
    const auto start = clock::now();
    advisory_hold hold;
    std::vector<std::int64_t> taken;
    std::optional<std::int64_t> answer;  // the token, or -1: the probe of k failed
    std::uint32_t visited = 0;
    bool published = false;
    while (visited < n && taken.size() < permits) {
      std::vector<std::int64_t> candidates;
      std::vector<sql::key_reservation> reserved;
      std::vector<std::int32_t> hi, lo;
      while (visited < n && candidates.size() < chunk) {
        const auto key = slots_[(first + visited++) % n];
        auto text = reservation_of(key);
        if (!st_->share->reserve(text, clock::now())) continue;  // a lease of this process holds it
        reserved.emplace_back(st_->share.get(), std::move(text));
        candidates.push_back(key);
        hi.push_back(high_of(key));
        lo.push_back(low_of(key));
      }
      if (candidates.empty()) break;
      const sql::param ps[] = {array_text(hi),
                               array_text(lo),
                               static_cast<std::int64_t>(permits - taken.size()),
                               std::int64_t{high_of(key_.semaphore_mark)},
                               std::int64_t{low_of(key_.semaphore_mark)},
                               std::int64_t{published ? 0 : 1},
                               key_.key};
      sql::result out;
      for (int attempt = 0;; ++attempt) {
        sql::sql_error err;
        if (!s.conn()->execute(st_->slots_try_sql, ps, out, err)) {
          // Some of the candidates may be held now (a failed statement keeps session locks): give
          // back everything this attempt may hold, or end the session.
          sql::set_sql_error(ec, err, what);
          taken.insert(taken.end(), candidates.begin(), candidates.end());
          unlock_slots(s, taken);
          return nullptr;
        }
        s.answered(start);
        if (out.rows.empty() || out.rows[0].size() < 3) {
          set_error(ec, errc::backend_error, what + ": unreadable answer");
          taken.insert(taken.end(), candidates.begin(), candidates.end());
          unlock_slots(s, taken);
          return nullptr;
        }
        if (out.rows[0][0] == std::optional<std::string>("t")) break;
        if (attempt + 1 >= publish_attempts) return nullptr;  // nothing taken, nothing held
      }
      published = true;
      for (auto ord : ordinals_of(out.rows[0][1])) {
        if (ord < 1 || ord > candidates.size()) continue;
        taken.push_back(candidates[ord - 1]);
        hold.reserved.push_back(std::move(reserved[ord - 1]));
      }
      if (out.rows[0][2]) answer = int_of(out.rows[0][2]);
    }  // the reservations of the candidates not taken go here
    if (taken.size() < permits || !answer) {
      if (taken.size() == permits) set_error(ec, errc::backend_error, what + ": unreadable fencing token");
      if (published) unlock_slots(s, taken);
      return nullptr;  // hold's reservations go only now, after the unlock
    }
    if (*answer == -1) answer = check_locks(s, taken, ec);  // refused: the slots and the mark are given back
    if (!answer || *answer <= 0) return nullptr;
    hold.unlock_sql = st_->slots_unlock_sql;
    hold.params = unlock_params(taken);
    hold.reserved.push_back(std::move(mark));
    return advisory_lease_on(st_, std::move(session), std::string(name()), options(), start,
                             static_cast<std::uint64_t>(*answer), std::move(hold), ec);
  }

  // The probe of k failed: a mutex or rw lock of the name holds it, or another acquirer of this
  // semaphore was probing k at that instant. pg_locks tells which. The token when nothing holds
  // k; otherwise the slots and the mark go back and ec says name_conflict (or the failure).
  std::optional<std::int64_t> check_locks(sql::session& s, const std::vector<std::int64_t>& taken,
                                          std::error_code& ec) {
    const std::string what = "acquiring semaphore " + describe(name());
    const sql::param ps[] = {
        classid_of(key_.key),          objid_of(key_.key),           classid_of(key_.semaphore_mark),
        objid_of(key_.semaphore_mark), classid_of(key_.writer_mark), objid_of(key_.writer_mark)};
    sql::result out;
    sql::sql_error err;
    if (!s.conn()->execute(st_->lock_check_sql, ps, out, err)) {
      sql::set_sql_error(ec, err, what);
      unlock_slots(s, taken);
      return std::nullopt;
    }
    const auto& row = out.rows.empty() ? sql::row{} : out.rows[0];
    const auto cell = [&](std::size_t i) { return i < row.size() ? int_of(row[i]).value_or(-1) : -1; };
    const auto readers = cell(0), writers = cell(1), exclusive = cell(2), token = cell(3);
    if (readers == 0 && exclusive == 0 && token > 0) return token;
    unlock_slots(s, taken);
    if (readers < 0 || exclusive < 0) {
      set_error(ec, errc::backend_error, what + ": unreadable answer to the lock check");
      return std::nullopt;
    }
    std::string as;
    if (exclusive > writers)
      as = "a mutex (held by a server session)";
    else if (writers > 0)
      as = "a reader-writer lock (held by a writer)";
    else
      as = "a reader-writer lock (held by " + std::to_string(readers) + (readers == 1 ? " reader)" : " readers)");
    set_error(ec, errc::name_conflict,
              "lock " + describe(name()) + " is in use as " + as +
                  "; a semaphore of the same name cannot be taken: use another name");
    return std::nullopt;
  }

  std::shared_ptr<advisory_state> st_;
  advisory_key key_;                 // the name's k and marks
  std::vector<std::int64_t> slots_;  // slot i's key
};

}  // namespace

std::unique_ptr<rw_lock> make_advisory_rw_lock(std::shared_ptr<advisory_state> st, std::string name,
                                               lock_options options) {
  return std::make_unique<advisory_rw_lock>(std::move(st), std::move(name), std::move(options));
}

std::unique_ptr<semaphore> make_advisory_semaphore(std::shared_ptr<advisory_state> st, std::string name,
                                                   std::uint32_t max_count, lock_options options) {
  return std::make_unique<advisory_semaphore>(std::move(st), std::move(name), max_count, std::move(options));
}

}  // namespace dlock::pg
