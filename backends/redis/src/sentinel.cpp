#include "sentinel.hpp"

#include <algorithm>
#include <charconv>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"
#include "dlock/uri.hpp"

namespace dlock::redis {

namespace {

using std::chrono::milliseconds;

// The space-separated words of a sentinel event's message ("mymaster 127.0.0.1 6379 127.0.0.1 6380").
std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const auto start = s.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    s.remove_prefix(start);
    const auto end = std::min(s.find(' '), s.size());
    out.push_back(s.substr(0, end));
    s.remove_prefix(end);
  }
  return out;
}

std::optional<std::uint16_t> port_of(std::string_view text) {
  unsigned value = 0;
  auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc() || ptr != text.data() + text.size() || value == 0 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

std::string_view text_of(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string_view(r->str, r->len)
                                                                               : std::string_view();
}

}  // namespace

sentinel_settings parse_sentinel_settings(const uri& u, const endpoint& master) {
  sentinel_settings s;
  const auto path = std::string_view(u.path());
  s.master_name = std::string(path.empty() ? path : path.substr(1));
  if (s.master_name.empty() || s.master_name.find('/') != std::string::npos)
    throw error(errc::invalid_uri, "redis: " + u.redacted() +
                                       ": the path must name the master set the sentinels monitor, like "
                                       "redis+sentinel://s1:26379,s2:26379,s3:26379/mymaster (the database is ?db=N)");
  if (u.hosts().empty()) throw error(errc::invalid_uri, "redis: " + u.redacted() + ": name at least one sentinel");
  const auto sentinel_user = u.get("sentinel_user");
  const auto sentinel_password = u.get("sentinel_password");
  // One place for each server's credentials: the master's in the authority, the sentinels' in the
  // query. A sentinel user without its password is a half-given credential, not a default.
  if (sentinel_user && !sentinel_password)
    throw error(errc::invalid_uri, "redis: " + u.redacted() +
                                       ": sentinel_user is given without sentinel_password (the sentinels' own "
                                       "credentials are sentinel_user= and sentinel_password=; the master's are "
                                       "user:password@ before the sentinels)");
  for (const auto& h : u.hosts()) {
    endpoint e;
    e.host = h.host.empty() ? "127.0.0.1" : h.host;
    e.port = h.port_or(26379);
    e.user = sentinel_user.value_or("");
    e.password = sentinel_password;
    e.connect_timeout = master.connect_timeout;
    e.command_timeout = master.command_timeout;
    s.sentinels.push_back(std::move(e));
  }
  return s;
}

sentinel_watch::sentinel_watch(sentinel_settings s) : cfg_(std::move(s)) {}

std::string sentinel_watch::label() const {
  std::string out = "master set '" + cfg_.master_name + "' (sentinels ";
  for (std::size_t i = 0; i < cfg_.sentinels.size(); ++i) out += (i ? "," : "") + cfg_.sentinels[i].label();
  return out + ")";
}

std::unique_ptr<connection> sentinel_watch::open_sentinel(std::size_t index, milliseconds read_timeout,
                                                          std::error_code& ec) noexcept {
  try {
    auto where = cfg_.sentinels[index];
    where.command_timeout = read_timeout;
    auto c = connection::open(where, ec);
    if (!c && ec == make_error_code(errc::authentication_failed))
      set_error(ec, ec,
                "sentinel " + last_error_message() +
                    " (a sentinel's own credentials are sentinel_user= and sentinel_password=; the "
                    "master's are user:password@ before the sentinels)");
    return c;
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory");
    return nullptr;
  }
}

