// The helpers of the Redis Cluster tests (declared, with what each is for, in
// redis_cluster_support.hpp): raw views of the cluster, slot moves, the repair of the cluster after
// a fault, the guarded resource and its waiters, the fixture.
#include "redis_cluster_support.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "dlock_test/support.hpp"

namespace dlock::testing::redis_cluster {

namespace {

constexpr int slot_count = 16384;

// A field of INFO <section> or CLUSTER INFO ("field:value" lines), or "" when absent.
std::string field_of(const reply_ptr& r, const std::string& field) {
  if (!r || r->type != REDIS_REPLY_STRING) return "";
  const std::string text(r->str, r->len);
  const auto at = text.find(field + ":");
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return "";
  const auto from = at + field.size() + 1;
  return text.substr(from, text.find_first_of("\r\n", from) - from);
}

std::chrono::seconds uptime_of(int port) {
  const auto v = info(port, "server", "uptime_in_seconds");
  return std::chrono::seconds(v.empty() ? 0 : std::stol(v));
}

// One line of CLUSTER NODES.
struct cluster_node {
  std::string id;
  int port = -1;
  std::string flags;
  std::string master_id;  // "-" for a master
  bool connected = false;
  std::vector<std::pair<int, int>> slots;
  // The node's own slots in migration: "[slot->-id]" (migrating to id), "[slot-<-id]" (importing).
  struct open_slot {
    int slot;
    bool migrating;
    std::string peer_id;
  };
  std::vector<open_slot> open_slots;

