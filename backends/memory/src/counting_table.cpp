#include "counting_table.hpp"

#include <algorithm>
#include <map>

#include "dlock/error.hpp"

namespace dlock::memory {

counting_table::entry* counting_table::entry_for_locked(const std::string& name, std::uint64_t capacity,
                                                        std::error_code& ec) {
  auto& e = entries_[name];
  if (e.capacity == 0) e.capacity = capacity;
  if (e.capacity == capacity) return &e;
  set_error(ec, errc::invalid_argument,
            "semaphore '" + name + "' is in use with " + std::to_string(e.capacity) + " permits; this one says " +
                std::to_string(capacity) + " (every user of a name must give the same max_count)");
  return nullptr;
}

unit_ticket counting_table::grant_locked(entry& e, std::uint64_t units, std::chrono::milliseconds ttl,
                                         clock::time_point now) {
  const auto id = ++last_id_;
  auto link = std::make_shared<lease_link>();
  e.holders.push_back(holder{id, units, now + ttl, link});
  e.used += units;
  // One counter for grant ids and fencing tokens: it only grows, over every name of the table.
  return unit_ticket{id, id, std::move(link), now};
}

void counting_table::hand_on_locked(entry& e, clock::time_point now) {
  // Strict arrival order: the head must fit before anyone behind it is considered.
  while (!e.queue.empty() && e.queue.front()->units <= e.capacity - e.used) {
    waiter* next = e.queue.front();
    e.queue.pop_front();
    next->granted = grant_locked(e, next->units, next->ttl, now);
    next->wake.notify_one();
  }
}

void counting_table::expire_due_locked(entry& e, clock::time_point now, lost_notes& notes) {
  bool freed = false;
  std::erase_if(e.holders, [&](const holder& h) {
    if (h.expires_at > now) return false;
    notes.emplace_back(h.link, make_error_code(errc::lock_lost));
    e.used -= h.units;
    freed = true;
    return true;
  });
  if (freed) hand_on_locked(e, now);
}

void counting_table::erase_if_idle_locked(const std::string& name) {
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.holders.empty() && it->second.queue.empty()) entries_.erase(it);
}

std::optional<unit_ticket> counting_table::try_acquire(const std::string& name, std::uint64_t capacity,
                                                       std::uint64_t units, std::chrono::milliseconds ttl,
                                                       std::error_code& ec) {
  return acquire_until(name, capacity, units, ttl, clock::time_point::min(), ec);
}

std::optional<unit_ticket> counting_table::acquire_until(const std::string& name, std::uint64_t capacity,
                                                         std::uint64_t units, std::chrono::milliseconds ttl,
                                                         clock::time_point deadline, std::error_code& ec) {
  lost_notes notes;
  std::unique_lock lock(mutex_);
  auto now = clock::now();
  entry* e = entry_for_locked(name, capacity, ec);  // stays valid while a waiter of it is queued
  if (!e) {
    erase_if_idle_locked(name);
    return std::nullopt;
  }
  expire_due_locked(*e, now, notes);
  std::optional<unit_ticket> ticket;
  if (e->queue.empty() && units <= e->capacity - e->used) ticket = grant_locked(*e, units, ttl, now);
  if (ticket || now >= deadline) {
    erase_if_idle_locked(name);
    lock.unlock();
    deliver_lost_notes(notes);
    return ticket;
  }

  waiter self{units, ttl, {}, std::nullopt};
  e->queue.push_back(&self);
  for (;;) {
    if (!notes.empty()) {
      lock.unlock();
      deliver_lost_notes(notes);
      lock.lock();
    }
    if (self.granted) return std::move(self.granted);
    now = clock::now();
    if (now >= deadline) {
      e->queue.erase(std::find(e->queue.begin(), e->queue.end(), &self));
      // Leaving may unblock the waiters behind us (we were the head that did not fit).
      hand_on_locked(*e, now);
      erase_if_idle_locked(name);
      lock.unlock();
      deliver_lost_notes(notes);
      return std::nullopt;
    }
    // Sleep until granted, the deadline, or the first holder's expiry (a dead holder never
    // releases: whoever wakes at its expiry frees it and hands on).
    auto wake_at = deadline;
    for (const auto& h : e->holders) wake_at = std::min(wake_at, h.expires_at);
    self.wake.wait_until(lock, wake_at);
    if (!self.granted) expire_due_locked(*e, clock::now(), notes);
  }
}

