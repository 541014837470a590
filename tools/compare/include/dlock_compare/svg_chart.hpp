#pragma once
// Inline SVG charts for the HTML report of `dlock compare`: no script, no external resource.
#include <chrono>
#include <string>
#include <vector>

#include "dlock_compare/latency_histogram.hpp"

namespace dlock::compare {

// Text made safe inside HTML/SVG elements and attribute values (& < > " ').
std::string html_escaped(const std::string& text);

struct cdf_series {
  std::string label;
  bool dashed = false;  // an unsafe variant
  const latency_histogram* latencies = nullptr;
};
// The cumulative distribution of each series: x the latency on a log scale (decades from the
// fastest to the slowest bucket seen), y the share of samples at or below it on a tail scale
// (p50, p90, p99, p99.9 evenly spaced: the tail is what a lock's users wait on).
std::string svg_cdf(const std::string& title, const std::vector<cdf_series>& series);

struct bar_group {
  std::string label;
  bool unsafe = false;
  std::vector<double> values;  // one per bar_chart::series; <= 0: not measured
};
// Horizontal bars on a log scale, one group per backend, one bar per series, the value printed at
// its end.
std::string svg_bars(const std::string& title, const std::vector<std::string>& series,
                     const std::vector<bar_group>& groups);

// The colour of series i (a fixed palette that repeats), for the charts and their legends.
std::string series_colour(std::size_t i);

}  // namespace dlock::compare
