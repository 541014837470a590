// dlock vs raw libpq sending the same messages (the dialect's own SQL text from pg_sql.cpp, each
// parameterised statement prepared once per connection then PQexecPrepared, BEGIN/COMMIT through
// PQexec, as pg_connection does), uncontended (one name per thread, the bench's own tables
// bench_index/bench_forupdate/bench_version), 1 and 8 threads, in the same run. The dlock side
// shares one backend (one pool) per scheme between the threads, as an application would;
// DLOCK_BENCH_PER_THREAD=1 gives each thread its own backend instead.
//   eval "$(compose/native/dlock-servers env)"
//   taskset -c 1 build/backends/postgres/postgres_bench --benchmark_repetitions=10
//   --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// Round trips per acquire + release (both sides; counted with strace -f -c: sendto per cycle):
// index 1+1, forupdate 2+1 (BEGIN, locking UPDATE; COMMIT), version 2+1 (read, conditional
// UPDATE; UPDATE), advisory 1+1; plus one PQprepare per statement text and connection, once.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "advisory_grant.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/held_leases_cpu.hpp"
#include "pg_connection.hpp"
#include "pg_sql.hpp"
#include "raw_pg_session.hpp"

namespace {

std::string uri_for(const std::string& scheme) {
  const char* v = std::getenv("DLOCK_POSTGRES_URI");
  if (!v) throw std::runtime_error("DLOCK_POSTGRES_URI is not set");
  std::string b = v;
  // Tables of the bench's own (bench_index, ...): other tests' rows and sweeps stay out.
  const std::string table = "bench_" + scheme.substr(scheme.find('+') + 1);
  return scheme + b.substr(b.find("://")) + "?watchdog=false&ttl=30s" +
         (scheme == "postgres+advisory" ? "" : "&table=" + table);
}

// The raw side of each comparison, connected to the index scheme's server.
struct raw_conn : dlock::pg::bench::raw_pg_session {
  raw_conn() : raw_pg_session(uri_for("postgres+index")) {}
};

std::string name_for(const benchmark::State& s, const char* what) {
  return std::string("bench-") + what + "-" + std::to_string(s.thread_index()) + "-" +
         dlock::spi::random_token().substr(0, 6);
}

const dlock::sql::table_ref table_index{"", "bench_index"}, table_forupdate{"", "bench_forupdate"},
    table_version{"", "bench_version"};

// Opening a backend creates its table (create_table=true): the raw loops need it too.
// Once per scheme and process: 128 threads opening a backend each at once would time out.
void ensure_table(const char* scheme) {
  static std::mutex m;
  static std::set<std::string> done;
  std::lock_guard lk(m);
  if (done.insert(scheme).second) (void)dlock::open(uri_for(scheme));
}

// One backend per scheme shared by every thread (as an application would use it: one pool, the
// threads taking connections from it), opened by the first thread of a run.
std::shared_ptr<dlock::backend> shared_backend(const char* scheme) {
  static std::mutex m;
  static std::map<std::string, std::shared_ptr<dlock::backend>> opened;
  std::lock_guard lk(m);
  auto& b = opened[scheme];
  if (!b) b = dlock::open(uri_for(scheme));
  return b;
}

// dlock's side: a try-acquire and the release of its lease per iteration, after one untimed
// (the pool opens this thread's connection, statements prepared).
void try_acquire_cycles(benchmark::State& state, dlock::distributed_lock& lock) {
  lock.try_acquire().release();
  for (auto _ : state) {
    auto l = lock.try_acquire();
    if (!l) state.SkipWithError("contended");
    l.release();
  }
}

void dlock_loop(benchmark::State& state, const char* scheme) {
  // DLOCK_BENCH_PER_THREAD=1: a backend (pool) per thread instead, like a raw connection each.
  auto be = std::getenv("DLOCK_BENCH_PER_THREAD") ? dlock::open(uri_for(scheme)) : shared_backend(scheme);
  try_acquire_cycles(state, *be->make_lock(name_for(state, scheme)));
}

void BM_dlock_index(benchmark::State& s) { dlock_loop(s, "postgres+index"); }
void BM_dlock_forupdate(benchmark::State& s) { dlock_loop(s, "postgres+forupdate"); }
void BM_dlock_version(benchmark::State& s) { dlock_loop(s, "postgres+version"); }
void BM_dlock_advisory(benchmark::State& s) { dlock_loop(s, "postgres+advisory"); }

void BM_raw_index(benchmark::State& state) {
  ensure_table("postgres+index");
  raw_conn c;
  auto sql = dlock::pg::index_statements(table_index);
  const std::string name = name_for(state, "raw-index"), owner = dlock::spi::default_owner_id();
  for (auto _ : state) {
    c.exec(sql.acquire[0].sql, {dlock::sql::bytes{name}, owner, std::int64_t{30000}});
    c.exec(sql.release[0].sql, {dlock::sql::bytes{name}, owner, std::string("dlock_bench_index")});
  }
}

void BM_raw_forupdate(benchmark::State& state) {
  ensure_table("postgres+forupdate");
  raw_conn c;
  auto sql = dlock::pg::forupdate_statements(table_forupdate);
  const std::string name = name_for(state, "raw-forupdate");
  c.exec(sql.ensure_row[0].sql, {dlock::sql::bytes{name}});
  for (auto _ : state) {
    c.simple("BEGIN");
    c.exec(sql.lock_nowait[0].sql, {dlock::sql::bytes{name}});
    c.simple("COMMIT");
  }
}

void BM_raw_version(benchmark::State& state) {
  ensure_table("postgres+version");
  raw_conn c;
  auto sql = dlock::pg::version_statements(table_version);
  const std::string name = name_for(state, "raw-version"), owner = dlock::spi::default_owner_id();
  c.exec(sql.ensure_row[0].sql, {dlock::sql::bytes{name}});
  for (auto _ : state) {
    std::int64_t v = std::stoll(c.exec(sql.read[0].sql, {dlock::sql::bytes{name}}));
    c.exec(sql.acquire[0].sql, {owner, std::int64_t{30000}, dlock::sql::bytes{name}, v});
    c.exec(sql.release[0].sql, {dlock::sql::bytes{name}, owner, v + 1, std::string("dlock_bench_version")});
  }
}

void BM_raw_advisory(benchmark::State& state) {
  raw_conn c;
  const std::int64_t key = dlock::spi::sha256_int64(name_for(state, "raw-advisory"));
  for (auto _ : state) {
    c.exec("SELECT pg_try_advisory_lock($1)", {key});
    c.exec("SELECT pg_advisory_unlock($1)", {key});
  }
}

// The cost of the one-name rule on the server, raw libpq on both sides: postgres+advisory's granting
// statement before the rule (the lock and the token) and with it (the probe of the semaphore mark
// between them: two more lock-manager calls), each with its unlock. Same round trips.
void BM_raw_advisory_granting_statement(benchmark::State& state, bool with_probe) {
  raw_conn c;
  ensure_table("postgres+advisory");  // creates the sequence
  const auto k = dlock::pg::advisory_key::of(name_for(state, "raw-advisory-statement"));
  const std::int64_t hi = dlock::pg::high_of(k.semaphore_mark), lo = dlock::pg::low_of(k.semaphore_mark);
  const std::string before =
      "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS got) SELECT CASE WHEN got THEN "
      "nextval('dlock_advisory_fence') END FROM l";
  const std::string now =
      "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS got) SELECT CASE WHEN NOT got THEN NULL WHEN NOT "
      "pg_try_advisory_lock($2::int4, $3::int4) THEN -1 WHEN pg_advisory_unlock($2::int4, $3::int4) THEN "
      "nextval('dlock_advisory_fence') END FROM l";
  for (auto _ : state) {
    if (with_probe)
      c.exec(now, {k.key, hi, lo});
    else
      c.exec(before, {k.key});
    c.exec("SELECT pg_advisory_unlock($1)", {k.key});
  }
}

// --- Scaling (tools/bench/scaling's table reads these names) ---------------------
// One iteration = one uncontended acquire + release, each thread on its own name. raw: the
// minimal commands of the strategy on one libpq connection per thread; dlock: ONE backend for all
// threads (dlock::open once, as a service would) and a lock object per thread.

// postgres+index, raw: insert or take over an expired row (ON CONFLICT ... WHERE expired) with
// its fence, and delete our live row -- no NOTIFY, no hold count, no waiter mark: the least a
// lease-with-expiry-and-fence on a unique index can send.
void BM_scaling_raw_index(benchmark::State& state) {
  ensure_table("postgres+index");
  raw_conn c;
  const std::string acquire =
      "INSERT INTO bench_index AS l (name, owner, hold_count, expires_at, fence)"
      " VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 millisecond', nextval('bench_index_fence'))"
      " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, hold_count = 1,"
      " expires_at = EXCLUDED.expires_at, fence = EXCLUDED.fence"
      " WHERE l.expires_at <= clock_timestamp() RETURNING l.fence";
  const std::string release =
      "DELETE FROM bench_index WHERE name = $1 AND owner = $2 AND expires_at > clock_timestamp()";
  const std::string name = name_for(state, "scaling-raw-index"), owner = dlock::spi::default_owner_id();
  c.exec(acquire, {dlock::sql::bytes{name}, owner, std::int64_t{30000}});  // untimed: prepares both
  c.exec(release, {dlock::sql::bytes{name}, owner});
  for (auto _ : state) {
    if (c.exec(acquire, {dlock::sql::bytes{name}, owner, std::int64_t{30000}}).empty())
      state.SkipWithError("contended");
    c.exec(release, {dlock::sql::bytes{name}, owner});
  }
}

// postgres+advisory, raw: pg_try_advisory_lock + pg_advisory_unlock on the thread's connection.
void BM_scaling_raw_advisory(benchmark::State& state) {
  raw_conn c;
  const std::int64_t key = dlock::spi::sha256_int64(name_for(state, "scaling-raw-advisory"));
  c.exec("SELECT pg_try_advisory_lock($1)", {key});  // untimed: prepares both
  c.exec("SELECT pg_advisory_unlock($1)", {key});
  for (auto _ : state) {
    if (c.exec("SELECT pg_try_advisory_lock($1)", {key}) != "t") state.SkipWithError("contended");
    c.exec("SELECT pg_advisory_unlock($1)", {key});
  }
}

// dlock: always the one shared backend (DLOCK_BENCH_PER_THREAD does not apply here).
void scaling_dlock(benchmark::State& state, const char* scheme) {
  try_acquire_cycles(state, *shared_backend(scheme)->make_lock(name_for(state, scheme)));
}
void BM_scaling_dlock_index(benchmark::State& s) { scaling_dlock(s, "postgres+index"); }
void BM_scaling_dlock_advisory(benchmark::State& s) { scaling_dlock(s, "postgres+advisory"); }

// 10,000 postgres+index leases held (watchdog on, renewal every ttl/3): the process's CPU as a
// percentage of one core. Argument: the ttl in ms.
void BM_held_leases_cpu(benchmark::State& state) {
  const char* v = std::getenv("DLOCK_POSTGRES_URI");
  if (!v) throw std::runtime_error("DLOCK_POSTGRES_URI is not set");
  const std::string server = v;
  auto b = dlock::open("postgres+index" + server.substr(server.find("://")) +
                       "?table=bench_index&ttl=" + std::to_string(state.range(0)) + "ms");
  dlock::testing::held_leases_cpu(state, *b, "bench-held-" + dlock::spi::random_token().substr(0, 6) + "-");
}

}  // namespace

