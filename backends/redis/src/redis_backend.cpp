#include "redis_backend.hpp"

#include <algorithm>
#include <utility>

#include "capabilities.hpp"
#include "dlock/acquire_stop.hpp"
#include "redis_keys.hpp"
#include "redis_lease.hpp"
#include "redis_lock.hpp"
#include "redis_primitives.hpp"
#include "renewal.hpp"

namespace dlock::redis {

namespace {

// The declared set (capabilities.hpp) of the scheme that serves mode `m`: on one server, through
// Sentinel or on a cluster.
constexpr capabilities declared_caps(mode m, std::string_view scheme) noexcept {
  const bool via_sentinel = scheme.ends_with("+sentinel"), via_cluster = scheme.ends_with("+cluster");
  switch (m) {
    case mode::simple: return via_sentinel ? redis_sentinel_caps : via_cluster ? redis_cluster_caps : redis_caps;
    case mode::reentrant:
      return via_sentinel  ? redis_reentrant_sentinel_caps
             : via_cluster ? redis_reentrant_cluster_caps
                           : redis_reentrant_caps;
    case mode::fair:
      return via_sentinel ? redis_fair_sentinel_caps : via_cluster ? redis_fair_cluster_caps : redis_fair_caps;
  }
  return redis_caps;
}

// A node of a cluster: its pool and pipeline. A node that cannot be reached, or a connection to it
// that drops, makes the slot map be read again at the next lookup: a dead master never answers
// MOVED, and its slots are served by its promoted replica once the cluster has failed over. A drop
// also makes the held leases be checked, as on a single server.
std::shared_ptr<node> make_node(backend_state& s, const endpoint& where) {
  auto n = std::make_shared<node>();
  auto open = [raw = &s](const endpoint& at, std::error_code& ec) {
    auto c = connection::open(at, ec);
    if (c) {
      raw->cluster->reachable(at);
    } else if (!spi::stop_requested()) {  // an open abandoned at the acquire's stop says nothing of the node
      raw->cluster->unreachable(at);
    }
    return c;
  };
  n->connections = std::make_shared<pool>(where, s.config.pool_size, std::move(open));
  n->requests = std::make_unique<pipeline>(n->connections);
  n->connections->on_server_change([raw = &s] {
    raw->cluster->mark_stale();
    raw->check_held_soon();
  });
  return n;
}

// redis:// (or a Sentinel scheme) at a cluster node would work for the names whose slot that node
// serves and fail for the others: refused at open, naming the scheme that fits.
void refuse_cluster_node(connection& c, const backend_state& s) {
  std::error_code ec;
  auto r = c.command({"INFO", "cluster"}, ec);
  if (ec || r->type != REDIS_REPLY_STRING) return;  // an old server without the section is no cluster
  if (std::string_view(r->str, r->len).find("cluster_enabled:1") == std::string_view::npos) return;
  throw error(errc::backend_error,
              "redis " + server_label(s) +
                  ": the server is a Redis Cluster node, which serves only some slots: use redis+cluster://" +
                  c.where().label() + " (any nodes of the cluster, comma-separated) with the same options");
}

// pubsub=auto: sharded when the cluster's nodes know SPUBLISH (Redis 7), as Redisson's default
// (ShardedSubscriptionMode.AUTO) chooses; a Redisson service on the same names must choose alike.
bool uses_sharded_pubsub(backend_state& s, const uri& u) {
  using choice = settings::pubsub_choice;
  if (s.config.pubsub == choice::classic) return false;
  std::error_code ec;
  const auto masters = s.cluster->known();
  auto c = masters.empty() ? pool::handle{} : masters.front()->connections->checkout(ec);
  if (!c) throw error(ec, last_error_message());
  auto r = c->command({"COMMAND", "INFO", "SPUBLISH"}, ec);
  if (ec) throw error(ec, last_error_message());
  const bool known = r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY;
  if (!known && s.config.pubsub == choice::sharded)
    throw error(errc::backend_error, "redis " + u.redacted() +
                                         ": pubsub=sharded, but the cluster's nodes do not know SPUBLISH (Redis 7 "
                                         "or later has it); use pubsub=auto or classic");
  return known;
}

}  // namespace

redis_backend::redis_backend(const uri& u, const lock_options& defaults, mode m)
    : backend(declared_caps(m, u.scheme()), redis_primitives, lock_scope::network, name_limits{4096}, defaults,
              u.redacted()) {
  auto s = std::make_shared<backend_state>();
  s->config = parse_settings(u, m);
  std::error_code ec;
  if (!s->config.cluster_seeds.empty()) {
    s->cluster = std::make_unique<cluster_map>(
        s->config.cluster_seeds, [raw = s.get()](const endpoint& where) { return make_node(*raw, where); });
    // Read the slot map now, so a wrong password, no reachable node or a server that is no cluster
    // fails at open.
    s->cluster->refresh(ec);
    if (ec) throw error(ec, last_error_message());
    s->config.sharded_pubsub = uses_sharded_pubsub(*s, u);
  } else {
    opener open;
    if (s->config.sentinel) {
      s->sentinels = std::make_shared<sentinel_watch>(*s->config.sentinel);
      open = [w = s->sentinels](const endpoint& where, std::error_code& ec) { return w->open_master(where, ec); };
    }
    s->single = std::make_shared<node>();
    s->single->connections = std::make_shared<pool>(s->config.where, s->config.pool_size, std::move(open));
    s->single->requests = std::make_unique<pipeline>(s->single->connections);
    s->single->connections->on_server_change([raw = s.get()] { raw->check_held_soon(); });
    // Connect now, so a wrong password, an unreachable host or a non-Redis server fails at open.
    auto probe = s->single->connections->checkout(ec);
    if (ec) throw error(ec, last_error_message());
    refuse_cluster_node(*probe, *s);
  }
  s->renewals = std::make_unique<pipelined_renewals<redis_lease>>(*s);
  s->primitive_renewals = make_grant_renewals(*s);
  if (s->sentinels) s->sentinels->follow([raw = s.get()] { raw->master_moved(); });
  state_ = std::move(s);
}

std::unique_ptr<distributed_lock> redis_backend::do_make_lock(std::string name, lock_options options) {
  return make_redis_lock(state_, name, caps(), std::move(options));
}

std::unique_ptr<rw_lock> redis_backend::do_make_rw_lock(std::string name, lock_options options) {
  return make_redis_rw_lock(state_, name, rw_caps(), std::move(options));
}

std::unique_ptr<semaphore> redis_backend::do_make_semaphore(std::string name, std::uint32_t max_count,
                                                            lock_options options) {
  return make_redis_semaphore(state_, name, max_count, semaphore_caps(), std::move(options));
}

}  // namespace dlock::redis

