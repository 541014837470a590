#include "memory_table.hpp"

#include <algorithm>
#include <map>

#include "dlock/error.hpp"

namespace dlock::memory {


// ---- table -----------------------------------------------------------------------------------

grant_ticket table::grant_locked(entry& e, const std::string& owner, std::chrono::milliseconds ttl,
                                 clock::time_point now) {
  grant g;
  g.owner = owner;
  g.generation = ++last_generation_;
  g.token = ++last_token_;
  g.expires_at = now + ttl;
  auto link = std::make_shared<lease_link>();
  g.holds.push_back(link);
  e.held = std::move(g);
  return grant_ticket{e.held->generation, e.held->token, std::move(link), now};
}

grant_ticket table::join_locked(entry& e, std::chrono::milliseconds ttl, clock::time_point now) {
  // A reentrant acquisition joins the grant: one more hold, the same generation and token. The
  // grant's expiry only ever moves later, so a short-ttl inner lease cannot cut the outer one's.
  auto& g = *e.held;
  g.expires_at = std::max(g.expires_at, now + ttl);
  auto link = std::make_shared<lease_link>();
  g.holds.push_back(link);
  return grant_ticket{g.generation, g.token, std::move(link), now};
}

void table::free_locked(entry& e, clock::time_point now, std::error_code reason, lost_notes& notes) {
  if (reason) {
    for (auto& link : e.held->holds) notes.emplace_back(link, reason);
  }
  e.held.reset();
  // FIFO hand-off: the lock goes straight to the oldest waiter, so nobody arriving later can
  // barge in between the release and the waiter waking up.
  if (!e.queue.empty()) {
    waiter* next = e.queue.front();
    e.queue.pop_front();
    next->granted = grant_locked(e, next->owner, next->ttl, now);
    next->wake.notify_one();
  }
}

void table::expire_if_due_locked(entry& e, clock::time_point now, lost_notes& notes) {
  if (e.held && e.held->expires_at <= now) free_locked(e, now, make_error_code(errc::lock_lost), notes);
}

void table::erase_if_idle_locked(const std::string& name) {
  auto it = entries_.find(name);
  if (it != entries_.end() && !it->second.held && it->second.queue.empty()) entries_.erase(it);
}

std::optional<grant_ticket> table::try_acquire(const std::string& name, const std::string& owner,
                                               std::chrono::milliseconds ttl) {
  lost_notes notes;
  std::optional<grant_ticket> ticket;
  {
    std::lock_guard guard(mutex_);
    const auto now = clock::now();
    auto& e = entries_[name];
    expire_if_due_locked(e, now, notes);
    if (!e.held) {
      if (e.queue.empty()) ticket = grant_locked(e, owner, ttl, now);
      // else: the expiry just handed the lock to the oldest waiter.
    } else if (e.held->owner == owner) {
      ticket = join_locked(e, ttl, now);
    }
    erase_if_idle_locked(name);
  }
  deliver_lost_notes(notes);
  return ticket;
}

std::optional<grant_ticket> table::acquire_until(const std::string& name, const std::string& owner,
                                                 std::chrono::milliseconds ttl, clock::time_point deadline) {
  lost_notes notes;
  std::unique_lock lock(mutex_);
  auto now = clock::now();
  auto& e = entries_[name];  // stays valid: an entry with a waiter in its queue is never erased
  expire_if_due_locked(e, now, notes);
  std::optional<grant_ticket> ticket;
  if (!e.held && e.queue.empty()) {
    ticket = grant_locked(e, owner, ttl, now);
  } else if (e.held && e.held->owner == owner) {
    ticket = join_locked(e, ttl, now);
  }
  if (ticket || now >= deadline) {
    erase_if_idle_locked(name);
    lock.unlock();
    deliver_lost_notes(notes);
    return ticket;
  }

  waiter self{owner, ttl, {}, std::nullopt};
  e.queue.push_back(&self);
  for (;;) {
    if (!notes.empty()) {
      lock.unlock();
      deliver_lost_notes(notes);
      lock.lock();
    }
    if (self.granted) return std::move(self.granted);
    now = clock::now();
    if (now >= deadline) {
      e.queue.erase(std::find(e.queue.begin(), e.queue.end(), &self));
      erase_if_idle_locked(name);
      return std::nullopt;
    }
    // Sleep until granted, the deadline, or the current grant's expiry (a dead holder never
    // releases: whoever wakes first at its expiry frees it and hands it to the oldest waiter).
    auto wake_at = deadline;
    if (e.held && e.held->expires_at < wake_at) wake_at = e.held->expires_at;
    self.wake.wait_until(lock, wake_at);
    if (!self.granted) expire_if_due_locked(e, clock::now(), notes);
  }
}

void table::release(const std::string& name, std::uint64_t generation, const std::shared_ptr<lease_link>& link,
                    std::error_code& ec) {
  lost_notes notes;
  {
    std::lock_guard guard(mutex_);
    const auto now = clock::now();
    auto it = entries_.find(name);
    if (it != entries_.end()) expire_if_due_locked(it->second, now, notes);
    if (it == entries_.end() || !it->second.held || it->second.held->generation != generation) {
      set_error(ec, errc::not_owner,
                "memory lock '" + name + "' was no longer held by this lease when released: its grant expired "
                                         "(not renewed within its ttl) or was broken, and may have gone to another owner");
    } else {
      auto& e = it->second;
      auto& holds = e.held->holds;
      holds.erase(std::remove(holds.begin(), holds.end(), link), holds.end());
      // The grant is freed when its last hold goes, whichever order the leases are released in.
      if (holds.empty()) free_locked(e, now, {}, notes);
    }
    if (it != entries_.end()) erase_if_idle_locked(name);
  }
  deliver_lost_notes(notes);
}

void table::renew(const std::string& name, std::uint64_t generation, std::chrono::milliseconds ttl,
                  std::error_code& ec) {
  lost_notes notes;
  {
    std::lock_guard guard(mutex_);
    const auto now = clock::now();
    auto it = entries_.find(name);
    if (it != entries_.end()) expire_if_due_locked(it->second, now, notes);
    if (it == entries_.end() || !it->second.held || it->second.held->generation != generation) {
      set_error(ec, errc::not_owner,
                "cannot renew memory lock '" + name + "': its grant expired (not renewed within its ttl) or was "
                                                      "broken, and may have gone to another owner");
    } else {
      auto& g = *it->second.held;
      g.expires_at = std::max(g.expires_at, now + ttl);
    }
    if (it != entries_.end()) erase_if_idle_locked(name);
  }
  deliver_lost_notes(notes);
}

bool table::break_grant(const std::string& name) {
  lost_notes notes;
  bool was_held = false;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(name);
    if (it != entries_.end() && it->second.held) {
      free_locked(it->second, clock::now(), make_error_code(errc::lock_lost), notes);
      was_held = true;
      erase_if_idle_locked(name);
    }
  }
  deliver_lost_notes(notes);
  return was_held;
}

bool table::is_held(const std::string& name) {
  lost_notes notes;
  bool held = false;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      expire_if_due_locked(it->second, clock::now(), notes);
      held = it->second.held.has_value();
      erase_if_idle_locked(name);
    }
  }
  deliver_lost_notes(notes);
  return held;
}

std::size_t table::waiting(const std::string& name) {
  std::lock_guard guard(mutex_);
  auto it = entries_.find(name);
  return it == entries_.end() ? 0 : it->second.queue.size();
}

std::shared_ptr<table> table_for(const std::string& ns) {
  static std::mutex mutex;
  static auto* namespaces = new std::map<std::string, std::shared_ptr<table>>();  // never destroyed:
  // leases held in static objects may still be released during exit.
  std::lock_guard guard(mutex);
  auto& t = (*namespaces)[ns];
  if (!t) t = std::make_shared<table>();
  return t;
}

}  // namespace dlock::memory
