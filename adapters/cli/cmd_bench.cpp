// dlock bench URI [--threads N] [--names K] [--duration D] [--json]: N threads, each with its
// own lock objects, thread i on name i % K, doing blocking acquire+release cycles for D.
// Reports cycles/s, cycle latency percentiles, and under contention (K < N) the handoff time:
// from a release (a shared steady_clock stamp written just before it) to the next holder of the
// same name (read right after its acquire, counted only when that acquire started before the
// release, i.e. it really waited for it).
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/dlock.hpp"

namespace dlock::cli {
namespace {

using clock = std::chrono::steady_clock;

// Log-linear histogram of nanoseconds: 64 sub-buckets per power of two (< 1.6% error).
class histogram {
 public:
  void add(std::uint64_t ns) {
    ++buckets_[index(ns)];
    ++count_;
  }
  void merge(const histogram& o) {
    for (std::size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += o.buckets_[i];
    count_ += o.count_;
  }
  std::uint64_t count() const { return count_; }
  double percentile_us(double p) const {
    if (!count_) return 0;
    const auto rank = static_cast<std::uint64_t>(p * static_cast<double>(count_ - 1)) + 1;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      if ((seen += buckets_[i]) >= rank) return static_cast<double>(upper(i)) / 1000.0;
    return 0;
  }

 private:
  static constexpr unsigned sub_bits = 6;
  static std::size_t index(std::uint64_t v) {
    if (v < (1u << sub_bits)) return v;
    const unsigned e = static_cast<unsigned>(std::bit_width(v)) - sub_bits - 1;  // v >> e in [64, 128)
    return (e + 1) * (1u << sub_bits) + ((v >> e) - (1u << sub_bits));
  }
  static std::uint64_t upper(std::size_t i) {
    if (i < (1u << sub_bits)) return i;
    const std::size_t e = i / (1u << sub_bits) - 1;
    return ((i % (1u << sub_bits)) + (1u << sub_bits) + 1) << e;
  }
  std::array<std::uint64_t, 64 * 64> buckets_{};
  std::uint64_t count_ = 0;
};

struct alignas(64) name_slot {
  std::atomic<clock::rep> released_at{0};
};

}  // namespace

int cmd_bench(const arguments& argv) {
  const args a(argv, {"threads", "names", "duration", "uri-file"}, {"help", "json"});
  if (a.flag("help")) {
    std::puts("usage: dlock bench [URI] [--uri-file PATH] [--threads N] [--names K] [--duration D] [--json]\n"
              "(the URI from the command line, --uri-file PATH, or DLOCK_URI)\n"
              "N threads (default 1), thread i on name i % K (default K = N), blocking acquire+release\n"
              "cycles for D (default 2s). Prints cycles/s, p50/p99/p999 of one cycle, and the handoff\n"
              "time (release -> next holder) when K < N.");
    return 0;
  }
  const auto uri = take_uri(a, 0, "expected one URI").uri;
  if (!uri) throw usage_error("no URI: give it, or --uri-file PATH, or DLOCK_URI");
  const auto threads = static_cast<int>(a.integer("threads", 1, 1, 1024));
  const auto names = static_cast<int>(a.integer("names", threads, 1, 1 << 20));
  const auto duration = a.duration("duration").value_or(std::chrono::seconds(2));
  auto backend = dlock::open(*uri);
  const std::string prefix = "dlock-bench/" + std::to_string(::getpid()) + "/";

  std::vector<name_slot> slots(static_cast<std::size_t>(names));
  std::vector<histogram> cycles(static_cast<std::size_t>(threads)), handoffs(static_cast<std::size_t>(threads));
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  const auto start = clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const int k = t % names;
      auto lock = backend->make_lock(prefix + std::to_string(k));
      auto& slot = slots[static_cast<std::size_t>(k)];
      auto& cyc = cycles[static_cast<std::size_t>(t)];
      auto& hand = handoffs[static_cast<std::size_t>(t)];
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          const auto t0 = clock::now();
          lease l = lock->acquire();
          const auto got = clock::now();
          const auto released = slot.released_at.load();
          if (released > t0.time_since_epoch().count())
            hand.add(static_cast<std::uint64_t>(got.time_since_epoch().count() - released));
          slot.released_at.store(clock::now().time_since_epoch().count());
          l.release();
          cyc.add(static_cast<std::uint64_t>(std::chrono::nanoseconds(clock::now() - t0).count()));
        }
      } catch (const std::exception& e) {
        if (failures++ == 0) std::fprintf(stderr, "dlock bench: %s\n", scrub_secrets(e.what()).c_str());
      }
    });
  }
  std::this_thread::sleep_for(duration);
  stop = true;
  for (auto& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  histogram all, hand;
  for (auto& h : cycles) all.merge(h);
  for (auto& h : handoffs) hand.merge(h);
  const double rate = static_cast<double>(all.count()) / seconds;

  if (a.flag("json")) {
    std::printf("{\"uri\":\"%s\",\"threads\":%d,\"names\":%d,\"seconds\":%.3f,\"cycles\":%llu,\"cycles_per_s\":%.1f,"
                "\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"handoffs\":%llu,\"handoff_p50_us\":%.2f,"
                "\"handoff_p99_us\":%.2f,\"errors\":%d}\n",
                backend->redacted_uri().c_str(), threads, names, seconds,
                static_cast<unsigned long long>(all.count()), rate, all.percentile_us(0.5), all.percentile_us(0.99),
                all.percentile_us(0.999), static_cast<unsigned long long>(hand.count()), hand.percentile_us(0.5),
                hand.percentile_us(0.99), failures.load());
  } else {
    std::printf("%s: %d thread(s) over %d name(s) for %.2fs\n", backend->redacted_uri().c_str(), threads, names, seconds);
    std::printf("  %llu acquire+release cycles, %.0f cycles/s\n", static_cast<unsigned long long>(all.count()), rate);
    std::printf("  cycle latency: p50 %.1fus  p99 %.1fus  p999 %.1fus\n", all.percentile_us(0.5),
                all.percentile_us(0.99), all.percentile_us(0.999));
    if (names < threads)
      std::printf("  handoff (release -> next holder): %llu measured, p50 %.1fus  p99 %.1fus\n",
                  static_cast<unsigned long long>(hand.count()), hand.percentile_us(0.5), hand.percentile_us(0.99));
  }
  return failures.load() ? exit_unavailable : 0;
}

}  // namespace dlock::cli
