#pragma once
// A log-linear histogram of latencies: 64 sub-buckets per power of two of nanoseconds (under 1.6%
// error), fixed size, so each client thread keeps its own and they are merged afterwards.
// `dlock bench` and the speed columns of `dlock compare` both count with it.
#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

namespace dlock::compare {

class latency_histogram {
 public:
  void add(std::chrono::nanoseconds d) noexcept;
  void merge(const latency_histogram& other) noexcept;
  std::uint64_t count() const noexcept { return count_; }

  // The upper bound of the bucket holding the p-quantile (p in [0, 1]); zero when empty.
  std::chrono::nanoseconds percentile(double p) const noexcept;
  double percentile_us(double p) const noexcept;  // the same in microseconds, for printing

  // The non-empty buckets in increasing order, each with its upper bound: a distribution to draw.
  struct bucket {
    std::chrono::nanoseconds upper;
    std::uint64_t count;
  };
  std::vector<bucket> buckets() const;

 private:
  static constexpr unsigned sub_bits = 6;
  static std::size_t index(std::uint64_t ns) noexcept;
  static std::uint64_t upper(std::size_t i) noexcept;
  std::array<std::uint64_t, 64 * 64> buckets_{};
  std::uint64_t count_ = 0;
};

}  // namespace dlock::compare
