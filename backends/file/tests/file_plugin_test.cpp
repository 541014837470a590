// file:// as a run-time module: a registry without builtins finds the scheme by loading
// libdlock_file.so, and a lock taken through the module excludes one taken through the statically
// linked backend on the same directory (the kernel's flock is the only shared state).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "dlock/dlock.hpp"

namespace {

TEST(FilePlugin, SchemeIsFoundByLoadingTheModuleAndExcludesTheStaticBackend) {
  const std::string uri = "file:///tmp/dlock-file-plugin-test-" + std::to_string(::getpid());
  dlock::registry plugins;  // no builtins
  EXPECT_FALSE(plugins.contains("file"));
  plugins.add_plugin_dir(DLOCK_TEST_PLUGIN_DIR);
  auto loaded = plugins.open(uri);
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(plugins.contains("file")) << "open() must have loaded libdlock_file.so from " << DLOCK_TEST_PLUGIN_DIR;

  auto linked = dlock::default_registry().open(uri);  // the statically linked backend
  EXPECT_EQ(loaded->caps(), linked->caps());

  auto via_module = loaded->make_lock("shared")->try_acquire();
  ASSERT_TRUE(via_module);
  auto linked_lock = linked->make_lock("shared");
  EXPECT_FALSE(linked_lock->try_acquire()) << "module and static backend must exclude each other";
  via_module.release();
  auto via_static = linked_lock->try_acquire();
  ASSERT_TRUE(via_static);
  EXPECT_FALSE(loaded->make_lock("shared")->try_acquire());
  EXPECT_GT(*via_static.fencing_token(), *via_module.fencing_token());
  via_static.release();
  std::filesystem::remove_all(uri.substr(std::string_view("file://").size()));
}

}  // namespace
