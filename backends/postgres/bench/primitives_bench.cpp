// postgres+advisory's reader-writer lock and semaphore: dlock vs raw libpq sending the same
// statements (the texts advisory.cpp builds, each prepared once per connection then
// PQexecPrepared, as pg_connection does).
//   uncontended read acquire + release: one name per thread, try_acquire_read / release vs the
//     shared try-lock with its token and pg_advisory_unlock_shared;
//   uncontended semaphore acquire + release (N = 4, one permit, one name per thread): the slot
//     statement over the N slots from a random start, then the unlock of the slot taken;
//   paired/*: the same, a raw and a dlock cycle alternating inside one loop (counter raw/dlock);
//   the mutex (try_acquire / release vs its two statements), as a reference in the same run;
//   8 readers on ONE name vs 1 reader: acquire_read / release (dlock, one backend shared by the
//     threads) vs the shared try-lock / unlock on a connection per thread (raw).
//   eval "$(compose/native/dlock-servers env)"
//   build/backends/postgres/postgres_primitives_bench --benchmark_repetitions=5
//   --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>

#include "advisory_primitives.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "pg_connection.hpp"
#include "raw_pg_session.hpp"

namespace {

std::string server() {
  const char* v = std::getenv("DLOCK_POSTGRES_URI");
  if (!v) throw std::runtime_error("DLOCK_POSTGRES_URI is not set");
  const std::string b = v;
  return b.substr(b.find("://"));
}
std::string advisory_uri() { return "postgres+advisory" + server() + "?watchdog=false&ttl=30s"; }

// The statements advisory.cpp sends (default sequence "dlock_advisory_fence").
const std::string seq = "'\"dlock_advisory_fence\"'";
const std::string try_shared_sql =
    "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock_shared($1) AS got) SELECT CASE WHEN got THEN nextval(" + seq +
    ") END FROM l";
const std::string unlock_shared_sql = "SELECT pg_advisory_unlock_shared($1)";
const std::string slots_try_sql =
    "WITH c AS MATERIALIZED (SELECT ord FROM unnest($1::int4[], $2::int4[]) WITH ORDINALITY AS s(hi, lo, ord)"
    " WHERE pg_try_advisory_lock(hi, lo) LIMIT $3::int)"
    " SELECT array_agg(ord)::text, CASE WHEN count(*) = $3::int THEN nextval(" +
    seq + ") END FROM c";
const std::string slots_unlock_sql =
    "SELECT coalesce(bool_and(pg_advisory_unlock(hi, lo)), false) FROM unnest($1::int4[], $2::int4[]) AS s(hi, lo)";

// The raw side of each comparison (raw_pg_session.hpp: the same protocol use as pg_connection).
struct raw_conn : dlock::pg::bench::raw_pg_session {
  raw_conn() : raw_pg_session(advisory_uri()) {}
};

std::string name_for(const benchmark::State& s, const char* what) {
  return std::string("bench-") + what + "-" + std::to_string(s.thread_index()) + "-" +
         dlock::spi::random_token().substr(0, 6);
}

std::shared_ptr<dlock::backend> shared_backend() {
  static std::mutex m;
  static std::shared_ptr<dlock::backend> b;
  std::lock_guard lk(m);
  if (!b) b = dlock::open(advisory_uri());
  return b;
}

// One raw cycle of the advisory lock of `key`: the try-lock statement (its token, "" when refused)
// then the unlock statement.
void raw_cycle(benchmark::State& state, raw_conn& c, const std::string& try_sql, const std::string& unlock_sql,
               std::int64_t key) {
  if (c.exec(try_sql, {key}).empty()) state.SkipWithError("contended");
  c.exec(unlock_sql, {key});
}

// One dlock cycle: the lease a try-acquire returned, then its release.
void dlock_cycle(benchmark::State& state, dlock::lease l) {
  if (!l) state.SkipWithError("contended");
  l.release();
}

void BM_raw_read(benchmark::State& state) {
  raw_conn c;
  const std::int64_t key = dlock::spi::sha256_int64(name_for(state, "raw-read"));
  for (auto _ : state) raw_cycle(state, c, try_shared_sql, unlock_shared_sql, key);
}

void BM_dlock_read(benchmark::State& state) {
  auto rw = shared_backend()->make_rw_lock(name_for(state, "dlock-read"));
  rw->try_acquire_read().release();  // untimed: the shared session opened, statements prepared
  for (auto _ : state) dlock_cycle(state, rw->try_acquire_read());
}

// The mutex as a reference in the same interleaved run (the statements advisory.cpp sends).
const std::string try_exclusive_sql =
    "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS got) SELECT CASE WHEN got THEN nextval(" + seq +
    ") END FROM l";
const std::string unlock_exclusive_sql = "SELECT pg_advisory_unlock($1)";
void BM_raw_mutex(benchmark::State& state) {
  raw_conn c;
  const std::int64_t key = dlock::spi::sha256_int64(name_for(state, "raw-mutex"));
  for (auto _ : state) raw_cycle(state, c, try_exclusive_sql, unlock_exclusive_sql, key);
}
void BM_dlock_mutex(benchmark::State& state) {
  auto lock = shared_backend()->make_lock(name_for(state, "dlock-mutex"));
  lock->try_acquire().release();
  for (auto _ : state) dlock_cycle(state, lock->try_acquire());
}

constexpr std::uint32_t permits = 4;

std::string array_text(const std::vector<std::int32_t>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "}";
}
std::int32_t high_of(std::int64_t k) { return static_cast<std::int32_t>(static_cast<std::uint64_t>(k) >> 32); }
std::int32_t low_of(std::int64_t k) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(k)));
}

