#include "dlock/backend.hpp"

#include <algorithm>
#include <new>

#include "dlock/error.hpp"
#include "dlock/spi.hpp"
#include "errors_caught.hpp"
#include "local_wait_queue.hpp"
#include "observation.hpp"
#include "or_throw.hpp"

namespace dlock {

backend::backend(capabilities caps, lock_scope scope, name_limits limits, lock_options defaults,
                 std::string redacted_uri)
    : backend(caps, primitive_caps{}, scope, limits, std::move(defaults), std::move(redacted_uri)) {}

backend::backend(capabilities caps, primitive_caps primitives, lock_scope scope, name_limits limits,
                 lock_options defaults, std::string redacted_uri)
    : caps_(with_primitives(caps, primitives)),
      primitives_(primitives),
      scope_(scope),
      limits_(limits),
      defaults_(std::move(defaults)),
      redacted_uri_(std::move(redacted_uri)),
      wait_lines_(std::make_shared<detail::local_wait_queues>()),
      observation_(std::make_shared<detail::observation_point>(redacted_uri_.substr(0, redacted_uri_.find(':')))) {}

backend::~backend() = default;

void backend::set_observer(std::shared_ptr<observer> target) { observation_->set(std::move(target)); }

std::shared_ptr<observer> backend::observed_by() const { return observation_->current(); }

std::unique_ptr<distributed_lock> backend::make_lock(std::string_view name) { return make_lock(name, defaults_); }

std::unique_ptr<distributed_lock> backend::make_lock(std::string_view name, std::error_code& ec) noexcept {
  return make_lock(name, defaults_, ec);
}

std::unique_ptr<distributed_lock> backend::make_lock(std::string_view name, lock_options options) {
  return detail::or_throw([&](std::error_code& ec) { return make_lock(name, std::move(options), ec); });
}

bool backend::check_lock_name(std::string_view name, std::error_code& ec) const noexcept {
  const std::string limit = "1 to " + std::to_string(limits_.max_length) + " bytes";
  if (name.empty()) {
    set_error(ec, errc::invalid_name, "lock name is empty; " + redacted_uri_ + " accepts names of " + limit);
    return false;
  }
  if (name.size() > limits_.max_length) {
    set_error(ec, errc::invalid_name,
              "lock name of " + std::to_string(name.size()) + " bytes is too long; " + redacted_uri_ +
                  " accepts names of " + limit);
    return false;
  }
  return true;
}

bool backend::check_make(std::string_view name, lock_options& options, std::error_code& ec) const noexcept {
  if (!check_lock_name(name, ec)) return false;
  check_lock_options(options, ec);
  if (ec) return false;
  try {
    if (options.owner.empty()) options.owner = spi::default_owner_id();
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, e.what());
    return false;
  }
  return true;
}

// Runs a backend's do_make_* and maps what it throws (or a null result) to ec.
template <class Make>
static auto made_or_error(const std::string& redacted_uri, std::error_code& ec, Make&& make) noexcept
    -> decltype(make()) {
  return detail::errors_caught(ec, [&] {
    auto made = make();
    if (!made) set_error(ec, errc::backend_error, "backend " + redacted_uri + " made nothing");
    return made;
  });
}

std::unique_ptr<distributed_lock> backend::make_lock(std::string_view name, lock_options options,
                                                     std::error_code& ec) noexcept {
  return make_lock_by(&backend::do_make_lock, name, std::move(options), ec);
}

std::unique_ptr<distributed_lock> backend::do_make_election_lock(std::string name, lock_options options) {
  return do_make_lock(std::move(name), std::move(options));
}

std::unique_ptr<distributed_lock> backend::make_lock_by(lock_maker maker, std::string_view name, lock_options options,
                                                        std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (!check_make(name, options, ec)) return nullptr;
  return made_or_error(redacted_uri_, ec, [&] {
    auto lock = (this->*maker)(std::string(name), std::move(options));
    // Keyed by the lock's own name: a backend that wraps another one's lock names it the same.
    if (lock && !lock->line_) lock->line_ = wait_lines_->for_name(std::string(lock->name()));
    if (lock) lock->observation_ = observation_;
    return lock;
  });
}

void backend::refuse_primitive(std::string_view what, capability needed, std::error_code& ec) const noexcept {
  set_error(ec, errc::not_supported,
            redacted_uri_ + " makes no " + std::string(what) + " (it lacks the capability " +
                std::string(to_string(needed)) + "; `dlock backends` lists the schemes that have it, and the " +
                "backend's README says why this one has none)");
}

