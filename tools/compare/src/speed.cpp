#include "dlock_compare/speed.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>

#include "dlock/dlock.hpp"

namespace dlock::compare {

namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// One name's last release instant, on its own cache line: every holder of the name writes it.
struct alignas(64) name_slot {
  std::atomic<clock::rep> released_at{0};
};

struct client_result {
  latency_histogram cycles;
  latency_histogram handoffs;
  std::uint64_t grants = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t failed_acquires = 0;
};

class first_error {
 public:
  void record(const std::string& message) {
    const std::scoped_lock guard(mutex_);
    if (count_++ == 0) message_ = message;
  }
  std::uint64_t count() const { return count_; }
  const std::string& message() const { return message_; }

 private:
  std::mutex mutex_;
  std::uint64_t count_ = 0;
  std::string message_;
};

}  // namespace

speed_measurement measure_speed(const speed_run& run) {
  const auto clients = std::max<std::uint32_t>(run.clients, 1);
  const auto names = std::max<std::uint32_t>(run.names, 1);
  std::vector<name_slot> slots(names);
  std::vector<client_result> results(clients);
  first_error errors;
  std::atomic<bool> stop{false};
  std::latch ready(static_cast<std::ptrdiff_t>(clients) + 1);  // every client opened, and the timer
  clock::time_point start;
  std::latch started(1);
  std::vector<std::thread> threads;
  threads.reserve(clients);
  for (std::uint32_t c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::shared_ptr<backend> own;
      std::unique_ptr<distributed_lock> lock;
      try {
        own = run.shared_backend ? run.shared_backend : dlock::open(run.uri);
        lock = own->make_lock(run.name_prefix + std::to_string(c % names));
      } catch (const std::exception& e) {
        errors.record(e.what());
      }
      ready.count_down();
      started.wait();
      if (!lock) return;
      auto& slot = slots[c % names];
      auto& mine = results[c];
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          const auto t0 = clock::now();
          lease l;
          try {
            l = run.acquire_timeout ? lock->try_acquire_for(*run.acquire_timeout) : lock->acquire();
          } catch (const std::exception&) {
            ++mine.failed_acquires;
            throw;
          }
          if (!l) {
            ++mine.timeouts;
            if (!run.timeout_stops_the_client) continue;
            errors.record("no grant within " + std::to_string(run.acquire_timeout->count()) + " ms");
            return;
          }
          ++mine.grants;
          const auto granted = clock::now();
          const auto released = slot.released_at.load();
          if (released > t0.time_since_epoch().count())
            mine.handoffs.add(std::chrono::nanoseconds(granted.time_since_epoch().count() - released));
          slot.released_at.store(clock::now().time_since_epoch().count());
          l.release();
          mine.cycles.add(clock::now() - t0);
        }
      } catch (const std::exception& e) {
        errors.record(e.what());
      }
    });
  }
  ready.arrive_and_wait();
  start = clock::now();
  started.count_down();
  std::this_thread::sleep_for(run.duration);
  stop = true;
  for (auto& t : threads) t.join();

  speed_measurement m;
  m.clients = clients;
  m.names = names;
  m.seconds = std::chrono::duration<double>(clock::now() - start).count();
  for (const auto& r : results) {
    m.cycles.merge(r.cycles);
    m.handoffs.merge(r.handoffs);
    m.cycles_per_client.push_back(r.cycles.count());
    m.grants += r.grants;
    m.timeouts += r.timeouts;
    m.failed_acquires += r.failed_acquires;
  }
  m.errors = errors.count();
  m.first_error = errors.message();
  return m;
}

namespace {

double share_of(const speed_measurement& m, bool lowest) {
  if (m.cycles_per_client.empty() || m.cycles.count() == 0) return 0.0;
  const auto [fewest, most] = std::minmax_element(m.cycles_per_client.begin(), m.cycles_per_client.end());
  const double fair = static_cast<double>(m.cycles.count()) / static_cast<double>(m.cycles_per_client.size());
  return static_cast<double>(lowest ? *fewest : *most) / fair;
}

}  // namespace

double speed_measurement::lowest_share() const { return share_of(*this, true); }
double speed_measurement::highest_share() const { return share_of(*this, false); }

backend_speed measure_backend_speed(const std::string& uri, const std::string& name_prefix,
                                    std::chrono::milliseconds duration_per_point) {
  const auto point = [&](std::uint32_t clients, std::uint32_t names, const char* tag) {
    speed_run run;
    run.uri = uri;
    run.name_prefix = name_prefix + tag + "/";
    run.clients = clients;
    run.names = names;
    run.duration = duration_per_point;
    return measure_speed(run);
  };
  backend_speed s;
  s.one_client = point(1, 1, "one");
  s.many_clients = point(speed_clients, speed_clients, "many");
  s.contended = point(speed_clients, 1, "contended");
  return s;
}

std::chrono::milliseconds backend_speed_length(std::chrono::milliseconds duration_per_point) {
  return 3 * (duration_per_point + 300ms);  // three points, each with its clients' connections to open
}

std::string cpu_placement() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::string cpus;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    // Ranges, as taskset -c prints them: "0-1", "0,2-3".
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &set)) continue;
      int last = cpu;
      while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
      cpus += (cpus.empty() ? "" : ",") + std::to_string(cpu) + (last > cpu ? "-" + std::to_string(last) : "");
      cpu = last;
    }
  }
  if (cpus.empty()) cpus = "unknown";
  return "client threads on CPUs " + cpus + " of " + std::to_string(online) +
         " online (this process's affinity; threads not pinned further); the servers run on the same host";
}

}  // namespace dlock::compare
