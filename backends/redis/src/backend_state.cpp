#include "backend_state.hpp"

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

namespace dlock::redis {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

}  // namespace

std::shared_ptr<subscriber> backend_state::subscriber_for_waits() noexcept {
  std::lock_guard lock(mutex_);
  if (!subscriber_) {
    try {
      opener open;
      if (sentinels)
        open = [w = sentinels](const endpoint& where, std::error_code& ec) { return w->open_master(where, ec); };
      else if (cluster)
        open = [c = cluster.get()](const endpoint& where, std::error_code& ec) { return c->open_any(where, ec); };
      std::optional<shard_routing> shards;
      if (config.sharded_pubsub) {
        shards.emplace();
        shards->route = [c = cluster.get()](std::string_view channel) -> std::optional<endpoint> {
          std::error_code ec;
          if (auto n = c->for_slot(key_slot(channel), ec)) return n->connections->where();
          return std::nullopt;
        };
        shards->moved = [c = cluster.get()] { c->mark_stale(); };
      }
      // A dropped subscriber connection: the server restarted or stopped, or (cluster) a master
      // died, whose slots are served elsewhere once its replica is promoted.
      auto dropped = [this] {
        if (cluster) cluster->mark_stale();
        check_held_soon();
      };
      subscriber_ = std::make_shared<subscriber>(config.where, std::move(dropped), std::move(open), std::move(shards));
    } catch (...) {
      return nullptr;
    }
  }
  return subscriber_;
}

void backend_state::watch_server_of(std::string_view key) noexcept {
  auto sub = subscriber_for_waits();
  if (!sub || !cluster) return;  // one server: the subscriber's own connection watches it
  std::error_code ec;
  if (auto n = node_for(key, ec)) sub->watch(n->connections->where());
}

backend_state::~backend_state() {
  if (sentinels) sentinels->stop();  // its thread calls master_moved()
  // A handle may outlive us (see the header): the pools' listeners must not call back.
  if (single) single->connections->on_server_change({});
  if (cluster)
    for (const auto& n : cluster->known()) n->connections->on_server_change({});
}

std::shared_ptr<node> backend_state::node_for(std::string_view key, std::error_code& ec) noexcept {
  if (single) return single;
  return cluster->for_slot(key_slot(key), ec);
}

pool::handle backend_state::checkout_for(std::string_view key, std::error_code& ec) noexcept {
  return checkout_for(key, clock::now() + config.where.connect_timeout, ec);
}

pool::handle backend_state::checkout_for(std::string_view key, clock::time_point deadline,
                                         std::error_code& ec) noexcept {
  auto n = node_for(key, ec);
  if (!n) return {};
  return n->connections->checkout(deadline, ec);
}

namespace {

// An ASK answer: this one script goes to the node importing the slot, right after ASKING on the
// same connection. Sent with its source (EVALSHA's NOSCRIPT retry would need a second ASKING);
// migrations are rare, so it is not pipelined.
pipeline::outcome eval_after_asking(node& target, const script& s, const std::vector<std::string_view>& keys,
                                    const std::vector<std::string_view>& args, clock::time_point deadline,
                                    std::error_code& ec, const std::vector<std::string_view>& trailer) noexcept {
  pipeline::outcome out;
  auto c = target.connections->checkout(deadline, ec);
  if (ec) return out;
  if (auto asking = c->command({"ASKING"}, ec); ec) return out;
  out.reply = c->eval_source(s, keys, args, ec);
  if (!ec && !trailer.empty()) out.trailer = c->command(trailer, ec);
  return out;
}

}  // namespace

pipeline::outcome backend_state::eval(const script& s, const std::vector<std::string_view>& keys,
                                      const std::vector<std::string_view>& args, clock::time_point deadline,
                                      milliseconds min_server_age, std::error_code& ec, bool source_only,
                                      const std::vector<std::string_view>& trailer) noexcept {
  const auto routing_key = keys.empty() ? std::string_view{} : keys.front();
  auto n = node_for(routing_key, ec);
  if (!n) return {};
  if (!cluster) return n->requests->eval(s, keys, args, deadline, min_server_age, ec, source_only, trailer);
  return eval_on_cluster(std::move(n), as_published(config, s), keys, args, deadline, min_server_age, ec, source_only,
                         trailer);
}

