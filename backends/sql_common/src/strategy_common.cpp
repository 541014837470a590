// What the three table strategies share (strategy_common.hpp), and run_ddl (strategies.hpp).
#include "strategy_common.hpp"

#include <charconv>
#include <thread>

#include "dlock/error.hpp"

namespace dlock::sql {
namespace detail {
namespace {

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
    }
  }
  return ps;
}

}  // namespace

bool transient(failure f) noexcept { return f == failure::deadlock || f == failure::serialization; }

bool run(connection& c, const script& s, const values& v, result& out, sql_error& err, int attempts,
         bool one_transaction) noexcept {
  for (int attempt = 0;; ++attempt) {
    err = {};
    out = {};
    bool ok = true;
    std::size_t committed = 0;  // statements that committed on their own (autocommit)
    try {
      if (s.size() == 1) {
        auto ps = bind(s.front(), v);
        ok = c.execute(s.front().sql, ps, out, err);
      } else if (!one_transaction) {
        for (std::size_t i = 0; ok && i < s.size(); ++i) {
          auto ps = bind(s[i], v);
          out = {};
          ok = c.execute(s[i].sql, ps, out, err);
          if (ok) ++committed;
        }
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
    if (committed > 0) return false;  // running the script again would apply its first statements twice
    // The transaction was rolled back, so running it again is safe. Fair-mode attempts on MariaDB
    // (INSERT ... SELECT takes shared next-key locks) make deadlocks with releases common under
    // contention: the index strategy allows a few retries, each after a short growing pause.
    if (!transient(err.kind) || attempt + 1 >= attempts) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{1 + attempt * 2});
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

void create_schema(shared_state& st, const std::vector<std::string>& ddl) {
  if (!st.setup.params.create_table) return;
  run_ddl(*st.setup.connections, ddl, st.setup.redacted_uri, "creating the lock table",
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

void run_ddl(pool& connections, const std::vector<std::string>& ddl, const std::string& redacted_uri,
             std::string_view what, std::string_view hint) {
  std::error_code ec;
  auto h = connections.checkout(ec);
  if (!h) throw error(ec, "opening " + redacted_uri + ": " + last_error_message());
  for (const auto& stmt : ddl) {
    for (int attempt = 0;; ++attempt) {
      result out;
      sql_error err;
      if (h->execute(stmt, {}, out, err)) break;
      // Several processes creating the objects at once: PostgreSQL's CREATE ... IF NOT EXISTS
      // can still fail with a unique violation on its catalog; the object then exists.
      if (err.kind == failure::duplicate_key) break;
      if (detail::transient(err.kind) && attempt == 0) continue;
      std::error_code e;
      set_sql_error(e, err, std::string(what) + " for " + redacted_uri + " (" + std::string(hint) + ")");
      throw error(e, last_error_message());
    }
  }
}

}  // namespace dlock::sql
