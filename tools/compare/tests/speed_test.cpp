// The speed module: the histogram's percentiles on known samples, measure_speed on a process-scope
// lock (the registry's, at its declared local URI: real lock objects, real threads; no rate is asserted, only what is
// counted), and the HTML report's escaping. The cells' verdicts and colours: verdict_test.cpp, report_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "dlock_compare/html_report.hpp"
#include "dlock_compare/latency_histogram.hpp"
#include "dlock_compare/speed.hpp"
#include "dlock_compare/svg_chart.hpp"
#include "dlock_test/support.hpp"
#include "local_backends.hpp"

namespace dlock::compare::testing {
namespace {

using namespace std::chrono_literals;

TEST(LatencyHistogram, PercentilesOfKnownSamplesWithinTheBucketError) {
  latency_histogram h;
  for (int us = 1; us <= 1000; ++us) h.add(std::chrono::microseconds(us));
  ASSERT_EQ(h.count(), 1000u);
  // 64 sub-buckets per power of two: an upper bound at most 1/64 above the sample.
  EXPECT_GE(h.percentile_us(0.5), 500.0);
  EXPECT_LE(h.percentile_us(0.5), 500.0 * (1 + 1.0 / 64) + 1);
  EXPECT_GE(h.percentile_us(0.99), 990.0);
  EXPECT_LE(h.percentile_us(0.99), 990.0 * (1 + 1.0 / 64) + 1);
  std::uint64_t in_buckets = 0;
  for (const auto& b : h.buckets()) in_buckets += b.count;
  EXPECT_EQ(in_buckets, 1000u) << "the buckets drawn must hold every sample";
}

TEST(LatencyHistogram, MergeAddsAndEmptyIsZero) {
  latency_histogram a, b;
  EXPECT_EQ(a.percentile(0.5), 0ns);
  a.add(10us);
  b.add(20ms);
  a.merge(b);
  EXPECT_EQ(a.count(), 2u);
  EXPECT_GE(a.percentile(1.0), 20ms);
}

speed_run local_run(std::uint32_t clients, std::uint32_t names) {
  speed_run run;
  run.uri = with_parameters(local_uri_of_scope(lock_scope::process, std::filesystem::temp_directory_path()), "ttl=5s");
  run.name_prefix = dlock::testing::unique_name("speed") + "-";
  run.clients = clients;
  run.names = names;
  run.duration = 300ms;
  return run;
}

TEST(MeasureSpeed, UncontendedClientsCycleWithoutHandoffs) {
  const auto m = measure_speed(local_run(4, 4));
  EXPECT_EQ(m.errors, 0u) << m.first_error;
  EXPECT_EQ(m.clients, 4u);
  EXPECT_GT(m.cycles.count(), 0u);
  EXPECT_GT(m.cycles_per_second(), 0.0);
  EXPECT_EQ(m.handoffs.count(), 0u) << "each client on a name of its own never waits for another";
  ASSERT_EQ(m.cycles_per_client.size(), 4u);
  std::uint64_t sum = 0;
  for (const auto n : m.cycles_per_client) sum += n;
  EXPECT_EQ(sum, m.cycles.count()) << "the per-client counts are the same cycles, split by client";
  EXPECT_LE(m.lowest_share(), 1.0);
  EXPECT_GE(m.highest_share(), 1.0);
  EXPECT_GT(m.lowest_share(), 0.0) << "every client on its own name cycled";
}

TEST(MeasureSpeed, ClientsOnOneNameHandTheLockOver) {
  const auto m = measure_speed(local_run(4, 1));
  EXPECT_EQ(m.errors, 0u) << m.first_error;
  EXPECT_GT(m.cycles.count(), 0u);
  EXPECT_GT(m.handoffs.count(), 0u) << "four clients on one name must have waited for each other";
}

TEST(MeasureSpeed, AnUnopenableUriIsAnErrorNotAThrow) {
  auto run = local_run(2, 2);
  run.uri = "nosuch-scheme://x";
  const auto m = measure_speed(run);
  EXPECT_EQ(m.errors, 2u);
  EXPECT_FALSE(m.first_error.empty());
  EXPECT_EQ(m.cycles.count(), 0u);
}

TEST(HtmlEscaped, MarkupCharactersAreEscaped) {
  EXPECT_EQ(html_escaped("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
}

}  // namespace
}  // namespace dlock::compare::testing
