#pragma once
// What the mysql benchmarks share: dlock's side opened once per scheme, and the raw side,
// Connector/C++ on a connection of its own issuing the statements dlock issues, each prepared once.
#include <benchmark/benchmark.h>
#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/statement.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "../tests/test_support.hpp"
#include "dlock/dlock.hpp"

namespace dlock::mysql::bench {

// The backend of `scheme` with `query`, opened at its first use (which creates its tables and
// sequences) and shared by every benchmark of the run.
inline std::shared_ptr<dlock::backend> opened_once(const std::string& scheme, const std::string& query) {
  static std::mutex m;
  static std::map<std::string, std::shared_ptr<dlock::backend>> opened;
  std::lock_guard lock(m);
  auto& b = opened[scheme + "?" + query];
  if (!b) b = dlock::open(test::uri_for(scheme, query));
  return b;
}

// dlock's side of a benchmark: `try_acquire()` and the release of its lease, uncontended, each
// iteration (a miss ends the run with an error).
template <class TryAcquire>
void acquire_release_loop(benchmark::State& state, TryAcquire try_acquire) {
  for (auto _ : state) {
    auto l = try_acquire();
    if (!l) state.SkipWithError("contended?");
    l.release();
  }
}

// One raw connection with one prepared statement per SQL text.
struct raw_session {
  std::shared_ptr<::sql::Connection> c = test::raw_connect(test::server_uri());
  std::map<std::string, std::unique_ptr<::sql::PreparedStatement>> st;
  ::sql::PreparedStatement& p(const std::string& text) {
    auto& s = st[text];
    if (!s) s.reset(c->prepareStatement(text));
    return *s;
  }
  // A statement without parameters, unprepared (START TRANSACTION, COMMIT).
  void exec(const std::string& text) { std::unique_ptr<::sql::Statement>(c->createStatement())->execute(text); }
};

}  // namespace dlock::mysql::bench
