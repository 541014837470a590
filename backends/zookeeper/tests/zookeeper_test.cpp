// zookeeper:// against real servers: DLOCK_ZOOKEEPER_URI (one node) and, for the fault tests,
// DLOCK_ZOOKEEPER_ENSEMBLE_URI plus DLOCK_SERVERS (the native launcher, to stop and start nodes).
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"
#include "sequence.hpp"
#include "zk_lock.hpp"

using namespace std::chrono_literals;
namespace zk = dlock::zookeeper;

namespace {

std::string env_uri(const char* var) {
  const char* v = std::getenv(var);
  if (!v || !*v) {
    ADD_FAILURE() << var << " is not set: eval \"$(compose/native/dlock-servers up zookeeper zookeeper-ensemble)\"";
    return {};
  }
  return v;
}

std::string unique(std::string_view prefix) { return std::string(prefix) + "-" + dlock::spi::random_token().substr(0, 16); }

struct zh_close {
  void operator()(zhandle_t* zh) const noexcept { zookeeper_close(zh); }
};
using zh_ptr = std::unique_ptr<zhandle_t, zh_close>;

zh_ptr raw_connect(const std::string& text, const clientid_t* id = nullptr) {
  const auto u = dlock::uri::parse(text);
  std::string hosts;
  for (const auto& h : u.hosts()) hosts += (hosts.empty() ? "" : ",") + h.host + ":" + std::to_string(h.port_or(2181));
  zh_ptr zh(zookeeper_init(hosts.c_str(), nullptr, 4000, id, nullptr, 0));
  for (int i = 0; i < 400 && zoo_state(zh.get()) != ZOO_CONNECTED_STATE; ++i) std::this_thread::sleep_for(25ms);
  EXPECT_EQ(zoo_state(zh.get()), ZOO_CONNECTED_STATE);
  return zh;
}

std::vector<std::string> children(zhandle_t* zh, const std::string& path) {
  String_vector v{0, nullptr};
  std::vector<std::string> out;
  if (zoo_get_children(zh, path.c_str(), 0, &v) == ZOK)
    for (int i = 0; i < v.count; ++i) out.emplace_back(v.data[i]);
  deallocate_String_vector(&v);
  return out;
}

std::string root_of(const std::string& text) {
  auto p = dlock::uri::parse(text).path();
  while (!p.empty() && p.back() == '/') p.pop_back();
  return p;
}

void wait_for_contenders(zhandle_t* zh, const std::string& parent, std::size_t n) {
  for (int i = 0; i < 400 && zk::lock_nodes_in_order(children(zh, parent)).size() < n; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(zk::lock_nodes_in_order(children(zh, parent)).size(), n);
}

void expire(const std::string& text, const dlock::lease& l) {
  const auto id = zk::session_of(*l.state());
  ASSERT_TRUE(id);
  raw_connect(text, &*id);  // same session, closed: the server ends it
}

int launcher(const std::string& args) {
  const char* tool = std::getenv("DLOCK_SERVERS");
  if (!tool) {
    ADD_FAILURE() << "DLOCK_SERVERS is not set (the native launcher's path)";
    return -1;
  }
  return std::system((std::string(tool) + " " + args + " >/dev/null").c_str());
}

}  // namespace

TEST(zookeeper_sequence, OrderSurvivesTheCounterWrapping) {
  EXPECT_EQ(zk::sequence_of("_c_0b4a7c48-1f1d-4b1e-9d1e-0123456789ab-lock-0000000042"), 42);
  EXPECT_EQ(zk::sequence_of("x-lock--2147483648"), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(zk::sequence_of("x-lock-2147483647"), 2147483647);
  EXPECT_FALSE(zk::sequence_of("unrelated"));
  EXPECT_FALSE(zk::sequence_of("x-lock-12ab"));
  const std::vector<std::string> wrapped{"c-lock--2147483647", "a-lock-2147483646", "d-lock--2147483646",
                                         "b-lock-2147483647", "e-lock-0000000000"};
  // e (0) is far from the others: fine, still within half the ring.
  const std::vector<std::string> expected{"a-lock-2147483646", "b-lock-2147483647", "c-lock--2147483647",
                                          "d-lock--2147483646"};
  auto got = zk::lock_nodes_in_order({wrapped[0], wrapped[1], wrapped[2], wrapped[3]});
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(zk::sequence_before(2147483647, std::numeric_limits<std::int32_t>::min()));
  EXPECT_TRUE(zk::sequence_before(1, 2));
  EXPECT_FALSE(zk::sequence_before(2, 1));
}

TEST(zookeeper, NodesAreNamedAsCuratorNamesThem) {
  const auto uri = env_uri("DLOCK_ZOOKEEPER_URI");
  ASSERT_FALSE(uri.empty());
  auto b = dlock::open(uri);
  const auto name = unique("curator");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  auto zh = raw_connect(uri);
  const auto kids = children(zh.get(), zk::parent_path(root_of(uri), name));
  ASSERT_EQ(kids.size(), 1u);
  EXPECT_TRUE(std::regex_match(kids[0], std::regex("_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-[0-9]{10}")))
      << kids[0];
  held.release();
  EXPECT_TRUE(children(zh.get(), zk::parent_path(root_of(uri), name)).empty());
}

TEST(zookeeper, WaitersAreGrantedInArrivalOrder) {
  const auto uri = env_uri("DLOCK_ZOOKEEPER_URI");
  ASSERT_FALSE(uri.empty());
  auto b = dlock::open(uri);
  const auto name = unique("fifo");
  const auto parent = zk::parent_path(root_of(uri), name);
  auto zh = raw_connect(uri);
  auto first = b->make_lock(name)->acquire();
  std::mutex m;
  std::vector<int> order;
  std::vector<std::unique_ptr<dlock::distributed_lock>> locks;
  for (int i = 0; i < 3; ++i) locks.push_back(b->make_lock(name));
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto l = locks[i]->acquire();
      std::lock_guard g(m);
      order.push_back(i);
    });
    wait_for_contenders(zh.get(), parent, static_cast<std::size_t>(i) + 2);  // arrival order is fixed now
  }
  first.release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(zookeeper, ReentrantPerLockObjectOnly) {
  const auto uri = env_uri("DLOCK_ZOOKEEPER_URI");
  ASSERT_FALSE(uri.empty());
  auto b = dlock::open(uri);
  const auto name = unique("reent");
  auto mine = b->make_lock(name), other = b->make_lock(name);
  auto outer = mine->try_acquire();
  ASSERT_TRUE(outer);
  auto inner = mine->try_acquire();
  ASSERT_TRUE(inner);
  EXPECT_EQ(outer.fencing_token(), inner.fencing_token());
  EXPECT_FALSE(other->try_acquire()) << "a second lock object in the same process must wait its turn";
  inner.release();
  EXPECT_FALSE(other->try_acquire());
  outer.release();
  EXPECT_TRUE(other->try_acquire());
}

