// Conformance hooks for memcached://: the saboteur deletes the lock item out of band (what an
// operator, an eviction or a restart does), and with it the name's semaphore slot items (its first
// 64: every permit grant of the name is broken, as memory's break does); the probe reads the item directly.
#include <stdexcept>
#include <string>

#include "../src/client_pool.hpp"
#include "../src/memcached_semaphore.hpp"
#include "dlock/uri.hpp"
#include "dlock_test/hooks.hpp"

namespace {

using namespace dlock::memcached;

memc_ptr connect(const dlock::uri& u) { return make_handle(u, std::chrono::seconds{2}, std::chrono::seconds{2}); }

void break_lock(const std::string& text, const dlock::lease& held) {
  const auto u = dlock::uri::parse(text);
  auto m = connect(u);
  const auto k = keys_for(u.get("prefix").value_or("dlock:"), held.name());
  const auto rc = memcached_delete_by_key(m.get(), k.group.data(), k.group.size(), k.lock.data(), k.lock.size(), 0);
  if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_DELETED && rc != MEMCACHED_NOTFOUND)
    throw std::runtime_error(std::string("memcached hooks: delete failed: ") + memcached_strerror(m.get(), rc));
  const auto sem = semaphore_keys_for(u.get("prefix").value_or("dlock:"), held.name());
  for (std::uint32_t i = 0; i < 64; ++i) {
    const auto slot = sem.slot(i);
    memcached_delete_by_key(m.get(), slot.group.data(), slot.group.size(), slot.lock.data(), slot.lock.size(), 0);
  }
}

bool is_held(const std::string& text, std::string_view name) {
  const auto u = dlock::uri::parse(text);
  auto m = connect(u);
  const auto k = keys_for(u.get("prefix").value_or("dlock:"), name);
  memcached_return_t rc;
  const auto it = gets(m.get(), k, k.lock, rc);
  if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND)
    throw std::runtime_error(std::string("memcached hooks: gets failed: ") + memcached_strerror(m.get(), rc));
  return it.has_value();
}

}  // namespace

DLOCK_TEST_HOOKS("memcached",
                 {.break_lock = break_lock,
                  .is_held_on_server = is_held,
                  .stop_waits_out_a_silent_command = true,
                  .inspection = {.inspect = true,
                                 .list = false,
                                 .force_release = true,
                                 .owner = dlock::testing::backend_hooks::inspection_support::owner_record::server_id}});
