#include "acquire_deadline.hpp"

#include <algorithm>

namespace dlock::memcached {

io_bound::io_bound(memcached_st* m, std::chrono::milliseconds connect_timeout,
                   std::chrono::milliseconds io_timeout) noexcept
    : m_(m),
      connect_timeout_(connect_timeout),
      io_timeout_(io_timeout),
      bounded_(io_deadline() != steady_clock::time_point::max()) {
  refresh();
}

io_bound::~io_bound() {
  if (!bounded_) return;
  memcached_behavior_set(m_, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, static_cast<uint64_t>(connect_timeout_.count()));
  memcached_behavior_set(m_, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, static_cast<uint64_t>(io_timeout_.count()));
}

void io_bound::refresh() noexcept {
  if (!bounded_) return;
  const auto left = std::max<std::chrono::milliseconds::rep>(
      1, std::chrono::ceil<std::chrono::milliseconds>(io_deadline() - steady_clock::now()).count());
  memcached_behavior_set(m_, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT,
                         static_cast<uint64_t>(std::min(left, connect_timeout_.count())));
  memcached_behavior_set(m_, MEMCACHED_BEHAVIOR_POLL_TIMEOUT,
                         static_cast<uint64_t>(std::min(left, io_timeout_.count())));
}

}  // namespace dlock::memcached