TEST(zookeeper, FencingIsTheCzxidAndIncreases) {
  const auto uri = env_uri("DLOCK_ZOOKEEPER_URI");
  ASSERT_FALSE(uri.empty());
  auto b = dlock::open(uri);
  const auto name = unique("fence");
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto l = b->make_lock(name)->try_acquire();
    ASSERT_TRUE(l);
    ASSERT_TRUE(l.fencing_token());
    EXPECT_GT(*l.fencing_token(), last);
    last = *l.fencing_token();
  }
}

TEST(zookeeper, SessionExpiredFromOutsideTellsHolderAndGrantsNextWaiter) {
  const auto uri = env_uri("DLOCK_ZOOKEEPER_URI");
  ASSERT_FALSE(uri.empty());
  auto holder_backend = dlock::open(uri + "?session_timeout=4s");
  auto waiter_backend = dlock::open(uri + "?session_timeout=4s");
  const auto name = unique("expire");
  auto held = holder_backend->make_lock(name)->acquire();
  auto waiter = std::async(std::launch::async, [&] { return waiter_backend->make_lock(name)->try_acquire_for(20s); });
  auto zh = raw_connect(uri);
  wait_for_contenders(zh.get(), zk::parent_path(root_of(uri), name), 2);
  expire(uri, held);
  auto next = waiter.get();
  EXPECT_TRUE(next) << "the next waiter did not get the lock after the holder's session expired";
  for (int i = 0; i < 200 && !held.lost_token().stop_requested(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(held.lost_token().stop_requested()) << "the holder was not told";
  // The holder's backend opens a fresh session for later locks.
  next.release();
  EXPECT_TRUE(holder_backend->make_lock(name)->try_acquire_for(10s));
}

TEST(zookeeper, KazooWaitsBehindOurNodeWithCuratorsPattern) {
  const auto uri = env_uri("DLOCK_ZOOKEEPER_URI");
  ASSERT_FALSE(uri.empty());
  auto b = dlock::open(uri);
  const auto name = unique("kazoo");
  auto held = b->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  const auto u = dlock::uri::parse(uri);
  const auto hosts = u.hosts()[0].to_string();
  const auto path = zk::parent_path(root_of(uri), name);
  const std::string script =
      "import sys\nfrom kazoo.client import KazooClient\n"
      "c=KazooClient(hosts=sys.argv[1]); c.start(timeout=10)\n"
      "l=c.Lock(sys.argv[2], extra_lock_patterns=['-lock-'])\n"
      "from kazoo.exceptions import LockTimeout\n"
      "try:\n  got=l.acquire(timeout=1.5)\nexcept LockTimeout:\n  got=False\n"
      "print('acquired' if got else 'waited')\n"
      "if got: l.release()\nc.stop()\n";
  const std::string cmd = "/usr/bin/python3 -c \"" + std::regex_replace(script, std::regex("\""), "\\\"") + "\" " + hosts + " " + path;
  auto run = [&] {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[256];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    return out;
  };
  EXPECT_NE(run().find("waited"), std::string::npos) << "kazoo did not wait behind our node";
  held.release();
  EXPECT_NE(run().find("acquired"), std::string::npos) << "kazoo could not acquire after our release";
}

// --- the three-node ensemble ------------------------------------------------------------------

// ---- Digest authentication and ACLs (open item 1). Digest auth needs no server configuration: the
// server records user:base64(sha1(user:password)) as the client's identity, whatever the password.

namespace {

// base "zookeeper://h:p/root" -> "zookeeper://user:password@h:p/root"
std::string with_credentials(const std::string& base, const std::string& user, const std::string& password) {
  const auto at = base.find("://") + 3;
  return base.substr(0, at) + user + ":" + password + "@" + base.substr(at);
}

std::string digest_id(const std::string& user, const std::string& password) {
  const auto credentials = user + ":" + password;
  unsigned char sha[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(credentials.data()), credentials.size(), sha);
  unsigned char b64[4 * ((SHA_DIGEST_LENGTH + 2) / 3) + 1];
  EVP_EncodeBlock(b64, sha, SHA_DIGEST_LENGTH);
  return user + ":" + reinterpret_cast<const char*>(b64);
}

// zoo_add_auth and wait for its completion.
int raw_add_auth(zhandle_t* zh, const std::string& credentials) {
  auto done = std::make_unique<std::promise<int>>();
  auto result = done->get_future();
  const int rc = zoo_add_auth(
      zh, "digest", credentials.data(), static_cast<int>(credentials.size()),
      [](int rc, const void* data) { static_cast<std::promise<int>*>(const_cast<void*>(data))->set_value(rc); }, done.get());
  if (rc != ZOK) return rc;
  if (result.wait_for(10s) != std::future_status::ready) {
    (void)done.release();  // the completion may still run: leave it its promise
    return ZOPERATIONTIMEOUT;
  }
  return result.get();
}

struct acl_entry {
  std::string scheme, id;
  int perms;
  bool operator==(const acl_entry&) const = default;
};
std::ostream& operator<<(std::ostream& os, const acl_entry& a) { return os << a.scheme << ":" << a.id << " perms " << a.perms; }

std::vector<acl_entry> acl_of(zhandle_t* zh, const std::string& path, int& rc) {
  ACL_vector v{0, nullptr};
  Stat st{};
  rc = zoo_get_acl(zh, path.c_str(), &v, &st);
  std::vector<acl_entry> out;
  if (rc == ZOK)
    for (int i = 0; i < v.count; ++i) out.push_back({v.data[i].id.scheme, v.data[i].id.id, v.data[i].perms});
  deallocate_ACL_vector(&v);
  return out;
}

}  // namespace

TEST(zookeeper_auth, CreatorAclKeepsOutClientsWithoutTheCredentialsAndSameCredentialsContend) {
  const auto base = env_uri("DLOCK_ZOOKEEPER_URI");
  ASSERT_FALSE(base.empty());
  const auto user = unique("user"), password = unique("pw");
  auto a = dlock::open(with_credentials(base, user, password) + "?session_timeout=4s");
  auto b = dlock::open(with_credentials(base, user, password) + "?session_timeout=4s");
  const auto name = unique("acl");
  const auto parent = zk::parent_path(root_of(base), name);
  auto held = a->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);

  // With the credentials: the parent and the lock node carry exactly our digest id, all permissions.
  auto authed = raw_connect(base);
  ASSERT_EQ(raw_add_auth(authed.get(), user + ":" + password), ZOK);
  const auto nodes = zk::lock_nodes_in_order(children(authed.get(), parent));
  ASSERT_EQ(nodes.size(), 1u);
  const auto node = parent + "/" + nodes[0];
  const std::vector<acl_entry> expected{{"digest", digest_id(user, password), ZOO_PERM_ALL}};
  int rc = 0;
  EXPECT_EQ(acl_of(authed.get(), parent, rc), expected);
  EXPECT_EQ(rc, ZOK);
  EXPECT_EQ(acl_of(authed.get(), node, rc), expected);
  EXPECT_EQ(rc, ZOK);

  // Without credentials: cannot list, read, delete (the holder's node) nor queue (create) under the parent.
  auto anonymous = raw_connect(base);
  String_vector kids{0, nullptr};
  EXPECT_EQ(zoo_get_children(anonymous.get(), parent.c_str(), 0, &kids), ZNOAUTH);
  deallocate_String_vector(&kids);
  char data[256];
  int len = sizeof data;
  Stat st{};
  EXPECT_EQ(zoo_get(anonymous.get(), node.c_str(), 0, data, &len, &st), ZNOAUTH);
  EXPECT_EQ(zoo_delete(anonymous.get(), node.c_str(), -1), ZNOAUTH) << "a client without the credentials deleted the lock";
  EXPECT_EQ(zoo_create(anonymous.get(), (parent + "/intruder").c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0),
            ZNOAUTH);
  // What ZooKeeper does not protect: exists needs no permission, so anyone sees that the lock node exists.
  EXPECT_EQ(zoo_exists(anonymous.get(), node.c_str(), 0, &st), ZOK);
  EXPECT_FALSE(held.lost_token().stop_requested());

  // A dlock backend without credentials is refused clearly (not "contended").
  auto open_backend = dlock::open(base);
  std::error_code ec;
  auto refused = open_backend->make_lock(name)->try_acquire(ec);
  EXPECT_FALSE(refused);
  EXPECT_EQ(ec, dlock::errc::authentication_failed) << dlock::last_error_message();
  EXPECT_NE(dlock::last_error_message().find("ACL"), std::string::npos) << dlock::last_error_message();

  // The same credentials in a second backend: contends like any other owner, then gets it in turn.
  EXPECT_FALSE(b->make_lock(name)->try_acquire()) << "the second backend with the same credentials did not see it held";
  auto waiter = std::async(std::launch::async, [&] { return b->make_lock(name)->try_acquire_for(20s); });
  wait_for_contenders(authed.get(), parent, 2);
  held.release();
  auto next = waiter.get();
  EXPECT_TRUE(next) << "the second backend with the same credentials did not get the lock after release";
  EXPECT_EQ(zk::lock_nodes_in_order(children(authed.get(), parent)).size(), 1u);
}

TEST(zookeeper_auth, WrongPasswordIsRefusedClearlyAndNeverShown) {
  const auto base = env_uri("DLOCK_ZOOKEEPER_URI");
  ASSERT_FALSE(base.empty());
  const auto user = unique("user"), password = unique("right-pw"), wrong = unique("wrong-pw");
  auto owner = dlock::open(with_credentials(base, user, password));
  const auto name = unique("acl-wrong");
  auto held = owner->make_lock(name)->try_acquire();
  ASSERT_TRUE(held);
  const auto never_shows = [&](const std::string& text) {
    EXPECT_EQ(text.find(password), std::string::npos) << text;
    EXPECT_EQ(text.find(wrong), std::string::npos) << text;
  };
  never_shows(owner->redacted_uri());
  // Both spellings of the credentials: user:password@ and ?digest=user:password.
  for (const auto& text : {with_credentials(base, user, wrong), base + "?digest=" + user + ":" + wrong}) {
    SCOPED_TRACE(dlock::redact_uri_text(text));
    // The server cannot refuse a digest password at connect time (it only records the hash as our
    // identity), so open succeeds; the lock is refused at its first use, as authentication_failed.
    auto intruder = dlock::open(text);
    never_shows(intruder->redacted_uri());
    std::error_code ec;
    auto l = intruder->make_lock(name)->try_acquire(ec);
    EXPECT_FALSE(l);
    EXPECT_EQ(ec, dlock::errc::authentication_failed) << dlock::last_error_message();
    EXPECT_NE(dlock::last_error_message().find("digest"), std::string::npos) << dlock::last_error_message();
    never_shows(dlock::last_error_message());
    try {
      (void)intruder->make_lock(name)->try_acquire();
      ADD_FAILURE() << "the throwing overload did not throw";
    } catch (const dlock::error& e) {
      EXPECT_EQ(e.code(), dlock::errc::authentication_failed);
      never_shows(e.what());
    }
  }
  // A malformed parameter beside digest=: the message names the URI without the password.
  try {
    (void)dlock::open(base + "?digest=" + user + ":" + wrong + "&session_timeout=soon");
    ADD_FAILURE() << "session_timeout=soon was accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), dlock::errc::invalid_uri);
    never_shows(e.what());
  }
  EXPECT_FALSE(held.lost_token().stop_requested());
}

TEST(zookeeper_ensemble, OneNodeDownLockSurvivesAndWaitersStillGetItInOrder) {
  const auto uri = env_uri("DLOCK_ZOOKEEPER_ENSEMBLE_URI");
  ASSERT_FALSE(uri.empty());
  auto b = dlock::open(uri + "?session_timeout=6s");
  const auto name = unique("one-down");
  auto held = b->make_lock(name)->acquire();
  auto w1 = b->make_lock(name), w2 = b->make_lock(name);
  auto zh = raw_connect(uri);
  const auto parent = zk::parent_path(root_of(uri), name);
  std::vector<int> order;
  std::mutex m;
  std::thread t1([&] { std::error_code ec; auto l = w1->acquire(ec); std::lock_guard g(m); order.push_back(ec ? -1 : 1); });
  wait_for_contenders(zh.get(), parent, 2);
  std::thread t2([&] { std::error_code ec; auto l = w2->acquire(ec); std::lock_guard g(m); order.push_back(ec ? -2 : 2); });
  wait_for_contenders(zh.get(), parent, 3);
  ASSERT_EQ(launcher("stop zookeeper-ensemble.1"), 0);
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(held.held()) << "losing one node of three must not lose the lock";
  held.release();
  t1.join();
  t2.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(launcher("start zookeeper-ensemble.1"), 0);
}

TEST(zookeeper_ensemble, TwoNodesDownHolderToldLostAndNobodyElseAcquires) {
  const auto uri = env_uri("DLOCK_ZOOKEEPER_ENSEMBLE_URI");
  ASSERT_FALSE(uri.empty());
  auto b = dlock::open(uri + "?session_timeout=4s");
  auto other = dlock::open(uri + "?session_timeout=4s");
  const auto name = unique("two-down");
  auto held = b->make_lock(name)->acquire();
  ASSERT_EQ(launcher("stop zookeeper-ensemble.1"), 0);
  ASSERT_EQ(launcher("stop zookeeper-ensemble.2"), 0);
  // No quorum: nobody can acquire; the holder is told once its session can no longer be kept.
  std::error_code ec;
  auto stolen = other->make_lock(name)->try_acquire_for(3s, ec);
  EXPECT_FALSE(stolen) << "acquired without a quorum";
  for (int i = 0; i < 400 && !held.lost_token().stop_requested(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(held.lost_token().stop_requested()) << "the holder was not told the lock is lost";
  EXPECT_EQ(launcher("start zookeeper-ensemble.1"), 0);
  EXPECT_EQ(launcher("start zookeeper-ensemble.2"), 0);
}
