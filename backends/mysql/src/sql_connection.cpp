#include "sql_connection.hpp"

#include <cppconn/connection.h>
#include <cppconn/datatype.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "detached_threads.hpp"
#include "dlock_sql/deadline.hpp"

namespace dlock::mysql {

dlock::sql::failure failure_of(const ::sql::SQLException& e) noexcept {
  using dlock::sql::failure;
  using namespace error_number;
  switch (e.getErrorCode()) {
    case duplicate_key: return failure::duplicate_key;
    case lock_wait_timeout:  // also MariaDB's answer to NOWAIT and WAIT n
    case lock_nowait_mysql: return failure::lock_not_available;
    case deadlock: return failure::deadlock;
    case access_denied: return failure::auth_failed;
    case unknown_database: return failure::unknown_database;
    case 1146: return failure::undefined_table;  // ER_NO_SUCH_TABLE
    case cant_connect:
    case cant_connect_local:
    case unknown_host: return failure::unreachable;
    default: break;
  }
  if (classify(e) == errc::backend_unavailable) return failure::connection_lost;
  return failure::other;
}

namespace {

bool returns_rows(std::string_view text) noexcept {
  return text.starts_with("SELECT") || text.find(" RETURNING ") != std::string_view::npos;
}

// MariaDB runs a statement whose client has shut its socket down on to its end: a stopped wait
// for a row lock (FOR UPDATE) would stay queued on the server for innodb_lock_wait_timeout, which
// a forever acquire sets to the maximum, holding a server thread and a connection slot, and be
// granted the row once, when the holder leaves. KILL from a second connection ends it now. It
// runs on a thread of its own so that the stopped acquire returns at once, bounded by the
// connect timeout; its failure only leaves the statement to its own end, so it is not reported
// (and an "unknown thread" answer means the server ended it already, as it does GET_LOCK's).
void end_on_the_server(const connection_settings& settings, std::uint64_t server_id) noexcept {
  if (server_id == 0) return;
  try {
    start_detached([settings, server_id] {
      std::error_code ec;
      auto killer = open_sql_connection(settings, ec);
      dlock::sql::result ignored;
      dlock::sql::sql_error err;
      if (killer) killer->execute("KILL CONNECTION " + std::to_string(server_id), {}, ignored, err);
    });
  } catch (...) {  // no thread: the statement ends by itself, as above
  }
}

class mysql_sql_connection final : public dlock::sql::connection {
 public:
  mysql_sql_connection(session_ptr s, connection_settings settings)
      : session_(std::move(s)), settings_(std::move(settings)) {}

  bool execute(std::string_view text, std::span<const dlock::sql::param> params, dlock::sql::result& out,
               dlock::sql::sql_error& err) noexcept override {
    out = {};
    const bool ok = run(err, [&] {
      auto& st = session_->prepared(std::string(text));
      unsigned i = 1;
      for (const auto& p : params) {
        std::visit(
            [&](const auto& v) {
              using T = std::decay_t<decltype(v)>;
              if constexpr (std::is_same_v<T, std::monostate>)
                st.setNull(i, ::sql::DataType::VARCHAR);
              else if constexpr (std::is_same_v<T, std::int64_t>)
                st.setInt64(i, v);
              else if constexpr (std::is_same_v<T, std::string>)
                st.setString(i, v);
              else
                st.setString(i, v.data);  // SQLString keeps the std::string: NUL bytes survive
            },
            p);
        ++i;
      }
      // Connector/C++ 1.1's prepared statements cannot report an update count after execute(),
      // so the kind of statement decides: rows come back from SELECT and ... RETURNING.
      if (returns_rows(text)) {
        std::unique_ptr<::sql::ResultSet> rs(st.executeQuery());
        const unsigned columns = rs->getMetaData()->getColumnCount();
        while (rs->next()) {
          dlock::sql::row r;
          r.reserve(columns);
          for (unsigned c = 1; c <= columns; ++c) {
            if (rs->isNull(c))
              r.emplace_back(std::nullopt);
            else
              r.emplace_back(std::string(rs->getString(c)));
          }
          out.rows.push_back(std::move(r));
        }
        out.rows_affected = out.rows.size();
      } else {
        out.rows_affected = static_cast<std::uint64_t>(st.executeUpdate());
      }
    });
    return ok;
  }

