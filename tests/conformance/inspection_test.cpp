// backend::inspect, list and force_release against what each backend's hooks (and README)
// declare: what is declared works, what is not is refused with errc::not_supported.
#include <algorithm>

#include "conformance_test.hpp"

namespace dlock::conformance {
namespace {

// Whether inspect's `reported` owner names `lock`'s holder, as precisely as the backend records it.
bool names_the_owner(const dlock::testing::backend_hooks& h, const std::string& reported,
                     const distributed_lock& lock) {
  using record = dlock::testing::backend_hooks::inspection_support::owner_record;
  switch (h.inspection.owner) {
    case record::owner_id: return reported == lock.owner();
    case record::host_pid: return !reported.empty() && lock.owner().starts_with(reported + ":");
    case record::server_id: return !reported.empty();
  }
  return false;
}

bool lists(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_P(Lock, InspectAndListMatchTheDeclaredSupport) {
  const auto* h = hooks();
  ASSERT_TRUE(h);
  const auto name = dlock::testing::unique_name("inspect");
  const auto ttl = 5000ms;
  auto lock = make(name, options(ttl, false));
  // Within ttl + margin: a freshly started Redis grants nothing for a ttl (wait_after_restart).
  auto held = acquire_within(*lock, ttl + margin);
  ASSERT_TRUE(held);

  std::error_code ec;
  const auto info = backend_->inspect(name, ec);
  if (!h->inspection.inspect) {
    EXPECT_EQ(ec, errc::not_supported) << label() << " declares no inspect: " << dlock::last_error_message();
  } else {
    ASSERT_FALSE(ec) << dlock::last_error_message();
    EXPECT_TRUE(info.held);
    ASSERT_EQ(info.holders.size(), 1u);
    EXPECT_TRUE(names_the_owner(*h, info.holders[0].owner, *lock))
        << "inspect says '" << info.holders[0].owner << "', the lock's owner is '" << lock->owner() << "'";
    if (info.holders[0].fencing_token && held.fencing_token()) {
      EXPECT_EQ(info.holders[0].fencing_token, held.fencing_token());
    }
  }
  const auto names = backend_->list(name, ec);
  if (!h->inspection.list) {
    EXPECT_EQ(ec, errc::not_supported) << label() << " declares no list: " << dlock::last_error_message();
  } else {
    ASSERT_FALSE(ec) << dlock::last_error_message();
    EXPECT_TRUE(lists(names, name)) << "list does not show the held name";
  }

  held.release();
  if (h->inspection.inspect) {
    EXPECT_FALSE(backend_->inspect(name).held) << "still held after release";
  }
  if (h->inspection.list) {
    EXPECT_FALSE(lists(backend_->list(name), name)) << "still listed after release";
  }
}

TEST_P(Lock, ForceReleaseMatchesTheDeclaredSupport) {
  const auto* h = hooks();
  ASSERT_TRUE(h);
  const auto name = dlock::testing::unique_name("force-release");
  const auto ttl = 5000ms;
  auto stuck = make(name, options(ttl, false));
  auto held = acquire_within(*stuck, ttl + margin);
  ASSERT_TRUE(held);

  std::error_code ec;
  const auto removed = backend_->force_release(name, ec);
  if (!h->inspection.force_release) {
    EXPECT_EQ(ec, errc::not_supported) << label() << " declares no force_release: " << dlock::last_error_message();
    return;
  }
  ASSERT_FALSE(ec) << dlock::last_error_message();
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_TRUE(names_the_owner(*h, removed[0].owner, *stuck)) << "removed '" << removed[0].owner << "'";
  auto next = make(name);
  auto theirs = next->try_acquire_for(margin);
  EXPECT_TRUE(theirs) << "the name was not free after force_release";
  // A fenced resource refuses the broken holder's writes: the next grant's token is larger.
  if (theirs && held.fencing_token()) {
    ASSERT_TRUE(theirs.fencing_token());
    EXPECT_GT(*theirs.fencing_token(), *held.fencing_token());
  }
  const bool reported_lost = held.lost_token().stop_requested();
  held.release(ec);
  EXPECT_TRUE(reported_lost || ec == errc::not_owner)
      << "the broken holder neither saw its lease lost nor was told not_owner on release";
}

}  // namespace dlock::conformance
