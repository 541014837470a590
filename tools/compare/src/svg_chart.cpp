#include "dlock_compare/svg_chart.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <utility>

#include "dlock_compare/speed_report.hpp"

namespace dlock::compare {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A log scale over whole decades [10^lo, 10^hi] mapped to [from, to] pixels.
struct log_axis {
  int lo = 0, hi = 1;
  double from = 0, to = 1;
  double at(double v) const {
    const double d = std::log10(std::max(v, std::pow(10.0, lo)));
    return from + (to - from) * (d - lo) / (hi - lo);
  }
};

log_axis decades(double smallest, double largest, double from, double to) {
  log_axis a;
  a.lo = static_cast<int>(std::floor(std::log10(std::max(smallest, 1e-3))));
  a.hi = std::max(a.lo + 1, static_cast<int>(std::ceil(std::log10(std::max(largest, smallest)))));
  a.from = from;
  a.to = to;
  return a;
}

// A decade's label: 10^d with an SI prefix, "1us", "100ms", "10k/s".
std::string decade_label(int d, const char* const* units, int unit_count, int first_power) {
  const int step = std::clamp((d - first_power) / 3, 0, unit_count - 1);
  const int rest = d - first_power - 3 * step;
  const auto mantissa =
      rest >= 0 ? std::to_string(static_cast<long long>(std::pow(10.0, rest))) : num(std::pow(10.0, rest));
  return mantissa + units[step];
}

std::string latency_decade(int d) {  // d: a power of ten of nanoseconds
  static constexpr const char* units[] = {"ns", "us", "ms", "s"};
  return decade_label(d, units, 4, 0);
}

std::string rate_decade(int d) {  // d: a power of ten per second
  static constexpr const char* units[] = {"/s", "k/s", "M/s", "G/s"};
  return decade_label(d, units, 4, 0);
}

// The CDF's vertical axis spreads the tail: a fraction f sits at -log10(1 - f), so p50, p90, p99
// and p99.9 are evenly spaced; everything at or above p99.9 is drawn at the top.
constexpr double tail_decades = 3;
double tail_position(double fraction) { return fraction >= 0.999 ? tail_decades : -std::log10(1.0 - fraction); }

std::string text_at(double x, double y, const std::string& text, const char* anchor = "start", const char* extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" +
         html_escaped(text) + "</text>";
}

std::string line(double x1, double y1, double x2, double y2, const char* cls) {
  return "<line class=\"" + std::string(cls) + "\" x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) +
         "\" y2=\"" + num(y2) + "\"/>";
}

std::string svg_open(double width, double height, const std::string& title) {
  return "<svg class=\"chart\" width=\"" + num(width) + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " +
         num(width) + " " + num(height) + "\" role=\"img\"><title>" + html_escaped(title) + "</title>";
}

}  // namespace

