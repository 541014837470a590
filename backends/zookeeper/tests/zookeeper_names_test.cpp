// zookeeper://'s lock names against a real server (DLOCK_ZOOKEEPER_URI) and kazoo: a name is the
// path Curator and kazoo use below the URI's path; what ZooKeeper cannot store is hashed; a name
// written as an absolute ZooKeeper path is refused, saying what to write instead.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "dlock_test/support.hpp"
#include "name_mapping.hpp"
#include "sequence.hpp"
#include "zk_test_support.hpp"

namespace zk = dlock::zookeeper;

namespace {

using namespace dlock::zookeeper::testing;  // zk_test_support.hpp

// `uri` ("zookeeper://h:p/dlock") with its path replaced by `root` ("" for none).
std::string with_root(const std::string& uri, const std::string& root) {
  const auto hosts_end = uri.find('/', uri.find("://") + 3);
  return uri.substr(0, hosts_end) + root;
}

// What a backend says about `name`: the code of make_lock, make_rw_lock and make_semaphore (all
// three must agree) and the message of the first.
struct verdict {
  std::error_code code;
  std::string message;
};
verdict made(dlock::backend& b, const std::string& name) {
  verdict v;
  std::error_code rw_code, semaphore_code;
  auto lock = b.make_lock(name, v.code);
  v.message = dlock::last_error_message();
  auto rw = b.make_rw_lock(name, rw_code);
  auto semaphore = b.make_semaphore(name, 2, semaphore_code);
  EXPECT_EQ(rw_code, v.code) << "make_rw_lock('" << name << "') and make_lock disagree";
  EXPECT_EQ(semaphore_code, v.code) << "make_semaphore('" << name << "') and make_lock disagree";
  return v;
}

}  // namespace

TEST(zookeeper_names, ValidPathsAreUsedAsCuratorUsesThemOnlyTheRestIsHashed) {
  EXPECT_EQ(zk::parent_path("/dlock", "orders/42"), "/dlock/orders/42");
  EXPECT_EQ(zk::parent_path("/dlock", "job.daily"), "/dlock/job.daily");
  EXPECT_EQ(zk::parent_path("/dlock", "a b:c-d_e"), "/dlock/a b:c-d_e");
  EXPECT_EQ(zk::parent_path("/dlock", "caf\xc3\xa9/\xe6\x97\xa5"), "/dlock/caf\xc3\xa9/\xe6\x97\xa5");  // UTF-8 is fine
  EXPECT_EQ(zk::parent_path("", "orders/42"), "/orders/42");
  EXPECT_EQ(zk::parent_path("/dlock", "zookeeper"), "/dlock/zookeeper");
  const auto hashed = [](const std::string& root, const std::string& name) {
    const auto p = zk::parent_path(root, name);
    return p.starts_with(root + "/#") && p.find('/', root.size() + 1) == std::string::npos &&
           p.ends_with(dlock::spi::sha256_hex(name));
  };
  // What ZooKeeper (PathUtils.validatePath) cannot store: empty components, "." and "..",
  // control characters, U+007F-U+009F, U+D800-U+F8FF, U+FFF0-U+FFFF and beyond U+FFFF, bad UTF-8.
  for (const std::string& bad :
       std::vector<std::string>{"trail/", "a//b", ".", "..", "a/./b", "a/../b", "./a", std::string("nul\0x", 5),
                                "tab\tx", "del\x7f", "c1\xc2\x85", "private\xee\x80\x80", "fff0\xef\xbf\xb0",
                                "emoji\xf0\x9f\x98\x80", "bad\xff", "cut\xc3", "overlong\xc0\xaf"})
    EXPECT_TRUE(hashed("/dlock", bad)) << "'" << bad << "' -> " << zk::parent_path("/dlock", bad);
  EXPECT_TRUE(hashed("", "zookeeper")) << "the server's own /zookeeper tree: " << zk::parent_path("", "zookeeper");
  EXPECT_TRUE(hashed("", "zookeeper/quota"));
  // A folder that reads as a lock node would be a contender of the name above it that never leaves.
  EXPECT_TRUE(hashed("/dlock", "orders/_c_x-lock-0000000001"));
  EXPECT_TRUE(hashed("/dlock", "orders/k__lock__0000000001"));
  // No collisions: a name that looks like a hashed form is hashed itself.
  const auto other = zk::parent_path("/dlock", "a/../b");
  const auto look_alike = other.substr(std::string("/dlock/").size());
  EXPECT_NE(zk::parent_path("/dlock", look_alike), other);
  EXPECT_TRUE(hashed("/dlock", look_alike));
  EXPECT_NE(zk::parent_path("/dlock", "a"), zk::parent_path("/dlock", "a/"));
  // A name hashed before keeps its folder (a service upgraded in place still meets its old peers).
  EXPECT_EQ(zk::parent_path("/dlock", "tab\tx"), "/dlock/#tab." + dlock::spi::sha256_hex("tab\tx"));
}

// kazoo takes the path as it is: a kazoo Lock on "<root>/orders/42" and dlock on "orders/42" (the
// README's first example) are one lock; so are "<root>/job.daily" and "job.daily".
TEST(zookeeper_names, KazooOnTheCuratorPathContendsWithUs) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  auto zh = raw_connect(uri);
  const auto tag = unique_name("names");
  for (const auto& name : {tag + "/orders/42", tag + ".job.daily"}) {
    SCOPED_TRACE(name);
    const auto path = root_of(uri) + "/" + name;
    EXPECT_EQ(zk::parent_path(root_of(uri), name), path);
    auto held = b->make_lock(name)->try_acquire();
    ASSERT_TRUE(held);
    EXPECT_EQ(children(zh.get(), path).size(), 1u) << "our node is not in " << path;
    // kazoo queues behind our node before we release: an empty folder is a container the server
    // removes within a second, which could happen between kazoo's ensure_path and its create.
    kazoo_peer peer(uri, path, "lock");
    wait_for_children(zh.get(), path, 2);
    held.release();
    ASSERT_TRUE(peer.wait_for("acquired", 30s));
    auto lock = b->make_lock(name);
    EXPECT_FALSE(lock->try_acquire()) << "kazoo holds " << path << ", yet we got '" << name << "' too";
    peer.release();
    EXPECT_TRUE(lock->try_acquire_for(20s));
  }
}

