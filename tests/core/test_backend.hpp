#pragma once
// A test-local backend for testing the core machinery itself (watchdog, lease, registry checks):
// an in-process table, with counters and switches the tests read and flip. Not a server mock.
#include <atomic>
#include <map>
#include <mutex>

#include "dlock/spi.hpp"

namespace dlock::core_test {

// Server faults the core must handle, which the tests switch on: the next N attempts find the
// server unreachable; the next N grants arrive with their validity already gone (a server that
// stalled while replying). `attempts` counts every attempt.
struct server_faults {
  std::atomic<int> unavailable_attempts{0};
  std::atomic<int> stalled_grants{0};
  std::atomic<int> attempts{0};

  // One attempt reaches the server: false, with ec set to backend_unavailable, while the
  // unavailable attempts last.
  bool reached(std::error_code& ec) {
    ++attempts;
    if (unavailable_attempts > 0) {
      --unavailable_attempts;
      set_error(ec, errc::backend_unavailable, "test server down");
      return false;
    }
    return true;
  }
  // Whether the grant being made is one of the stalled ones.
  bool stalls_grant() {
    const bool stalled = stalled_grants > 0;
    if (stalled) --stalled_grants;
    return stalled;
  }
};

struct table : server_faults {
  std::mutex m;
  std::map<std::string, std::string> owner_of;
  std::map<std::string, int> holds;  // re-entries beyond the first, for a reentrant test backend
  std::atomic<int> renewals{0};
  std::atomic<bool> fail_renew{false};
};

class test_lease final : public spi::lease_state {
 public:
  test_lease(std::shared_ptr<table> t, std::string name, std::string owner, std::chrono::milliseconds ttl,
             bool expiring, bool renewable, bool stalled = false)
      : lease_state(name, ttl,
                    stalled    ? clock::now() - std::chrono::milliseconds(1)
                    : expiring ? validity_after(clock::now(), ttl)
                               : clock::time_point::max()),
        t_(std::move(t)),
        owner_(std::move(owner)),
        renewable_(renewable) {}

 private:
  void do_release(std::error_code& ec) noexcept override {
    std::lock_guard g(t_->m);
    auto it = t_->owner_of.find(name());
    if (it == t_->owner_of.end() || it->second != owner_) return set_error(ec, errc::not_owner, "not ours");
    if (auto extra = t_->holds.find(name()); extra != t_->holds.end() && extra->second > 0) {
      --extra->second;
      return;
    }
    t_->owner_of.erase(it);
  }
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override {
    if (!renewable_) return lease_state::do_renew(ttl, ec);  // the core's not_supported
    ++t_->renewals;
    if (t_->fail_renew) set_error(ec, errc::not_owner, "renewal refused");
  }
  std::shared_ptr<table> t_;
  std::string owner_;
  bool renewable_;
};

class test_lock final : public distributed_lock {
 public:
  test_lock(std::shared_ptr<table> t, std::string name, capabilities caps, lock_options o)
      : distributed_lock(std::move(name), caps, std::move(o)), t_(std::move(t)) {}

 private:
  std::unique_ptr<spi::lease_state> do_try_acquire(std::error_code& ec) noexcept override {
    if (!t_->reached(ec)) return nullptr;
    std::lock_guard g(t_->m);
    auto [it, inserted] = t_->owner_of.try_emplace(std::string(name()), owner());
    if (!inserted && !(caps().has(capability::reentrant) && it->second == owner())) return nullptr;
    if (!inserted) ++t_->holds[std::string(name())];
    return std::make_unique<test_lease>(t_, std::string(name()), owner(), options().ttl,
                                        caps().has(capability::expiring), caps().has(capability::renewable),
                                        t_->stalls_grant());
  }
  std::shared_ptr<table> t_;
};

class test_backend final : public backend {
 public:
  test_backend(capabilities caps, lock_options o = {}, std::size_t max_name = 64)
      : backend(caps, lock_scope::process, {max_name}, std::move(o), "test://"), t(std::make_shared<table>()) {}
  std::shared_ptr<table> t;

 private:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options o) override {
    return std::make_unique<test_lock>(t, std::move(name), caps(), std::move(o));
  }
};

}  // namespace dlock::core_test
