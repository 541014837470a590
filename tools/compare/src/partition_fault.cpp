#include "dlock_compare/partition_fault.hpp"

#include <signal.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "dlock/uri.hpp"
#include "dlock_compare/families.hpp"
#include "dlock_compare/history.hpp"
#include "dlock_compare/network_partition.hpp"
#include "fault_steps.hpp"

namespace dlock::compare {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

milliseconds partition_length(const scenario_settings& s) { return s.ttl * 5 / 2; }

// Catching the holder, the cut, then time for TCP to retransmit (its backoff reaches seconds)
// and for the clients to hand the lock on.
milliseconds partition_run_length(const scenario_settings& s) {
  return std::max(s.duration, partition_length(s) + 2 * s.ttl + 4s);
}

std::string partition_unavailable_because(const std::string& uri) {
  if (const auto* family = family_of_scheme(dlock::uri::parse(uri).scheme());
      family != nullptr && !family->partition_not_applicable.empty())
    return std::string(family->partition_not_applicable);
  if (auto why = network_partition::unavailable_because(); !why.empty()) return why;
  if (network_partition::loopback_ports(uri).empty())
    return "the server is not on 127.0.0.1 (the forwarder in the partition's namespace reaches loopback only)";
  return {};
}

scenario_result run_partition(const scenario_settings& s) {
  scenario_result r;
  if (const auto why = partition_unavailable_because(s.uri); !why.empty()) {
    r.fault_not_injected = why;
    return r;
  }
  network_partition::sweep_stale();
  network_partition net(s.clients, network_partition::loopback_ports(s.uri));  // deleted whatever happens
  // Two ttls: the holder is still writing when its lease runs out, so the cell shows whether it is
  // told before the server lets another client in.
  auto plan = fault_steps::plan(s, 2 * s.ttl, partition_run_length(s));
  plan.start_delay = 1s;  // a worker behind `ip netns exec` or libfaketime starts a little slower
  plan.uri = net.reachable_uri(s.uri);
  for (std::uint32_t c = 1; c <= s.clients; ++c) plan.launch.push_back({net.launch_prefix(c), {}, {}});

  instant cut_at{}, healed_at{};
  {
    worker_fleet fleet(plan);
    r.victim = fault_steps::stop_a_holder_inside_its_write(fleet, plan);
    if (!r.victim) {
      r.fault_not_injected = "no holder was caught inside its write";
    } else {
      // Cut while it is stopped, so no step of it falls between the catch and the cut.
      net.cut(*r.victim);
      cut_at = shared_clock::now();
      ::kill(fleet.pid(*r.victim), SIGCONT);
      std::this_thread::sleep_for(partition_length(s));
      healed_at = shared_clock::now();  // before the heal: a grant it lets happen comes after this
      net.heal(*r.victim);
      r.paused_for = std::chrono::duration_cast<milliseconds>(healed_at - cut_at);
      r.watched_after_fault = fleet.stop_at() - cut_at;
    }
    fault_steps::finish(fleet, plan, r);
  }
  if (!r.victim) return r;

  const auto sections = assemble_sections(read_history(plan.history));
  const auto next = fault_steps::next_grant_to_another(sections, *r.victim, cut_at);
  if (next) r.recovered_after = *next - cut_at;
  r.fault_notes.push_back("link down " + fault_steps::seconds(healed_at - cut_at));
  r.fault_notes.push_back(next ? "next grant " + fault_steps::seconds(*next - cut_at) + " after the cut" +
                                     (*next > healed_at ? " (after the link came back)" : "")
                               : "no grant after the cut");
  if (const auto victim = fault_steps::section_at(sections, *r.victim, cut_at)) {
    r.fault_notes.push_back(fault_steps::notified_text(*victim, next));
    // Its release begins when its write ends: say on which side of the heal it was sent.
    const bool after_heal = victim->write_end && *victim->write_end >= healed_at;
    r.fault_notes.push_back(fault_steps::release_text(*victim) + (victim->release == release_outcome::none ? ""
                                                                  : after_heal ? " (sent with the link back)"
                                                                               : " (sent while the link was down)"));
  }
  return r;
}

}  // namespace dlock::compare
