// What the three table strategies share (strategy_common.hpp), and run_ddl (strategies.hpp).
#include "strategy_common.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <thread>
#include <tuple>

#include "dlock/error.hpp"
#include "dlock/spi.hpp"

namespace dlock::sql {
namespace detail {
namespace {

// Between the retries of a transaction rolled back by a deadlock or serialization failure.
constexpr backoff_policy transient_retry_pause{std::chrono::milliseconds{1}, std::chrono::milliseconds{16}};

std::vector<param> bind(const statement& st, const values& v) {
  std::vector<param> ps;
  ps.reserve(st.binds.size());
  for (arg a : st.binds) {
    switch (a) {
      case arg::name: ps.emplace_back(bytes{v.name}); break;
      case arg::owner: ps.emplace_back(v.owner); break;
      case arg::ttl_ms: ps.emplace_back(v.ttl_ms); break;
      case arg::version: ps.emplace_back(v.version); break;
      case arg::channel: ps.emplace_back(v.channel); break;
      case arg::upper: ps.emplace_back(bytes{v.upper}); break;
      case arg::unbounded: ps.emplace_back(v.unbounded); break;
    }
  }
  return ps;
}

}  // namespace

bool transient(failure f) noexcept { return f == failure::deadlock || f == failure::serialization; }

void pause_before_retry(int attempt) noexcept {
  std::this_thread::sleep_for(spi::backoff_delay(transient_retry_pause, static_cast<unsigned>(attempt)));
}

bool run(connection& c, const script& s, const values& v, result& out, sql_error& err, int attempts) noexcept {
  for (int attempt = 0;; ++attempt) {
    err = {};
    out = {};
    bool ok = true;
    try {
      if (s.size() == 1) {
        auto ps = bind(s.front(), v);
        ok = c.execute(s.front().sql, ps, out, err);
      } else {
        ok = c.begin(err);
        for (std::size_t i = 0; ok && i < s.size(); ++i) {
          auto ps = bind(s[i], v);
          out = {};
          ok = c.execute(s[i].sql, ps, out, err);
        }
        if (ok) {
          ok = c.commit(err);
        } else if (c.usable()) {
          sql_error ignored;
          c.rollback(ignored);
        }
      }
    } catch (...) {
      err = {failure::other, "", "out of memory binding parameters"};
      ok = false;
    }
    if (ok) return true;
    // The transaction was rolled back, so running it again is safe. Fair-mode attempts on MariaDB
    // (INSERT ... SELECT takes shared next-key locks) make deadlocks with releases common under
    // contention: the index strategy allows a few retries.
    if (!transient(err.kind) || attempt + 1 >= attempts) return false;
    pause_before_retry(attempt);
  }
}

std::optional<std::int64_t> to_int(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  std::int64_t v = 0;
  auto [p, e] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (e != std::errc() || p != s->data() + s->size()) return std::nullopt;
  return v;
}

std::string quoted_name(const std::string& name) {
  std::string out = "'";
  for (unsigned char ch : name) {
    if (ch >= 0x20 && ch < 0x7f)
      out += static_cast<char>(ch);
    else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out + "'";
}

std::string table_label(const table_ref& t, std::string_view suffix) {
  std::string label = t.schema.empty() ? std::string() : "\"" + t.schema + "\".";
  return label + "\"" + t.table + std::string(suffix) + "\"";
}

void init_shared(shared_state& st, backend_setup&& setup) {
  st.setup = std::move(setup);
  if (st.setup.notifier) st.channel = st.setup.notifier->channel();
}

void create_schema(shared_state& st, const ddl& statements) {
  if (!st.setup.params.create_table) return;
  run_ddl(*st.setup.connections, statements, st.setup.redacted_uri, "creating the lock table",
          "set create_table=false if an administrator creates it; DDL in the README");
}

bool run_pooled(shared_state& st, const script& s, const values& v, result& out, std::error_code& ec,
                std::string_view what, int attempts) noexcept {
  auto h = st.setup.connections->checkout(ec);
  if (!h) return false;
  sql_error err;
  if (run(*h, s, v, out, err, attempts)) return true;
  if (!h->usable()) h.discard();
  set_sql_error(ec, err, what);
  return false;
}

namespace {

// One row to extend: the leases that hold it (a re-entered row has several), all with one ttl.
struct row_to_renew {
  const renewal_key* key;
  std::vector<std::size_t> leases;  // positions in renew_together's keys
};

// The batch statement for `rows` (one ttl); renewed[k] for rows[k]. False (err set) when the
// statement failed; deadlocks are retried as a single renewal's are.
bool renew_rows(connection& c, const batch_renewal_sql& sql, std::int64_t ttl_ms, std::span<const row_to_renew> rows,
                std::vector<bool>& renewed, sql_error& err) {
  constexpr int attempts = 5;
  std::size_t count = 1;  // a power of two: a few statement texts per connection
  while (count < rows.size()) count *= 2;
  std::vector<param> ps;
  ps.reserve(1 + 3 * count);
  ps.emplace_back(ttl_ms);
  for (std::size_t k = 0; k < count; ++k) {
    const auto& key = *rows[std::min(k, rows.size() - 1)].key;  // past the end: the last row again
    ps.emplace_back(bytes{std::string(key.name)});
    ps.emplace_back(std::string(key.owner));
    if (sql.binds_version) ps.emplace_back(key.version);
  }
  const auto text = sql.renew_many(count);
  result out;
  for (int attempt = 0;; ++attempt) {
    if (c.execute(text, ps, out, err)) break;
    if (!transient(err.kind) || attempt + 1 >= attempts) return false;
    pause_before_retry(attempt);
  }
  renewed.assign(rows.size(), false);
  if (sql.returns_positions) {
    for (const auto& row : out.rows) {
      const auto k = row.empty() ? std::nullopt : to_int(row[0]);
      if (k && *k >= 0) renewed[std::min(static_cast<std::size_t>(*k), rows.size() - 1)] = true;
    }
    return true;
  }
  if (out.rows_affected == rows.size()) {  // every row was ours, and extended
    renewed.assign(rows.size(), true);
    return true;
  }
  // A row is no longer ours (rare: a lease lost, or released meanwhile). Which one, only single
  // renewals tell: each extends its row once more, which is harmless.
  for (std::size_t k = 0; k < rows.size(); ++k) {
    values v;
    v.name = std::string(rows[k].key->name);
    v.owner = std::string(rows[k].key->owner);
    v.version = rows[k].key->version;
    v.ttl_ms = ttl_ms;
    if (!run(c, sql.renew, v, out, err, attempts)) return false;
    renewed[k] = out.rows_affected != 0;
  }
  return true;
}

}  // namespace

void renew_together(shared_state& st, const batch_renewal_sql& sql, std::span<spi::lease_state* const> leases,
                    renewal_key (*key_of)(const spi::lease_state&), std::span<std::error_code> outcomes) noexcept {
  constexpr std::size_t most_rows_at_once = 512;
  try {
    std::vector<renewal_key> keys;
    keys.reserve(leases.size());
    for (const auto* l : leases) keys.push_back(key_of(*l));
    std::map<std::int64_t, std::vector<row_to_renew>> by_ttl;
    std::map<std::tuple<std::int64_t, std::string_view, std::string_view, std::int64_t>, std::size_t> row_of;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const auto& key = keys[i];
      auto& rows = by_ttl[key.ttl_ms];
      const auto [it, added] = row_of.try_emplace({key.ttl_ms, key.name, key.owner, key.version}, rows.size());
      if (added) rows.push_back(row_to_renew{&key, {}});
      rows[it->second].leases.push_back(i);
    }
    std::error_code ec;
    auto h = st.setup.connections->checkout(ec);
    if (!h) {
      std::fill(outcomes.begin(), outcomes.end(), ec);
      return;
    }
    std::vector<bool> renewed;
    std::error_code broken;  // the connection was lost: every later row fails with it (the watchdog retries)
    for (const auto& [ttl, rows] : by_ttl) {
      for (std::size_t from = 0; from < rows.size(); from += most_rows_at_once) {
        const auto chunk = std::span(rows).subspan(from, std::min(most_rows_at_once, rows.size() - from));
        sql_error err;
        if (broken || !renew_rows(*h, sql, ttl, chunk, renewed, err)) {
          if (!broken) {
            set_sql_error(ec, err, "renewing " + std::to_string(chunk.size()) + " locks together");
            if (!h->usable()) broken = ec;
          }
          for (const auto& r : chunk)
            for (auto i : r.leases) outcomes[i] = broken ? broken : ec;
          continue;
        }
        for (std::size_t k = 0; k < chunk.size(); ++k)
          for (auto i : chunk[k].leases)
            outcomes[i] = renewed[k] ? std::error_code{} : make_error_code(errc::not_owner);
      }
    }
    if (broken) h.discard();
  } catch (...) {
    std::error_code ec;
    set_error(ec, errc::backend_error, "out of memory renewing");
    std::fill(outcomes.begin(), outcomes.end(), ec);
  }
}

namespace {

[[noreturn]] void throw_sql(const sql_error& err, const std::string& what) {
  std::error_code ec;
  set_sql_error(ec, err, what);
  throw error(ec, last_error_message());
}

// A grant row (owner, fencing token, milliseconds left) as inspect reports it. The layout records
// no grant time (renewals move only the expiry).
lock_holder holder_of(const row& r) {
  lock_holder h;
  if (!r.empty() && r[0]) h.owner = *r[0];
  if (r.size() > 1) {
    if (auto fence = to_int(r[1]); fence && *fence >= 0) h.fencing_token = static_cast<std::uint64_t>(*fence);
  }
  if (r.size() > 2) {
    if (auto left = to_int(r[2])) h.ttl_left = std::chrono::milliseconds{std::max<std::int64_t>(*left, 0)};
  }
  return h;
}

}  // namespace

void prefix_range(const std::string& prefix, std::string& upper, bool& bounded) {
  // The first byte string after every one that starts with `prefix`: drop trailing 0xff bytes,
  // then add one to the last byte left. None when nothing is left (empty, or all 0xff).
  upper = prefix;
  while (!upper.empty() && static_cast<unsigned char>(upper.back()) == 0xff) upper.pop_back();
  bounded = !upper.empty();
  if (bounded) upper.back() = static_cast<char>(static_cast<unsigned char>(upper.back()) + 1);
}

std::string from_hex(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0)
      throw error(errc::backend_error, "the server listed a name that is not hex: " + std::string(hex));
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

lock_info inspect_rows(shared_state& st, const inspection_sql& sql, const std::string& name, bool waiters) {
  values v;
  v.name = name;
  result out;
  std::error_code ec;
  const std::string what = "inspecting lock " + quoted_name(name);
  if (!run_pooled(st, sql.holders, v, out, ec, what)) throw error(ec, last_error_message());
  lock_info info;
  info.name = name;
  for (const auto& r : out.rows) info.holders.push_back(holder_of(r));
  info.held = !info.holders.empty();
  if (waiters && !sql.waiters.empty()) {
    if (!run_pooled(st, sql.waiters, v, out, ec, what + " (its queue)")) throw error(ec, last_error_message());
    info.waiters_known = true;
    for (const auto& r : out.rows) {
      lock_waiter w;
      if (!r.empty() && r[0]) w.owner = *r[0];
      w.kind = hold_kind::mutex;
      info.waiters.push_back(std::move(w));
    }
  }
  return info;
}

std::vector<std::string> list_rows(shared_state& st, const inspection_sql& sql, const std::string& prefix) {
  values v;
  v.name = prefix;
  bool bounded = false;
  prefix_range(prefix, v.upper, bounded);
  v.unbounded = bounded ? 0 : 1;
  result out;
  std::error_code ec;
  if (!run_pooled(st, sql.list, v, out, ec, "listing the held locks of " + st.setup.redacted_uri))
    throw error(ec, last_error_message());
  std::vector<std::string> names;
  names.reserve(out.rows.size());
  for (const auto& r : out.rows)
    if (!r.empty() && r[0]) names.push_back(from_hex(*r[0]));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<lock_holder> force_release_rows(shared_state& st, const inspection_sql& sql, const std::string& name) {
  values v;
  v.name = name;
  v.channel = st.channel;
  const std::string what = "breaking lock " + quoted_name(name);
  std::error_code ec;
  auto h = st.setup.connections->checkout(ec);
  if (!h) throw error(ec, last_error_message());
  // The grants read under their row locks, then ended in the same transaction: what is returned
  // is what was removed. A deadlock with a holder's renewal rolls it back: tried again.
  for (int attempt = 0;; ++attempt) {
    sql_error err;
    result held, removed;
    if (h->begin(err) && run(*h, sql.lock_holders, v, held, err, 1) && run(*h, sql.remove, v, removed, err, 1) &&
        h->commit(err)) {
      std::vector<lock_holder> holders;
      for (const auto& r : held.rows) holders.push_back(holder_of(r));
      return holders;
    }
    if (h->usable()) {
      sql_error ignored;
      h->rollback(ignored);
    }
    if (!h->usable()) h.discard();
    if (!h || !transient(err.kind) || attempt >= 4) throw_sql(err, what);
    pause_before_retry(attempt);
  }
}

void refuse_fair(const backend_setup& setup, std::string_view strategy) {
  if (!setup.params.fair) return;
  throw error(errc::invalid_uri, setup.redacted_uri + ": fair=true applies to the unique-index scheme only (the " +
                                     std::string(strategy) + " strategy has no waiters table)");
}

std::size_t sweep_with(shared_state& st, std::initializer_list<const script*> scripts, std::error_code& ec) noexcept {
  std::size_t swept = 0;
  for (const script* s : scripts) {
    if (s->empty()) continue;
    result out;
    if (!run_pooled(st, *s, values{}, out, ec, "sweeping expired rows of " + st.setup.redacted_uri)) return swept;
    swept += static_cast<std::size_t>(out.rows_affected);
  }
  return swept;
}

}  // namespace detail

void run_ddl(pool& connections, const ddl& statements, const std::string& redacted_uri, std::string_view what,
             std::string_view hint) {
  std::error_code ec;
  auto h = connections.checkout(ec);
  if (!h) throw error(ec, "opening " + redacted_uri + ": " + last_error_message());
  const auto fail = [&](const sql_error& err) {
    std::error_code e;
    set_sql_error(e, err, std::string(what) + " for " + redacted_uri + " (" + std::string(hint) + ")");
    throw error(e, last_error_message());
  };
  for (const auto& stmt : statements) {
    if (!stmt.unless_exists.empty()) {
      result found;
      sql_error err;
      if (!h->execute(stmt.unless_exists, stmt.object, found, err)) fail(err);
      if (!found.rows.empty()) continue;
    }
    for (int attempt = 0;; ++attempt) {
      result out;
      sql_error err;
      if (h->execute(stmt.sql, {}, out, err)) break;
      // Several processes creating the objects at once: PostgreSQL's CREATE ... IF NOT EXISTS
      // can still fail with a unique violation on its catalog; the object then exists.
      if (err.kind == failure::duplicate_key) break;
      if (detail::transient(err.kind) && attempt == 0) continue;
      fail(err);
    }
  }
}

}  // namespace dlock::sql
