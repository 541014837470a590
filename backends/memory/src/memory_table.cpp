#include "memory_table.hpp"

#include <algorithm>
#include <map>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"

namespace dlock::memory {
namespace {

const char* what_is_asked(use kind) {
  switch (kind) {
    case use::mutex: return "a mutex";
    case use::reader_writer: return "a reader-writer lock";
    case use::semaphore: return "a semaphore";
  }
  return "a lock";
}

}  // namespace

table::entry* table::entry_for_locked(const std::string& name, const request& r, std::error_code& ec) {
  auto& e = entries_[name];
  if (e.holders.empty() && e.queue.empty()) {  // new, or idle: the request says what it is now
    e.kind = r.kind;
    e.capacity = r.capacity;
    return &e;
  }
  const bool held_as_semaphore = e.kind == use::semaphore;
  if (held_as_semaphore != (r.kind == use::semaphore)) {
    // Holders are never absent here: a queue forms only behind holders, and every release hands
    // the units on to the queue's head.
    std::string in_use_as;
    if (held_as_semaphore) {
      in_use_as = "a semaphore (" + std::to_string(e.used) + " of " + std::to_string(e.capacity) + " permits held)";
    } else {
      const bool mutex = std::any_of(e.holders.begin(), e.holders.end(), [](const holder& h) { return h.mutex; });
      in_use_as = mutex ? "a mutex" : "a reader-writer lock";
    }
    set_error(ec, errc::name_conflict,
              "lock '" + name + "' is in use as " + in_use_as + " in this memory:// namespace; " +
                  what_is_asked(r.kind) + " of the same name cannot be taken: use another name");
    return nullptr;
  }
  if (e.capacity != r.capacity) {  // only semaphores differ in capacity
    set_error(ec, errc::name_conflict,
              "semaphore '" + name + "' is in use with " + std::to_string(e.capacity) + " permits; this one says " +
                  std::to_string(r.capacity) + " (every user of a name must give the same max_count)");
    return nullptr;
  }
  return &e;
}

ticket table::grant_locked(entry& e, const request& r, clock::time_point now) {
  const auto id = ++last_token_;
  auto link = std::make_shared<lease_link>();
  e.holders.push_back(holder{id,
                             r.units,
                             now + r.ttl,
                             r.owner ? *r.owner : std::string(),
                             r.kind == use::mutex,
                             std::chrono::system_clock::now(),
                             {link}});
  e.used += r.units;
  return ticket{id, id, std::move(link), now};
}

bool table::would_grant_locked(const entry& e, const request& r) {
  const bool reentry = r.kind == use::mutex && std::any_of(e.holders.begin(), e.holders.end(), [&](const holder& h) {
                         return h.mutex && h.owner == *r.owner;
                       });
  return reentry || (e.queue.empty() && r.units <= e.capacity - e.used);
}

std::optional<ticket> table::attempt_locked(entry& e, const request& r, clock::time_point now) {
  if (r.kind == use::mutex) {
    // A re-entry joins its owner's grant as one more hold, with the same id and token, wherever
    // the queue stands (the waiters wait for that very grant). The grant's expiry only ever moves
    // later, so a short-ttl inner lease cannot cut the outer one's.
    for (auto& h : e.holders) {
      if (!h.mutex || h.owner != *r.owner) continue;
      h.expires_at = std::max(h.expires_at, now + r.ttl);
      auto link = std::make_shared<lease_link>();
      h.holds.push_back(link);
      return ticket{h.id, h.id, std::move(link), now};
    }
  }
  if (e.queue.empty() && r.units <= e.capacity - e.used) return grant_locked(e, r, now);
  return std::nullopt;
}

void table::hand_on_locked(entry& e, clock::time_point now) {
  // Strict arrival order: the head must fit before anyone behind it is considered, so a waiting
  // mutex or writer holds back the readers queued after it.
  while (!e.queue.empty() && e.queue.front()->asked.units <= e.capacity - e.used) {
    waiter* next = e.queue.front();
    e.queue.pop_front();
    next->granted = grant_locked(e, next->asked, now);
    next->wake.notify_one();
  }
}

void table::free_locked(entry& e, std::vector<holder>::iterator h, clock::time_point now) {
  e.used -= h->units;
  e.holders.erase(h);
  hand_on_locked(e, now);
}

void table::expire_due_locked(entry& e, clock::time_point now, lost_notes& notes) {
  bool freed = false;
  std::erase_if(e.holders, [&](const holder& h) {
    if (h.expires_at > now) return false;
    for (const auto& link : h.holds) notes.emplace_back(link, make_error_code(errc::lock_lost));
    e.used -= h.units;
    freed = true;
    return true;
  });
  if (freed) hand_on_locked(e, now);
}

void table::erase_if_idle_locked(const std::string& name) {
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.holders.empty() && it->second.queue.empty()) entries_.erase(it);
}

