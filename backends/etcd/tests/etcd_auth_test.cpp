// etcd:// against a server with authentication enabled (a server of its own: enabling it changes
// the server for every client): user and password from the URI, a wrong password or none refused
// saying so without showing the password, and a holder that keeps renewing while an operator changes
// the server's users and roles.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"

namespace {

using namespace std::chrono_literals;

constexpr const char* password = "S3cret-etcd-pw";

std::string endpoints() {
  const auto u = dlock::uri::parse(dlock::testing::server_uri("DLOCK_ETCD_URI"));
  std::string list;
  for (const auto& h : u.hosts()) list += (list.empty() ? "" : ",") + h.to_string();
  return list;
}

// etcdctl with these arguments, to its end; its exit status.
std::optional<int> etcdctl(std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + endpoints()};
  argv.insert(argv.end(), args.begin(), args.end());
  dlock::testing::child_process run(argv);
  return run.wait(30s);
}

class EtcdAuth : public ::testing::Test {
 protected:
  // Once for the suite's server: the root user, then authentication on (etcdctl grants root its
  // role). Later tests find it on already; the user's creation then fails, which is fine.
  static void SetUpTestSuite() {
    (void)etcdctl({"user", "add", std::string("root:") + password, "--interactive=false"});
    (void)etcdctl({"auth", "enable"});
  }

  static std::string uri_with(const std::string& credentials) {
    return "etcd://" + credentials + endpoints() + "?ttl=2s";
  }
};

TEST_F(EtcdAuth, TheRightPasswordIsGrantedAndAWrongOneIsRefusedWithoutShowingIt) {
  auto backend = dlock::open(uri_with(std::string("root:") + password + "@"));
  const auto name = dlock::testing::unique_name("etcd-auth");
  auto held = backend->make_lock(name)->try_acquire();
  ASSERT_TRUE(held) << "not granted with the right password";
  EXPECT_TRUE(held.fencing_token());
  EXPECT_FALSE(backend->make_lock(name)->try_acquire()) << "a second owner was granted the held lock";
  held.release();

  std::error_code ec;
  auto refused = dlock::open(uri_with("root:not-the-password@"), ec);
  dlock::lease got;
  if (refused) got = refused->make_lock(name)->try_acquire(ec);
  EXPECT_FALSE(got);
  EXPECT_EQ(ec, dlock::errc::authentication_failed) << ec.message();
  const auto message = dlock::last_error_message();
  EXPECT_NE(message.find("root"), std::string::npos) << "the refusal does not name the user: " << message;
  EXPECT_EQ(message.find("not-the-password"), std::string::npos) << "the refusal shows the password: " << message;
}

TEST_F(EtcdAuth, WithoutCredentialsTheRefusalSaysTheServerWantsThem) {
  std::error_code ec;
  auto backend = dlock::open(uri_with(""), ec);
  dlock::lease got;
  if (backend) got = backend->make_lock(dlock::testing::unique_name("etcd-anonymous"))->try_acquire(ec);
  EXPECT_FALSE(got);
  EXPECT_EQ(ec, dlock::errc::authentication_failed) << ec.message();
  const auto message = dlock::last_error_message();
  EXPECT_NE(message.find("user:password"), std::string::npos)
      << "the refusal does not say that the URI needs user:password: " << message;
}

// An operator adds a role while a lease is held: the server's auth revision moves on, and the
// holder's renewals must go on (a token the server no longer takes is fetched again), not lose it.
TEST_F(EtcdAuth, AHolderKeepsItsLeaseWhileTheServersUsersAndRolesChange) {
  auto backend = dlock::open(uri_with(std::string("root:") + password + "@"));
  auto held = backend->make_lock(dlock::testing::unique_name("etcd-auth-renew"))->try_acquire();
  ASSERT_TRUE(held);
  const auto role = dlock::testing::unique_name("role");
  ASSERT_EQ(etcdctl({"--user", std::string("root:") + password, "role", "add", role}), std::optional<int>(0));
  ASSERT_EQ(etcdctl({"--user", std::string("root:") + password, "user", "add", role + ":pw", "--interactive=false"}),
            std::optional<int>(0));
  std::this_thread::sleep_for(3s);  // past the 2 s ttl: renewed twice with the new auth revision
  EXPECT_FALSE(held.lost_token().stop_requested())
      << held.lost_reason().message() << ": " << dlock::last_error_message();
  EXPECT_TRUE(held.held());
  std::error_code ec;
  held.release(ec);
  EXPECT_FALSE(ec) << dlock::last_error_message();
}

}  // namespace
