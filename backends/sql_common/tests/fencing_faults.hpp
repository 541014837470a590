#pragma once
// The fencing property across server faults, shared by the PostgreSQL and MySQL backend tests:
// a grant's token is larger than every token handed out before it for that name, whatever
// happened to the previous holder.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"

namespace dlock::sql::testing {

// Call once the holder of `first_token` on `name` has been taken from it on the server (its
// session or connection killed, `how` says which) or abandoned: the next grant, from a backend
// `open_backend` makes, must come within 20 s with a higher token; then the server (`server`, the
// launcher's process name) is restarted while that grant is held, and the grant after the
// restart must have a higher token again.
inline void expect_tokens_rise_after_a_kill_and_a_restart(
    const std::string& name, std::uint64_t first_token,
    const std::function<std::shared_ptr<dlock::backend>()>& open_backend, const std::string& server,
    const std::string& how) {
  using namespace std::chrono_literals;
  auto next_backend = open_backend();
  auto second = next_backend->make_lock(name)->try_acquire_for(20s);
  ASSERT_TRUE(second) << "the lock was never freed after the holder's " << how;
  ASSERT_TRUE(second.fencing_token());
  EXPECT_GT(*second.fencing_token(), first_token) << "a token was handed out twice after a " << how;

  {  // the server restarted while `second` holds the lock
    dlock::testing::stopped_server restart(server);
    ASSERT_TRUE(restart.stopped()) << "could not stop " << server << " through $DLOCK_SERVERS";
    ASSERT_TRUE(restart.start()) << "could not start " << server << " again through $DLOCK_SERVERS";
  }
  auto after_restart = open_backend();
  auto third = after_restart->make_lock(name)->try_acquire_for(20s);
  ASSERT_TRUE(third) << "no grant after the restart";
  ASSERT_TRUE(third.fencing_token());
  EXPECT_GT(*third.fencing_token(), *second.fencing_token()) << "a token was handed out twice across a restart";
}

}  // namespace dlock::sql::testing
