#pragma once
// The conformance fixture: one TEST_P suite (`Lock`) over every joined backend target.
// Capabilities come from the opened backend and are asserted both ways.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/hooks.hpp"
#include "dlock_test/support.hpp"

namespace dlock::testing {
// gtest prints the parameter in listings and failures; show the label, never the URI (found by ADL).
inline void PrintTo(const conformance_target& t, std::ostream* os) { *os << t.label; }
}  // namespace dlock::testing

namespace dlock::conformance {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using dlock::testing::conformance_target;

// Generous slack for "within ttl + margin": a correctness bound, not a speed assertion.
inline constexpr auto margin = 3s;

// Waits up to `bound` for each worker process: each must finish, never meet another holder inside
// (exit status 3, said as `overlap`) and succeed. Run under ASSERT_NO_FATAL_FAILURE.
inline void expect_workers_succeed(const std::vector<std::unique_ptr<dlock::testing::child_process>>& workers,
                                   std::chrono::seconds bound, const char* overlap) {
  for (const auto& c : workers) {
    const auto rc = c->wait(bound);
    ASSERT_TRUE(rc) << "worker did not finish in " << bound.count() << "s";
    EXPECT_NE(*rc, 3) << overlap;
    EXPECT_EQ(*rc, 0) << "worker failed (see its stderr above)";
  }
}

class Lock : public ::testing::TestWithParam<conformance_target> {
 protected:
  void SetUp() override;

  bool has(capability c) const { return caps_.has(c); }
  const std::string& label() const { return GetParam().label; }
  // Options with quick polling (tests wait on contention a lot) and the given ttl.
  lock_options options(std::chrono::milliseconds ttl = 1000ms, bool watchdog = true) const;
  std::unique_ptr<distributed_lock> make(const std::string& name) const { return backend_->make_lock(name, options()); }
  std::unique_ptr<distributed_lock> make(const std::string& name, lock_options o) const {
    return backend_->make_lock(name, std::move(o));
  }
  // The backend's hooks, or nullptr after recording a failure saying they are missing.
  const dlock::testing::backend_hooks* hooks() const;
  // Polls `other` until it acquires or `timeout` passes.
  static lease acquire_within(distributed_lock& other, std::chrono::milliseconds timeout) {
    return other.try_acquire_for(timeout);
  }

  std::string uri_;
  std::string scheme_;
  std::shared_ptr<backend> backend_;
  capabilities caps_;
};

}  // namespace dlock::conformance