// The same two statements dlock sends for one permit of N = 4: the N slots from a random start
// (the arrays built per acquire, as dlock does), LIMIT 1; then the unlock of the slot taken.
class raw_permit_cycle {
 public:
  explicit raw_permit_cycle(const std::string& name) {
    for (std::uint32_t i = 0; i < permits; ++i) slots_.push_back(dlock::pg::semaphore_slot_key(name, i));
  }
  void operator()(benchmark::State& state, raw_conn& c) {
    const auto first = random_() % permits;
    std::vector<std::int32_t> hi, lo;
    for (std::uint32_t i = 0; i < permits; ++i) {
      const auto k = slots_[(first + i) % permits];
      hi.push_back(high_of(k));
      lo.push_back(low_of(k));
    }
    const auto taken = c.exec(slots_try_sql, {array_text(hi), array_text(lo), std::int64_t{1}});
    if (taken.size() < 3) state.SkipWithError("contended");
    const auto ord = std::stoul(taken.substr(1)) - 1;
    c.exec(slots_unlock_sql, {array_text({hi[ord]}), array_text({lo[ord]})});
  }

 private:
  std::vector<std::int64_t> slots_;
  std::minstd_rand random_{std::random_device{}()};
};

void BM_raw_semaphore(benchmark::State& state) {
  raw_conn c;
  raw_permit_cycle cycle(name_for(state, "raw-semaphore"));
  for (auto _ : state) cycle(state, c);
}

void BM_dlock_semaphore(benchmark::State& state) {
  auto sem = shared_backend()->make_semaphore(name_for(state, "dlock-semaphore"), permits);
  sem->try_acquire().release();  // untimed: the shared session opened, statements prepared
  for (auto _ : state) dlock_cycle(state, sem->try_acquire());
}

// Readers of ONE name (per benchmark run): items/s is the read throughput.
std::string one_name(const char* what) {
  static std::mutex m;
  static std::map<std::string, std::string> names;
  std::lock_guard lk(m);
  auto& n = names[what];
  if (n.empty()) n = std::string("bench-") + what + "-" + dlock::spi::random_token().substr(0, 6);
  return n;
}

void BM_readers_raw(benchmark::State& state) {
  raw_conn c;
  const std::int64_t key = dlock::spi::sha256_int64(one_name("readers-raw"));
  for (auto _ : state) raw_cycle(state, c, try_shared_sql, unlock_shared_sql, key);
  state.SetItemsProcessed(state.iterations());
}

void BM_readers_dlock(benchmark::State& state) {
  auto rw = shared_backend()->make_rw_lock(one_name("readers-dlock"));
  rw->acquire_read().release();
  for (auto _ : state) rw->acquire_read().release();
  state.SetItemsProcessed(state.iterations());
}

