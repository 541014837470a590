#include "orphan_sweeper.hpp"

#include <algorithm>

#include "dlock/diagnostics.hpp"
#include "dlock/error.hpp"

namespace dlock::memcached {

orphan_sweeper::orphan_sweeper(std::shared_ptr<client_pool> pool) : pool_(std::move(pool)) {}

orphan_sweeper::~orphan_sweeper() {
  if (thread_.joinable()) {
    thread_.request_stop();
    wake_.notify_all();
    thread_.join();
  }
}

void orphan_sweeper::sweep(key_layout keys, std::string token, time_t exptime) noexcept {
  try {
    std::lock_guard guard(mutex_);
    orphans_.push_back(orphan{std::move(keys), std::move(token), std::chrono::seconds(exptime), std::nullopt});
    if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
    wake_.notify_all();
  } catch (const std::exception& e) {
    // No memory or no thread: the item, if it was stored, expires after its ttl.
    std::error_code ec = make_error_code(errc::backend_unavailable);
    report_background_error(ec, std::string("memcached: cannot watch a grant whose reply was lost: ") + e.what());
  }
}

std::size_t orphan_sweeper::pending() const {
  std::lock_guard guard(mutex_);
  return orphans_.size();
}

void orphan_sweeper::run(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    if (orphans_.empty()) {
      wake_.wait(lock, stop, [&] { return !orphans_.empty(); });
      continue;
    }
    // Work on a copy so sweep() never waits for the network.
    auto batch = std::move(orphans_);
    orphans_.clear();
    lock.unlock();
    try {
      auto h = pool_->borrow();
      std::erase_if(batch, [&](orphan& o) { return settle(h.get(), o); });
    } catch (const std::exception&) {
      // No handle: keep everything and try again.
    }
    lock.lock();
    orphans_.insert(orphans_.end(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
    if (!orphans_.empty()) wake_.wait_for(lock, stop, retry_every, [] { return false; });
  }
}

bool orphan_sweeper::settle(memcached_st* m, orphan& o) {
  memcached_return_t rc;
  const auto found = store_if_ours(m, o.keys, o.token, expired_exptime, rc);
  if (found == ownership::stored) return true;   // it was there, and now it is deleted
  if (found == ownership::failed) return false;  // no answer: the request may still be queued
  // Not there (or another owner's): the server answers, so a request of ours still queued in it is
  // read within moments; anything it stores expires exptime later (+1 s: memcached's clock).
  const auto now = clock::now();
  if (!o.gone_by) o.gone_by = now + o.exptime + std::chrono::seconds(1);
  return now >= *o.gone_by;
}

}  // namespace dlock::memcached
