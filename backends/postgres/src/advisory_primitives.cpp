#include "advisory_primitives.hpp"

#include <random>
#include <vector>

#include "capabilities.hpp"
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
        key_{std::string(this->name()), spi::sha256_int64(this->name()), std::to_string(spi::sha256_int64(this->name()))} {}

 private:
  static advisory_mode mode_of(access side) { return side == access::read ? advisory_mode::shared : advisory_mode::exclusive; }
  std::unique_ptr<spi::lease_state> do_try_acquire(access side, std::error_code& ec) noexcept override {
    return acquire_advisory_key(st_, key_, mode_of(side), options(), false, clock::now(), ec);
  }
  // A blocking wait on the server for both sides: that is what makes a waiting writer hold back
  // the readers that come after it (polled try-locks would not queue).
  std::unique_ptr<spi::lease_state> do_acquire_until(access side, clock::time_point deadline,
                                                     std::error_code& ec) noexcept override {
    return acquire_advisory_key(st_, key_, mode_of(side), options(), true, deadline, ec);
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

std::int32_t high_of(std::int64_t key) { return static_cast<std::int32_t>(static_cast<std::uint64_t>(key) >> 32); }
std::int32_t low_of(std::int64_t key) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(key))); }

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

class advisory_semaphore final : public semaphore {
 public:
  advisory_semaphore(std::shared_ptr<advisory_state> st, std::string name, std::uint32_t max_count, lock_options o)
      : semaphore(std::move(name), max_count, postgres_advisory_primitives.semaphore.value_or(capabilities{}), std::move(o)),
        st_(std::move(st)) {
    slots_.reserve(max_count);
    for (std::uint32_t i = 0; i < max_count; ++i) slots_.push_back(semaphore_slot_key(this->name(), i));
  }

 private:
  // Slots per statement: enough for any usual N in one round trip, few enough to keep the
  // statement small for a large N.
  static constexpr std::size_t chunk = 256;

  static std::string reservation_of(std::int64_t slot_key) { return "slot:" + std::to_string(slot_key); }

  // Gives the slots back on the session (under its mutex); a session that cannot is ended (the
  // server frees them with it).
  void unlock_slots(sql::session& s, const std::vector<std::int64_t>& keys) noexcept {
    if (keys.empty() || !s.conn()) return;
    try {
      std::vector<std::int32_t> hi, lo;
      for (auto k : keys) hi.push_back(high_of(k)), lo.push_back(low_of(k));
      const sql::param ps[] = {array_text(hi), array_text(lo)};
      sql::result out;
      sql::sql_error err;
      if (s.conn()->usable() && s.conn()->execute(st_->slots_unlock_sql, ps, out, err)) return;
    } catch (...) {
    }
    s.end();
  }

  // Starting at a random slot (so that acquirers spread over the slots instead of all trying slot
  // 0 first), the slots this process does not hold are tried in chunks, on one shared session
  // (a try never waits, so it may share one), until `permits` are taken: all on that session, so
  // one lease gives them back in one statement and loses them together.
  std::unique_ptr<spi::lease_state> do_try_acquire(std::uint32_t permits, std::error_code& ec) noexcept override {
    try {
      return try_slots(permits, ec);
    } catch (...) {
      set_error(ec, errc::backend_error, "out of memory");
      return nullptr;
    }
  }

  std::unique_ptr<spi::lease_state> try_slots(std::uint32_t permits, std::error_code& ec) {
    const std::uint32_t n = max_count();
    thread_local std::minstd_rand random{std::random_device{}()};
    const std::uint32_t first = static_cast<std::uint32_t>(random() % n);
    auto picked = st_->share->pick(clock::now() + st_->connections->options().checkout_timeout, ec);
    if (!picked.s) return nullptr;
    auto& s = *picked.s;
    const std::string what = "acquiring semaphore " + describe(name());
    const auto start = clock::now();
    advisory_hold hold;
    std::vector<std::int64_t> taken;
    std::optional<std::uint64_t> token;
    std::uint32_t visited = 0;
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
      const sql::param ps[] = {array_text(hi), array_text(lo), static_cast<std::int64_t>(permits - taken.size())};
      sql::result out;
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
      if (out.rows.empty() || out.rows[0].size() < 2) {
        set_error(ec, errc::backend_error, what + ": unreadable answer");
        taken.insert(taken.end(), candidates.begin(), candidates.end());
        unlock_slots(s, taken);
        return nullptr;
      }
      for (auto ord : ordinals_of(out.rows[0][0])) {
        if (ord < 1 || ord > candidates.size()) continue;
        taken.push_back(candidates[ord - 1]);
        hold.reserved.push_back(std::move(reserved[ord - 1]));
      }
      if (out.rows[0][1]) token = token_of(sql::result{0, {{out.rows[0][1]}}});
    }  // the reservations of the candidates not taken go here
    if (taken.size() < permits || !token) {
      if (taken.size() == permits) set_error(ec, errc::backend_error, what + ": unreadable fencing token");
      unlock_slots(s, taken);
      return nullptr;  // hold's reservations go only now, after the unlock
    }
    std::vector<std::int32_t> hi, lo;
    for (auto k : taken) hi.push_back(high_of(k)), lo.push_back(low_of(k));
    hold.unlock_sql = st_->slots_unlock_sql;
    hold.params.emplace_back(array_text(hi));
    hold.params.emplace_back(array_text(lo));
    return advisory_lease_on(st_, std::move(picked.s), std::string(name()), options(), start, *token, std::move(hold), ec);
  }

  std::shared_ptr<advisory_state> st_;
  std::vector<std::int64_t> slots_;  // slot i's key
};

}  // namespace

std::int64_t semaphore_slot_key(std::string_view name, std::uint32_t slot) {
  std::string data;
  data.reserve(4 + name.size());
  for (int shift = 24; shift >= 0; shift -= 8) data.push_back(static_cast<char>((slot >> shift) & 0xffu));
  data.append(name);
  return spi::sha256_int64(data);
}

std::unique_ptr<rw_lock> make_advisory_rw_lock(std::shared_ptr<advisory_state> st, std::string name, lock_options options) {
  return std::make_unique<advisory_rw_lock>(std::move(st), std::move(name), std::move(options));
}

std::unique_ptr<semaphore> make_advisory_semaphore(std::shared_ptr<advisory_state> st, std::string name,
                                                   std::uint32_t max_count, lock_options options) {
  return std::make_unique<advisory_semaphore>(std::move(st), std::move(name), max_count, std::move(options));
}

}  // namespace dlock::pg
