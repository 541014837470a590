#include "cluster.hpp"

#include <algorithm>
#include <charconv>

#include "dlock/error.hpp"
#include "dlock/uri.hpp"
#include "pipeline.hpp"

namespace dlock::redis {

namespace {

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the cluster specification's checksum.
constexpr std::array<std::uint16_t, 256> crc16_table = [] {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    t[i] = crc;
  }
  return t;
}();

std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (const unsigned char c : data)
    crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[((crc >> 8) ^ c) & 0xff]);
  return crc;
}

std::string text_of(const redisReply* r) {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return {};
  return {r->str, r->len};
}

}  // namespace

std::uint16_t key_slot(std::string_view key) noexcept {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<std::uint16_t>(crc16(key) & (cluster_slots - 1));
}

std::optional<redirection> redirection_of(const redisReply* r) noexcept {
  const auto text = error_text(r);
  redirection out;
  std::string_view rest;
  if (text.starts_with("MOVED ")) {
    rest = text.substr(6);
  } else if (text.starts_with("ASK ")) {
    out.ask = true;
    rest = text.substr(4);
  } else {
    return std::nullopt;
  }
  const auto space = rest.find(' ');
  const auto colon = rest.rfind(':');  // the host may be an IPv6 address
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) return std::nullopt;
  unsigned slot = 0, port = 0;
  const auto slot_text = rest.substr(0, space), port_text = rest.substr(colon + 1);
  if (std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot).ec != std::errc() ||
      slot >= cluster_slots ||
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port).ec != std::errc() || port == 0 ||
      port > 65535)
    return std::nullopt;
  out.slot = static_cast<std::uint16_t>(slot);
  out.port = static_cast<std::uint16_t>(port);
  try {
    out.host = std::string(rest.substr(space + 1, colon - space - 1));
  } catch (...) {
    return std::nullopt;
  }
  return out;
}

node::~node() = default;

cluster_map::cluster_map(std::vector<endpoint> seeds, node_factory make)
    : seeds_(std::move(seeds)), make_(std::move(make)) {}

endpoint cluster_map::with_address(const std::string& host, std::uint16_t port) const {
  endpoint e = seeds_.front();  // credentials, timeouts, learn_server_start
  e.host = host;
  e.port = port;
  return e;
}

std::shared_ptr<node> cluster_map::node_at_locked(const endpoint& where) {
  auto& n = nodes_[where.label()];
  if (!n) n = make_(where);
  return n;
}

std::shared_ptr<node> cluster_map::at(const std::string& host, std::uint16_t port) noexcept {
  try {
    std::lock_guard lock(mutex_);
    return node_at_locked(with_address(host, port));
  } catch (...) {
    return nullptr;
  }
}

std::vector<std::shared_ptr<node>> cluster_map::known() noexcept {
  std::vector<std::shared_ptr<node>> out;
  try {
    std::lock_guard lock(mutex_);
    for (const auto& [label, n] : nodes_) out.push_back(n);
  } catch (...) {
  }
  return out;
}

std::string cluster_map::label() const {
  std::string out = "cluster ";
  for (std::size_t i = 0; i < seeds_.size(); ++i) out += (i ? "," : "") + seeds_[i].label();
  return out;
}

std::unique_ptr<connection> cluster_map::open_any(const endpoint& where, std::error_code& ec) noexcept {
  std::vector<endpoint> candidates;
  try {
    {
      std::lock_guard lock(mutex_);
      for (const auto& [label, n] : nodes_) candidates.push_back(n->connections->where());
    }
    for (const auto& s : seeds_) candidates.push_back(s);
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory connecting");
    return nullptr;
  }
  std::error_code first;
  std::string first_message;
  for (auto& c : candidates) {
    c.user = where.user;
    c.password = where.password;
    c.learn_server_start = where.learn_server_start;
    ec.clear();
    if (auto opened = connection::open(c, ec)) return opened;
    if (!first || ec == errc::authentication_failed) {  // a refused password says more than a down node
      first = ec;
      first_message = last_error_message();
    }
  }
  set_error(ec, first ? static_cast<errc>(first.value()) : errc::backend_unavailable,
            first_message.empty() ? "redis " + label() + ": no node reachable" : first_message);
  return nullptr;
}

void cluster_map::refresh(std::error_code& ec) noexcept {
  std::lock_guard one_at_a_time(refresh_mutex_);
  refresh_locked(ec);
}

