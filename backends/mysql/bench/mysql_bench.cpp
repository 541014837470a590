// dlock's four MySQL schemes against raw Connector/C++ issuing the same statements, uncontended
// (each thread its own lock name), in the same run. Needs DLOCK_MYSQL_URI.
//   taskset -c 1 ./mysql_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//   --benchmark_report_aggregates_only=true
// Round trips per acquire + release, the same on both sides (counted with strace -f -c, sendto per
// cycle, DLOCK_BENCH_ITERATIONS=200 vs 700): getlock 1+1, index 2+1 (INSERT ... ON DUPLICATE KEY
// UPDATE, SELECT, each autocommitted; DELETE), forupdate 3+1 (START TRANSACTION, SELECT ... FOR UPDATE NOWAIT, fence
// INSERT ... RETURNING; COMMIT), version 2+1 (SELECT, UPDATE; UPDATE).
#include <benchmark/benchmark.h>

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "../src/dialect.hpp"
#include "../src/getlock_key.hpp"
#include "../tests/test_support.hpp"
#include "bench_support.hpp"
#include "dlock/dlock.hpp"
#include "dlock_test/held_leases_cpu.hpp"

namespace {

using namespace dlock::mysql;
using bench::raw_session;

std::shared_ptr<dlock::backend> backend_for(const std::string& scheme) {
  std::string query = "ttl=30s&watchdog=false&pool_size=16";
  if (scheme != "mysql+getlock") query += "&table=bench_" + scheme.substr(6);
  return bench::opened_once(scheme, query);
}

void dlock_loop(benchmark::State& state, const std::string& scheme) {
  auto b = backend_for(scheme);
  auto lock = b->make_lock(test::unique_name("bench"));
  bench::acquire_release_loop(state, [&] { return lock->try_acquire(); });
}

void bind_args(::sql::PreparedStatement& st, const dlock::sql::statement& s, const std::string& name,
               const std::string& owner, std::int64_t version) {
  unsigned i = 1;
  for (auto a : s.binds) {
    switch (a) {
      case dlock::sql::arg::name: st.setString(i, name); break;
      case dlock::sql::arg::owner: st.setString(i, owner); break;
      case dlock::sql::arg::ttl_ms: st.setInt64(i, 30000); break;
      case dlock::sql::arg::version: st.setInt64(i, version); break;
      case dlock::sql::arg::channel: st.setString(i, ""); break;
      // backend::list's range: not run by the benchmark
      case dlock::sql::arg::upper: st.setString(i, ""); break;
      case dlock::sql::arg::unbounded: st.setInt64(i, 1); break;
    }
    ++i;
  }
}

// One statement of the dialect's, as sql_connection runs it: rows read when it returns rows.
void run_statement(raw_session& r, const dlock::sql::statement& s, const std::string& name, const std::string& owner) {
  auto& st = r.p(s.sql);
  bind_args(st, s, name, owner, 0);
  if (s.sql.starts_with("SELECT") || s.sql.find(" RETURNING ") != std::string::npos) {
    std::unique_ptr<::sql::ResultSet> rs(st.executeQuery());
    while (rs->next()) {
    }
  } else {
    st.executeUpdate();
  }
}

void BM_raw_getlock(benchmark::State& state) {
  raw_session r;
  const auto key = getlock_key(test::unique_name("bench"));
  for (auto _ : state) {
    auto& g = r.p("SELECT GET_LOCK(?, ?)");
    g.setString(1, key);
    g.setDouble(2, 0);
    std::unique_ptr<::sql::ResultSet>(g.executeQuery())->next();
    auto& rel = r.p("SELECT RELEASE_LOCK(?)");
    rel.setString(1, key);
    std::unique_ptr<::sql::ResultSet>(rel.executeQuery())->next();
  }
}

void BM_raw_index(benchmark::State& state) {
  raw_session r;
  dlock::sql::table_ref t{"", "bench_index"};
  backend_for("mysql+index");  // creates the table
  const auto sql = index_dialect(t);
  const auto name = test::unique_name("bench"), owner = test::unique_name("owner");
  for (auto _ : state) {
    const bool transaction = sql.acquire.size() > 1;  // as dlock: several statements are one transaction
    if (transaction) r.exec("START TRANSACTION");
    for (const auto& statement : sql.acquire) run_statement(r, statement, name, owner);
    if (transaction) r.exec("COMMIT");
    run_statement(r, sql.release[0], name, owner);
  }
}

// The cost of the one-name rule on the server, raw Connector/C++ on both sides: the granting
// statement of mysql+index's mutex and of mysql+getlock's before the rule and with it (index: the
// INSERT offered only while the name has no live holder row of a reader-writer lock or semaphore;
// getlock: GET_LOCK in a derived table and a primary-key look-up of the semaphores' table), each
// with its release. Same round trips.
void BM_raw_index_statement(benchmark::State& state, bool with_rule) {
  raw_session r;
  backend_for("mysql+index");  // creates the tables
  const auto sql = index_dialect({"", "bench_index"});
  const auto name = test::unique_name("bench"), owner = test::unique_name("owner");
  const std::string before =
      "INSERT INTO `bench_index` (name, owner, hold_count, fence, expires_at) VALUES (?, ?, 1, "
      "NEXTVAL(`bench_index_fence`),"
      " TIMESTAMPADD(MICROSECOND, ? * 1000, NOW(6))) ON DUPLICATE KEY UPDATE"
      " hold_count = IF(expires_at <= NOW(6), 1, IF(owner = VALUES(owner), hold_count + 1, hold_count)),"
      " fence = IF(expires_at <= NOW(6), VALUES(fence), fence), owner = IF(expires_at <= NOW(6), VALUES(owner), owner),"
      " expires_at = IF(expires_at <= NOW(6) OR owner = VALUES(owner), VALUES(expires_at), expires_at)"
      " RETURNING IF(owner = ?, fence, NULL), hold_count";
  using dlock::sql::arg;
  const dlock::sql::statement old_acquire{before, {arg::name, arg::owner, arg::ttl_ms, arg::owner}};
  for (auto _ : state) {
    run_statement(r, with_rule ? sql.acquire[0] : old_acquire, name, owner);
    run_statement(r, sql.release[0], name, owner);
  }
}

void BM_raw_getlock_statement(benchmark::State& state, bool with_rule) {
  raw_session r;
  backend_for("mysql+getlock");  // creates the sequence and the semaphores' table
  const auto key = getlock_key(test::unique_name("bench"));
  auto& before = r.p("SELECT CASE GET_LOCK(?, ?) WHEN 1 THEN NEXTVAL(`dlock_getlock_fence`) WHEN 0 THEN 0 END");
  auto& now =
      r.p("SELECT CASE g WHEN 1 THEN IF(EXISTS (SELECT 1 FROM `dlock_getlock_semaphores` s WHERE s.name = ? AND"
          " g = 1), -1, NEXTVAL(`dlock_getlock_fence`)) WHEN 0 THEN 0 END FROM (SELECT GET_LOCK(?, ?) AS g) AS t");
  auto& release = r.p("SELECT RELEASE_LOCK(?)");
  for (auto _ : state) {
    if (with_rule) {
      now.setString(1, key);
      now.setString(2, key);
      now.setString(3, "0");
      std::unique_ptr<::sql::ResultSet>(now.executeQuery())->next();
    } else {
      before.setString(1, key);
      before.setString(2, "0");
      std::unique_ptr<::sql::ResultSet>(before.executeQuery())->next();
    }
    release.setString(1, key);
    std::unique_ptr<::sql::ResultSet>(release.executeQuery())->next();
  }
}

void BM_raw_forupdate(benchmark::State& state) {
  raw_session r;
  backend_for("mysql+forupdate");
  const auto sql = forupdate_dialect({"", "bench_forupdate"});
  const auto name = test::unique_name("bench");
  auto& ensure = r.p(sql.ensure_row[0].sql);
  bind_args(ensure, sql.ensure_row[0], name, "", 0);
  ensure.executeUpdate();
  for (auto _ : state) {
    r.exec("START TRANSACTION");
    auto& lock = r.p(sql.lock_nowait[0].sql);
    bind_args(lock, sql.lock_nowait[0], name, "", 0);
    std::unique_ptr<::sql::ResultSet>(lock.executeQuery())->next();
    auto& bump = r.p(sql.bump_fence[0].sql);
    bind_args(bump, sql.bump_fence[0], name, "", 0);
    std::unique_ptr<::sql::ResultSet>(bump.executeQuery())->next();
    r.exec("COMMIT");
  }
}

void BM_raw_version(benchmark::State& state) {
  raw_session r;
  backend_for("mysql+version");
  const auto sql = version_dialect({"", "bench_version"});
  const auto name = test::unique_name("bench"), owner = test::unique_name("owner");
  auto& ensure = r.p(sql.ensure_row[0].sql);
  bind_args(ensure, sql.ensure_row[0], name, owner, 0);
  ensure.executeUpdate();
  for (auto _ : state) {
    auto& read = r.p(sql.read[0].sql);
    bind_args(read, sql.read[0], name, owner, 0);
    std::unique_ptr<::sql::ResultSet> rs(read.executeQuery());
    rs->next();
    const std::int64_t version = rs->getInt64(1);
    auto& acq = r.p(sql.acquire[0].sql);
    bind_args(acq, sql.acquire[0], name, owner, version);
    acq.executeUpdate();
    auto& rel = r.p(sql.release[0].sql);
    bind_args(rel, sql.release[0], name, owner, version + 1);
    rel.executeUpdate();
  }
}

void BM_dlock_getlock(benchmark::State& s) { dlock_loop(s, "mysql+getlock"); }
void BM_dlock_index(benchmark::State& s) { dlock_loop(s, "mysql+index"); }
void BM_dlock_forupdate(benchmark::State& s) { dlock_loop(s, "mysql+forupdate"); }
void BM_dlock_version(benchmark::State& s) { dlock_loop(s, "mysql+version"); }

// The scaling convention (one table of every backend, built from these names): one iteration is
// one uncontended acquire + release, each thread on its own name. raw: the minimal statements of
// the strategy on one Connector/C++ connection per thread; dlock: ONE backend opened from
// DLOCK_MYSQL_URI with its defaults (one pool) shared by every thread, a lock object per thread.
std::shared_ptr<dlock::backend> scaling_backend(const std::string& scheme) {
  static std::mutex m;
  static std::map<std::string, std::shared_ptr<dlock::backend>> opened;
  std::lock_guard lock(m);
  auto& b = opened[scheme];
  if (!b) b = dlock::open(test::uri_for(scheme, scheme == "mysql+index" ? "table=bench_index" : ""));
  return b;
}

void scaling_dlock(benchmark::State& state, const std::string& scheme) {
  auto lock = scaling_backend(scheme)->make_lock(test::unique_name("scaling"));
  bench::acquire_release_loop(state, [&] { return lock->try_acquire(); });
}

// GET_LOCK(name, 0) and RELEASE_LOCK(name): a session lock needs nothing else.
void scaling_raw_getlock(benchmark::State& state) {
  raw_session r;
  const auto key = getlock_key(test::unique_name("scaling"));
  auto& get = r.p("SELECT GET_LOCK(?, 0)");
  auto& release = r.p("SELECT RELEASE_LOCK(?)");
  for (auto _ : state) {
    get.setString(1, key);
    std::unique_ptr<::sql::ResultSet> got(get.executeQuery());
    if (!got->next() || got->getInt(1) != 1) state.SkipWithError("GET_LOCK refused");
    release.setString(1, key);
    std::unique_ptr<::sql::ResultSet>(release.executeQuery())->next();
  }
}

// The table strategy's floor: one statement that inserts or takes over the row (the dialect's
// own), one DELETE of our row.
void scaling_raw_index(benchmark::State& state) {
  raw_session r;
  scaling_backend("mysql+index");  // creates the table
  const auto sql = index_dialect({"", "bench_index"});
  const auto name = test::unique_name("scaling"), owner = test::unique_name("owner");
  for (auto _ : state) {
    run_statement(r, sql.acquire[0], name, owner);
    run_statement(r, sql.release[0], name, owner);
  }
}

void scaling_threads(benchmark::internal::Benchmark* b) {
  b->Threads(1)->Threads(8)->Threads(32)->Threads(128)->UseRealTime();
  if (const char* n = std::getenv("DLOCK_BENCH_ITERATIONS")) b->Iterations(std::stoll(n));
}

// 10,000 mysql+index leases held (watchdog on, renewal every ttl/3): the process's CPU as a
// percentage of one core. Argument: the ttl in ms.
void BM_held_leases_cpu(benchmark::State& state) {
  auto b = dlock::open(test::uri_for("mysql+index", "table=bench_index&ttl=" + std::to_string(state.range(0)) + "ms"));
  dlock::testing::held_leases_cpu(state, *b, test::unique_name("held") + "-");
}

// DLOCK_BENCH_ITERATIONS=N: a fixed iteration count (to count system calls per cycle under strace).
void configure(benchmark::internal::Benchmark* b) {
  b->Threads(1)->Threads(8)->UseRealTime();
  if (const char* n = std::getenv("DLOCK_BENCH_ITERATIONS")) b->Iterations(std::stoll(n));
}

}  // namespace

