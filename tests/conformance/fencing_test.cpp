#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, FencingTokensExactlyAsDeclared) {
  const auto name = dlock::testing::unique_name("fencing");
  auto a = make(name), b = make(name);
  std::optional<std::uint64_t> previous;
  for (int i = 0; i < 6; ++i) {
    auto held = (i % 2 ? b : a)->try_acquire();
    ASSERT_TRUE(held);
    const auto token = held.fencing_token();
    if (!has(capability::fencing)) {
      EXPECT_FALSE(token) << "fencing_token() must be nullopt without the fencing capability";
    } else {
      ASSERT_TRUE(token) << "declared fencing, but no token";
      if (previous) {
        EXPECT_GT(*token, *previous) << "fencing tokens must strictly increase per grant";
      }
      previous = token;
    }
    held.release();
  }
}

}  // namespace dlock::conformance