// Not const although it changes no member: a MOVED answer updates the cluster's slot map (cluster->moved).
// NOLINTNEXTLINE(readability-make-member-function-const)
pipeline::outcome backend_state::eval_on_cluster(std::shared_ptr<node> n, const script& s,
                                                 const std::vector<std::string_view>& keys,
                                                 const std::vector<std::string_view>& args, clock::time_point deadline,
                                                 milliseconds min_server_age, std::error_code& ec, bool source_only,
                                                 const std::vector<std::string_view>& trailer) noexcept {
  const auto routing_key = keys.empty() ? std::string_view{} : keys.front();
  // A slot moves at most a few times while one request is routed; more redirections in a row than
  // this mean the cluster's nodes disagree (a failover in progress): an outage, tried again later.
  constexpr int max_redirections = 5;
  auto pause = milliseconds(10);
  std::shared_ptr<node> asking;  // after an ASK: the next try goes there, once, after ASKING
  for (int redirections = 0;;) {
    auto out = asking ? eval_after_asking(*asking, s, keys, args, deadline, ec, trailer)
                      : n->requests->eval(s, keys, args, deadline, min_server_age, ec, source_only, trailer);
    asking.reset();
    if (ec || out.withdrawn || !out.reply || out.reply->type != REDIS_REPLY_ERROR) return out;
    const auto to = redirection_of(out.reply.get());
    // TRYAGAIN: a multi-key script while its slot is half migrated (some keys moved, or an importing
    // node asked for keys it does not have yet); CLUSTERDOWN: a failover in progress.
    const bool again = !to && (is_error(out.reply.get(), "TRYAGAIN") || is_error(out.reply.get(), "CLUSTERDOWN"));
    if (!to && !again) return out;  // the script's own error: the caller judges it
    if ((to && ++redirections > max_redirections) || (again && clock::now() + pause >= deadline)) {
      set_error(ec, errc::backend_unavailable,
                "redis " + cluster->label() + ": slot " + std::to_string(key_slot(routing_key)) +
                    " is moving (last answer: " + std::string(error_text(out.reply.get())) +
                    "); the request was not run, try again");
      out.reply.reset();
      return out;
    }
    if (again) {
      std::this_thread::sleep_for(pause);  // the migration moves the rest of the slot's keys meanwhile
      pause = std::min(pause * 2, milliseconds(200));
      redirections = 0;
      continue;  // from the slot's owner again: it answers ASK, or MOVED once the migration ends
    }
    if (to->ask) {
      asking = cluster->at(to->host, to->port);
    } else {
      n = cluster->moved(*to);
    }
    if (!asking && !n) {
      set_error(ec, errc::backend_unavailable, "redis: out of memory following a redirection");
      return {};
    }
  }
}

void backend_state::master_moved() noexcept {
  single->connections->retire_all();  // also checks the held leases (the pool's server-change listener)
  std::lock_guard lock(mutex_);
  if (subscriber_) subscriber_->reconnect();
}

namespace {
std::string key_and_owner(std::string_view key, std::string_view owner) {
  std::string out(key);
  out += '\0';
  out += owner;
  return out;
}
}  // namespace

std::uint64_t backend_state::add_held(spi::lease_state* lease, std::string key, std::string owner) noexcept {
  std::lock_guard lock(held_mutex_);
  const auto id = ++next_held_id_;
  try {
    auto& h = held_.emplace(id, held{lease, std::move(key), std::move(owner)}).first->second;
    ++holds_[key_and_owner(h.key, h.owner)];
  } catch (...) {
    // out of memory: this lease is checked at its renewals only
  }
  return id;
}

void backend_state::remove_held(std::uint64_t id) noexcept {
  std::lock_guard lock(held_mutex_);
  auto it = held_.find(id);
  if (it == held_.end()) return;
  try {
    if (auto h = holds_.find(key_and_owner(it->second.key, it->second.owner)); h != holds_.end() && --h->second == 0)
      holds_.erase(h);
  } catch (...) {
  }
  held_.erase(it);
}

bool backend_state::holds(const std::string& key, const std::string& owner) noexcept {
  try {
    std::lock_guard lock(held_mutex_);
    return holds_.contains(key_and_owner(key, owner));
  } catch (...) {
    return true;  // out of memory: try first, as without waiters
  }
}

void backend_state::note_young_server(const std::string& run_id, milliseconds left, milliseconds ttl) noexcept {
  try {
    {
      std::lock_guard lock(held_mutex_);
      if (run_id == young_run_id_reported_) return;
      young_run_id_reported_ = run_id;
    }
    report_background_error(
        make_error_code(errc::backend_unavailable),
        "redis " + config.where.label() + ": the server started less than a ttl (" + std::to_string(ttl.count()) +
            "ms) ago, or may have (its uptime_in_seconds counts whole wall-clock seconds: a second is "
            "added); no lock is granted for another " +
            std::to_string(left.count()) +
            "ms, so that holders from before a restart without persistence time out first "
            "(wait_after_restart=false turns this off for a server that persists every write)");
  } catch (...) {
  }
}

void backend_state::check_held_soon() noexcept {
  if (check_pending_.exchange(true)) return;  // one check at a time covers every trigger
  post([this](std::stop_token stop) { check_held(stop); });
}

