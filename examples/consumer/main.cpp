// A small service using dlock as an installed package: a std::unique_lock with try_lock_for over
// a distributed lock, printing the fencing token it got; then, on a backend that makes them, a
// std::shared_lock on the reader side of a reader-writer lock and one permit of a 3-permit
// semaphore, all from the one URI.
#include <chrono>
#include <cstdio>
#include <mutex>
#include <shared_mutex>

#include "dlock/counting_semaphore.hpp"
#include "dlock/dlock.hpp"
#include "dlock/shared_timed_lockable.hpp"
#include "dlock/timed_lockable.hpp"

int main(int argc, char** argv) {
  const char* uri = argc > 1 ? argv[1] : "memory://";
  try {
    auto backend = dlock::open(uri);
    dlock::timed_lockable orders(backend->make_lock("orders/42"));
    std::unique_lock guard(orders, std::defer_lock);
    if (!guard.try_lock_for(std::chrono::seconds(2))) {
      std::fprintf(stderr, "consumer: orders/42 is busy\n");
      return 75;
    }
    const auto token = orders.fencing_token();
    std::printf("consumer: holding orders/42 on %s, fencing token %s\n", backend->redacted_uri().c_str(),
                token ? std::to_string(*token).c_str() : "-");

    if (backend->caps().has(dlock::capability::read_write)) {
      // Many readers at once, in this process and others; a writer alone (std::unique_lock).
      dlock::shared_timed_lockable catalog(backend->make_rw_lock("catalog"));
      std::shared_lock reading(catalog, std::chrono::seconds(2));
      std::printf("consumer: reading catalog: %s\n", reading.owns_lock() ? "yes" : "busy");
    }
    if (backend->caps().has(dlock::capability::semaphore)) {
      // At most 3 holders of "licence-server" at once, over every process.
      auto licences = backend->make_semaphore("licence-server", 3);
      if (auto permit = licences->try_acquire_for(std::chrono::seconds(2)))
        std::printf("consumer: holding 1 of 3 licence-server permits\n");
      else
        std::printf("consumer: licence-server: all 3 permits taken\n");
    }
    return 0;
  } catch (const dlock::error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
