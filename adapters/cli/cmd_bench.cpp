// dlock bench URI [--threads N] [--names K] [--duration D] [--wait D] [--json]: N threads, each with
// its own lock objects, thread i on name i % K, doing acquire+release cycles for D (blocking, or
// each acquire bounded by --wait, a timeout counted and tried again).
// Reports cycles/s, cycle latency percentiles, and under contention (K < N) the handoff time:
// from a release (a shared steady_clock stamp written just before it) to the next holder of the
// same name (read right after its acquire, counted only when that acquire started before the
// release, i.e. it really waited for it). The measuring loop and the histogram are tools/compare's
// speed module, the one `dlock compare` measures its speed columns with.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/dlock.hpp"
#include "dlock_compare/speed.hpp"
#include "metrics_endpoint.hpp"

namespace dlock::cli {

int cmd_bench(const arguments& argv) {
  const args a(argv, {"threads", "names", "duration", "wait", "uri-file", "metrics", "metrics-linger"},
               {"help", "json"});
  if (a.flag("help")) {
    std::puts("usage: dlock bench [URI] [--uri-file PATH] [--threads N] [--names K] [--duration D] [--wait D]\n"
              "                   [--json] [--metrics HOST:PORT [--metrics-linger D]]\n"
              "(the URI from the command line, --uri-file PATH, or DLOCK_URI)\n"
              "N threads (default 1), thread i on name i % K (default K = N), acquire+release cycles for D\n"
              "(default 2s). Each acquire blocks until granted, or with --wait D gives up after D: the\n"
              "timeout is counted and the thread tries again. Prints cycles/s, p50/p99/p999 of one cycle,\n"
              "the handoff time (release -> next holder) when K < N, the fewest and most cycles one thread\n"
              "made as a fraction of the fair share (a starved waiter shows far below 1), and the acquires:\n"
              "granted + timed out + failed.\n"
              "--metrics HOST:PORT serves the locks' Prometheus metrics at http://HOST:PORT/metrics while it\n"
              "runs (port 0: a free one; stderr says which); --metrics-linger D keeps serving them for D\n"
              "after the results are printed, so that a scrape sees the run's final counts.\n"
              "tools/bench/scaling runs it at 1/8/32/128 threads on every backend, beside the raw clients.");
    return 0;
  }
  const auto uri = take_uri(a, 0, "expected one URI").uri;
  if (!uri) throw usage_error("no URI: give it, or --uri-file PATH, or DLOCK_URI");
  const auto threads = static_cast<int>(a.integer("threads", 1, 1, 1024));
  const auto names = static_cast<int>(a.integer("names", threads, 1, 1 << 20));
  const auto duration = a.duration("duration").value_or(std::chrono::seconds(2));
  const auto wait = a.duration("wait");
  const auto linger = a.duration("metrics-linger");
  if (linger && !a.get("metrics")) throw usage_error("--metrics-linger needs --metrics HOST:PORT");
  const auto metrics = serve_metrics(a);
  auto backend = dlock::open(*uri, {}, metrics ? metrics->observer() : nullptr);
  // The measuring loop is dlock compare's (its speed columns): one backend object shared by the
  // threads, as in one service; acquire() waits as long as it takes, or --wait.
  compare::speed_run run;
  run.uri = *uri;
  run.name_prefix = "dlock-bench/" + std::to_string(::getpid()) + "/";
  run.clients = static_cast<std::uint32_t>(threads);
  run.names = static_cast<std::uint32_t>(names);
  run.duration = std::chrono::duration_cast<std::chrono::milliseconds>(duration);
  run.shared_backend = backend;
  run.acquire_timeout = wait;  // nullopt: acquire() blocks
  run.timeout_stops_the_client = false;
  const auto measured = compare::measure_speed(run);
  if (measured.errors > 0) std::fprintf(stderr, "dlock bench: %s\n", scrub_secrets(measured.first_error).c_str());
  const double seconds = measured.seconds;
  const auto& all = measured.cycles;
  const auto& hand = measured.handoffs;
  const double rate = measured.cycles_per_second();

  if (a.flag("json")) {
    std::printf("{\"uri\":\"%s\",\"threads\":%d,\"names\":%d,\"seconds\":%.3f,\"cycles\":%llu,\"cycles_per_s\":%.1f,"
                "\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"handoffs\":%llu,\"handoff_p50_us\":%.2f,"
                "\"handoff_p99_us\":%.2f,\"lowest_share\":%.3f,\"highest_share\":%.3f,\"errors\":%d,"
                "\"acquires\":%llu,\"granted\":%llu,\"timed_out\":%llu,\"failed\":%llu}\n",
                backend->redacted_uri().c_str(), threads, names, seconds, static_cast<unsigned long long>(all.count()),
                rate, all.percentile_us(0.5), all.percentile_us(0.99), all.percentile_us(0.999),
                static_cast<unsigned long long>(hand.count()), hand.percentile_us(0.5), hand.percentile_us(0.99),
                measured.lowest_share(), measured.highest_share(), static_cast<int>(measured.errors),
                static_cast<unsigned long long>(measured.acquires()), static_cast<unsigned long long>(measured.grants),
                static_cast<unsigned long long>(measured.timeouts),
                static_cast<unsigned long long>(measured.failed_acquires));
  } else {
    std::printf("%s: %d thread(s) over %d name(s) for %.2fs\n", backend->redacted_uri().c_str(), threads, names,
                seconds);
    std::printf("  %llu acquire+release cycles, %.0f cycles/s\n", static_cast<unsigned long long>(all.count()), rate);
    std::printf("  cycle latency: p50 %.1fus  p99 %.1fus  p999 %.1fus\n", all.percentile_us(0.5),
                all.percentile_us(0.99), all.percentile_us(0.999));
    if (names < threads)
      std::printf("  handoff (release -> next holder): %llu measured, p50 %.1fus  p99 %.1fus\n",
                  static_cast<unsigned long long>(hand.count()), hand.percentile_us(0.5), hand.percentile_us(0.99));
    if (threads > 1)
      std::printf("  cycles per thread: fewest %.2fx, most %.2fx the fair share (%.0f each)\n", measured.lowest_share(),
                  measured.highest_share(), static_cast<double>(all.count()) / threads);
    std::printf("  acquires: %llu = %llu granted + %llu timed out + %llu failed\n",
                static_cast<unsigned long long>(measured.acquires()), static_cast<unsigned long long>(measured.grants),
                static_cast<unsigned long long>(measured.timeouts),
                static_cast<unsigned long long>(measured.failed_acquires));
  }
  if (metrics && linger) {
    std::fflush(stdout);  // the results first: a scraper reads them, then the final counts
    std::fprintf(stderr, "dlock: metrics stay up for %lld ms\n",
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(*linger).count()));
    std::this_thread::sleep_for(*linger);
  }
  return measured.errors ? exit_unavailable : 0;
}

}  // namespace dlock::cli