std::optional<ticket> table::try_acquire(const std::string& name, const request& r, std::error_code& ec) {
  return acquire_until(name, r, clock::time_point::min(), ec);
}

std::optional<std::vector<ticket>> table::try_acquire_all(std::span<const std::string* const> names, const request& r,
                                                          std::error_code& ec) {
  lost_notes notes;
  std::unique_lock lock(mutex_);
  const auto now = clock::now();
  std::vector<entry*> found;  // an unordered_map's elements stay where they are as others are added
  for (const auto* name : names) {
    if (auto it = entries_.find(*name); it != entries_.end()) expire_due_locked(it->second, now, notes);
    entry* e = entry_for_locked(*name, r, ec);
    if (e == nullptr || !would_grant_locked(*e, r)) break;
    found.push_back(e);
  }
  std::optional<std::vector<ticket>> granted;
  if (found.size() == names.size()) {
    granted.emplace();
    for (auto* e : found) granted->push_back(*attempt_locked(*e, r, now));
  }
  for (const auto* name : names) erase_if_idle_locked(*name);
  lock.unlock();
  deliver_lost_notes(notes);
  return granted;
}

std::optional<ticket> table::acquire_until(const std::string& name, const request& r, clock::time_point deadline,
                                           std::error_code& ec) {
  lost_notes notes;
  std::unique_lock lock(mutex_);
  auto now = clock::now();
  if (auto it = entries_.find(name); it != entries_.end()) expire_due_locked(it->second, now, notes);
  entry* e = entry_for_locked(name, r, ec);  // stays valid while a waiter of it is queued
  std::optional<ticket> granted;
  if (e) granted = attempt_locked(*e, r, now);
  if (!e || granted || now >= deadline) {
    erase_if_idle_locked(name);
    lock.unlock();
    deliver_lost_notes(notes);
    return granted;
  }

  waiter self{r, {}, std::nullopt};
  e->queue.push_back(&self);
  for (;;) {
    if (!notes.empty()) {
      lock.unlock();
      deliver_lost_notes(notes);
      lock.lock();
    }
    if (self.granted) return std::move(self.granted);
    now = clock::now();
    if (now >= deadline || spi::stop_requested()) {
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
    (void)spi::wait_until(self.wake, lock, wake_at, [&] { return self.granted.has_value(); });  // or a stop
    if (!self.granted) expire_due_locked(*e, clock::now(), notes);
  }
}

template <class Look>
void table::with_entry(const std::string& name, Look&& look) {
  lost_notes notes;
  {
    std::lock_guard guard(mutex_);
    const auto now = clock::now();
    auto it = entries_.find(name);
    entry* e = it == entries_.end() ? nullptr : &it->second;
    if (e) expire_due_locked(*e, now, notes);
    look(e, now);
    if (e) erase_if_idle_locked(name);
  }
  deliver_lost_notes(notes);
}

void table::release(const std::string& name, std::uint64_t id, const std::shared_ptr<lease_link>& link,
                    std::error_code& ec) {
  with_entry(name, [&](entry* e, clock::time_point now) {
    auto found = e ? std::find_if(e->holders.begin(), e->holders.end(), [&](const holder& h) { return h.id == id; })
                   : std::vector<holder>::iterator();
    if (!e || found == e->holders.end()) {
      set_error(ec, errc::not_owner,
                "memory lock '" + name +
                    "' was no longer held by this lease when released: its grant expired "
                    "(not renewed within its ttl) or was broken, and may have gone to another owner");
      return;
    }
    auto& holds = found->holds;
    holds.erase(std::remove(holds.begin(), holds.end(), link), holds.end());
    // The grant is freed when its last hold goes, whichever order the leases are released in.
    if (holds.empty()) free_locked(*e, found, now);
  });
}

void table::renew(const std::string& name, std::uint64_t id, std::chrono::milliseconds ttl, std::error_code& ec) {
  with_entry(name, [&](entry* e, clock::time_point now) {
    holder* found = nullptr;
    if (e)
      for (auto& h : e->holders)
        if (h.id == id) found = &h;
    if (!found) {
      set_error(ec, errc::not_owner,
                "cannot renew memory lock '" + name +
                    "': its grant expired (not renewed within its ttl) or was "
                    "broken, and may have gone to another owner");
      return;
    }
    found->expires_at = std::max(found->expires_at, now + ttl);
  });
}

std::size_t table::break_grants(const std::string& name) {
  lost_notes notes;
  std::size_t broken = 0;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      auto& e = it->second;
      broken = e.holders.size();
      for (auto& h : e.holders)
        for (const auto& link : h.holds) notes.emplace_back(link, make_error_code(errc::lock_lost));
      e.holders.clear();
      e.used = 0;
      hand_on_locked(e, clock::now());
      erase_if_idle_locked(name);
    }
  }
  deliver_lost_notes(notes);
  return broken;
}