  bool begin(dlock::sql::sql_error& err) noexcept override {
    return run(err, [&] { session_->execute("START TRANSACTION"); });
  }
  bool commit(dlock::sql::sql_error& err) noexcept override {
    return run(err, [&] { session_->execute("COMMIT"); });
  }
  bool rollback(dlock::sql::sql_error& err) noexcept override {
    return run(err, [&] { session_->execute("ROLLBACK"); });
  }

  // innodb_lock_wait_timeout counts whole seconds: a timed try rounds up (MariaDB accepts 0,
  // which fails at once like NOWAIT). nullopt: the server's maximum, 1073741824 s.
  bool set_lock_wait_timeout(std::optional<std::chrono::milliseconds> timeout,
                             dlock::sql::sql_error& err) noexcept override {
    const long long seconds =
        timeout ? std::chrono::ceil<std::chrono::seconds>(std::max(*timeout, std::chrono::milliseconds::zero())).count()
                : 1073741824LL;
    if (seconds == lock_wait_seconds_) return true;  // no round trip when unchanged
    const bool ok = run(err, [&] {
      session_->execute("SET SESSION innodb_lock_wait_timeout = " + std::to_string(seconds));  // an integer
    });
    if (ok) lock_wait_seconds_ = seconds;
    return ok;
  }

  bool usable() const noexcept override { return usable_ && !session_->closed(); }
  bool poll_alive() noexcept override { return session_->poll_alive(); }
  int native_socket() const noexcept override { return session_->socket_fd(); }

 private:
  template <class F>
  bool run(dlock::sql::sql_error& err, F&& f) noexcept {
    err = {};
    // Inside an acquire's deadline: a statement unanswered by then has its socket shut down.
    dlock::sql::socket_guard guard(session_->socket_fd());
    dlock::sql::socket_stopper stopper(session_->socket_fd());  // a waiting statement, on a stop request
    // Both watches end before the answer is trusted. A socket shut down just after the answer
    // arrived ends the session on the server all the same, and a named lock or a row lock the
    // statement was granted goes with it: that answer is a failure too.
    bool stopped = false, cut = false;
    try {
      f();
      stopped = stopper.disarm();
      cut = guard.disarm();
      if (!stopped && !cut) return true;
      err.kind = dlock::sql::failure::connection_lost;
      err.message = "the answer came as the socket was shut down";
    } catch (const ::sql::SQLException& e) {
      err.kind = failure_of(e);
      err.code = std::to_string(e.getErrorCode()) + (e.getSQLState().empty() ? "" : "/" + e.getSQLState());
      err.message = e.what();
    } catch (const std::exception& e) {
      err.kind = dlock::sql::failure::other;
      err.message = e.what();
    } catch (...) {
      err.kind = dlock::sql::failure::other;
      err.message = "unknown exception from Connector/C++";
    }
    stopped = stopped || stopper.disarm();
    cut = cut || guard.disarm();
    if (stopped) {
      end_on_the_server(settings_, session_->server_id());
      err.kind = dlock::sql::failure::connection_lost;
      err.message = "the waiting statement was stopped: its connection was shut down (" + err.message + ")";
    } else if (cut) {
      err.kind = dlock::sql::failure::connection_lost;
      err.message = "no answer by the caller's deadline (+" + std::to_string(dlock::sql::deadline_grace.count()) +
                    " ms): the connection was shut down (" + err.message + ")";
    }
    if (err.kind == dlock::sql::failure::connection_lost || err.kind == dlock::sql::failure::unreachable)
      usable_ = false;
    return false;
  }

