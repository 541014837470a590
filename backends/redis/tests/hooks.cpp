// Conformance hooks for redis://, redis+reentrant://, redis+fair://, redlock://, the Sentinel and the Cluster schemes:
// the saboteur deletes the lock key out of band (what an operator, an eviction or a restart without persistence does),
// and the probe asks EXISTS. Raw hiredis, so the probe does not trust the code under test.
#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "dlock/uri.hpp"
#include "dlock_test/hooks.hpp"
#include "raw_redis.hpp"

namespace {

using dlock::testing::raw_redis::context_ptr;
using dlock::testing::raw_redis::reply_ptr;

context_ptr connect(const dlock::uri& u, const dlock::host_port& h) {
  context_ptr c(redisConnect(h.host.c_str(), h.port_or(6379)));
  if (!c || c->err) throw std::runtime_error("redis hooks: cannot connect to " + h.to_string());
  if (u.password()) {
    const char* argv[3];
    size_t lens[3];
    int n = 0;
    argv[n] = "AUTH";
    lens[n++] = 4;
    if (!u.user().empty()) {
      argv[n] = u.user().data();
      lens[n++] = u.user().size();
    }
    argv[n] = u.password()->data();
    lens[n++] = u.password()->size();
    freeReplyObject(redisCommandArgv(c.get(), n, argv, lens));
  }
  if (!u.path().empty() && u.path() != "/") {
    const auto db = u.path().substr(1);
    freeReplyObject(redisCommand(c.get(), "SELECT %s", db.c_str()));
  }
  return c;
}

long long run(redisContext* c, const char* cmd, std::string_view key) {
  auto* r = static_cast<redisReply*>(redisCommand(c, cmd, key.data(), key.size()));
  if (!r) throw std::runtime_error("redis hooks: no reply");
  const long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  freeReplyObject(r);
  return v;
}

std::string key_of(const dlock::uri& u, std::string_view name) {
  return u.get("prefix").value_or("") + std::string(name);
}

void break_lock(const std::string& text, const dlock::lease& held) {
  const auto u = dlock::uri::parse(text);
  for (const auto& h : u.hosts()) run(connect(u, h).get(), "DEL %b", key_of(u, held.name()));
}

bool is_held(const std::string& text, std::string_view name) {
  const auto u = dlock::uri::parse(text);
  std::size_t holding = 0;
  for (const auto& h : u.hosts()) holding += run(connect(u, h).get(), "EXISTS %b", key_of(u, name)) == 1;
  return holding >= u.hosts().size() / 2 + 1;
}

// redis+sentinel:// and its reentrant and fair forms: the same DEL and EXISTS, sent to the master
// the sentinels name (asked with raw hiredis too).

// The master the first answering sentinel names, connected (AUTH and db as the URI says).
context_ptr sentinel_master_of(const dlock::uri& u) {
  const auto name = u.path().substr(1);
  for (const auto& h : u.hosts()) {
    context_ptr s(redisConnect(h.host.c_str(), h.port_or(26379)));
    if (!s || s->err) continue;
    reply_ptr r(static_cast<redisReply*>(redisCommand(s.get(), "SENTINEL get-master-addr-by-name %s", name.c_str())));
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) continue;
    context_ptr c(redisConnect(r->element[0]->str, std::stoi(r->element[1]->str)));
    if (!c || c->err) continue;
    if (u.password()) {
      reply_ptr a(static_cast<redisReply*>(
          u.user().empty() ? redisCommand(c.get(), "AUTH %s", u.password()->c_str())
                           : redisCommand(c.get(), "AUTH %s %s", u.user().c_str(), u.password()->c_str())));
    }
    if (auto db = u.get("db")) reply_ptr(static_cast<redisReply*>(redisCommand(c.get(), "SELECT %s", db->c_str())));
    return c;
  }
  throw std::runtime_error("sentinel hooks: no sentinel named the master of " + u.redacted());
}