void counting_table::release(const std::string& name, std::uint64_t id, std::error_code& ec) {
  lost_notes notes;
  {
    std::lock_guard guard(mutex_);
    const auto now = clock::now();
    auto it = entries_.find(name);
    if (it != entries_.end()) expire_due_locked(it->second, now, notes);
    auto found = it == entries_.end() ? decltype(it->second.holders.begin()){}
                                      : std::find_if(it->second.holders.begin(), it->second.holders.end(),
                                                     [&](const holder& h) { return h.id == id; });
    if (it == entries_.end() || found == it->second.holders.end()) {
      set_error(ec, errc::not_owner,
                "memory '" + name + "' grant was no longer held when released: it expired (not renewed within its "
                                    "ttl) or was broken, and its share may have gone to others");
    } else {
      it->second.used -= found->units;
      it->second.holders.erase(found);
      hand_on_locked(it->second, now);
    }
    if (it != entries_.end()) erase_if_idle_locked(name);
  }
  deliver_lost_notes(notes);
}

void counting_table::renew(const std::string& name, std::uint64_t id, std::chrono::milliseconds ttl,
                           std::error_code& ec) {
  lost_notes notes;
  {
    std::lock_guard guard(mutex_);
    const auto now = clock::now();
    auto it = entries_.find(name);
    if (it != entries_.end()) expire_due_locked(it->second, now, notes);
    holder* found = nullptr;
    if (it != entries_.end())
      for (auto& h : it->second.holders)
        if (h.id == id) found = &h;
    if (!found) {
      set_error(ec, errc::not_owner,
                "cannot renew memory '" + name + "' grant: it expired (not renewed within its ttl) or was broken");
    } else {
      found->expires_at = std::max(found->expires_at, now + ttl);
    }
    if (it != entries_.end()) erase_if_idle_locked(name);
  }
  deliver_lost_notes(notes);
}

std::size_t counting_table::break_grants(const std::string& name) {
  lost_notes notes;
  std::size_t broken = 0;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      auto& e = it->second;
      broken = e.holders.size();
      for (auto& h : e.holders) notes.emplace_back(h.link, make_error_code(errc::lock_lost));
      e.holders.clear();
      e.used = 0;
      hand_on_locked(e, clock::now());
      erase_if_idle_locked(name);
    }
  }
  deliver_lost_notes(notes);
  return broken;
}

std::size_t counting_table::holders(const std::string& name) {
  lost_notes notes;
  std::size_t live = 0;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      expire_due_locked(it->second, clock::now(), notes);
      live = it->second.holders.size();
      erase_if_idle_locked(name);
    }
  }
  deliver_lost_notes(notes);
  return live;
}

namespace {
std::shared_ptr<counting_table> table_of(std::map<std::string, std::shared_ptr<counting_table>>& tables,
                                         const std::string& ns) {
  auto& t = tables[ns];
  if (!t) t = std::make_shared<counting_table>();
  return t;
}
std::mutex tables_mutex;
// Never destroyed: leases held in static objects may still be released during exit.
auto* rw_tables = new std::map<std::string, std::shared_ptr<counting_table>>();
auto* semaphore_tables = new std::map<std::string, std::shared_ptr<counting_table>>();
}  // namespace

std::shared_ptr<counting_table> rw_table_for(const std::string& ns) {
  std::lock_guard guard(tables_mutex);
  return table_of(*rw_tables, ns);
}

std::shared_ptr<counting_table> semaphore_table_for(const std::string& ns) {
  std::lock_guard guard(tables_mutex);
  return table_of(*semaphore_tables, ns);
}

}  // namespace dlock::memory
