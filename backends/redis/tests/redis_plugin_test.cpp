// The redis family as a run-time module: libdlock_redis.so registers ten schemes (and the four
// unsafe ones), and a registry without builtins finds each of them, including those with no file of
// their own name
// (libdlock_redlock.so does not exist): open() then loads the plugin folder's modules and looks again.
#include <gtest/gtest.h>

#include <string>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"

namespace {

using dlock::testing::server_uri;

TEST(RedisPlugin, EverySchemeOfTheModuleIsFoundWithoutAFileOfItsName) {
  const auto redlock = server_uri("DLOCK_REDLOCK_URI");
  const auto redis = server_uri("DLOCK_REDIS_URI");
  dlock::registry plugins;  // no builtins
  plugins.add_plugin_dir(DLOCK_TEST_PLUGIN_DIR);
  EXPECT_FALSE(plugins.contains("redlock"));
  // wait_after_restart=false: the servers may have just been restarted by the fault tests.
  auto backend = plugins.open(redlock + "?wait_after_restart=false");
  ASSERT_TRUE(backend);
  for (const char* scheme :
       {"redis", "redis+reentrant", "redis+fair", "redlock", "redis+sentinel", "redis+reentrant+sentinel",
        "redis+fair+sentinel", "redis+cluster", "redis+reentrant+cluster", "redis+fair+cluster",
        "redis+unsafe-setnx-expire", "redis+unsafe-getset", "redis+unsafe-del", "redis+unsafe-incr"})
    EXPECT_TRUE(plugins.contains(scheme)) << scheme << " was not registered by loading libdlock_redis.so";
  EXPECT_TRUE(backend->make_lock("plugin-redlock")->try_acquire());
  auto fair = plugins.open("redis+fair" + redis.substr(redis.find("://")) + "?wait_after_restart=false");
  EXPECT_TRUE(fair->make_lock("plugin-fair")->try_acquire());
}

TEST(RedisPlugin, AnUnknownSchemeIsStillNamedWithWhereModulesAreLookedFor) {
  dlock::registry plugins;
  plugins.add_plugin_dir(DLOCK_TEST_PLUGIN_DIR);
  std::error_code ec;
  EXPECT_FALSE(plugins.open("nosuch://127.0.0.1", {}, ec));
  EXPECT_EQ(ec, dlock::errc::unknown_scheme);
  const std::string message = dlock::last_error_message();
  EXPECT_NE(message.find("libdlock_nosuch.so"), std::string::npos) << message;
  EXPECT_NE(message.find("redlock"), std::string::npos) << "the schemes loaded from modules are listed: " << message;
}

}  // namespace
