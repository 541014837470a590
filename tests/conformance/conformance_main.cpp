// Instantiates the suite over the joined targets minus DLOCK_TEST_EXCLUDE. No
// GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST: a run with no target fails.
#include <cstring>
#include <iostream>

#include "conformance_test.hpp"

namespace dlock::conformance {
namespace {

// Every joined target is instantiated, whatever DLOCK_TEST_EXCLUDE says: ctest caches the
// PRE_TEST test list until the executable changes, so the list must not depend on the
// environment. An excluded target's tests are reported as skipped (visible in ctest's summary).
const std::vector<conformance_target>& all_targets() { return dlock::testing::joined_targets(); }

}  // namespace

void Lock::SetUp() {
  if (dlock::testing::is_excluded(GetParam(), dlock::testing::excluded_names_from_environment()))
    GTEST_SKIP() << "conformance: excluded " << label() << " (DLOCK_TEST_EXCLUDE)";
  const auto resolved = dlock::testing::resolve(GetParam());
  ASSERT_TRUE(resolved.uri) << resolved.error;
  uri_ = *resolved.uri;
  std::error_code ec;
  backend_ = dlock::default_registry().open(uri_, {}, ec);
  ASSERT_FALSE(ec) << label() << ": cannot open the backend: " << dlock::last_error_message();
  ASSERT_TRUE(backend_);
  scheme_ = dlock::uri::parse(uri_).scheme();
  caps_ = backend_->caps();
}

lock_options Lock::options(std::chrono::milliseconds ttl, bool watchdog) const {
  auto o = backend_->default_options();
  o.ttl = ttl;
  o.watchdog = watchdog;
  o.renew_every.reset();
  o.poll = {1ms, 20ms};
  return o;
}

const dlock::testing::backend_hooks* Lock::hooks() const {
  const auto* h = dlock::testing::find_hooks(scheme_);
  if (h == nullptr)
    ADD_FAILURE() << label() << ": no conformance hooks are registered for scheme '" << scheme_
                  << "': add DLOCK_TEST_HOOKS(\"" << scheme_ << "\", {.break_lock=..., .is_held_on_server=...}) "
                  << "in the backend's tests/hooks.cpp and list it as HOOK_SOURCES in dlock_join_conformance";
  return h;
}

INSTANTIATE_TEST_SUITE_P(, Lock, ::testing::ValuesIn(all_targets()),
                         [](const ::testing::TestParamInfo<conformance_target>& info) { return info.param.label; });

}  // namespace dlock::conformance

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto excluded = dlock::testing::excluded_names_from_environment();
  bool any = false;
  for (const auto& t : dlock::testing::joined_targets()) {
    if (!dlock::testing::is_excluded(t, excluded)) continue;
    any = true;
    std::cerr << "conformance: excluded " << t.label << " (DLOCK_TEST_EXCLUDE)\n";
  }
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--print-exclusions") == 0) {
      if (!any) std::cout << "conformance: nothing excluded (DLOCK_TEST_EXCLUDE is empty)\n";
      for (const auto& t : dlock::testing::joined_targets())
        if (dlock::testing::is_excluded(t, excluded))
          std::cout << "conformance: excluded " << t.label << " (DLOCK_TEST_EXCLUDE)\n";
      return 0;
    }
  return RUN_ALL_TESTS();
}