BENCHMARK(BM_raw_getlock)->Apply(configure);
BENCHMARK(BM_dlock_getlock)->Apply(configure);
BENCHMARK(BM_raw_index)->Apply(configure);
BENCHMARK(BM_dlock_index)->Apply(configure);
BENCHMARK_CAPTURE(BM_raw_index_statement, before_the_rule, false)->Apply(configure);
BENCHMARK_CAPTURE(BM_raw_index_statement, with_the_rule, true)->Apply(configure);
BENCHMARK_CAPTURE(BM_raw_getlock_statement, before_the_rule, false)->Apply(configure);
BENCHMARK_CAPTURE(BM_raw_getlock_statement, with_the_rule, true)->Apply(configure);
BENCHMARK(BM_raw_forupdate)->Apply(configure);
BENCHMARK(BM_dlock_forupdate)->Apply(configure);
BENCHMARK(BM_raw_version)->Apply(configure);
BENCHMARK(BM_dlock_version)->Apply(configure);
BENCHMARK(scaling_raw_index)->Name("scaling/mysql+index/raw")->Apply(scaling_threads);
BENCHMARK_CAPTURE(scaling_dlock, index, std::string("mysql+index"))
    ->Name("scaling/mysql+index/dlock")
    ->Apply(scaling_threads);
BENCHMARK(scaling_raw_getlock)->Name("scaling/mysql+getlock/raw")->Apply(scaling_threads);
BENCHMARK_CAPTURE(scaling_dlock, getlock, std::string("mysql+getlock"))
    ->Name("scaling/mysql+getlock/dlock")
    ->Apply(scaling_threads);
BENCHMARK(BM_held_leases_cpu)
    ->Name("held leases CPU/mysql+index")
    ->Arg(3000)
    ->Arg(30000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);
BENCHMARK_MAIN();