std::optional<sentinel_watch::address> sentinel_watch::ask(std::error_code& ec) noexcept {
  try {
    std::size_t first = 0;
    std::uint64_t switches_seen = 0;
    std::optional<address> replaced, stale;
    std::size_t stale_index = 0;
    {
      std::lock_guard lock(mutex_);
      first = preferred_;
      switches_seen = switches_;
      replaced = replaced_;
    }
    std::string unreachable, unknown, not_sentinel, refused;
    std::error_code refused_ec;
    for (std::size_t k = 0; k < cfg_.sentinels.size(); ++k) {
      const auto i = (first + k) % cfg_.sentinels.size();
      const auto name = cfg_.sentinels[i].label();
      std::error_code one;
      auto c = open_sentinel(i, cfg_.sentinels[i].command_timeout, one);
      if (!c) {
        if (one == make_error_code(errc::authentication_failed)) {
          refused += (refused.empty() ? "" : "; ") + last_error_message();
          refused_ec = one;
        } else {
          unreachable += (unreachable.empty() ? "" : ", ") + name + " (" + last_error_message() + ")";
        }
        continue;
      }
      auto r = c->command({"SENTINEL", "get-master-addr-by-name", cfg_.master_name}, one);
      if (!r) {
        unreachable += (unreachable.empty() ? "" : ", ") + name + " (" + last_error_message() + ")";
        continue;
      }
      if (r->type == REDIS_REPLY_ERROR) {
        not_sentinel += (not_sentinel.empty() ? "" : ", ") + name + " (" + std::string(error_text(r.get())) + ")";
        continue;
      }
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        unknown += (unknown.empty() ? "" : ", ") + name;
        continue;
      }
      const auto port = port_of(text_of(r->element[1]));
      if (!port) {
        unknown += (unknown.empty() ? "" : ", ") + name;
        continue;
      }
      address found{std::string(text_of(r->element[0])), *port};
      if (replaced && found == *replaced) {  // a sentinel behind the switch: ask the others first
        if (!stale) stale_index = i;
        stale = std::move(found);
        continue;
      }
      return settle(found, i, switches_seen);
    }
    if (stale) return settle(*stale, stale_index, switches_seen);
    // Nobody named the master: the most telling reason first. A wrong setting (credentials, a
    // server that is no sentinel, a master set nobody monitors) is not waited out.
    if (!refused.empty()) {
      set_error(ec, refused_ec, refused);
    } else if (!not_sentinel.empty()) {
      set_error(ec, errc::backend_error,
                "redis: " + label() + ": not a Redis Sentinel: " + not_sentinel +
                    "; redis+sentinel:// names the sentinels (usually port 26379), not the master: use redis:// for "
                    "a server without sentinels");
    } else if (!unknown.empty()) {
      set_error(ec, errc::backend_error,
                "redis: no sentinel knows the master set '" + cfg_.master_name + "' (asked " + unknown +
                    (unreachable.empty() ? std::string() : "; unreachable: " + unreachable) +
                    "): check the name after the '/' against the sentinels' 'sentinel monitor' lines");
    } else {
      set_error(ec, errc::backend_unavailable, "redis: no sentinel answered for " + label() + ": " + unreachable);
    }
    return std::nullopt;
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory asking the sentinels");
    return std::nullopt;
  }
}

sentinel_watch::address sentinel_watch::settle(const address& found, std::size_t index,
                                               std::uint64_t switches_seen) noexcept {
  std::lock_guard lock(mutex_);
  if (switches_ != switches_seen && master_) return *master_;
  preferred_ = index;
  master_ = found;
  return found;
}

void sentinel_watch::forget(const address& stale) noexcept {
  std::lock_guard lock(mutex_);
  if (master_ == stale) master_.reset();
}

std::unique_ptr<connection> sentinel_watch::open_master(const endpoint& where, std::error_code& ec) noexcept {
  try {
    // Twice at most: a cached address that fails is asked for again once, and a sentinel that
    // names a server that is not (or no longer) the master during a failover is asked once more.
    for (int round = 0; round < 2; ++round) {
      std::optional<address> at;
      {
        std::lock_guard lock(mutex_);
        at = master_;
      }
      const bool cached = at.has_value();
      if (!at) at = ask(ec);
      if (!at) return nullptr;
      ec.clear();
      auto e = where;
      e.host = at->host;
      e.port = at->port;
      auto c = connection::open(e, ec);
      if (!c) {
        if (spi::stop_requested()) return nullptr;  // abandoned at the acquire's stop: nothing learnt of the master
        forget(*at);
        if (ec == make_error_code(errc::backend_unavailable) && cached) continue;  // moved? ask again
        set_error(ec, ec, last_error_message() + " (the master of " + label() + ")");
        return nullptr;
      }
      auto role = c->command({"ROLE"}, ec);
      if (!role) return nullptr;
      const auto kind = role->type == REDIS_REPLY_ARRAY && role->elements > 0 ? text_of(role->element[0]) : "";
      if (kind == "master") return c;
      forget(*at);
      set_error(ec, errc::backend_unavailable,
                "redis " + e.label() + ": the sentinels of " + label() + " name it the master but ROLE says '" +
                    std::string(kind.empty() ? error_text(role.get()) : kind) +
                    "' (a failover under way?); no lock command goes to a replica");
      if (!cached) return nullptr;
    }
    return nullptr;
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory connecting to the master");
    return nullptr;
  }
}