std::size_t table::holders(const std::string& name) {
  std::size_t live = 0;
  with_entry(name, [&](entry* e, clock::time_point) { live = e ? e->holders.size() : 0; });
  return live;
}

lock_holder table::describe(const entry& e, const holder& h, clock::time_point now) {
  lock_holder out;
  out.owner = h.owner;
  if (e.kind == use::semaphore) {
    out.kind = hold_kind::permits;
    out.count = static_cast<std::uint32_t>(h.units);
  } else {
    out.kind = h.mutex ? hold_kind::mutex : (h.units == 1 ? hold_kind::read : hold_kind::write);
  }
  out.since = h.since;
  out.ttl_left = std::chrono::ceil<std::chrono::milliseconds>(h.expires_at - now);
  out.fencing_token = h.id;
  return out;
}

lock_info table::inspect(const std::string& name) {
  lock_info info;
  info.waiters_known = true;
  with_entry(name, [&](entry* e, clock::time_point now) {
    if (!e) return;
    for (const auto& h : e->holders) info.holders.push_back(describe(*e, h, now));
    for (const waiter* w : e->queue) {
      lock_waiter out;
      if (w->asked.owner) out.owner = *w->asked.owner;
      if (w->asked.kind == use::semaphore)
        out.kind = hold_kind::permits;
      else if (w->asked.kind == use::mutex)
        out.kind = hold_kind::mutex;
      else
        out.kind = w->asked.units == 1 ? hold_kind::read : hold_kind::write;
      info.waiters.push_back(std::move(out));
    }
  });
  return info;
}

std::vector<std::string> table::held_names(const std::string& prefix) {
  std::vector<std::string> names;
  {
    std::lock_guard guard(mutex_);
    const auto now = clock::now();
    for (const auto& [name, e] : entries_) {
      if (!name.starts_with(prefix)) continue;
      // Expired grants are not held; they are freed by the next call on the name.
      if (std::any_of(e.holders.begin(), e.holders.end(), [&](const holder& h) { return h.expires_at > now; }))
        names.push_back(name);
    }
  }
  return names;
}

std::vector<lock_holder> table::force_release(const std::string& name) {
  lost_notes notes;
  std::vector<lock_holder> removed;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      auto& e = it->second;
      const auto now = clock::now();
      expire_due_locked(e, now, notes);
      for (auto& h : e.holders) {
        removed.push_back(describe(e, h, now));
        for (const auto& link : h.holds) notes.emplace_back(link, make_error_code(errc::lock_lost));
      }
      e.holders.clear();
      e.used = 0;
      hand_on_locked(e, now);
      erase_if_idle_locked(name);
    }
  }
  deliver_lost_notes(notes);
  return removed;
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
