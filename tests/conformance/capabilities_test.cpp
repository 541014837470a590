#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, CapabilitiesEqualTheRegistryDeclaration) {
  bool found = false;
  for (const auto& info : dlock::default_registry().list()) {
    if (info.scheme != scheme_) continue;
    found = true;
    // The registry declares a scheme's default capabilities; `fair=true` adds `fair` where a
    // backend offers an opt-in fair mode (the SQL unique-index schemes), which waits for a set of
    // names member by member (no atomic_set), and nothing else may differ.
    auto declared = info.caps;
    if (dlock::uri::parse(uri_).get_bool("fair").value_or(false))
      declared = declared.with(capability::fair).without(capability::atomic_set);
    EXPECT_EQ(caps_.to_string(), declared.to_string()) << label();
    EXPECT_EQ(to_string(backend_->scope()), to_string(info.scope)) << label();
  }
  EXPECT_TRUE(found) << label() << ": scheme '" << scheme_ << "' is not in the registry";
  // A lock's are the mutex's: the backend's, less the bits that say which other primitives it makes.
  const auto mutex_only = [](capabilities c) {
    return c.without(capability::read_write).without(capability::semaphore).without(capability::writer_preferred);
  };
  auto lock = make(dlock::testing::unique_name("caps"));
  EXPECT_EQ(mutex_only(lock->caps()).to_string(), mutex_only(caps_).to_string());
}

}  // namespace dlock::conformance