  bool has_flag(const std::string& f) const {
    std::stringstream in(flags);
    for (std::string one; std::getline(in, one, ',');)
      if (one == f) return true;
    return false;
  }
  bool is_master() const { return has_flag("master"); }
  bool failing() const { return has_flag("fail") || has_flag("fail?") || has_flag("handshake") || has_flag("noaddr"); }
  int slot_total() const {
    int n = 0;
    for (auto [from, to] : slots) n += to - from + 1;
    return n;
  }
};

std::vector<cluster_node> nodes_seen_by(int port) {
  std::vector<cluster_node> out;
  auto r = ask(port, {"CLUSTER", "NODES"});
  if (!r || r->type != REDIS_REPLY_STRING) return out;
  std::stringstream lines(std::string(r->str, r->len));
  for (std::string line; std::getline(lines, line);) {
    std::stringstream in(line);
    std::vector<std::string> f;
    for (std::string w; in >> w;) f.push_back(w);
    if (f.size() < 8) continue;
    cluster_node n;
    n.id = f[0];
    const auto colon = f[1].find(':'), at = f[1].find('@');
    n.port = colon == std::string::npos ? -1 : std::stoi(f[1].substr(colon + 1, at - colon - 1));
    n.flags = f[2];
    n.master_id = f[3];
    n.connected = f[7] == "connected";
    for (std::size_t i = 8; i < f.size(); ++i) {
      const auto& s = f[i];
      if (s.front() == '[') {
        const bool migrating = s.find("->-") != std::string::npos;
        const auto arrow = s.find(migrating ? "->-" : "-<-");
        n.open_slots.push_back(
            {std::stoi(s.substr(1, arrow - 1)), migrating, s.substr(arrow + 3, s.size() - arrow - 4)});
      } else if (const auto dash = s.find('-'); dash == std::string::npos) {
        n.slots.emplace_back(std::stoi(s), std::stoi(s));
      } else {
        n.slots.emplace_back(std::stoi(s.substr(0, dash)), std::stoi(s.substr(dash + 1)));
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

std::string node_id(int port) { return text_of(ask(port, {"CLUSTER", "MYID"})); }

std::vector<std::string> keys_in_slot(int port, int slot) {
  std::vector<std::string> out;
  auto r = ask(port, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100000"});
  if (r && r->type == REDIS_REPLY_ARRAY)
    for (std::size_t i = 0; i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
  return out;
}

// The cluster is healthy: every process runs and answers, every node says cluster_state:ok with
// all 16384 slots ok and knows the six nodes, no slot is in migration, every node sees the same
// three masters (owning the same slots) each with one linked replica, and every replica's link
// to its master is up and synced (min_replicas needs it: WAIT counts only linked replicas).
bool healthy() {
  std::optional<std::string> shared_view;
  for (int p : cluster_ports()) {
    if (dlock::testing::launcher_pid(process_of(p)) <= 0 || !answers(p)) return false;
    auto r = ask(p, {"CLUSTER", "INFO"});
    if (field_of(r, "cluster_state") != "ok" || field_of(r, "cluster_slots_assigned") != "16384" ||
        field_of(r, "cluster_slots_ok") != "16384" || field_of(r, "cluster_known_nodes") != "6" ||
        field_of(r, "cluster_size") != "3")
      return false;
    const auto nodes = nodes_seen_by(p);
    if (nodes.size() != 6) return false;
    std::map<std::string, int> replicas_of;
    std::map<std::string, std::string> view;  // id -> what it is, to compare the nodes' views
    for (const auto& n : nodes) {
      if (n.failing() || !n.connected || !n.open_slots.empty()) return false;
      if (n.is_master()) {
        if (n.slot_total() == 0) return false;
        replicas_of.try_emplace(n.id, 0);
        std::string slots;
        for (auto [from, to] : n.slots) slots += " " + std::to_string(from) + "-" + std::to_string(to);
        view[n.id] = "master" + slots;
      } else {
        ++replicas_of[n.master_id];
        view[n.id] = "replica of " + n.master_id;
      }
    }
    if (replicas_of.size() != 3) return false;
    for (const auto& [id, count] : replicas_of)
      if (count != 1) return false;
    std::string flat;
    for (const auto& [id, what] : view) flat += id + " " + what + "\n";
    if (shared_view && *shared_view != flat) return false;
    shared_view = flat;
    if (info(p, "replication", "role") == "slave" && (info(p, "replication", "master_link_status") != "up" ||
                                                      info(p, "replication", "master_sync_in_progress") != "0"))
      return false;
  }
  return true;
}

// The ports of the nodes by id, as `port` sees them.
std::map<std::string, int> ports_by_id(int port) {
  std::map<std::string, int> out;
  for (const auto& n : nodes_seen_by(port)) out[n.id] = n.port;
  return out;
}

}  // namespace

std::string cluster_uri() { return dlock::testing::server_uri("DLOCK_REDIS_CLUSTER_URI"); }

std::vector<int> cluster_ports() {
  std::vector<int> out;
  std::stringstream in(dlock::testing::server_uri("DLOCK_REDIS_CLUSTER_PORTS"));
  for (std::string p; std::getline(in, p, ',');) out.push_back(std::stoi(p));
  return out;
}

std::string process_of(int port) {
  const auto ports = cluster_ports();
  for (std::size_t i = 0; i < ports.size(); ++i)
    if (ports[i] == port) return "redis-cluster." + std::to_string(i + 1);
  return "?";
}

raw_node::raw_node(int port) : ctx_(raw_redis::connect_local(port, 5s)) {}

reply_ptr raw_node::command(const std::vector<std::string>& args) { return raw_redis::command(ctx_.get(), args); }

reply_ptr ask(int port, const std::vector<std::string>& args) { return raw_node(port).command(args); }

bool is_error(const reply_ptr& r) { return !r || r->type == REDIS_REPLY_ERROR; }
std::string text_of(const reply_ptr& r) {
  if (!r) return "(no reply)";
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
    return std::string(r->str, r->len);
  if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
  return "(reply of type " + std::to_string(r->type) + ")";
}

bool answers(int port) {
  auto r = ask(port, {"PING"});
  return r && r->type == REDIS_REPLY_STATUS && text_of(r) == "PONG";
}

std::string cluster_info(int port, const std::string& field) { return field_of(ask(port, {"CLUSTER", "INFO"}), field); }
std::string info(int port, const std::string& section, const std::string& field) {
  return field_of(ask(port, {"INFO", section}), field);
}

int keyslot(const std::string& key) {
  for (int p : cluster_ports())
    if (auto r = ask(p, {"CLUSTER", "KEYSLOT", key}); r && r->type == REDIS_REPLY_INTEGER)
      return static_cast<int>(r->integer);
  return -1;
}

std::string prefixed(const std::string& prefix, const std::string& name) {
  return name.find('{') != std::string::npos ? prefix + ":" + name : prefix + ":{" + name + "}";
}

std::optional<slot_owner> owner_seen_by(int port, int slot) {
  auto r = ask(port, {"CLUSTER", "SLOTS"});
  if (!r || r->type != REDIS_REPLY_ARRAY) return std::nullopt;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const auto* range = r->element[i];
    if (range->elements < 3 || slot < range->element[0]->integer || slot > range->element[1]->integer) continue;
    slot_owner o;
    o.master = static_cast<int>(range->element[2]->element[1]->integer);
    if (range->element[2]->elements > 2) o.master_id = range->element[2]->element[2]->str;
    for (std::size_t j = 3; j < range->elements; ++j)
      o.replicas.push_back(static_cast<int>(range->element[j]->element[1]->integer));
    return o;
  }
  return std::nullopt;
}
std::optional<slot_owner> owner_of(int slot) {
  for (int p : cluster_ports())
    if (auto o = owner_seen_by(p, slot)) return o;
  return std::nullopt;
}

std::vector<int> master_ports() {
  std::set<int> out;
  for (int p : cluster_ports()) {
    auto r = ask(p, {"CLUSTER", "SLOTS"});
    if (!r || r->type != REDIS_REPLY_ARRAY) continue;
    for (std::size_t i = 0; i < r->elements; ++i)
      out.insert(static_cast<int>(r->element[i]->element[2]->element[1]->integer));
    break;
  }
  return {out.begin(), out.end()};
}

bool stored_on(int port, const std::string& key) {
  const auto keys = keys_in_slot(port, keyslot(key));
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}
int master_other_than(int port) {
  int other = -1;
  for (int m : master_ports())
    if (m != port) other = m;
  return other;
}

std::vector<int> masters_storing(const std::string& key) {
  std::vector<int> out;
  for (int m : master_ports())
    if (stored_on(m, key)) out.push_back(m);
  return out;
}
std::string type_on(int port, const std::string& key) { return text_of(ask(port, {"TYPE", key})); }

std::string describe_cluster() {
  std::string out;
  for (int p : cluster_ports()) {
    out += "\n  " + process_of(p) + " (" + std::to_string(p) + ", pid " +
           std::to_string(dlock::testing::launcher_pid(process_of(p))) + "): ";
    auto r = ask(p, {"CLUSTER", "NODES"});
    if (!r || r->type != REDIS_REPLY_STRING) {
      out += "does not answer";
      continue;
    }
    out += "cluster_state:" + cluster_info(p, "cluster_state");
    for (const auto& n : nodes_seen_by(p)) {
      out += "\n    " + std::to_string(n.port) + " " + n.flags +
             (n.is_master() ? "" : " of " + n.master_id.substr(0, 8)) + (n.connected ? "" : " disconnected");
      for (auto [from, to] : n.slots) out += " " + std::to_string(from) + "-" + std::to_string(to);
      for (const auto& o : n.open_slots)
        out += " [" + std::to_string(o.slot) + (o.migrating ? "->" : "<-") + o.peer_id.substr(0, 8) + "]";
    }
  }
  return out;
}

bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds bound) {
  for (const auto until = clock_type::now() + bound; clock_type::now() < until; std::this_thread::sleep_for(100ms))
    if (done()) return true;
  return done();
}

std::function<bool()> ready_for(std::chrono::seconds ttl) {
  return [ttl] {
    if (!healthy()) return false;
    for (int p : cluster_ports())
      if (uptime_of(p) <= ttl + 2s) return false;
    return true;
  };
}

slot_move::slot_move(int slot, int from, int to)
    : slot_(slot), from_(from), to_(to), from_id_(node_id(from)), to_id_(node_id(to)) {}

std::string slot_move::open() {
  if (auto r = ask(to_, {"CLUSTER", "SETSLOT", std::to_string(slot_), "IMPORTING", from_id_}); is_error(r))
    return "IMPORTING on " + std::to_string(to_) + ": " + text_of(r);
  if (auto r = ask(from_, {"CLUSTER", "SETSLOT", std::to_string(slot_), "MIGRATING", to_id_}); is_error(r))
    return "MIGRATING on " + std::to_string(from_) + ": " + text_of(r);
  return "";
}

std::string slot_move::move_keys(const std::vector<std::string>& these) {
  for (;;) {
    std::vector<std::string> batch = these;
    if (these.empty()) {
      auto r = ask(from_, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot_), "100"});
      if (!r || r->type != REDIS_REPLY_ARRAY) return "GETKEYSINSLOT on " + std::to_string(from_) + ": " + text_of(r);
      for (std::size_t i = 0; i < r->elements; ++i) batch.emplace_back(r->element[i]->str, r->element[i]->len);
    }
    if (batch.empty()) return "";
    std::vector<std::string> args{"MIGRATE", "127.0.0.1", std::to_string(to_), "", "0", "5000", "KEYS"};
    args.insert(args.end(), batch.begin(), batch.end());
    if (auto r = ask(from_, args); is_error(r)) return "MIGRATE from " + std::to_string(from_) + ": " + text_of(r);
    if (!these.empty()) return "";
  }
}

std::string slot_move::close() {
  std::vector<int> order{to_, from_};  // the target first, as redis-cli does
  for (int m : master_ports())
    if (m != to_ && m != from_) order.push_back(m);
  for (int m : order)
    if (auto r = ask(m, {"CLUSTER", "SETSLOT", std::to_string(slot_), "NODE", to_id_}); is_error(r))
      return "SETSLOT NODE on " + std::to_string(m) + ": " + text_of(r);
  return "";
}

// Puts the cluster back together, whatever a test (or a crashed earlier run) left: stopped nodes
// thawed or started again (a killed master comes back as a replica of the node promoted in its
// place: nodes.conf keeps the membership), slots left in migration moved on to their target,
// unassigned slots given to the master with the fewest, a master left without a replica given
// one from a master with two; then waits until healthy(). An ADD_FAILURE when it cannot.
void restore_cluster() {
  const auto ports = cluster_ports();
  for (int p : ports) {
    const auto proc = process_of(p);
    if (auto pid = dlock::testing::launcher_pid(proc); pid > 0)
      ::kill(pid, SIGCONT);
    else
      dlock::testing::run_launcher("start " + proc);
  }
  if (wait_for(healthy, 5s)) return;
  // Failure detection and failovers settle first (node timeout 1 s): a slot whose master was
  // killed is served again once its replica is promoted, and only then can keys move.
  wait_for(
      [&] {
        for (int p : ports)
          if (!answers(p) || cluster_info(p, "cluster_state") != "ok") return false;
        return true;
      },
      20s);

  // Slots in migration: finished towards the target (the keys already there stay there).
  for (int p : ports) {
    const auto ids = ports_by_id(p);
    for (const auto& n : nodes_seen_by(p)) {
      if (!n.has_flag("myself")) continue;
      for (const auto& o : n.open_slots) {
        const auto peer = ids.find(o.peer_id);
        if (peer == ids.end()) continue;
        const int from = o.migrating ? p : peer->second, to = o.migrating ? peer->second : p;
        slot_move move(o.slot, from, to);
        const auto failed = [&](const std::string& e) {
          if (!e.empty()) std::printf("[ restore  ] slot %d from %d to %d: %s\n", o.slot, from, to, e.c_str());
          return !e.empty();
        };
        if (failed(move.open()) || failed(move.move_keys()) || failed(move.close())) {
          // Cannot be finished (a side is no master any more): both sides forget the migration.
          ask(from, {"CLUSTER", "SETSLOT", std::to_string(o.slot), "STABLE"});
          ask(to, {"CLUSTER", "SETSLOT", std::to_string(o.slot), "STABLE"});
        }
      }
    }
  }

  // Unassigned slots (none unless a node's nodes.conf was lost): to the master with the fewest.
  if (cluster_info(ports[0], "cluster_slots_assigned") != "16384") {
    const auto nodes = nodes_seen_by(ports[0]);
    std::vector<bool> assigned(slot_count, false);
    const cluster_node* poorest = nullptr;
    for (const auto& n : nodes) {
      for (auto [from, to] : n.slots)
        for (int s = from; s <= to; ++s) assigned[static_cast<std::size_t>(s)] = true;
      if (n.is_master() && !n.failing() && (!poorest || n.slot_total() < poorest->slot_total())) poorest = &n;
    }
    for (int s = 0; poorest && s < slot_count; ++s)
      if (!assigned[static_cast<std::size_t>(s)]) ask(poorest->port, {"CLUSTER", "ADDSLOTS", std::to_string(s)});
  }

  // Replicas: a master without one (its replica was promoted elsewhere) takes a spare: a master
  // that owns no slot, or the second replica of another master.
  wait_for(
      [&] {
        const auto nodes = nodes_seen_by(ports[0]);
        std::map<std::string, std::vector<int>> replicas;
        std::vector<std::string> orphans;
        std::vector<int> spares;
        for (const auto& n : nodes)
          if (!n.is_master()) replicas[n.master_id].push_back(n.port);
        for (const auto& n : nodes) {
          if (!n.is_master() || n.failing()) continue;
          if (n.slot_total() == 0)
            spares.push_back(n.port);
          else if (replicas[n.id].empty())
            orphans.push_back(n.id);
          else if (replicas[n.id].size() > 1)
            spares.insert(spares.end(), replicas[n.id].begin() + 1, replicas[n.id].end());
        }
        for (std::size_t i = 0; i < orphans.size() && i < spares.size(); ++i)
          ask(spares[i], {"CLUSTER", "REPLICATE", orphans[i]});
        return orphans.empty();
      },
      20s);

  if (!wait_for(healthy, 60s)) ADD_FAILURE() << "the cluster is not healthy again:" << describe_cluster();
}

void guarded_resource::enter(const dlock::lease& held) {
  if (inside++ != 0) ++overlaps;
  {
    std::lock_guard guard(tokens_mutex);
    tokens.push_back(held.fencing_token().value_or(0));
  }
  read_value = counter.load(std::memory_order_relaxed);
}

void guarded_resource::leave() {
  counter.store(read_value + 1, std::memory_order_relaxed);
  --inside;
}

void guarded_resource::turn(const dlock::lease& held, std::chrono::milliseconds hold) {
  if (inside++ != 0) ++overlaps;
  {
    std::lock_guard guard(tokens_mutex);
    tokens.push_back(held.fencing_token().value_or(0));
  }
  const int v = counter.load(std::memory_order_relaxed);  // lossy on purpose
  std::this_thread::sleep_for(hold);
  counter.store(v + 1, std::memory_order_relaxed);
  --inside;
}

std::string guarded_resource::token_order() {
  std::lock_guard guard(tokens_mutex);
  std::string all;
  for (auto t : tokens) all += " " + std::to_string(t);
  for (std::size_t i = 1; i < tokens.size(); ++i)
    if (tokens[i] <= tokens[i - 1]) return "tokens not strictly increasing:" + all;
  for (auto t : tokens)
    if (t == 0) return "a grant without a fencing token:" + all;
  return "";
}

waiters::waiters(int count, const std::string& uri, const std::string& name, std::chrono::seconds bound,
                 guarded_resource& resource) {
  for (int i = 0; i < count; ++i)
    threads_.emplace_back([this, uri, name, bound, &resource] {
      try {
        auto backend = dlock::open(uri);
        auto lock = backend->make_lock(name);
        ++waiting_;
        auto held = lock->try_acquire_for(bound);
        if (!held) {
          ++not_granted_;
          return;
        }
        resource.turn(held, 5ms);
        std::error_code ec;
        held.release(ec);
        if (ec) ADD_FAILURE() << "a waiter's release failed: " << ec.message();
        ++granted_;
      } catch (const std::exception& e) {
        ++failed_;
        ADD_FAILURE() << "a waiter failed: " << e.what();
      }
    });
}

void waiters::join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void release_and_expect_every_waiter_served(dlock::lease& held, guarded_resource& resource, waiters& waiting,
                                            int waiter_count, const std::string& why) {
  resource.leave();
  std::error_code ec;
  held.release(ec);
  EXPECT_FALSE(ec) << "the holder's release: " << ec.message();
  waiting.join();
  EXPECT_EQ(waiting.failed(), 0);
  EXPECT_EQ(waiting.granted(), waiter_count) << why;
  EXPECT_EQ(resource.overlaps.load(), 0) << "two holders at once";
  EXPECT_EQ(resource.counter.load(), 1 + waiter_count) << "lost updates: the lock did not exclude";
  EXPECT_EQ(resource.token_order(), "");
}

void let_waiters_wait(const waiters& w, int count, int master, const std::string& channel) {
  wait_for([&] { return w.waiting() == count; }, 10s);
  std::this_thread::sleep_for(300ms);
  wait_for(
      [&] {
        auto r = ask(master, {"PUBSUB", "SHARDNUMSUB", channel});
        return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->integer >= count;
      },
      3s);
}

std::shared_ptr<dlock::backend> open_cluster(const std::string& query) { return dlock::open(cluster_uri() + query); }
std::string unique(std::string_view what) { return dlock::testing::unique_name("dlock-cluster:" + std::string(what)); }
void RedisCluster::SetUp() {
  restore_cluster();
  ASSERT_TRUE(wait_for(ready_for(15s), 90s)) << "the cluster is not healthy (or a node is younger than the ttl) before "
                                                "the test:"
                                             << describe_cluster();
}

}  // namespace dlock::testing::redis_cluster