std::unique_ptr<rw_lock> backend::make_rw_lock(std::string_view name) { return make_rw_lock(name, defaults_); }

std::unique_ptr<rw_lock> backend::make_rw_lock(std::string_view name, std::error_code& ec) noexcept {
  return make_rw_lock(name, defaults_, ec);
}

std::unique_ptr<rw_lock> backend::make_rw_lock(std::string_view name, lock_options options) {
  return detail::or_throw([&](std::error_code& ec) { return make_rw_lock(name, std::move(options), ec); });
}

std::unique_ptr<rw_lock> backend::make_rw_lock(std::string_view name, lock_options options,
                                               std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (!primitives_.rw_lock) {
    refuse_primitive("reader-writer lock", capability::read_write, ec);
    return nullptr;
  }
  if (!check_make(name, options, ec)) return nullptr;
  return made_or_error(redacted_uri_, ec, [&] {
    auto made = do_make_rw_lock(std::string(name), std::move(options));
    if (made) made->observation_ = observation_;
    return made;
  });
}

std::unique_ptr<multi_lock> backend::make_multi_lock(std::vector<std::string> names) {
  return make_multi_lock(std::move(names), defaults_);
}

std::unique_ptr<multi_lock> backend::make_multi_lock(std::vector<std::string> names, std::error_code& ec) noexcept {
  return make_multi_lock(std::move(names), defaults_, ec);
}

std::unique_ptr<multi_lock> backend::make_multi_lock(std::vector<std::string> names, lock_options options) {
  return detail::or_throw(
      [&](std::error_code& ec) { return make_multi_lock(std::move(names), std::move(options), ec); });
}

std::unique_ptr<multi_lock> backend::make_multi_lock(std::vector<std::string> names, lock_options options,
                                                     std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (names.empty()) {
    set_error(ec, errc::invalid_argument, "a set of locks needs at least one name; got none");
    return nullptr;
  }
  return detail::errors_caught(ec, [&]() -> std::unique_ptr<multi_lock> {
    // The canonical order: std::string compares as unsigned bytes (char_traits<char>), the same
    // in every process whatever its locale.
    std::sort(names.begin(), names.end());
    if (const auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
      set_error(ec, errc::invalid_name,
                "lock name '" + *twice + "' is given twice in a set of locks; expected each name once");
      return nullptr;
    }
    // One owner for the whole set, checked once (the names are checked by make_lock).
    if (!check_make(names.front(), options, ec)) return nullptr;
    std::vector<std::unique_ptr<distributed_lock>> members;
    members.reserve(names.size());
    for (const auto& name : names) {
      auto member = make_lock(name, options, ec);
      if (!member) return nullptr;
      members.push_back(std::move(member));
    }
    try {
      return std::unique_ptr<multi_lock>(new multi_lock(std::move(members)));  // its constructor is private
    } catch (const std::bad_alloc&) {
      set_error(ec, errc::backend_error, "out of memory making a set of locks");
      return nullptr;
    }
  });
}

std::unique_ptr<semaphore> backend::make_semaphore(std::string_view name, std::uint32_t max_count) {
  return make_semaphore(name, max_count, defaults_);
}

std::unique_ptr<semaphore> backend::make_semaphore(std::string_view name, std::uint32_t max_count,
                                                   std::error_code& ec) noexcept {
  return make_semaphore(name, max_count, defaults_, ec);
}

std::unique_ptr<semaphore> backend::make_semaphore(std::string_view name, std::uint32_t max_count,
                                                   lock_options options) {
  return detail::or_throw([&](std::error_code& ec) { return make_semaphore(name, max_count, std::move(options), ec); });
}

std::unique_ptr<semaphore> backend::make_semaphore(std::string_view name, std::uint32_t max_count, lock_options options,
                                                   std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (!primitives_.semaphore) {
    refuse_primitive("semaphore", capability::semaphore, ec);
    return nullptr;
  }
  if (max_count < 1 || max_count > max_semaphore_count) {
    set_error(ec, errc::invalid_argument,
              "semaphore '" + std::string(name) + "': max_count must be 1 to " + std::to_string(max_semaphore_count) +
                  ", got " + std::to_string(max_count));
    return nullptr;
  }
  if (!check_make(name, options, ec)) return nullptr;
  return made_or_error(redacted_uri_, ec, [&] {
    auto made = do_make_semaphore(std::string(name), max_count, std::move(options));
    if (made) made->observation_ = observation_;
    return made;
  });
}

