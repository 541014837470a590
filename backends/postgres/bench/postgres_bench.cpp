// dlock vs raw libpq running the same statements (the dialect's own SQL text from pg_sql.cpp),
// uncontended (one name per thread), 1 and 8 threads, in the same run.
//   eval "$(compose/native/dlock-servers up postgres)"
//   taskset -c 1 build/backends/postgres/postgres_bench --benchmark_repetitions=5 \
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// Round trips per acquire + release (both sides): index 1+1, forupdate 2+1 (BEGIN, locking
// UPDATE; COMMIT), version 2+1 (read, conditional UPDATE; UPDATE), advisory 1+1.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "pg_connection.hpp"
#include "pg_sql.hpp"

namespace {

std::string uri_for(const std::string& scheme) {
  const char* v = std::getenv("DLOCK_POSTGRES_URI");
  if (!v) throw std::runtime_error("DLOCK_POSTGRES_URI is not set");
  std::string b = v;
  return scheme + b.substr(b.find("://")) + "?watchdog=false&ttl=30s";
}

dlock::pg::pgconn_ptr raw_connect() {
  dlock::sql::sql_error err;
  auto c = dlock::pg::connect_raw(dlock::pg::pg_settings::from_uri(dlock::uri::parse(uri_for("postgres+index"))),
                                  std::chrono::seconds{5}, err);
  if (!c) throw std::runtime_error("connect: " + err.message);
  return c;
}

// One statement through PQexecParams, binary bytea name like the backend; returns the first value.
std::string exec(PGconn* c, const std::string& sql, const std::vector<dlock::sql::param>& ps) {
  std::vector<std::string> text(ps.size());
  std::vector<const char*> values(ps.size());
  std::vector<int> lengths(ps.size()), formats(ps.size());
  std::vector<Oid> types(ps.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (auto* n = std::get_if<std::int64_t>(&ps[i])) text[i] = std::to_string(*n), types[i] = 20;
    else if (auto* t = std::get_if<std::string>(&ps[i])) text[i] = *t, types[i] = 25;
    else text[i] = std::get<dlock::sql::bytes>(ps[i]).data, types[i] = 17, formats[i] = 1;
    values[i] = text[i].data();
    lengths[i] = static_cast<int>(text[i].size());
  }
  dlock::pg::pgresult_ptr r(PQexecParams(c, sql.c_str(), static_cast<int>(ps.size()), types.data(), values.data(),
                                         lengths.data(), formats.data(), 0));
  auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw std::runtime_error(PQresultErrorMessage(r.get()));
  return PQntuples(r.get()) && PQnfields(r.get()) ? PQgetvalue(r.get(), 0, 0) : "";
}

std::string name_for(const benchmark::State& s, const char* what) {
  return std::string("bench-") + what + "-" + std::to_string(s.thread_index()) + "-" + dlock::spi::random_token().substr(0, 6);
}

const dlock::sql::table_ref table_index{"", "dlock_index"}, table_forupdate{"", "dlock_forupdate"},
    table_version{"", "dlock_version"};

void dlock_loop(benchmark::State& state, const char* scheme) {
  auto be = dlock::open(uri_for(scheme));  // per thread: its own pool, like a raw connection each
  auto lock = be->make_lock(name_for(state, scheme));
  for (auto _ : state) {
    auto l = lock->try_acquire();
    if (!l) state.SkipWithError("contended");
    l.release();
  }
}

void BM_dlock_index(benchmark::State& s) { dlock_loop(s, "postgres+index"); }
void BM_dlock_forupdate(benchmark::State& s) { dlock_loop(s, "postgres+forupdate"); }
void BM_dlock_version(benchmark::State& s) { dlock_loop(s, "postgres+version"); }
void BM_dlock_advisory(benchmark::State& s) { dlock_loop(s, "postgres+advisory"); }

void BM_raw_index(benchmark::State& state) {
  auto c = raw_connect();
  auto sql = dlock::pg::index_statements(table_index);
  const std::string name = name_for(state, "raw-index"), owner = dlock::spi::default_owner_id();
  for (auto _ : state) {
    exec(c.get(), sql.acquire[0].sql, {dlock::sql::bytes{name}, owner, std::int64_t{30000}});
    exec(c.get(), sql.release[0].sql, {dlock::sql::bytes{name}, owner, std::string("dlock_dlock_index")});
  }
}

void BM_raw_forupdate(benchmark::State& state) {
  auto c = raw_connect();
  auto sql = dlock::pg::forupdate_statements(table_forupdate);
  const std::string name = name_for(state, "raw-forupdate");
  exec(c.get(), sql.ensure_row[0].sql, {dlock::sql::bytes{name}});
  for (auto _ : state) {
    exec(c.get(), "BEGIN", {});
    exec(c.get(), sql.lock_nowait[0].sql, {dlock::sql::bytes{name}});
    exec(c.get(), "COMMIT", {});
  }
}

void BM_raw_version(benchmark::State& state) {
  auto c = raw_connect();
  auto sql = dlock::pg::version_statements(table_version);
  const std::string name = name_for(state, "raw-version"), owner = dlock::spi::default_owner_id();
  exec(c.get(), sql.ensure_row[0].sql, {dlock::sql::bytes{name}});
  for (auto _ : state) {
    std::int64_t v = std::stoll(exec(c.get(), sql.read[0].sql, {dlock::sql::bytes{name}}));
    exec(c.get(), sql.acquire[0].sql, {owner, std::int64_t{30000}, dlock::sql::bytes{name}, v});
    exec(c.get(), sql.release[0].sql, {dlock::sql::bytes{name}, owner, v + 1, std::string("dlock_dlock_version")});
  }
}

void BM_raw_advisory(benchmark::State& state) {
  auto c = raw_connect();
  const std::int64_t key = dlock::spi::sha256_int64(name_for(state, "raw-advisory"));
  for (auto _ : state) {
    exec(c.get(), "SELECT pg_try_advisory_lock($1)", {key});
    exec(c.get(), "SELECT pg_advisory_unlock($1)", {key});
  }
}

}  // namespace

#define DLOCK_PG_BENCH(fn) BENCHMARK(fn)->Threads(1)->Threads(8)->UseRealTime()
DLOCK_PG_BENCH(BM_raw_index);
DLOCK_PG_BENCH(BM_dlock_index);
DLOCK_PG_BENCH(BM_raw_forupdate);
DLOCK_PG_BENCH(BM_dlock_forupdate);
DLOCK_PG_BENCH(BM_raw_version);
DLOCK_PG_BENCH(BM_dlock_version);
DLOCK_PG_BENCH(BM_raw_advisory);
DLOCK_PG_BENCH(BM_dlock_advisory);

BENCHMARK_MAIN();
