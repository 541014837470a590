#pragma once
// The fixture of the reader-writer lock's and the semaphore's properties (shared_primitives_test,
// one_name_test), and the helpers they share: threads, and an occupancy record of who is inside.
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conformance_test.hpp"
#include "dlock_test/high_water.hpp"

namespace dlock::conformance {

using dlock::testing::raise_to;

// Runs body(t) for t in [0, threads) on threads of their own and joins them; an exception out of a
// body is a test failure. Returns how many bodies threw.
inline int run_threads(int threads, const std::function<void(int)>& body) {
  std::atomic<int> errors{0};
  std::vector<std::thread> spawned;
  for (int t = 0; t < threads; ++t)
    spawned.emplace_back([&, t] {
      try {
        body(t);
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  for (auto& s : spawned) s.join();
  return errors.load();
}

// Records how many holders of each kind are inside at once.
struct occupancy {
  std::atomic<int> readers{0}, writers{0}, max_readers{0}, violations{0};
  void enter(access side) {
    if (side == access::write) {
      if (++writers != 1 || readers.load() != 0) ++violations;
    } else {
      raise_to(max_readers, ++readers);
      if (writers.load() != 0) ++violations;
    }
  }
  void leave(access side) { side == access::write ? --writers : --readers; }
};

// One turn inside: a writer (or a name's mutex holder) does a read-modify-write of `counter` that
// loses updates when writers overlap; a reader stays `read_hold`. `inside` records who was in at once.
inline void rmw_turn(occupancy& inside, std::atomic<int>& counter, access side, std::chrono::microseconds read_hold) {
  inside.enter(side);
  if (side == access::write) {
    const int v = counter.load(std::memory_order_relaxed);  // lossy on purpose
    std::this_thread::sleep_for(100us);
    counter.store(v + 1, std::memory_order_relaxed);
  } else {
    std::this_thread::sleep_for(read_hold);
  }
  inside.leave(side);
}

class SharedPrimitives : public Lock {
 protected:
  bool offers_rw() const { return has(capability::read_write); }
  // For the properties of a primitive the backend does not make: it must refuse it (not_supported),
  // which is then all there is to show. True when refused as it should be.
  bool refuses_rw() const {
    if (offers_rw()) return false;
    std::error_code ec;
    EXPECT_FALSE(backend_->make_rw_lock("refused", ec));
    EXPECT_EQ(ec, make_error_code(errc::not_supported)) << label() << " neither declares nor refuses read_write";
    return true;
  }
  bool refuses_semaphore() const {
    if (offers_semaphore()) return false;
    std::error_code ec;
    EXPECT_FALSE(backend_->make_semaphore("refused", 2, ec));
    EXPECT_EQ(ec, make_error_code(errc::not_supported)) << label() << " neither declares nor refuses semaphore";
    return true;
  }
  bool offers_semaphore() const { return has(capability::semaphore); }
  bool rw_has(capability c) const { return backend_->rw_caps().has(c); }
  bool semaphore_has(capability c) const { return backend_->semaphore_caps().has(c); }
  std::unique_ptr<rw_lock> rw(const std::string& name, lock_options o) const {
    return backend_->make_rw_lock(name, std::move(o));
  }
  std::unique_ptr<rw_lock> rw(const std::string& name) const { return rw(name, options()); }
  std::unique_ptr<semaphore> sem(const std::string& name, std::uint32_t max, lock_options o) const {
    return backend_->make_semaphore(name, max, std::move(o));
  }
  std::unique_ptr<semaphore> sem(const std::string& name, std::uint32_t max) const { return sem(name, max, options()); }
  // The lock objects outlive their leases' checks.
  template <class T>
  T* keep(std::unique_ptr<T> object) {
    auto* raw = object.get();
    kept_.push_back(std::shared_ptr<void>(std::move(object)));
    return raw;
  }
  std::vector<std::shared_ptr<void>> kept_;

  std::filesystem::path fresh_dir(const std::string& prefix) const {
    const auto dir = std::filesystem::temp_directory_path() / dlock::testing::unique_name(prefix);
    std::filesystem::create_directories(dir);
    return dir;
  }
};

}  // namespace dlock::conformance
