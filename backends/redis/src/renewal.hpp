#pragma once
// Renewal, as every redis lease does it (the mutex's redis_lease and the reader-writer lock's and
// semaphore's grant_lease): what a renewal script's answer and min_replicas' WAIT mean for the
// lease, one renewal alone (a lease's do_renew), and the watchdog's batches, one pipeline on one
// pooled connection for many leases.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "backend_state.hpp"
#include "connection.hpp"
#include "dlock/spi.hpp"
#include "redis_settings.hpp"
#include "script_call.hpp"

namespace dlock::redis {

// One renewal script call: the script, its keys and its arguments (views into the lease and the
// caller's ttl text).
struct renewal_request {
  const script* s = nullptr;
  std::vector<std::string_view> keys, args;
};

// A renewal script answers 1 when the grant was ours and was extended. `what` names the grant in
// messages ("lock 'x'", "'x'"). READONLY (a master the sentinels demoted) is an outage: the
// renewal is tried again, on a connection to the new master.
void judge_renewal_reply(const redisReply& r, const std::string& what, std::error_code& ec);
// With min_replicas, a renewal fewer replicas confirmed is not counted (the validity is not
// extended; the watchdog tries again while the lease is valid).
void judge_renewal_replicas(const backend_state& s, const redisReply* wait_reply, const std::string& what,
                            std::error_code& ec);

// One renewal of `lease` (a Lease as renew_on_node takes it) through backend_state::eval: a lease's
// do_renew, and a renewal of a batch whose slot moved. Its renewal script for `ttl`, with
// min_replicas' WAIT after it on the same connection, judged by the lease. A request the pipeline
// never sent (every connection busy until the lease's connection_deadline()) fails with the error
// `set_not_sent(ec)` sets, which says so in the caller's words.
template <class Lease, class NotSent>
void renew_alone(backend_state& s, const Lease& lease, std::chrono::milliseconds ttl, std::error_code& ec,
                 NotSent&& set_not_sent) noexcept {
  try {
    const auto ttl_text = ms_text(ttl);
    const auto call = lease.renewal(ttl_text);
    auto out = s.eval(*call.s, call.keys, call.args, lease.connection_deadline(), std::chrono::milliseconds::zero(), ec,
                      false, replica_wait(s.config));
    if (!ec && (out.withdrawn || !out.reply)) set_not_sent(ec);
    if (ec) return;
    lease.judge_renewal(*out.reply, ec);
    if (!ec) lease.judge_replicas(out.trailer.get(), ec);
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory renewing");
  }
}

// Renews `leases` (all of type Lease) in one pipeline on one pooled connection: every renewal
// script appended and written at once, the replies read in order, a NOSCRIPT answer sent again
// with the source on the same connection (another checkout could wait for this very one with a
// pool of one), a READONLY answer retiring the pool's connections (a replica now), and with
// min_replicas one WAIT after the batch covering every renewal in it. Lease provides
// connection_deadline(), renewal(ttl_text) -> renewal_request, judge_renewal(reply, ec) and
// judge_replicas(wait_reply, ec).
//
// On a cluster, the leases of each node go in that node's pipeline; a renewal answered with a
// redirection (its slot moved) is sent again alone through backend_state::eval, which follows it.
template <class Lease>
void renew_on_node(backend_state& s, node& on, std::span<spi::lease_state* const> leases,
                   std::span<std::error_code> outcomes) noexcept {
  const auto of = [&](std::size_t i) -> const Lease& { return static_cast<const Lease&>(*leases[i]); };
  // A busy pool is waited for as a single renewal would wait for it: as long as the earliest of
  // these grants is valid.
  auto deadline = std::chrono::steady_clock::time_point::max();
  for (std::size_t i = 0; i < leases.size(); ++i) deadline = std::min(deadline, of(i).connection_deadline());
  std::error_code ec;
  auto c = on.connections->checkout(deadline, ec);
  if (ec) {
    std::fill(outcomes.begin(), outcomes.end(), ec);
    return;
  }
  std::size_t sent = 0;
  try {
    for (; sent < leases.size(); ++sent) {
      const auto ttl = ms_text(of(sent).ttl());
      const auto call = of(sent).renewal(ttl);
      if (!c->append_eval(*call.s, call.keys, call.args)) break;
    }
  } catch (...) {
    // out of memory: the leases appended so far are sent; the others fail this round
  }
  if (sent < leases.size())
    set_error(ec, errc::backend_unavailable, "redis: could not queue a renewal (out of memory or a broken connection)");
  if (sent > 0 && !c->flush()) set_error(ec, errc::backend_unavailable, "redis: sending renewals: connection failed");
  std::vector<std::size_t> without_script, redirected;
  bool demoted = false;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    if (i >= sent || (ec && c->broken())) {
      outcomes[i] = ec;
      continue;
    }
    auto r = c->read(outcomes[i]);
    if (!r) {
      ec = outcomes[i];
      continue;
    }
    if (is_error(r.get(), "NOSCRIPT")) {
      try {
        without_script.push_back(i);
      } catch (...) {
        set_error(outcomes[i], errc::backend_unavailable, "redis: out of memory renewing");
      }
      continue;
    }
    if (s.cluster && (redirection_of(r.get()) || is_error(r.get(), "TRYAGAIN"))) {
      try {
        redirected.push_back(i);
      } catch (...) {
        set_error(outcomes[i], errc::backend_unavailable, "redis: out of memory renewing");
      }
      continue;
    }
    of(i).judge_renewal(*r, outcomes[i]);
    demoted = demoted || is_error(r.get(), "READONLY");
  }
  if (demoted) {  // a replica now: this connection and the pool's others go (see pipeline.hpp)
    c->discard();
    on.connections->retire_all();
  }
  // The server lost its script cache (restart, SCRIPT FLUSH): those again with the source.
  for (const auto i : without_script) {
    try {
      const auto ttl = ms_text(of(i).ttl());
      const auto call = of(i).renewal(ttl);
      auto r = c->eval_source(*call.s, call.keys, call.args, outcomes[i]);
      if (r) of(i).judge_renewal(*r, outcomes[i]);
    } catch (...) {
      set_error(outcomes[i], errc::backend_unavailable, "redis: out of memory renewing");
    }
  }
  const auto is_redirected = [&](std::size_t i) {
    return std::find(redirected.begin(), redirected.end(), i) != redirected.end();
  };
  if (s.config.replicas.wanted() && !c->broken()) {
    bool any_renewed = false;
    for (std::size_t i = 0; i < leases.size(); ++i) any_renewed = any_renewed || (!outcomes[i] && !is_redirected(i));
    if (any_renewed) {
      std::error_code wait_ec;
      auto r = c->command(s.config.replicas.wait_command(), wait_ec);
      for (std::size_t i = 0; i < leases.size(); ++i)
        if (!outcomes[i] && !is_redirected(i)) of(i).judge_replicas(r.get(), outcomes[i]);
    }
  }
  c = {};  // back to the pool before the redirected ones take connections of their own
  for (const auto i : redirected)
    renew_alone(s, of(i), of(i).ttl(), outcomes[i], [](std::error_code& e) {
      set_error(e, errc::backend_unavailable, "redis: renewing: not sent (every connection busy)");
    });
}

