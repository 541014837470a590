#include "local_wait_queue.hpp"

#include <algorithm>

#include "dlock/acquire_stop.hpp"

namespace dlock::detail {
local_wait_queue::local_wait_queue(std::string name, std::shared_ptr<local_wait_queues> registry)
    : name_(std::move(name)), registry_(std::move(registry)) {}

local_wait_queue::~local_wait_queue() {
  if (registry_) registry_->forget(name_);
}

bool local_wait_queue::held_by(const std::string& owner) const {
  std::lock_guard guard(mutex_);
  return std::any_of(holders_.begin(), holders_.end(), [&](const auto& h) { return h.first == owner; });
}

void local_wait_queue::add_holder(const std::string& owner) {
  std::lock_guard guard(mutex_);
  for (auto& h : holders_) {
    if (h.first == owner) {
      ++h.second;
      return;
    }
  }
  holders_.emplace_back(owner, 1);
}

void local_wait_queue::released(const std::string* owner) noexcept {
  // Nobody in line and no holder to forget: nothing to do, and no mutex on the release path of
  // the backends that never queue here. A waiter joining concurrently asks the server after it
  // joined, so it sees this release's effect there (seq_cst on both sides).
  if (!owner && waiting_.load() == 0) return;
  std::lock_guard guard(mutex_);
  if (owner) {
    auto it = std::find_if(holders_.begin(), holders_.end(), [&](const auto& h) { return h.first == *owner; });
    if (it != holders_.end() && --it->second == 0) holders_.erase(it);
  }
  ++releases_;
  if (!line_.empty()) line_.front()->wake_.notify_one();
}

local_wait_queue::place::place(local_wait_queue& queue) : queue_(queue) {
  std::lock_guard guard(queue_.mutex_);
  where_ = queue_.line_.insert(queue_.line_.end(), this);
  queue_.waiting_.fetch_add(1);
  if (queue_.line_.size() == 1) {
    head_ = true;
    try_at_once_ = true;
    releases_at_head_ = queue_.releases_;
  }
}

local_wait_queue::place::~place() {
  std::lock_guard guard(queue_.mutex_);
  leave_locked(false);
}

void local_wait_queue::place::leave_with_grant() noexcept {
  std::lock_guard guard(queue_.mutex_);
  leave_locked(true);
}

void local_wait_queue::place::leave_locked(bool with_grant) noexcept {
  if (!in_line_) return;
  in_line_ = false;
  const bool was_head = where_ == queue_.line_.begin();
  queue_.line_.erase(where_);
  queue_.waiting_.fetch_sub(1);
  if (!was_head || queue_.line_.empty()) return;
  place& next = *queue_.line_.front();
  next.head_ = true;
  // Left with the lock: it is held in this process now, and its release will wake the next head.
  // Left without it (deadline, error): it may be free, so the next head asks at once.
  next.try_at_once_ = !with_grant;
  next.releases_at_head_ = queue_.releases_;
  next.wake_.notify_one();
}

bool local_wait_queue::place::wait_to_be_head(clock::time_point deadline) {
  std::unique_lock lock(queue_.mutex_);
  return spi::wait_until(wake_, lock, deadline, [this] { return head_; });  // a stop request ends it too
}

bool local_wait_queue::place::try_at_once() const {
  std::lock_guard guard(queue_.mutex_);
  return try_at_once_;
}

std::uint64_t local_wait_queue::place::releases_at_head() const {
  std::lock_guard guard(queue_.mutex_);
  return releases_at_head_;
}

std::uint64_t local_wait_queue::place::releases_seen() const {
  std::lock_guard guard(queue_.mutex_);
  return queue_.releases_;
}

void local_wait_queue::place::wait_for_release(std::uint64_t seen, clock::time_point until) {
  std::unique_lock lock(queue_.mutex_);
  (void)spi::wait_until(wake_, lock, until, [&] { return queue_.releases_ != seen; });
}

std::shared_ptr<local_wait_queue> local_wait_queues::for_name(const std::string& name) {
  std::lock_guard guard(mutex_);
  auto& slot = by_name_[name];
  if (auto queue = slot.lock()) return queue;
  auto queue = std::make_shared<local_wait_queue>(name, shared_from_this());
  slot = queue;
  return queue;
}

void local_wait_queues::forget(const std::string& name) noexcept {
  std::lock_guard guard(mutex_);
  auto it = by_name_.find(name);
  // A new line for the name may have replaced the dying one already: keep that one.
  if (it != by_name_.end() && it->second.expired()) by_name_.erase(it);
}

local_hold::local_hold(std::shared_ptr<local_wait_queue> queue, std::string owner, bool counted)
    : queue_(std::move(queue)), owner_(std::move(owner)), counted_(counted) {
  if (counted_) queue_->add_holder(owner_);
}

local_hold::~local_hold() { end(); }

void local_hold::end() noexcept {
  if (ended_) return;
  ended_ = true;
  queue_->released(counted_ ? &owner_ : nullptr);
}

}  // namespace dlock::detail