// DLOCK_BENCH_ITERATIONS=N: a fixed iteration count (to count system calls per cycle under strace).
void configure(benchmark::internal::Benchmark* b) {
  b->Threads(1)->Threads(8)->UseRealTime();
  if (const char* n = std::getenv("DLOCK_BENCH_ITERATIONS")) b->Iterations(std::stoll(n));
}
#define DLOCK_PG_BENCH(fn) BENCHMARK(fn)->Apply(configure)
DLOCK_PG_BENCH(BM_raw_index);
DLOCK_PG_BENCH(BM_dlock_index);
DLOCK_PG_BENCH(BM_raw_forupdate);
DLOCK_PG_BENCH(BM_dlock_forupdate);
DLOCK_PG_BENCH(BM_raw_version);
DLOCK_PG_BENCH(BM_dlock_version);
DLOCK_PG_BENCH(BM_raw_advisory);
DLOCK_PG_BENCH(BM_dlock_advisory);
BENCHMARK_CAPTURE(BM_raw_advisory_granting_statement, before_the_rule, false)->Apply(configure);
BENCHMARK_CAPTURE(BM_raw_advisory_granting_statement, with_the_probe, true)->Apply(configure);
BENCHMARK(BM_held_leases_cpu)
    ->Name("held leases CPU/postgres+index")
    ->Arg(3000)
    ->Arg(30000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

void scaling(benchmark::internal::Benchmark* b) {
  b->Threads(1)->Threads(8)->Threads(32)->Threads(128)->UseRealTime();
  if (const char* n = std::getenv("DLOCK_BENCH_ITERATIONS")) b->Iterations(std::stoll(n));
}
BENCHMARK(BM_scaling_raw_index)->Name("scaling/postgres+index/raw")->Apply(scaling);
BENCHMARK(BM_scaling_dlock_index)->Name("scaling/postgres+index/dlock")->Apply(scaling);
BENCHMARK(BM_scaling_raw_advisory)->Name("scaling/postgres+advisory/raw")->Apply(scaling);
BENCHMARK(BM_scaling_dlock_advisory)->Name("scaling/postgres+advisory/dlock")->Apply(scaling);

BENCHMARK_MAIN();
