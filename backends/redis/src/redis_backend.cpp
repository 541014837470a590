#include "redis_backend.hpp"

#include <utility>

#include "capabilities.hpp"
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
    } else {
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
