// zookeeper:// with digest authentication on a real server (DLOCK_ZOOKEEPER_URI): the creator's
// ACL keeps out clients without the credentials while clients with the same ones contend, and a
// wrong password is refused clearly and never shown. Digest auth needs no server configuration: the
// server records user:base64(sha1(user:password)) as the client's identity, whatever the password.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <ostream>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "name_mapping.hpp"
#include "sequence.hpp"
#include "zk_test_support.hpp"

namespace zk = dlock::zookeeper;

namespace {

using namespace dlock::zookeeper::testing;  // zk_test_support.hpp

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
      [](int rc, const void* data) { static_cast<std::promise<int>*>(const_cast<void*>(data))->set_value(rc); },
      done.get());
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
std::ostream& operator<<(std::ostream& os, const acl_entry& a) {
  return os << a.scheme << ":" << a.id << " perms " << a.perms;
}

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
  const auto base = server_uri("DLOCK_ZOOKEEPER_URI");
  const auto user = unique_name("user"), password = unique_name("pw");
  auto a = dlock::open(with_credentials(base, user, password) + "?session_timeout=4s");
  auto b = dlock::open(with_credentials(base, user, password) + "?session_timeout=4s");
  const auto name = unique_name("acl");
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
  EXPECT_EQ(zoo_delete(anonymous.get(), node.c_str(), -1), ZNOAUTH)
      << "a client without the credentials deleted the lock";
  EXPECT_EQ(
      zoo_create(anonymous.get(), (parent + "/intruder").c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0),
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

// A name held with credentials sits in a folder only that identity may read: a list by a client
// without them leaves it out and still lists the rest (one such folder beside others' names must
// not fail the whole list); the owner lists it.
TEST(zookeeper_auth, AListSkipsTheFoldersOfAnotherIdentityAndListsTheRest) {
  const auto base = server_uri("DLOCK_ZOOKEEPER_URI");
  const auto user = unique_name("user"), password = unique_name("pw");
  auto owner = dlock::open(with_credentials(base, user, password));
  auto anonymous = dlock::open(base);
  const auto prefix = unique_name("acl-list");
  // The open name first: its folder, made without credentials, makes the prefix's folder open too.
  auto open_name = anonymous->make_lock(prefix + "/open")->try_acquire();
  auto protected_name = owner->make_lock(prefix + "/protected")->try_acquire();
  ASSERT_TRUE(protected_name && open_name);
  std::vector<std::string> listed;
  ASSERT_NO_THROW(listed = anonymous->list(prefix)) << dlock::last_error_message();
  EXPECT_EQ(listed, std::vector<std::string>{prefix + "/open"});
  ASSERT_NO_THROW(listed = anonymous->list());
  EXPECT_NE(std::find(listed.begin(), listed.end(), prefix + "/open"), listed.end());
  EXPECT_EQ(std::find(listed.begin(), listed.end(), prefix + "/protected"), listed.end());
  EXPECT_EQ(owner->list(prefix), (std::vector<std::string>{prefix + "/open", prefix + "/protected"}));
}

TEST(zookeeper_auth, WrongPasswordIsRefusedClearlyAndNeverShown) {
  const auto base = server_uri("DLOCK_ZOOKEEPER_URI");
  const auto user = unique_name("user"), password = unique_name("right-pw"), wrong = unique_name("wrong-pw");
  auto owner = dlock::open(with_credentials(base, user, password));
  const auto name = unique_name("acl-wrong");
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
