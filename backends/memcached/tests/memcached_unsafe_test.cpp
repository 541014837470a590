// memcached+unsafe-delete:// (src/unsafe_delete.hpp) against a real server (DLOCK_MEMCACHED_URI):
// a slow holder's plain `delete` removes its successor's lock, so a third client gets in while the
// successor holds; memcached:// in the same scenario answers not_owner and keeps the successor.
// The server is read directly with libmemcached, so the test does not trust the code under test.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "client_pool.hpp"
#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/slow_holder.hpp"
#include "dlock_test/support.hpp"

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
namespace mc = dlock::memcached;

std::string server_uri() { return dlock::testing::server_uri("DLOCK_MEMCACHED_URI"); }

std::string uri_of(std::string_view scheme, std::string_view query) {
  return dlock::testing::with_query(dlock::testing::with_scheme(server_uri(), scheme), query);
}

std::shared_ptr<dlock::backend> open_uri(const std::string& text) { return dlock::default_registry().open(text); }

std::string unique(std::string_view what) {
  return dlock::testing::unique_name("dlock-test-unsafe-" + std::string(what));
}

// The lock item of a name, read and finally deleted directly (both schemes use the "dlock:" layout).
class raw_item {
 public:
  explicit raw_item(std::string name)
      : keys_(mc::keys_for("dlock:", name)), m_(mc::make_handle(dlock::uri::parse(server_uri()), 2s, 2s)) {}
  ~raw_item() {
    (void)memcached_delete_by_key(m_.get(), keys_.group.data(), keys_.group.size(), keys_.lock.data(),
                                  keys_.lock.size(), 0);
  }
  raw_item(const raw_item&) = delete;
  raw_item& operator=(const raw_item&) = delete;

  bool exists() {
    memcached_return_t rc;
    auto it = mc::gets(m_.get(), keys_, keys_.lock, rc);
    EXPECT_TRUE(rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND) << memcached_strerror(m_.get(), rc);
    return it.has_value();
  }
  bool wait_until_gone(milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (exists()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }

 private:
  mc::key_layout keys_;
  mc::memc_ptr m_;
};

using dlock::testing::slow_holder_outcome;

// A's grant (ttl 1 s) runs out while A still works; B is granted; A releases; C tries.
slow_holder_outcome slow_holder_releases_after_expiry(const std::string& uri, const std::string& name) {
  raw_item item(name);
  auto b = open_uri(uri);
  return dlock::testing::slow_holder_releases_after_expiry(
      *b, name, 1s, [&] { EXPECT_TRUE(item.wait_until_gone(10s)) << "A's item did not expire"; });
}

TEST(MemcachedUnsafe, RefusedUnlessTheUriSaysUnsafeTrue) {
  for (const char* query : {"", "unsafe=false"}) {
    try {
      (void)open_uri(uri_of("memcached+unsafe-delete", query));
      ADD_FAILURE() << "opened without unsafe=true";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), dlock::errc::invalid_uri) << e.what();
      EXPECT_NE(std::string(e.what()).find("UNSAFE"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("unsafe=true"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(open_uri(uri_of("memcached+unsafe-delete", "unsafe=true")));
  try {
    (void)open_uri("memcached+unsafe-delete://dlock:S3cr3tPw@" + server_uri().substr(server_uri().find("://") + 3));
    ADD_FAILURE() << "opened without unsafe=true";
  } catch (const dlock::error& e) {
    EXPECT_EQ(std::string(e.what()).find("S3cr3tPw"), std::string::npos)
        << "the refusal shows the password: " << e.what();
  }
  bool listed = false;
  for (const auto& info : dlock::default_registry().list()) {
    if (info.scheme != "memcached+unsafe-delete") continue;
    listed = true;
    EXPECT_TRUE(info.summary.starts_with("UNSAFE:")) << info.summary;
    EXPECT_EQ(info.caps.to_string(), "expiring");
  }
  EXPECT_TRUE(listed);
}

TEST(MemcachedUnsafe, DeleteReleaseOfAnExpiredHolderDeletesTheSuccessorsLock) {
  const auto out =
      slow_holder_releases_after_expiry(uri_of("memcached+unsafe-delete", "unsafe=true"), unique("delete"));
  EXPECT_FALSE(out.a_release) << "A's plain delete found an item to delete (B's), so it reports success: "
                              << out.a_release.message();
  EXPECT_TRUE(out.c_granted_while_b_holds) << "C was not granted while B held: no overlap";
}

TEST(MemcachedUnsafe, SafeSchemeReleaseOfAnExpiredHolderIsNotOwnerAndKeepsTheSuccessor) {
  // restart_delay=off: a freshly started test server must not refuse the grants (memcached_test covers it).
  const auto out = slow_holder_releases_after_expiry(uri_of("memcached", "restart_delay=off"), unique("safe"));
  EXPECT_EQ(out.a_release, dlock::errc::not_owner) << out.a_release.message();
  EXPECT_FALSE(out.c_granted_while_b_holds) << "C was granted while B held";
}

}  // namespace
