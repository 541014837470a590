// Conformance hooks for redis+sentinel://, redis+reentrant+sentinel:// and redis+fair+sentinel://: the redis hooks' DEL and EXISTS, sent to the master the
// sentinels name (asked with raw hiredis, so the probe does not trust the code under test).
#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "dlock/uri.hpp"
#include "dlock_test/hooks.hpp"

namespace {

struct ctx_deleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
using ctx_ptr = std::unique_ptr<redisContext, ctx_deleter>;
struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

ctx_ptr connect(const std::string& host, int port) {
  ctx_ptr c(redisConnect(host.c_str(), port));
  if (!c || c->err) throw std::runtime_error("sentinel hooks: cannot connect to " + host + ":" + std::to_string(port));
  return c;
}

// The master the first answering sentinel names, connected (AUTH and db as the URI says).
ctx_ptr master_of(const dlock::uri& u) {
  const auto name = u.path().substr(1);
  for (const auto& h : u.hosts()) {
    ctx_ptr s(redisConnect(h.host.c_str(), h.port_or(26379)));
    if (!s || s->err) continue;
    reply_ptr r(static_cast<redisReply*>(redisCommand(s.get(), "SENTINEL get-master-addr-by-name %s", name.c_str())));
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) continue;
    auto c = connect(r->element[0]->str, std::stoi(r->element[1]->str));
    if (u.password()) {
      reply_ptr a(static_cast<redisReply*>(u.user().empty()
                                               ? redisCommand(c.get(), "AUTH %s", u.password()->c_str())
                                               : redisCommand(c.get(), "AUTH %s %s", u.user().c_str(), u.password()->c_str())));
    }
    if (auto db = u.get("db")) reply_ptr(static_cast<redisReply*>(redisCommand(c.get(), "SELECT %s", db->c_str())));
    return c;
  }
  throw std::runtime_error("sentinel hooks: no sentinel named the master of " + u.redacted());
}

long long run(redisContext* c, const char* cmd, std::string_view key) {
  reply_ptr r(static_cast<redisReply*>(redisCommand(c, cmd, key.data(), key.size())));
  if (!r) throw std::runtime_error("sentinel hooks: no reply");
  return r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
}

std::string key_of(const dlock::uri& u, std::string_view name) { return u.get("prefix").value_or("") + std::string(name); }

void break_lock(const std::string& text, const dlock::lease& held) {
  const auto u = dlock::uri::parse(text);
  run(master_of(u).get(), "DEL %b", key_of(u, held.name()));
}

bool is_held(const std::string& text, std::string_view name) {
  const auto u = dlock::uri::parse(text);
  return run(master_of(u).get(), "EXISTS %b", key_of(u, name)) == 1;
}

}  // namespace

DLOCK_TEST_HOOKS("redis+sentinel", {.break_lock = break_lock, .is_held_on_server = is_held});
DLOCK_TEST_HOOKS("redis+reentrant+sentinel", {.break_lock = break_lock, .is_held_on_server = is_held});
DLOCK_TEST_HOOKS("redis+fair+sentinel", {.break_lock = break_lock, .is_held_on_server = is_held});
