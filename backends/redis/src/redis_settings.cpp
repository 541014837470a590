#include "redis_settings.hpp"

#include <charconv>
#include <map>
#include <memory>
#include <mutex>

#include "cluster.hpp"
#include "dlock/spi.hpp"

namespace dlock::redis {

const script& as_published(const settings& cfg, const script& s) {
  if (!cfg.sharded_pubsub) return s;
  static std::mutex mutex;
  static std::map<const script*, std::unique_ptr<script>> sharded;  // the scripts are static too
  std::lock_guard lock(mutex);
  auto& variant = sharded[&s];
  if (!variant) {
    std::string source = s.source;
    static constexpr std::string_view plain = "redis.call('publish',", spublish = "redis.call('spublish',";
    for (auto at = source.find(plain); at != std::string::npos; at = source.find(plain, at + spublish.size()))
      source.replace(at, plain.size(), spublish);
    variant = std::make_unique<script>(std::move(source));
  }
  return *variant;
}

std::string_view publish_command(const settings& cfg) noexcept { return cfg.sharded_pubsub ? "spublish" : "publish"; }

std::vector<std::string_view> replica_wait(const settings& cfg) {
  return cfg.replicas.wanted() ? cfg.replicas.wait_command() : std::vector<std::string_view>{};
}

settings parse_settings(const uri& u, mode m) {
  settings s;
  s.lock_mode = m;
  const bool via_sentinel = u.scheme().ends_with("+sentinel");
  const bool via_cluster = u.scheme().ends_with("+cluster");
  if (u.hosts().size() != 1 && !via_sentinel && !via_cluster)
    throw error(errc::invalid_uri, "redis: " + u.redacted() +
                                       ": expected exactly one host (use redlock:// for several independent masters, "
                                       "redis+cluster:// for a Redis Cluster, redis+sentinel:// for a Sentinel set)");
  s.where.host = u.hosts()[0].host.empty() ? "127.0.0.1" : u.hosts()[0].host;
  s.where.port = u.hosts()[0].port_or(6379);
  s.where.user = u.user();
  s.where.password = u.password();
  if (via_sentinel) {
    if (auto v = u.get_int("db", 0, 1 << 20)) s.where.db = static_cast<int>(*v);  // the path names the master set
  } else if (!via_cluster && !u.path().empty() && u.path() != "/") {
    int db = -1;
    const auto p = std::string_view(u.path()).substr(1);
    auto [ptr, err] = std::from_chars(p.data(), p.data() + p.size(), db);
    if (err != std::errc() || ptr != p.data() + p.size() || db < 0)
      throw error(errc::invalid_uri, "redis: " + u.redacted() + ": the path must be a database number, like /0");
    s.where.db = db;
  }
  if (auto v = u.get_duration("connect_timeout")) s.where.connect_timeout = *v;
  if (auto v = u.get_duration("command_timeout")) s.where.command_timeout = *v;
  if (auto v = u.get_int("pool_size", 1, 1024)) s.pool_size = static_cast<std::size_t>(*v);
  if (auto v = u.get("prefix")) s.prefix = *v;
  s.client_id = u.get("client_id").value_or(spi::random_uuid());  // Redisson's id is UUID.randomUUID()
  if (auto v = u.get_duration("fair_wait")) s.fair_wait = *v;
  if (auto v = u.get_bool("wait_after_restart")) s.wait_after_restart = *v;
  s.where.learn_server_start = s.wait_after_restart;
  s.replicas = parse_replication(u, s.where.command_timeout);
  if (via_sentinel) s.sentinel = parse_sentinel_settings(u, s.where);
  if (via_cluster) {
    s.cluster_seeds = parse_cluster_seeds(u, s.where);
    if (auto v = u.get("pubsub")) {
      if (*v == "sharded")
        s.pubsub = settings::pubsub_choice::sharded;
      else if (*v == "classic")
        s.pubsub = settings::pubsub_choice::classic;
      else if (*v != "auto")
        throw error(errc::invalid_uri, "redis: " + u.redacted() + ": pubsub must be auto, sharded or classic, not '" +
                                           std::string(*v) + "'");
    }
  }
  return s;
}

}  // namespace dlock::redis