// Asks the server, in one pipeline per node, whether each held key is still ours (GET == token, or
// the owner field present in a hash without 'mode': HMGET key owner mode, so a reader of the
// name's reader-writer lock with the same owner id is not taken for us), retrying until every node answers or every
// lease's validity has run out anyway; marks lost the leases whose grant is gone. Read-only: a lease is never extended
// here. A key whose slot moved meanwhile (MOVED, ASK) is asked again on the next round, after the map.
void backend_state::check_held(std::stop_token stop) noexcept {
  try {
    for (auto pause = std::chrono::milliseconds(50); !stop.stop_requested();
         pause = std::min(pause * 2, std::chrono::milliseconds(500))) {
      check_pending_ = false;  // a trigger from now on checks again
      std::vector<std::pair<std::uint64_t, held>> leases;
      auto latest_validity = clock::time_point::min();
      {
        std::lock_guard lock(held_mutex_);
        for (const auto& [id, h] : held_) {
          leases.emplace_back(id, h);
          latest_validity = std::max(latest_validity, h.lease->valid_until());
        }
      }
      if (leases.empty() || clock::now() >= latest_validity) return;
      // The leases by the node serving their key (one group on a single server).
      std::map<node*, std::pair<std::shared_ptr<node>, std::vector<const std::pair<std::uint64_t, held>*>>> by_node;
      bool all_answered = true;
      for (const auto& l : leases) {
        std::error_code ec;
        if (auto n = node_for(l.second.key, ec)) {
          auto& group = by_node[n.get()];
          group.first = n;
          group.second.push_back(&l);
        } else {
          all_answered = false;
        }
      }
      std::vector<std::uint64_t> gone;
      for (const auto& [raw, group] : by_node) {
        std::error_code ec;
        auto c = group.first->connections->checkout(ec);
        if (ec) {
          all_answered = false;
          continue;
        }
        bool sent = true;
        for (const auto* l : group.second)
          sent =
              sent && (config.lock_mode == mode::simple ? c->append({"GET", l->second.key})
                                                        : c->append({"HMGET", l->second.key, l->second.owner, "mode"}));
        if (!sent || !c->flush()) {
          all_answered = false;
          continue;
        }
        for (const auto* l : group.second) {
          auto r = c->read(ec);
          if (ec) break;
          if (r->type == REDIS_REPLY_ERROR && !is_error(r.get(), "WRONGTYPE")) {  // WRONGTYPE: another format's now
            // Not an answer about the key (a slot moving, a cluster failing over): ask again.
            if (auto to = redirection_of(r.get()); to && !to->ask && cluster) (void)cluster->moved(*to);
            all_answered = false;
            continue;
          }
          const bool ours = config.lock_mode == mode::simple
                                ? r->type == REDIS_REPLY_STRING && std::string_view(r->str, r->len) == l->second.owner
                                : r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                                      r->element[0]->type != REDIS_REPLY_NIL && r->element[1]->type == REDIS_REPLY_NIL;
          if (!ours) gone.push_back(l->first);
        }
        all_answered = all_answered && !ec && c->unanswered() == 0;
      }
      {
        std::lock_guard lock(held_mutex_);
        for (auto id : gone)
          if (auto it = held_.find(id); it != held_.end() && !it->second.lease->released())
            it->second.lease->mark_lost(make_error_code(errc::lock_lost));
      }
      if (all_answered) return;
      background_thread::pause(stop, pause);
    }
  } catch (...) {
    check_pending_ = false;
  }
}

void require_one_slot(const backend_state& s, std::string_view name, std::initializer_list<std::string_view> keys) {
  if (!s.cluster || keys.size() == 0) return;
  const auto slot = key_slot(*keys.begin());
  for (const auto k : keys) {
    if (k.empty() || key_slot(k) == slot) continue;
    throw error(errc::invalid_name,
                "redis+cluster: the keys of '" + std::string(name) + "' fall in different slots ('" +
                    std::string(*keys.begin()) + "' in slot " + std::to_string(slot) + ", '" + std::string(k) +
                    "' in slot " + std::to_string(key_slot(k)) +
                    "), and a cluster runs one script only on keys of one slot; a prefix must end in the name's "
                    "hash tag, or the name must carry one (like '{" +
                    std::string(name) + "}')");
  }
}

std::string server_label(const backend_state& s) {
  if (s.sentinels) return s.sentinels->label();
  if (s.cluster) return s.cluster->label();
  return s.config.where.label();
}

void set_withdrawn_error(std::error_code& ec, const backend_state& s, std::string_view doing) {
  set_error(ec, errc::backend_unavailable,
            "redis " + server_label(s) + ": " + std::string(doing) + ": not sent: all " +
                std::to_string(s.config.pool_size) +
                " connections (pool_size) stayed busy with other requests until the deadline (connect_timeout " +
                std::to_string(s.config.where.connect_timeout.count()) +
                "ms for a call without one, the lease's validity for a release or renewal); raise pool_size");
}

}  // namespace dlock::redis