// Paired: each iteration runs one raw cycle and one dlock cycle back to back (order alternating),
// timing each, so both sides see the same load on a shared machine (separate benchmarks, even
// interleaved, drift with the other sessions' builds). Counters: the mean of each side per cycle,
// and raw/dlock (the target is >= 0.9).
template <class Raw, class Dlock>
void paired(benchmark::State& state, Raw&& raw, Dlock&& dlock_cycle) {
  using clock = std::chrono::steady_clock;
  raw();
  dlock_cycle();  // untimed: statements prepared, sessions opened
  clock::duration raw_time{}, dlock_time{};
  bool raw_first = true;
  for (auto _ : state) {
    const auto t0 = clock::now();
    if (raw_first)
      raw();
    else
      dlock_cycle();
    const auto t1 = clock::now();
    if (raw_first)
      dlock_cycle();
    else
      raw();
    const auto t2 = clock::now();
    (raw_first ? raw_time : dlock_time) += t1 - t0;
    (raw_first ? dlock_time : raw_time) += t2 - t1;
    raw_first = !raw_first;
  }
  const double n = static_cast<double>(state.iterations());
  const double raw_us = std::chrono::duration<double, std::micro>(raw_time).count() / n;
  const double dlock_us = std::chrono::duration<double, std::micro>(dlock_time).count() / n;
  state.counters["raw_us"] = raw_us;
  state.counters["dlock_us"] = dlock_us;
  state.counters["raw/dlock"] = raw_us / dlock_us;
}

void BM_paired_read(benchmark::State& state) {
  raw_conn c;
  const std::int64_t key = dlock::spi::sha256_int64(name_for(state, "paired-raw-read"));
  auto rw = shared_backend()->make_rw_lock(name_for(state, "paired-dlock-read"));
  paired(
      state, [&] { raw_cycle(state, c, try_shared_sql, unlock_shared_sql, key); },
      [&] { dlock_cycle(state, rw->try_acquire_read()); });
}

void BM_paired_semaphore(benchmark::State& state) {
  raw_conn c;
  raw_permit_cycle raw(name_for(state, "paired-raw-semaphore"));
  auto sem = shared_backend()->make_semaphore(name_for(state, "paired-dlock-semaphore"), permits);
  paired(
      state, [&] { raw(state, c); }, [&] { dlock_cycle(state, sem->try_acquire()); });
}

void BM_paired_mutex(benchmark::State& state) {
  raw_conn c;
  const std::int64_t key = dlock::spi::sha256_int64(name_for(state, "paired-raw-mutex"));
  auto lock = shared_backend()->make_lock(name_for(state, "paired-dlock-mutex"));
  paired(
      state, [&] { raw_cycle(state, c, try_exclusive_sql, unlock_exclusive_sql, key); },
      [&] { dlock_cycle(state, lock->try_acquire()); });
}

}  // namespace

void uncontended(benchmark::internal::Benchmark* b) { b->Threads(1)->UseRealTime(); }
void readers(benchmark::internal::Benchmark* b) { b->Threads(1)->Threads(8)->UseRealTime(); }
BENCHMARK(BM_raw_mutex)->Name("mutex/raw")->Apply(uncontended);
BENCHMARK(BM_dlock_mutex)->Name("mutex/dlock")->Apply(uncontended);
BENCHMARK(BM_raw_read)->Name("read/raw")->Apply(uncontended);
BENCHMARK(BM_dlock_read)->Name("read/dlock")->Apply(uncontended);
BENCHMARK(BM_raw_semaphore)->Name("semaphore/raw")->Apply(uncontended);
BENCHMARK(BM_dlock_semaphore)->Name("semaphore/dlock")->Apply(uncontended);
BENCHMARK(BM_paired_mutex)->Name("paired/mutex")->Apply(uncontended);
BENCHMARK(BM_paired_read)->Name("paired/read")->Apply(uncontended);
BENCHMARK(BM_paired_semaphore)->Name("paired/semaphore")->Apply(uncontended);
BENCHMARK(BM_readers_raw)->Name("readers one name/raw")->Apply(readers);
BENCHMARK(BM_readers_dlock)->Name("readers one name/dlock")->Apply(readers);

BENCHMARK_MAIN();
