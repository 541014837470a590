// dlock::prometheus over the memory backend: the series a scrape would show, by their text
// exposition, after acquires of every outcome, holds, renewals, losses and waits.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/prometheus.hpp"

namespace {

using namespace std::chrono_literals;

// Every sample of a scrape: "name{labels}" -> value.
std::map<std::string, double> scrape(prometheus::Registry& registry) {
  std::istringstream text(prometheus::TextSerializer().Serialize(registry.Collect()));
  std::map<std::string, double> samples;
  for (std::string line; std::getline(text, line);) {
    if (line.empty() || line.front() == '#') continue;
    const auto space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

double sample(const std::map<std::string, double>& samples, const std::string& series) {
  const auto found = samples.find(series);
  if (found == samples.end()) {
    ADD_FAILURE() << "no series " << series;
    return -1;
  }
  return found->second;
}

std::string unique_uri(const std::string& test, const std::string& query = "") {
  static std::atomic<int> counter{0};
  return "memory://prometheus-" + test + "-" + std::to_string(counter++) + query;
}

// Polls the scrape until `series` reaches `value` (a watchdog's renewal or expiry comes on its own
// thread), up to 10 s.
bool reaches(prometheus::Registry& registry, const std::string& series, double value) {
  for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
    const auto samples = scrape(registry);
    if (auto found = samples.find(series); found != samples.end() && found->second >= value) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(Prometheus, CountsAcquiresByOutcomeAndHeldLeases) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto backend = dlock::open(unique_uri("outcomes"), dlock::make_prometheus_observer(registry));
  auto holder = backend->make_lock("orders");
  auto other = backend->make_lock("orders");
  auto held = holder->try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(other->try_acquire_for(20ms));
  std::stop_source stop;
  stop.request_stop();
  std::error_code ec;
  EXPECT_FALSE(other->try_acquire_for(10s, stop.get_token(), ec));

  auto samples = scrape(*registry);
  EXPECT_EQ(
      sample(samples, R"(dlock_acquire_duration_seconds_count{backend="memory",outcome="granted",primitive="mutex"})"),
      1);
  EXPECT_EQ(sample(samples,
                   R"(dlock_acquire_duration_seconds_count{backend="memory",outcome="timed_out",primitive="mutex"})"),
            1);
  EXPECT_EQ(sample(samples,
                   R"(dlock_acquire_duration_seconds_count{backend="memory",outcome="cancelled",primitive="mutex"})"),
            1);
  // The wait to the deadline is in the sum, in seconds.
  EXPECT_GE(
      sample(samples, R"(dlock_acquire_duration_seconds_sum{backend="memory",outcome="timed_out",primitive="mutex"})"),
      0.020);
  EXPECT_EQ(sample(samples, R"(dlock_leases_held{backend="memory",primitive="mutex"})"), 1);
  EXPECT_EQ(sample(samples, R"(dlock_waiters{backend="memory",primitive="mutex"})"), 0);
  // Lock names are not labels unless asked for.
  for (const auto& [series, value] : samples) EXPECT_EQ(series.find("name="), std::string::npos) << series;

  std::this_thread::sleep_for(20ms);
  held.release();
  samples = scrape(*registry);
  EXPECT_EQ(sample(samples, R"(dlock_leases_held{backend="memory",primitive="mutex"})"), 0);
  EXPECT_EQ(sample(samples, R"(dlock_hold_duration_seconds_count{backend="memory",primitive="mutex"})"), 1);
  EXPECT_GE(sample(samples, R"(dlock_hold_duration_seconds_sum{backend="memory",primitive="mutex"})"), 0.020);
  // The histogram's buckets are cumulative and end in +Inf.
  EXPECT_EQ(sample(samples, R"(dlock_hold_duration_seconds_bucket{backend="memory",primitive="mutex",le="+Inf"})"), 1);
}

TEST(Prometheus, GaugesTheWaitersWhileTheyWait) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto backend = dlock::open(unique_uri("waiters"), dlock::make_prometheus_observer(registry));
  auto held = backend->make_lock("queue")->try_acquire();
  ASSERT_TRUE(held);
  std::vector<std::jthread> waiters;
  for (int i = 0; i < 2; ++i)
    waiters.emplace_back([&] { auto lease = backend->make_lock("queue")->try_acquire_for(30s); });
  EXPECT_TRUE(reaches(*registry, R"(dlock_waiters{backend="memory",primitive="mutex"})", 2));
  held.release();
  waiters.clear();
  const auto samples = scrape(*registry);
  EXPECT_EQ(sample(samples, R"(dlock_waiters{backend="memory",primitive="mutex"})"), 0);
  EXPECT_EQ(
      sample(samples, R"(dlock_acquire_duration_seconds_count{backend="memory",outcome="granted",primitive="mutex"})"),
      3);
  EXPECT_EQ(sample(samples, R"(dlock_leases_held{backend="memory",primitive="mutex"})"), 0);
}

TEST(Prometheus, CountsRenewalsWithTheirMarginAndLosses) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto observer = dlock::make_prometheus_observer(registry);
  auto renewing = dlock::open(unique_uri("renew", "?ttl=300ms"), observer);
  auto lease = renewing->make_lock("renewed")->acquire();
  ASSERT_TRUE(reaches(*registry, R"(dlock_renewals_total{backend="memory",outcome="renewed",primitive="mutex"})", 2));
  auto samples = scrape(*registry);
  const double margin_sum = sample(samples, R"(dlock_renewal_margin_seconds_sum{backend="memory",primitive="mutex"})");
  const double margins = sample(samples, R"(dlock_renewal_margin_seconds_count{backend="memory",primitive="mutex"})");
  ASSERT_GE(margins, 2);
  EXPECT_GT(margin_sum / margins, 0.0);
  EXPECT_LT(margin_sum / margins, 0.300);  // renewed with less than its ttl left
  lease.release();

  // One observer for two backends: the second one's lease expires unrenewed.
  auto expiring = dlock::open(unique_uri("lost", "?ttl=100ms&watchdog=false"), observer);
  auto lost = expiring->make_lock("expires")->acquire();
  ASSERT_TRUE(
      reaches(*registry, R"(dlock_leases_lost_total{backend="memory",primitive="mutex",reason="lock_lost"})", 1));
  std::error_code ec;
  lost.release(ec);
  samples = scrape(*registry);
  EXPECT_EQ(sample(samples, R"(dlock_leases_held{backend="memory",primitive="mutex"})"), 0);
  // A loss is not a backend error.
  for (const auto& [series, value] : samples) {
    if (series.rfind("dlock_backend_errors_total", 0) == 0) {
      EXPECT_EQ(value, 0) << series;
    }
  }
}

TEST(Prometheus, LabelsEachPrimitiveAndNamesWhenAsked) {
  auto registry = std::make_shared<prometheus::Registry>();
  dlock::prometheus_options options;
  options.name_label = true;
  auto backend = dlock::open(unique_uri("kinds"), dlock::make_prometheus_observer(registry, options));
  auto rw = backend->make_rw_lock("catalog");
  { auto reader = rw->try_acquire_read(); }
  { auto writer = rw->try_acquire_write(); }
  { auto permits = backend->make_semaphore("pool", 3)->try_acquire(2); }
  std::error_code ec;
  EXPECT_FALSE(backend->make_semaphore("pool", 3)->try_acquire(4, ec));  // more permits than there are
  const auto samples = scrape(*registry);
  // One acquire of each, counted under its name, outcome and primitive.
  const char* const acquires[][3] = {{"catalog", "granted", "read"},
                                     {"catalog", "granted", "write"},
                                     {"pool", "granted", "semaphore"},
                                     {"pool", "error", "semaphore"}};
  for (const auto& [name, outcome, primitive] : acquires) {
    const auto series = std::string(R"(dlock_acquire_duration_seconds_count{backend="memory",name=")") + name +
                        R"(",outcome=")" + outcome + R"(",primitive=")" + primitive + R"("})";
    EXPECT_EQ(sample(samples, series), 1) << series;
  }
  EXPECT_EQ(
      sample(samples,
             R"(dlock_backend_errors_total{backend="memory",name="pool",operation="acquire",primitive="semaphore"})"),
      1);
}

TEST(Prometheus, RefusesANullRegistry) { EXPECT_THROW(dlock::make_prometheus_observer(nullptr), dlock::error); }

}  // namespace
