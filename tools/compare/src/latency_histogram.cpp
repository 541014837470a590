#include "dlock_compare/latency_histogram.hpp"

#include <bit>

namespace dlock::compare {

void latency_histogram::add(std::chrono::nanoseconds d) noexcept {
  ++buckets_[index(d.count() > 0 ? static_cast<std::uint64_t>(d.count()) : 0)];
  ++count_;
}

void latency_histogram::merge(const latency_histogram& other) noexcept {
  for (std::size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
}

std::chrono::nanoseconds latency_histogram::percentile(double p) const noexcept {
  if (count_ == 0) return {};
  const auto rank = static_cast<std::uint64_t>(p * static_cast<double>(count_ - 1)) + 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if ((seen += buckets_[i]) >= rank) return std::chrono::nanoseconds(upper(i));
  return {};
}

double latency_histogram::percentile_us(double p) const noexcept {
  return static_cast<double>(percentile(p).count()) / 1000.0;
}

std::vector<latency_histogram::bucket> latency_histogram::buckets() const {
  std::vector<bucket> out;
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if (buckets_[i] != 0) out.push_back({std::chrono::nanoseconds(upper(i)), buckets_[i]});
  return out;
}

// Below 64 ns one bucket per nanosecond; above, 64 buckets per power of two.
std::size_t latency_histogram::index(std::uint64_t v) noexcept {
  if (v < (1u << sub_bits)) return v;
  const unsigned e = static_cast<unsigned>(std::bit_width(v)) - sub_bits - 1;  // v >> e in [64, 128)
  const std::size_t i = (e + 1) * (1u << sub_bits) + ((v >> e) - (1u << sub_bits));
  return i < 64 * 64 ? i : 64 * 64 - 1;
}

std::uint64_t latency_histogram::upper(std::size_t i) noexcept {
  if (i < (1u << sub_bits)) return i;
  const std::size_t e = i / (1u << sub_bits) - 1;
  return ((i % (1u << sub_bits)) + (1u << sub_bits) + 1) << e;
}

}  // namespace dlock::compare
