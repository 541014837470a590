// How registry::open finds a scheme's run-time module: through the module's index
// (libdlock_<name>.schemes), loading that module only; and every backend module built registers
// exactly the schemes its index lists (dlock_add_backend's SCHEMES), so the index cannot lie.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"

namespace {

std::vector<std::string> registered_schemes(const dlock::registry& r) {
  std::vector<std::string> schemes;
  for (const auto& info : r.list()) schemes.push_back(info.scheme);
  return schemes;  // list() is sorted by scheme
}

TEST(ModuleLookup, ASchemeWithoutAFileOfItsNameLoadsTheModuleItsIndexNamesAndNoOther) {
  dlock::registry r;  // no builtins
  r.add_plugin_dir(DLOCK_TEST_MODULE_DIR);
  auto backend = r.open("test-family+second://ns");
  ASSERT_TRUE(backend);
  EXPECT_TRUE(r.contains("test-family")) << "the whole module registered";
  EXPECT_FALSE(r.contains("test-bystander")) << "open() loaded a module that does not have the scheme";
  EXPECT_TRUE(backend->make_lock("a")->try_acquire());
}

TEST(ModuleLookup, AnUnknownSchemeLoadsNoModuleAndNamesTheSchemesTheModulesHave) {
  dlock::registry r;
  r.add_plugin_dir(DLOCK_TEST_MODULE_DIR);
  std::error_code ec;
  EXPECT_FALSE(r.open("nosuch://ns", {}, ec));
  EXPECT_EQ(ec, dlock::errc::unknown_scheme);
  EXPECT_TRUE(registered_schemes(r).empty()) << "an unknown scheme loaded modules";
  const std::string message = dlock::last_error_message();
  EXPECT_NE(message.find("libdlock_nosuch.so"), std::string::npos) << message;
  EXPECT_NE(message.find("test-bystander"), std::string::npos) << message;
  EXPECT_NE(message.find("test-family+second"), std::string::npos) << message;
}

TEST(ModuleLookup, EveryBackendModuleRegistersExactlyTheSchemesOfItsIndex) {
  int modules = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DLOCK_TEST_BACKEND_MODULE_DIR)) {
    if (entry.path().extension() != ".schemes") continue;
    ++modules;
    std::vector<std::string> indexed;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) indexed.push_back(line);
    std::sort(indexed.begin(), indexed.end());
    auto module = entry.path();
    module.replace_extension(".so");
    dlock::registry r;
    r.load_plugin(module);
    EXPECT_EQ(registered_schemes(r), indexed)
        << module << " registers other schemes than the SCHEMES of its dlock_add_backend";
  }
  EXPECT_GE(modules, 2) << "memory and file are always built";
}

}  // namespace