void sentinel_break_lock(const std::string& text, const dlock::lease& held) {
  const auto u = dlock::uri::parse(text);
  run(sentinel_master_of(u).get(), "DEL %b", key_of(u, held.name()));
}

bool sentinel_is_held(const std::string& text, std::string_view name) {
  const auto u = dlock::uri::parse(text);
  return run(sentinel_master_of(u).get(), "EXISTS %b", key_of(u, name)) == 1;
}

// redis+cluster:// and its reentrant and fair forms: the same DEL and EXISTS, on the node that
// answers for the key: the URI names every node, and all but the slot's master answer MOVED
// (found without CLUSTER SLOTS, so the probe shares no routing logic with the code under test).
reply_ptr on_key_owner(const std::string& text, const char* cmd, std::string_view key) {
  const auto u = dlock::uri::parse(text);
  for (const auto& h : u.hosts()) {
    auto c = connect(u, h);  // a cluster URI has no path: no SELECT
    reply_ptr r(static_cast<redisReply*>(redisCommand(c.get(), cmd, key.data(), key.size())));
    if (r && r->type == REDIS_REPLY_INTEGER) return r;
  }
  throw std::runtime_error("cluster hooks: no node of " + u.redacted() + " answered for the key");
}

void cluster_break_lock(const std::string& text, const dlock::lease& held) {
  (void)on_key_owner(text, "DEL %b", key_of(dlock::uri::parse(text), held.name()));
}

bool cluster_is_held(const std::string& text, std::string_view name) {
  return on_key_owner(text, "EXISTS %b", key_of(dlock::uri::parse(text), name))->integer == 1;
}

// All three on one server (directly or through Sentinel), on a cluster and on Redlock's masters.
// The holder is named by its grant's token or Redisson owner field, not by the owner id.
constexpr dlock::testing::backend_hooks::inspection_support server_inspection{
    .inspect = true,
    .list = true,
    .force_release = true,
    .owner = dlock::testing::backend_hooks::inspection_support::owner_record::server_id};

}  // namespace

DLOCK_TEST_HOOKS("redis", {.break_lock = break_lock, .is_held_on_server = is_held, .inspection = server_inspection});
DLOCK_TEST_HOOKS("redis+reentrant",
                 {.break_lock = break_lock, .is_held_on_server = is_held, .inspection = server_inspection});
DLOCK_TEST_HOOKS("redis+fair",
                 {.break_lock = break_lock, .is_held_on_server = is_held, .inspection = server_inspection});
DLOCK_TEST_HOOKS("redlock", {.break_lock = break_lock, .is_held_on_server = is_held, .inspection = server_inspection});
DLOCK_TEST_HOOKS("redis+sentinel", {.break_lock = sentinel_break_lock,
                                    .is_held_on_server = sentinel_is_held,
                                    .data_servers_announced = true,
                                    .inspection = server_inspection});
DLOCK_TEST_HOOKS("redis+reentrant+sentinel", {.break_lock = sentinel_break_lock,
                                              .is_held_on_server = sentinel_is_held,
                                              .data_servers_announced = true,
                                              .inspection = server_inspection});
DLOCK_TEST_HOOKS("redis+fair+sentinel", {.break_lock = sentinel_break_lock,
                                         .is_held_on_server = sentinel_is_held,
                                         .data_servers_announced = true,
                                         .inspection = server_inspection});
DLOCK_TEST_HOOKS("redis+cluster", {.break_lock = cluster_break_lock,
                                   .is_held_on_server = cluster_is_held,
                                   .data_servers_announced = true,
                                   .inspection = server_inspection});
DLOCK_TEST_HOOKS("redis+reentrant+cluster", {.break_lock = cluster_break_lock,
                                             .is_held_on_server = cluster_is_held,
                                             .data_servers_announced = true,
                                             .inspection = server_inspection});
DLOCK_TEST_HOOKS("redis+fair+cluster", {.break_lock = cluster_break_lock,
                                        .is_held_on_server = cluster_is_held,
                                        .data_servers_announced = true,
                                        .inspection = server_inspection});