  session_ptr session_;
  connection_settings settings_;  // for a second connection that ends a stopped statement on the server
  bool usable_ = true;
  long long lock_wait_seconds_ = -1;  // unknown: the server default
};

}  // namespace

std::unique_ptr<dlock::sql::connection> open_sql_connection(const connection_settings& s,
                                                            std::error_code& ec) noexcept {
  try {
    const auto before = sockets_before_connect();
    return std::make_unique<mysql_sql_connection>(std::make_unique<session>(connect(s), s.port, before), s);
  } catch (const error& e) {
    set_error(ec, e.code(), e.detail());
  } catch (const ::sql::SQLException& e) {
    set_error(ec, classify(e), describe(e, "connecting to " + s.redacted_uri));
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, "connecting to " + s.redacted_uri + ": " + e.what());
  }
  return nullptr;
}

namespace {

// A connect begun on a thread of its own, which the acquire that began it may abandon.
struct pending_connect {
  std::mutex m;
  std::condition_variable_any finished;
  bool done = false;
  bool abandoned = false;
  std::unique_ptr<dlock::sql::connection> result;
  std::error_code ec;
};

// Connector/C++ connects in one blocking call that nothing interrupts. Inside an acquire that can
// be stopped, the connect and the session's setup statements run on a thread of their own, under
// the acquire's deadline, and a stop request abandons them: that thread ends by connect_timeout
// or the deadline at the latest, and closes what it opened. A connect begun after the stop
// request runs here to its end (a withdrawal or a release may need it).
std::unique_ptr<dlock::sql::connection> open_abandonable(const connection_settings& s, std::error_code& ec) noexcept {
  if (!dlock::spi::current_stop_token().stop_possible() || dlock::spi::stop_requested())
    return open_sql_connection(s, ec);
  std::shared_ptr<pending_connect> pending;
  try {
    pending = std::make_shared<pending_connect>();
    start_detached([pending, s, deadline = dlock::spi::current_deadline()] {
      std::optional<dlock::spi::deadline_scope> scope;
      if (deadline != std::chrono::steady_clock::time_point::max()) scope.emplace(deadline);
      std::error_code e;
      auto c = open_sql_connection(s, e);
      std::unique_ptr<dlock::sql::connection> unwanted;
      {
        std::lock_guard lk(pending->m);
        if (pending->abandoned) {
          unwanted = std::move(c);
        } else {
          pending->result = std::move(c);
          pending->ec = e;
        }
        pending->done = true;
      }
      pending->finished.notify_all();
    });
  } catch (...) {  // no thread: connect on this one, unabandonable
    return open_sql_connection(s, ec);
  }
  std::unique_lock lk(pending->m);
  dlock::spi::wait_until(pending->finished, lk, std::chrono::steady_clock::time_point::max(),
                         [&] { return pending->done; });
  if (!pending->done) {
    pending->abandoned = true;
    set_error(ec, errc::backend_unavailable,
              "connecting to " + s.redacted_uri + ": abandoned, the acquire was asked to stop");
    return nullptr;
  }
  ec = pending->ec;
  return std::move(pending->result);
}

}  // namespace

std::shared_ptr<dlock::sql::pool> make_pool(const connection_settings& s, const dlock::sql::pool_options& options) {
  auto settings = s;
  settings.connect_timeout = options.connect_timeout;
  return dlock::sql::pool::make(
      [settings](std::chrono::milliseconds connect_timeout,
                 std::error_code& ec) -> std::unique_ptr<dlock::sql::connection> {
        // Within an acquire's deadline (dlock_sql/deadline.hpp) with less than a second left, no
        // connect is begun: the client library counts whole seconds and would outlast it.
        if (connect_timeout < std::chrono::seconds{1} &&
            dlock::sql::io_deadline() != std::chrono::steady_clock::time_point::max()) {
          set_error(ec, errc::backend_unavailable,
                    "connecting to " + settings.redacted_uri +
                        ": less than 1 s was left of the caller's deadline "
                        "(the client library counts whole seconds)");
          return nullptr;
        }
        auto each = settings;
        each.connect_timeout = std::max(connect_timeout, std::chrono::milliseconds{1000});
        return open_abandonable(each, ec);
      },
      options);
}

}  // namespace dlock::mysql