void cluster_map::refresh_locked(std::error_code& ec) noexcept {
  try {
    std::vector<endpoint> candidates;
    {
      std::lock_guard lock(mutex_);
      for (const auto& n : owner_)
        if (n && std::find_if(candidates.begin(), candidates.end(), [&](const endpoint& e) {
                   return e.label() == n->connections->where().label();
                 }) == candidates.end())
          candidates.push_back(n->connections->where());
    }
    candidates.insert(candidates.end(), seeds_.begin(), seeds_.end());
    {
      // The nodes that could not be reached last time are asked last.
      std::lock_guard lock(mutex_);
      std::stable_partition(candidates.begin(), candidates.end(),
                            [&](const endpoint& e) { return !unreachable_.contains(e.label()); });
    }
    std::error_code failed;
    std::string failed_message;
    for (const auto& where : candidates) {
      std::error_code open_ec;
      auto c = connection::open(where, open_ec);
      if (!c) {
        if (open_ec == errc::backend_unavailable) {
          std::lock_guard lock(mutex_);
          unreachable_.insert(where.label());
        }
        if (!failed || open_ec == errc::authentication_failed) {
          failed = open_ec;
          failed_message = last_error_message();
        }
        continue;
      }
      reachable(where);
      auto r = c->command({"CLUSTER", "SLOTS"}, open_ec);
      if (!r) continue;
      if (r->type == REDIS_REPLY_ERROR) {
        // "ERR This instance has cluster support disabled": no use asking the others.
        set_error(ec, errc::backend_error,
                  "redis " + where.label() + ": the server is not in cluster mode (CLUSTER SLOTS answered '" +
                      std::string(error_text(r.get())) +
                      "'); use redis:// for a single server, redis+sentinel:// for a Sentinel set");
        return;
      }
      std::array<std::shared_ptr<node>, cluster_slots> owners{};
      std::size_t covered = 0;
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
        const auto* range = r->element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 || range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER || range->element[2]->type != REDIS_REPLY_ARRAY ||
            range->element[2]->elements < 2 || range->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
          continue;
        const auto first_slot = range->element[0]->integer, last_slot = range->element[1]->integer;
        if (first_slot < 0 || last_slot >= static_cast<long long>(cluster_slots) || first_slot > last_slot) continue;
        auto host = text_of(range->element[2]->element[0]);
        // An empty or unknown ("?") endpoint means the address we asked (the specification).
        if (host.empty() || host == "?") host = where.host;
        auto master =
            node_at_locked(with_address(host, static_cast<std::uint16_t>(range->element[2]->element[1]->integer)));
        for (auto s = first_slot; s <= last_slot; ++s) owners[static_cast<std::size_t>(s)] = master;
        covered += static_cast<std::size_t>(last_slot - first_slot + 1);
      }
      if (covered == 0) {
        set_error(ec, errc::backend_error,
                  "redis " + where.label() +
                      ": the cluster serves no slot yet (CLUSTER SLOTS is empty): "
                      "create it first (redis-cli --cluster create)");
        return;
      }
      owner_ = std::move(owners);
      stale_ = false;
      ec.clear();
      return;
    }
    set_error(ec, failed ? static_cast<errc>(failed.value()) : errc::backend_unavailable,
              failed_message.empty() ? "redis " + label() + ": no node of the cluster reachable" : failed_message);
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory reading the cluster's slot map");
  }
}

std::shared_ptr<node> cluster_map::for_slot(std::uint16_t slot, std::error_code& ec) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (owner_[slot] && !stale_) return owner_[slot];
  }
  std::lock_guard one_at_a_time(refresh_mutex_);
  {
    // The threads that found the map stale together: the first reads it, the others use its answer.
    std::lock_guard lock(mutex_);
    if (owner_[slot] && !stale_) return owner_[slot];
  }
  refresh_locked(ec);
  std::lock_guard lock(mutex_);
  if (owner_[slot]) {
    ec.clear();  // a failed refresh still leaves the last map's (or a MOVED's) owner
    return owner_[slot];
  }
  if (!ec)
    set_error(ec, errc::backend_unavailable,
              "redis " + label() + ": slot " + std::to_string(slot) +
                  " has no master now (a failover or a migration in progress, or the cluster is down)");
  return nullptr;
}

void cluster_map::mark_stale() noexcept {
  std::lock_guard lock(mutex_);
  stale_ = true;
}

void cluster_map::unreachable(const endpoint& where) noexcept {
  try {
    std::lock_guard lock(mutex_);
    stale_ = true;
    unreachable_.insert(where.label());
  } catch (...) {
  }
}

void cluster_map::reachable(const endpoint& where) noexcept {
  std::lock_guard lock(mutex_);
  if (!unreachable_.empty()) unreachable_.erase(where.label());
}

std::shared_ptr<node> cluster_map::moved(const redirection& to) noexcept {
  try {
    std::lock_guard lock(mutex_);
    auto n = node_at_locked(with_address(to.host, to.port));
    owner_[to.slot] = n;
    stale_ = true;  // others slots may have moved with it: the next lookup reads the map again
    return n;
  } catch (...) {
    return nullptr;
  }
}

std::vector<endpoint> parse_cluster_seeds(const uri& u, const endpoint& first) {
  if (!u.path().empty() && u.path() != "/")
    throw error(errc::invalid_uri, "redis: " + u.redacted() +
                                       ": a cluster URI has no path (a Redis Cluster has only database 0); "
                                       "expected " +
                                       u.scheme() + "://host:port,host:port,...");
  std::vector<endpoint> seeds;
  for (const auto& h : u.hosts()) {
    endpoint e = first;
    e.host = h.host.empty() ? "127.0.0.1" : h.host;
    e.port = h.port_or(6379);
    seeds.push_back(std::move(e));
  }
  return seeds;
}

}  // namespace dlock::redis