// The SPI's signature: the parameters are sinks that the backends' overrides move from.
// NOLINTNEXTLINE(performance-unnecessary-value-param): the default only throws; overrides move them
std::unique_ptr<rw_lock> backend::do_make_rw_lock(std::string, lock_options) {
  throw error(errc::not_supported, redacted_uri_ + " makes no reader-writer lock");
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the default only throws; overrides move them
std::unique_ptr<semaphore> backend::do_make_semaphore(std::string, std::uint32_t, lock_options) {
  throw error(errc::not_supported, redacted_uri_ + " makes no semaphore");
}

void check_lock_options(const lock_options& options, std::error_code& ec) noexcept {
  ec.clear();
  if (options.ttl <= std::chrono::milliseconds::zero() || options.ttl > longest_duration)
    return set_error(ec, errc::invalid_argument,
                     "ttl must be from 1ms to " + format_duration(longest_duration) + " (10 years), got " +
                         format_duration(options.ttl));
  if (options.renew_every &&
      (*options.renew_every <= std::chrono::milliseconds::zero() || *options.renew_every >= options.ttl))
    return set_error(ec, errc::invalid_argument,
                     "renew period must be positive and shorter than the ttl (" + format_duration(options.ttl) + ")");
  if (options.poll.min <= std::chrono::milliseconds::zero() || options.poll.max < options.poll.min ||
      options.poll.max > longest_duration)
    return set_error(ec, errc::invalid_argument,
                     "poll backoff must satisfy 0 < min <= max <= " + format_duration(longest_duration));
}

std::size_t backend::sweep_expired() {
  return detail::or_throw([&](std::error_code& ec) { return sweep_expired(ec); });
}

std::size_t backend::sweep_expired(std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  return do_sweep_expired(ec);
}

std::size_t backend::do_sweep_expired(std::error_code& ec) noexcept {
  ec.clear();
  return 0;
}

std::string backend::sweep_target() const { return do_sweep_target(); }

std::string backend::do_sweep_target() const { return {}; }

lock_info backend::inspect(std::string_view name) {
  return detail::or_throw([&](std::error_code& ec) { return inspect(name, ec); });
}

lock_info backend::inspect(std::string_view name, std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (!check_lock_name(name, ec)) return {};
  return detail::errors_caught(ec, [&] {
    auto info = do_inspect(std::string(name));
    info.name = std::string(name);
    info.held = !info.holders.empty();
    return info;
  });
}

std::vector<std::string> backend::list(std::string_view prefix) {
  return detail::or_throw([&](std::error_code& ec) { return list(prefix, ec); });
}

std::vector<std::string> backend::list(std::string_view prefix, std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  return detail::errors_caught(ec, [&] {
    auto names = do_list(std::string(prefix));
    // The contract for every backend: only names under the prefix, sorted, each once.
    std::erase_if(names, [&](const std::string& n) { return !n.starts_with(prefix); });
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  });
}

std::vector<lock_holder> backend::force_release(std::string_view name) {
  return detail::or_throw([&](std::error_code& ec) { return force_release(name, ec); });
}

std::vector<lock_holder> backend::force_release(std::string_view name, std::error_code& ec) noexcept {
  clear_last_error_message();
  ec.clear();
  if (!check_lock_name(name, ec)) return {};
  return detail::errors_caught(ec, [&] { return do_force_release(std::string(name)); });
}

void backend::refuse_inspection(std::string_view what) const {
  const auto scheme = redacted_uri_.substr(0, redacted_uri_.find(':'));
  throw error(errc::not_supported, std::string(scheme) + ":// cannot " + std::string(what) +
                                       " (its server keeps no record it can be asked about; see the backend's README)");
}

lock_info backend::do_inspect(const std::string&) { refuse_inspection("inspect a lock"); }

std::vector<std::string> backend::do_list(const std::string&) { refuse_inspection("list the held locks"); }

std::vector<lock_holder> backend::do_force_release(const std::string&) { refuse_inspection("break a lock"); }

std::string_view to_string(hold_kind kind) noexcept {
  switch (kind) {
    case hold_kind::mutex: return "mutex";
    case hold_kind::read: return "read";
    case hold_kind::write: return "write";
    case hold_kind::permits: return "permits";
  }
  return "mutex";
}

}  // namespace dlock