std::string html_escaped(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string series_colour(std::size_t i) {
  // 20 colours a full matrix's rows can tell apart (the unsafe rows are dashed besides).
  static constexpr std::array<const char*, 20> palette = {
      "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
      "#0b3d91", "#b35806", "#00441b", "#67000d", "#3f007d", "#543005", "#ae017e", "#252525", "#636300", "#006d77"};
  return palette[i % palette.size()];
}

std::string svg_cdf(const std::string& title, const std::vector<cdf_series>& series) {
  // The legend, a line per series, sets the height once there are more series than fit beside 270 px.
  constexpr double width = 900, left = 50, right = 600, top = 30;
  const double bottom = std::max(300.0, top + 14.0 * static_cast<double>(series.size()));
  const double height = bottom + 40;
  double smallest = 1e18, largest = 0;
  for (const auto& s : series)
    if (s.latencies && s.latencies->count())
      for (const auto& b : s.latencies->buckets()) {
        smallest = std::min(smallest, static_cast<double>(b.upper.count()));
        largest = std::max(largest, static_cast<double>(b.upper.count()));
      }
  std::string out = svg_open(width, height, title) + text_at(left, 18, title, "start", " class=\"chart-title\"");
  if (largest == 0) return out + text_at(left, 60, "nothing measured") + "</svg>";
  const auto x = decades(smallest, largest, left, right);
  const auto y = [&](double fraction) { return bottom - (bottom - top) * tail_position(fraction) / tail_decades; };
  for (int d = x.lo; d <= x.hi; ++d) {
    const double px = x.at(std::pow(10.0, d));
    out += line(px, top, px, bottom, "grid");
    out += text_at(px, bottom + 16, latency_decade(d), "middle");
  }
  for (const auto& [f, label] : {std::pair{0.0, "p0"}, {0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}, {0.999, "p99.9"}}) {
    out += line(left, y(f), right, y(f), "grid");
    out += text_at(left - 4, y(f) + 4, label, "end");
  }
  out +=
      text_at((left + right) / 2, bottom + 34, "latency (log scale); y: the share of samples at or below it", "middle");
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const double ly = top + 14.0 * static_cast<double>(i);
    const std::string colour = series_colour(i);
    const std::string dash = s.dashed ? " stroke-dasharray=\"5 3\"" : "";
    out += "<line x1=\"" + num(right + 14) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(right + 36) + "\" y2=\"" +
           num(ly) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"" + dash + "/>";
    const auto count = s.latencies ? s.latencies->count() : 0;
    out += text_at(right + 40, ly + 4, s.label + (count ? " (" + std::to_string(count) + ")" : " (none)"));
    if (count == 0) continue;
    std::string path;
    std::uint64_t seen = 0;
    double previous_y = y(0);
    for (const auto& b : s.latencies->buckets()) {
      seen += b.count;
      const double px = x.at(static_cast<double>(b.upper.count()));
      const double py = y(static_cast<double>(seen) / static_cast<double>(count));
      path += (path.empty() ? "M" + num(px) + " " + num(previous_y) : " L" + num(px) + " " + num(previous_y)) + " L" +
              num(px) + " " + num(py);
      previous_y = py;
    }
    out += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.6\"" + dash + "><title>" +
           html_escaped(s.label + ": p50 " + latency_text(s.latencies->percentile(0.5)) + ", p99 " +
                        latency_text(s.latencies->percentile(0.99)) + ", " + std::to_string(count) + " samples") +
           "</title></path>";
  }
  return out + "</svg>";
}

std::string svg_bars(const std::string& title, const std::vector<std::string>& series,
                     const std::vector<bar_group>& groups) {
  constexpr double left = 260, right = 720, top = 44, bar = 11, gap = 10, width = 840;
  const double group_height = bar * static_cast<double>(series.size()) + gap;
  const double height = top + group_height * static_cast<double>(groups.size()) + 30;
  double smallest = 1e18, largest = 0;
  for (const auto& g : groups)
    for (const double v : g.values)
      if (v > 0) {
        smallest = std::min(smallest, v);
        largest = std::max(largest, v);
      }
  std::string out = svg_open(width, height, title) + text_at(10, 18, title, "start", " class=\"chart-title\"");
  for (std::size_t i = 0; i < series.size(); ++i) {
    const double lx = left + 170.0 * static_cast<double>(i);
    out += "<rect x=\"" + num(lx) + "\" y=\"26\" width=\"12\" height=\"10\" fill=\"" + series_colour(i) + "\"/>";
    out += text_at(lx + 16, 35, series[i]);
  }
  if (largest == 0) return out + text_at(left, top + 20, "nothing measured") + "</svg>";
  const auto x = decades(smallest, largest, left, right);
  const double bottom = top + group_height * static_cast<double>(groups.size());
  for (int d = x.lo; d <= x.hi; ++d) {
    const double px = x.at(std::pow(10.0, d));
    out += line(px, top - 4, px, bottom, "grid");
    out += text_at(px, bottom + 14, rate_decade(d), "middle");
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double gy = top + group_height * static_cast<double>(g);
    const auto& group = groups[g];
    out +=
        text_at(left - 8, gy + bar * static_cast<double>(series.size()) / 2 + 4,
                group.label + (group.unsafe ? " (unsafe)" : ""), "end", group.unsafe ? " class=\"unsafe-label\"" : "");
    for (std::size_t i = 0; i < group.values.size() && i < series.size(); ++i) {
      const double v = group.values[i];
      const double by = gy + bar * static_cast<double>(i);
      if (v <= 0) {
        out += text_at(left + 4, by + bar - 2, "not measured", "start", " class=\"small\"");
        continue;
      }
      const double w = std::max(1.0, x.at(v) - left);
      out += "<rect x=\"" + num(left) + "\" y=\"" + num(by) + "\" width=\"" + num(w) + "\" height=\"" + num(bar - 1) +
             "\" fill=\"" + series_colour(i) + "\"><title>" +
             html_escaped(group.label + ", " + series[i] + ": " + rate_text(v)) + "</title></rect>";
      out += text_at(left + w + 4, by + bar - 2, rate_text(v), "start", " class=\"small\"");
    }
  }
  return out + "</svg>";
}

}  // namespace dlock::compare
