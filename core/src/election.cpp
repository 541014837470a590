#include "dlock/election.hpp"

#include "dlock/backend.hpp"
#include "dlock/error.hpp"
#include "errors_caught.hpp"
#include "or_throw.hpp"

namespace dlock {

namespace {

// What an election needs of the backend's mutex: a term (fencing) and a demotion signal
// (lost_notification).
constexpr capabilities election_needs{capability::fencing, capability::lost_notification};

}  // namespace

leadership::leadership(lease held, std::string id) noexcept : lease_(std::move(held)), id_(std::move(id)) {}

election::election(std::shared_ptr<backend> owner, std::unique_ptr<distributed_lock> lock) noexcept
    : backend_(std::move(owner)), lock_(std::move(lock)) {}

election::~election() = default;

leadership election::try_campaign() { return {lock_->try_acquire(), id()}; }

leadership election::try_campaign(std::error_code& ec) noexcept { return {lock_->try_acquire(ec), id()}; }

leadership election::campaign_until(clock::time_point deadline, std::stop_token stop) {
  return {lock_->try_acquire_until(deadline, std::move(stop)), id()};
}

leadership election::campaign_until(clock::time_point deadline, std::stop_token stop, std::error_code& ec) noexcept {
  return {lock_->try_acquire_until(deadline, std::move(stop), ec), id()};
}

leadership election::campaign(std::stop_token stop) { return {lock_->acquire(std::move(stop)), id()}; }

leadership election::campaign(std::stop_token stop, std::error_code& ec) noexcept {
  return {lock_->acquire(std::move(stop), ec), id()};
}

leader_info election::leader() {
  return detail::or_throw([&](std::error_code& ec) { return leader(ec); });
}

leader_info election::leader(std::error_code& ec) noexcept {
  const lock_info held = backend_->inspect(lock_->name(), ec);
  leader_info out;
  if (ec || held.holders.empty()) return out;
  // A mutex has one holder; the first is the leader should a layout report more.
  const lock_holder& first = held.holders.front();
  out.elected = true;
  out.id = first.owner;
  out.term = first.fencing_token;
  out.since = first.since;
  return out;
}

std::unique_ptr<election> backend::make_election(std::string_view name) { return make_election(name, defaults_); }

std::unique_ptr<election> backend::make_election(std::string_view name, std::error_code& ec) noexcept {
  return make_election(name, defaults_, ec);
}

std::unique_ptr<election> backend::make_election(std::string_view name, lock_options options) {
  return detail::or_throw([&](std::error_code& ec) { return make_election(name, std::move(options), ec); });
}

std::unique_ptr<election> backend::make_election(std::string_view name, lock_options options,
                                                 std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (const auto lacking = caps_.missing(election_needs); !lacking.empty()) {
    set_error(ec, errc::not_supported,
              redacted_uri_ + " makes no election: its lock lacks " + lacking.to_string() +
                  " (a leader's term is the fencing token, its demotion the lost notification; `dlock backends` " +
                  "lists the schemes with both)");
    return nullptr;
  }
  std::shared_ptr<backend> self = weak_from_this().lock();
  if (!self) {
    set_error(ec, errc::invalid_argument,
              "make_election needs a backend owned by a shared_ptr (as dlock::open returns it): the election "
              "keeps it alive to inspect who leads");
    return nullptr;
  }
  auto lock = make_lock_by(&backend::do_make_election_lock, name, std::move(options), ec);
  if (ec) return nullptr;
  return detail::errors_caught(ec, [&] { return std::make_unique<election>(std::move(self), std::move(lock)); });
}

}  // namespace dlock
