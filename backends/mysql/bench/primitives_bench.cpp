// mysql+index's reader-writer lock and semaphore, and mysql+getlock's semaphore, against raw
// Connector/C++ issuing the same statements (the dialect's own text), in the same run; and 1 vs 8
// readers of one name. Needs DLOCK_MYSQL_URI.
//   taskset -c 1 ./mysql_primitives_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//   --benchmark_report_aggregates_only=true
// Round trips per uncontended acquire + release, the same on both sides: index read 1+1 (the
// granting INSERT .. SELECT .. FOR UPDATE RETURNING; the DELETE .. RETURNING), index semaphore
// 1+1, getlock semaphore of one permit 1+1 (GET_LOCK with NEXTVAL; RELEASE_LOCK).
#include <benchmark/benchmark.h>

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "../src/dialect.hpp"
#include "../src/getlock_semaphore.hpp"
#include "../tests/test_support.hpp"
#include "bench_support.hpp"
#include "dlock/dlock.hpp"

namespace {

using namespace dlock::mysql;
using bench::raw_session;
constexpr const char* table = "bench_primitives";

std::shared_ptr<dlock::backend> backend_for(const std::string& scheme) {
  std::string query = "ttl=30s&watchdog=false&pool_size=16";
  if (scheme == "mysql+index") query += std::string("&table=") + table;
  return bench::opened_once(scheme, query);
}

// The index scheme's pool statements as dlock binds them (units.hpp fixes the order).
struct raw_pool {
  raw_session r;
  dlock::sql::units_sql sql = units_dialect({"", table});
  std::string name;
  std::int64_t kind, max_count, units;
  bool heed_mark;
  // A fresh grant id per grant, as dlock makes (owner # process nonce . counter): a new key in
  // the holders' primary key each time.
  std::string owner = test::unique_name("owner") + "#0123456789abcdef.";
  std::uint64_t grants = 0;
  std::string grant_id;

  raw_pool(std::string n, std::int64_t k, std::int64_t max, std::int64_t u, bool heed)
      : name(std::move(n)), kind(k), max_count(max), units(u), heed_mark(heed) {
    backend_for("mysql+index");
    auto& create = r.p(sql.create_anchor);
    create.setInt64(1, kind);
    create.setString(2, name);
    create.setInt64(3, max_count);
    create.executeUpdate();
  }
  bool acquire() {
    grant_id = owner + std::to_string(++grants);
    auto& g = r.p(sql.grant);
    g.setString(1, grant_id);
    g.setInt64(2, units);
    g.setInt64(3, 30000);
    g.setInt64(4, kind);
    g.setString(5, name);
    g.setInt64(6, max_count);
    g.setInt64(7, heed_mark ? 1 : 0);
    g.setInt64(8, units);
    std::unique_ptr<::sql::ResultSet> rs(g.executeQuery());
    return rs->next();
  }
  void release() {
    auto& d = r.p(sql.release);
    d.setString(1, name);
    d.setInt64(2, kind);
    d.setString(3, grant_id);
    std::unique_ptr<::sql::ResultSet> rs(d.executeQuery());
    rs->next();
  }
};

void BM_raw_index_read(benchmark::State& state) {
  raw_pool p(test::unique_name("read"), dlock::sql::rw_kind, dlock::sql::rw_units, 1, true);
  for (auto _ : state) {
    if (!p.acquire()) state.SkipWithError("contended?");
    p.release();
  }
}

void BM_dlock_index_read(benchmark::State& state) {
  auto rw = backend_for("mysql+index")->make_rw_lock(test::unique_name("read"));
  bench::acquire_release_loop(state, [&] { return rw->try_acquire_read(); });
}

void BM_raw_index_semaphore(benchmark::State& state) {
  raw_pool p(test::unique_name("sem"), dlock::sql::semaphore_kind, 4, 1, false);
  for (auto _ : state) {
    if (!p.acquire()) state.SkipWithError("contended?");
    p.release();
  }
}

void BM_dlock_index_semaphore(benchmark::State& state) {
  auto sem = backend_for("mysql+index")->make_semaphore(test::unique_name("sem"), 4);
  bench::acquire_release_loop(state, [&] { return sem->try_acquire(); });
}

// GET_LOCK of one slot with the fencing NEXTVAL (dlock's statement), then RELEASE_LOCK.
void BM_raw_getlock_semaphore(benchmark::State& state) {
  backend_for("mysql+getlock");  // creates the sequence
  raw_session r;
  const auto key = semaphore_slot_key(test::unique_name("gsem"), 0);
  auto& get = r.p("SELECT CASE GET_LOCK(?, ?) WHEN 1 THEN NEXTVAL(`dlock_getlock_fence`) WHEN 0 THEN 0 END");
  auto& release = r.p("SELECT RELEASE_LOCK(?)");
  for (auto _ : state) {
    get.setString(1, key);
    get.setString(2, "0");
    std::unique_ptr<::sql::ResultSet> got(get.executeQuery());
    if (!got->next() || got->getInt64(1) <= 0) state.SkipWithError("GET_LOCK refused");
    release.setString(1, key);
    std::unique_ptr<::sql::ResultSet>(release.executeQuery())->next();
  }
}

void BM_dlock_getlock_semaphore(benchmark::State& state) {
  auto sem = backend_for("mysql+getlock")->make_semaphore(test::unique_name("gsem"), 4);
  bench::acquire_release_loop(state, [&] { return sem->try_acquire(); });
}

// Readers of ONE name, one rw_lock object per thread on one backend: items/s at 1 and 8 threads.
// Every grant locks the name's anchor row, so grants of one name are serialized on the server.
void BM_readers_one_name(benchmark::State& state) {
  static const std::string name = test::unique_name("readers");
  auto rw = backend_for("mysql+index")->make_rw_lock(name);
  for (auto _ : state) {
    auto l = rw->try_acquire_read();
    if (!l) state.SkipWithError("a reader was refused");
    l.release();
  }
  state.SetItemsProcessed(state.iterations());
}

// DLOCK_BENCH_ITERATIONS=N: a fixed iteration count (to count system calls per cycle under strace).
void configure(benchmark::internal::Benchmark* b) {
  b->Threads(1)->UseRealTime();
  if (const char* n = std::getenv("DLOCK_BENCH_ITERATIONS")) b->Iterations(std::stoll(n));
}

}  // namespace

BENCHMARK(BM_raw_index_read)->Apply(configure);
BENCHMARK(BM_dlock_index_read)->Apply(configure);
BENCHMARK(BM_raw_index_semaphore)->Apply(configure);
BENCHMARK(BM_dlock_index_semaphore)->Apply(configure);
BENCHMARK(BM_raw_getlock_semaphore)->Apply(configure);
BENCHMARK(BM_dlock_getlock_semaphore)->Apply(configure);
BENCHMARK(BM_readers_one_name)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK_MAIN();
