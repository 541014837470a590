// One name, one lock on zookeeper:// (README "One name, one lock"): a semaphore of a name never
// holds beside a mutex or a reader-writer lock of it. Against peers in Curator's layouts (kazoo's
// recipes, Curator's node names written with a raw client) and against racing acquirers of the two
// kinds in different sessions, on one server and on the ensemble (where a session's reads may be
// served by a follower that lags the leader).
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/support.hpp"
#include "name_mapping.hpp"
#include "zk_test_support.hpp"

namespace zk = dlock::zookeeper;

namespace {

using namespace dlock::zookeeper::testing;  // zk_test_support.hpp

void expect_conflict(const std::error_code& ec, const dlock::lease& l, const std::string& what,
                     const std::string& in_use_as) {
  EXPECT_FALSE(l) << what << " was granted";
  EXPECT_EQ(ec, dlock::errc::name_conflict) << what << ": " << ec.message() << ": " << dlock::last_error_message();
  EXPECT_NE(dlock::last_error_message().find("in use as a " + in_use_as), std::string::npos)
      << what << ": " << dlock::last_error_message();
}

}  // namespace

// A permit held by a peer taking Curator's InterProcessSemaphoreV2 steps (tests/kazoo_semaphore_peer.py):
// our mutex, reader and writer of the name are refused, not granted beside it.
TEST(zookeeper_one_name, APeersSemaphorePermitRefusesOurMutexReaderAndWriter) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  const auto name = unique_name("one-name-peer-sem");
  dlock::testing::child_process peer({"/usr/bin/python3", DLOCK_ZOOKEEPER_TEST_DIR "/kazoo_semaphore_peer.py",
                                      hosts_of(uri), zk::parent_path(root_of(uri), name), "2", "1", "4"});
  const auto line = peer.read_line(30s);
  ASSERT_TRUE(line && line->starts_with("acquired "))
      << "the kazoo semaphore peer did not acquire: " << line.value_or("<nothing>");
  std::error_code ec;
  auto mutex = b->make_lock(name)->try_acquire(ec);
  expect_conflict(ec, mutex, "a mutex beside the peer's permit", "semaphore");
  EXPECT_NE(dlock::last_error_message().find("1 permit held"), std::string::npos) << dlock::last_error_message();
  auto rw = b->make_rw_lock(name);
  auto read = rw->try_acquire_read_for(1s, ec);
  expect_conflict(ec, read, "a reader beside the peer's permit", "semaphore");
  auto write = rw->try_acquire_write(ec);
  expect_conflict(ec, write, "a writer beside the peer's permit", "semaphore");
  const auto released = peer.read_line(30s);
  EXPECT_TRUE(released && released->starts_with("released ")) << released.value_or("<nothing>");
  EXPECT_EQ(peer.wait(20s), 0);
  EXPECT_TRUE(b->make_lock(name)->try_acquire_for(10s)) << "the mutex was refused after the peer's permit went";
}

// Our semaphore of a name held by kazoo's Lock, kazoo's ReadLock, or Curator's reader-writer lock
// (its __WRIT__ node, written with a raw client) is refused, by a try and by a waiting acquire alike.
TEST(zookeeper_one_name, APeersLockRefusesOurSemaphore) {
  const auto uri = server_uri("DLOCK_ZOOKEEPER_URI");
  auto b = dlock::open(uri);
  for (const auto& [kind, in_use_as] : {std::pair{"lock", "mutex"}, std::pair{"read", "reader-writer lock"}}) {
    SCOPED_TRACE(std::string("kazoo ") + kind);
    const auto name = unique_name("one-name-peer-lock");
    kazoo_peer peer(uri, zk::parent_path(root_of(uri), name), kind);
    ASSERT_TRUE(peer.wait_for("acquired", 30s));
    auto sem = b->make_semaphore(name, 2);
    std::error_code ec;
    auto permit = sem->try_acquire(ec);
    expect_conflict(ec, permit, "a permit beside kazoo's holder", in_use_as);
    permit = sem->try_acquire_for(1s, ec);
    expect_conflict(ec, permit, "a waiting permit beside kazoo's holder", in_use_as);
    peer.release();
    ASSERT_TRUE(peer.wait_for("released", 30s));
    // A node of another kind is refused, not waited for: wait until kazoo's is gone.
    ASSERT_EQ(peer.wait_exit(30s), 0) << "kazoo did not release and exit";
    EXPECT_TRUE(sem->try_acquire_for(10s)) << "the semaphore was refused after kazoo released";
  }
  {
    SCOPED_TRACE("Curator's writer node");
    const auto name = unique_name("one-name-curator-writer");
    const auto folder = zk::parent_path(root_of(uri), name);
    auto zh = raw_connect(uri);
    ASSERT_EQ(zoo_create(zh.get(), folder.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, nullptr, 0), ZOK);
    ASSERT_EQ(zoo_create(zh.get(), (folder + "/_c_0b4c2d1e-1111-2222-3333-444455556666-__WRIT__").c_str(), nullptr, -1,
                         &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, nullptr, 0),
              ZOK);
    std::error_code ec;
    auto permit = b->make_semaphore(name, 2)->try_acquire(ec);
    expect_conflict(ec, permit, "a permit beside Curator's writer", "reader-writer lock");
  }
}

// Two acquirers of different kinds, in different sessions, start at the same instant, round after
// round: each creates its node and then looks for the other's, so both may be refused, but never
// may both be granted. On the ensemble the sessions sit on different servers, whose reads may lag.
TEST(zookeeper_one_name, RacingSemaphoreAndLockAreNeverBothGranted) {
  for (const auto* variable : {"DLOCK_ZOOKEEPER_URI", "DLOCK_ZOOKEEPER_ENSEMBLE_URI"}) {
    SCOPED_TRACE(variable);
    const auto uri = server_uri(variable);
    auto semaphores = dlock::open(uri), locks = dlock::open(uri);
    constexpr int rounds = 30;
    int both = 0, only_semaphore = 0, only_lock = 0, neither = 0;
    for (int round = 0; round < rounds; ++round) {
      const auto name = unique_name("one-name-race");
      std::barrier start(2);
      dlock::lease permit, held;
      std::error_code semaphore_ec, lock_ec;
      std::thread semaphore_side([&] {
        auto sem = semaphores->make_semaphore(name, 2);
        start.arrive_and_wait();
        permit = sem->try_acquire(semaphore_ec);
      });
      std::thread lock_side([&] {
        auto mutex = locks->make_lock(name);
        auto rw = locks->make_rw_lock(name);
        start.arrive_and_wait();
        held = round % 3 == 0   ? mutex->try_acquire(lock_ec)
               : round % 3 == 1 ? rw->try_acquire_read(lock_ec)
                                : rw->try_acquire_write(lock_ec);
      });
      semaphore_side.join();
      lock_side.join();
      EXPECT_FALSE(permit && held) << "round " << round << ": a permit and a lock of '" << name
                                   << "' were both granted";
      for (const auto& ec : {semaphore_ec, lock_ec})
        EXPECT_TRUE(!ec || ec == dlock::errc::name_conflict) << "round " << round << ": " << ec.message();
      (permit && held ? both : permit ? only_semaphore : held ? only_lock : neither)++;
    }
    std::cout << "[ rounds   ] " << variable << ": " << only_semaphore << " semaphore only, " << only_lock
              << " lock only, " << neither << " both refused, " << both << " both granted\n";
  }
}
