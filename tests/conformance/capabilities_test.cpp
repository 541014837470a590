#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, CapabilitiesEqualTheRegistryDeclaration) {
  bool found = false;
  for (const auto& info : dlock::default_registry().list()) {
    if (info.scheme != scheme_) continue;
    found = true;
    EXPECT_EQ(caps_.to_string(), info.caps.to_string()) << label();
    EXPECT_EQ(to_string(backend_->scope()), to_string(info.scope)) << label();
  }
  EXPECT_TRUE(found) << label() << ": scheme '" << scheme_ << "' is not in the registry";
  auto lock = make(dlock::testing::unique_name("caps"));
  EXPECT_EQ(lock->caps().to_string(), caps_.to_string());
}

}  // namespace dlock::conformance