void sentinel_watch::follow(std::function<void()> moved) {
  {
    std::lock_guard lock(mutex_);
    moved_ = std::move(moved);
  }
  for (std::size_t i = 0; i < cfg_.sentinels.size(); ++i)
    threads_.emplace_back([this, i](std::stop_token stop) { run(stop, i); });
}

void sentinel_watch::stop() noexcept {
  for (auto& t : threads_) t.request_stop();
  threads_.clear();  // joins
  std::lock_guard lock(mutex_);
  moved_ = {};
}

void sentinel_watch::learned(const address& now, std::optional<address> replaced) noexcept {
  std::function<void()> moved;
  {
    std::lock_guard lock(mutex_);
    if (announced_ == now) return;  // each sentinel announces the same switch: one is enough
    announced_ = now;
    if (replaced && !(*replaced == now)) replaced_ = std::move(replaced);
    ++switches_;
    master_ = now;
    moved = moved_;
  }
  if (moved) moved();
}

void sentinel_watch::run(std::stop_token stop, std::size_t index) noexcept {
  constexpr milliseconds slice{200};  // how often a blocked read looks at `stop`
  while (!stop.stop_requested()) {
    std::error_code ec;
    auto c = open_sentinel(index, slice, ec);
    if (!c || !c->append({"SUBSCRIBE", "+switch-master", "+promoted-slave"}) || !c->flush()) {
      for (int i = 0; i < 5 && !stop.stop_requested(); ++i) std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    bool asked = false;
    while (!stop.stop_requested()) {
      auto r = c->read(ec);
      if (!r) {
        if (c->timed_out() && c->resume_after_timeout(slice)) continue;
        break;  // the sentinel went away: connect again
      }
      if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) continue;
      const auto kind = text_of(r->element[0]);
      if (kind == "subscribe" && !asked) {
        // A switch may have happened while nobody listened: ask once now that none is missed.
        asked = true;
        std::optional<address> before;
        {
          std::lock_guard lock(mutex_);
          before = master_;
        }
        std::error_code ignored;
        if (auto now = ask(ignored); now && before && !(*now == *before)) learned(*now, before);
        continue;
      }
      if (kind != "message") continue;
      const auto channel = text_of(r->element[1]);
      const auto w = words(text_of(r->element[2]));
      // "+switch-master <name> <old ip> <old port> <new ip> <new port>": every sentinel says it
      // once it has the new configuration (the failover's leader only at the end of the failover,
      // after reconfiguring the replicas: seconds later than the others here).
      // "+promoted-slave slave <ip:port> <ip> <port> @ <name> <master ip> <master port>": the
      // leader, as soon as the replica it chose says ROLE master. Moving there at once shortens
      // the time this client writes to an old master that is still up (a manual failover).
      if (channel == "+switch-master" && w.size() == 5 && w[0] == cfg_.master_name) {
        const auto old_port = port_of(w[2]);
        if (auto port = port_of(w[4]))
          learned(address{std::string(w[3]), *port},
                  old_port ? std::optional<address>(address{std::string(w[1]), *old_port}) : std::nullopt);
      } else if (channel == "+promoted-slave" && w.size() == 8 && w[5] == cfg_.master_name) {
        const auto old_port = port_of(w[7]);
        if (auto port = port_of(w[3]))
          learned(address{std::string(w[2]), *port},
                  old_port ? std::optional<address>(address{std::string(w[6]), *old_port}) : std::nullopt);
      }
    }
  }
}

}  // namespace dlock::redis
