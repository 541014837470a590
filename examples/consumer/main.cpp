// A small service using dlock as an installed package: a std::unique_lock with try_lock_for over
// a distributed lock, printing the fencing token it got.
#include <chrono>
#include <cstdio>
#include <mutex>

#include "dlock/dlock.hpp"
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
    return 0;
  } catch (const dlock::error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