// Renews `leases` (all of type Lease): one renew_on_node per node serving their keys (one on a
// single server).
template <class Lease>
void renew_in_one_pipeline(backend_state& s, std::span<spi::lease_state* const> leases,
                           std::span<std::error_code> outcomes) noexcept {
  if (s.single) return renew_on_node<Lease>(s, *s.single, leases, outcomes);
  try {
    std::map<node*, std::pair<std::shared_ptr<node>, std::vector<std::size_t>>> by_node;
    for (std::size_t i = 0; i < leases.size(); ++i) {
      const auto ttl = std::string("1");
      const auto call = static_cast<const Lease&>(*leases[i]).renewal(ttl);
      if (auto n = s.node_for(call.keys.front(), outcomes[i])) {
        auto& group = by_node[n.get()];
        group.first = std::move(n);
        group.second.push_back(i);
      }
    }
    for (auto& [raw, group] : by_node) {
      std::vector<spi::lease_state*> some;
      for (const auto i : group.second) some.push_back(leases[i]);
      std::vector<std::error_code> their(some.size());
      renew_on_node<Lease>(s, *group.first, some, their);
      for (std::size_t k = 0; k < some.size(); ++k) outcomes[group.second[k]] = their[k];
    }
  } catch (...) {
    for (auto& o : outcomes)
      if (!o) set_error(o, errc::backend_unavailable, "redis: out of memory renewing");
  }
}

// The watchdog's renewals of many leases (of type Lease) of one backend, as one renew_in_one_pipeline.
template <class Lease>
class pipelined_renewals final : public spi::renewal_batch {
 public:
  explicit pipelined_renewals(backend_state& owner) : state_(owner) {}
  void renew_all(std::span<spi::lease_state* const> leases, std::span<std::error_code> outcomes) noexcept override {
    renew_in_one_pipeline<Lease>(state_, leases, outcomes);
  }

 private:
  backend_state& state_;
};

}  // namespace dlock::redis