// A name starting with '/' is how a Curator or kazoo user writes the path of a lock. Hashed, it
// was a lock of its own that no peer on that path contends with (a CLI run was granted while
// kazoo's Lock held the path): refused instead, saying what to write.
TEST(zookeeper_names, AbsolutePathsAreRefusedSayingWhatToWrite) {
  const auto says = [](const std::string& root, const std::string& name, const std::string& expected) {
    const auto why = zk::refusal(root, name);
    EXPECT_NE(why.find(expected), std::string::npos) << "'" << name << "' under '" << root << "': " << why;
  };
  EXPECT_EQ(zk::refusal("/dlock", "x/abs"), "");
  EXPECT_EQ(zk::refusal("", "x/abs"), "");
  EXPECT_EQ(zk::refusal("", "#x"), "");
  says("", "/x/abs", "for the node Curator and kazoo lock as '/x/abs', write 'x/abs'");
  says("/dlock", "/x/abs", "for the node Curator and kazoo lock as '/dlock/x/abs', write 'x/abs'");
  says("/dlock", "/x/abs", "for '/x/abs' itself, open a URI without a path (zookeeper://host:port) and write 'x/abs'");
  says("/dlock", "/dlock/x", "for the node Curator and kazoo lock as '/dlock/x', write 'x'");
  for (const std::string name : {"/", "//", "/a//b", "/zookeeper"})
    says("", name, "write the name without the leading '/'");

  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  for (const std::string& name : std::vector<std::string>{"/x/abs", "/", root_of(uri) + "/x"}) {
    const auto v = made(*b, name);
    EXPECT_EQ(v.code, dlock::errc::invalid_name) << "'" << name << "' was accepted";
    EXPECT_NE(v.message.find("starts with '/'"), std::string::npos) << v.message;
  }
  EXPECT_FALSE(made(*b, "x/abs").code);
}

// Both ways against kazoo, with a URI path and without: kazoo's Lock on an absolute path P and
// dlock's lock of the name its refusal names are one lock.
TEST(zookeeper_names, TheNameTheRefusalNamesContendsWithKazooOnThePath) {
  const auto base = server_uri("DLOCK_ZOOKEEPER_URI");
  for (const auto& uri : {base, with_root(base, "")}) {
    SCOPED_TRACE(uri);
    auto b = dlock::open(uri);
    const auto tag = unique_name("abs");
    const auto path = root_of(uri) + "/" + tag + "/abs";  // what the kazoo user writes
    const auto refused = made(*b, path);
    ASSERT_EQ(refused.code, dlock::errc::invalid_name) << "'" << path << "' was accepted";
    const auto name = tag + "/abs";
    ASSERT_NE(refused.message.find("write '" + name + "'"), std::string::npos) << refused.message;
    ASSERT_EQ(zk::parent_path(root_of(uri), name), path);

    {  // kazoo holds the path: dlock's name is held.
      kazoo_peer peer(uri, path, "lock");
      ASSERT_TRUE(peer.wait_for("acquired", 30s));
      auto lock = b->make_lock(name);
      EXPECT_FALSE(lock->try_acquire()) << "kazoo holds " << path << ", yet '" << name << "' was granted";
      peer.release();
      ASSERT_TRUE(peer.wait_for("released", 30s));
      EXPECT_TRUE(lock->try_acquire_for(20s)) << "'" << name << "' stayed held after kazoo released " << path;
    }
    {  // dlock holds the name: kazoo (seeing Curator's node names) waits for its release.
      auto held = b->make_lock(name)->try_acquire();
      ASSERT_TRUE(held);
      kazoo_peer peer(uri, path, "lock", {"-lock-"});
      auto zh = raw_connect(uri);
      wait_for_children(zh.get(), path, 2);  // kazoo's node queued behind ours
      std::this_thread::sleep_for(300ms);
      const double released_at = steady_seconds();
      held.release();
      const auto acquired = peer.wait_for("acquired", 30s);
      ASSERT_TRUE(acquired);
      EXPECT_GT(*acquired, released_at) << "kazoo was granted " << path << " while dlock held '" << name << "'";
    }
  }
}

// The URI's path is the root of every lock: one ZooKeeper cannot store is refused at open, not by
// every acquire as a backend error ("bad arguments").
TEST(zookeeper_names, AUriPathZooKeeperCannotStoreIsRefusedAtOpen) {
  EXPECT_TRUE(zk::usable_root(""));
  EXPECT_TRUE(zk::usable_root("/dlock/svc.a"));
  for (const std::string root : {"/a//b", "/a/./b", "/a/..", "/tab\tx", "//"})
    EXPECT_FALSE(zk::usable_root(root)) << root;
  const auto base = server_uri("DLOCK_ZOOKEEPER_URI");
  for (const std::string path : {"/a//b", "/a/./b", "/tab%09x"}) {
    try {
      (void)dlock::open(with_root(base, path));
      ADD_FAILURE() << path << " was accepted";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), dlock::errc::invalid_uri) << e.what();
      EXPECT_NE(std::string(e.what()).find("is not a ZooKeeper path"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW((void)dlock::open(with_root(base, "/dlock/")));  // a trailing '/' is dropped
}