namespace dlock::redis {
namespace {

// One atomic look at a name (and, with ARGV[1] == 'break', its removal): the key's type and PTTL,
// the fencing counter, the fair queue (ARGV[2] == 'queue'), and the key's value (a string) or
// fields (a hash). A string of digits is a semaphore's count: never deleted here. Every key is in
// the name's slot (KEYS[3] is the counter again when there is no queue), and the release is
// published with ARGV[3] (PUBLISH, or SPUBLISH with sharded pub/sub), so it runs on a cluster too.
constexpr const char* inspect_script = R"lua(
local t = redis.call('TYPE', KEYS[1]).ok
local out = {t, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '', {}, {}}
if ARGV[2] == 'queue' then out[4] = redis.call('LRANGE', KEYS[3], 0, -1) end
local lock = false
if t == 'string' then
  local v = redis.call('GET', KEYS[1])
  out[5] = {v}
  lock = not string.match(v, '^%d+$')
elseif t == 'hash' then
  out[5] = redis.call('HGETALL', KEYS[1])
  lock = true
end
if ARGV[1] == 'break' and lock then
  redis.call('DEL', KEYS[1])
  redis.call(ARGV[3], KEYS[4], 0)
  redis.call(ARGV[3], KEYS[5], 1)
end
return out
)lua";

std::string text_of(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string(r->str, r->len)
                                                                               : std::string();
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A key of the lock layouts that SCAN finds: its value names a holder (not a counter or semaphore).
std::string glob_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

lock_info redis_backend::look(const std::string& name, bool remove) {
  const auto& cfg = state_->config;
  const auto keys = keys_for(cfg.prefix, cfg.lock_mode, name);
  std::error_code ec;
  auto c = state_->checkout_for(keys.key, ec);
  if (!c) throw error(ec, last_error_message());
  const bool queued = !keys.queue.empty();
  auto r =
      c->command({"EVAL", inspect_script, "5", keys.key, keys.fence, queued ? keys.queue : keys.fence, keys.channel,
                  keys.rw_channel, remove ? "break" : "look", queued ? "queue" : "", publish_command(cfg)},
                 ec);
  if (ec) throw error(ec, last_error_message());
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 5)
    throw error(errc::backend_error, "redis " + server_label(*state_) + ": unexpected reply inspecting '" + name + "'");
  const auto type = text_of(r->element[0]);
  const auto pttl = r->element[1]->integer;
  const auto fence = text_of(r->element[2]);
  const redisReply* queue = r->element[3];
  const redisReply* value = r->element[4];

  lock_info info;
  info.waiters_known = cfg.lock_mode == mode::fair;
  for (std::size_t i = 0; queue->type == REDIS_REPLY_ARRAY && i < queue->elements; ++i)
    info.waiters.push_back({text_of(queue->element[i]), hold_kind::mutex});
  const std::optional<std::chrono::milliseconds> ttl_left =
      pttl >= 0 ? std::optional(std::chrono::milliseconds(pttl)) : std::nullopt;
  if (type == "string") {
    const auto v = value->elements == 1 ? text_of(value->element[0]) : std::string();
    if (all_digits(v))
      throw error(errc::not_supported, "redis " + server_label(*state_) + ": '" + name +
                                           "' is a semaphore, whose permits are not inspected");
    lock_holder h;
    h.owner = v;  // the grant's token: redis:// records no owner id
    h.ttl_left = ttl_left;
    // The counter's value is this grant's token when a dlock client took it (a redis-py holder
    // takes none, and its value does not start with "dlock:").
    if (v.starts_with("dlock:") && all_digits(fence)) h.fencing_token = std::stoull(fence);
    info.holders.push_back(std::move(h));
  } else if (type == "hash") {
    std::string rw_mode;
    for (std::size_t i = 0; i + 1 < value->elements; i += 2)
      if (text_of(value->element[i]) == "mode") rw_mode = text_of(value->element[i + 1]);
    for (std::size_t i = 0; i + 1 < value->elements; i += 2) {
      const auto field = text_of(value->element[i]);
      if (field == "mode") continue;
      lock_holder h;
      h.owner = field;  // Redisson's "<client uuid>:<hash of the owner id>"
      h.kind = rw_mode.empty() ? hold_kind::mutex : rw_mode == "read" ? hold_kind::read : hold_kind::write;
      h.ttl_left = ttl_left;
      info.holders.push_back(std::move(h));
    }
  }
  return info;
}

lock_info redis_backend::do_inspect(const std::string& name) {
  auto info = look(name, false);
  info.name = name;
  info.held = !info.holders.empty();
  return info;
}

std::vector<lock_holder> redis_backend::do_force_release(const std::string& name) { return look(name, true).holders; }

// SCAN on the server, or on every master of a cluster (each holds the keys of its slots).
std::vector<std::string> redis_backend::do_list(const std::string& prefix) {
  const auto& cfg = state_->config;
  std::error_code ec;
  std::vector<pool::handle> servers;
  if (state_->cluster) {
    state_->cluster->refresh(ec);
    if (ec) throw error(ec, last_error_message());
    std::vector<std::shared_ptr<node>> masters;
    for (std::uint16_t slot = 0; slot < 16384; ++slot) {
      auto n = state_->cluster->for_slot(slot, ec);
      if (!n) throw error(ec, last_error_message());
      if (std::find(masters.begin(), masters.end(), n) == masters.end()) masters.push_back(std::move(n));
    }
    for (const auto& m : masters) {
      servers.push_back(m->connections->checkout(ec));
      if (!servers.back()) throw error(ec, last_error_message());
    }
  } else {
    servers.push_back(state_->checkout_for(cfg.prefix, ec));
    if (!servers.back()) throw error(ec, last_error_message());
  }
  const auto pattern = glob_escaped(cfg.prefix + prefix) + "*";
  std::vector<std::string> names;
  for (auto& c : servers) {
    std::string cursor = "0";
    do {
      auto r = c->command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, ec);
      if (ec) throw error(ec, last_error_message());
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        throw error(errc::backend_error, "redis " + server_label(*state_) + ": unexpected reply to SCAN");
      cursor = text_of(r->element[0]);
      for (std::size_t i = 0; i < r->element[1]->elements; ++i) {
        const auto key = text_of(r->element[1]->element[i]);
        // Derived keys (counters, queues, channels' keys) are Redisson's "redisson_*:{K}" names or
        // "{K}:suffix"; the lock's own key holds a dlock token (a string) or holder fields (a hash).
        auto type = c->command({"TYPE", key}, ec);
        if (ec) throw error(ec, last_error_message());
        const auto t = text_of(type.get());
        bool lock = t == "hash" && key.find('{') == std::string::npos;
        if (t == "string") {
          auto v = c->command({"GET", key}, ec);
          if (ec) throw error(ec, last_error_message());
          lock = text_of(v.get()).starts_with("dlock:");
        }
        if (lock) names.push_back(key.substr(cfg.prefix.size()));
      }
    } while (cursor != "0");
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace dlock::redis
