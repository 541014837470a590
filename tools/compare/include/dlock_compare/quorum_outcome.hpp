#pragma once
// What a quorum fault (independent masters, or an ensemble, losing members) did to a run, besides the
// checker's counts: which server processes went down and when, who was granted meanwhile, and
// whether the holder caught inside its write kept its lock or was told it lost it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dlock_compare/shared_clock.hpp"

namespace dlock::compare {

struct quorum_outcome {
  std::vector<std::string> stopped;  // the launcher's process names, in the order stopped ("<server>.3")
  std::string leader;                // ensemble-leader-lost: the process that said it led
  std::uint32_t members = 0;         // masters or ensemble nodes in the URI
  // From the first stop to the moment every stopped process answered again (the launcher's
  // start returned); nullopt when they could not be started again inside the run.
  std::optional<shared_clock::duration> down_for;
  // Grants to anyone from the first stop until the first stopped process was being started again
  // (it may serve before its start returns): for one stopped, its whole outage; for a majority
  // stopped, the time no majority was up.
  std::uint64_t grants_while_down = 0;
  // ensemble-leader-lost: from the stop to a remaining member saying it leads.
  std::optional<shared_clock::duration> new_leader_after;
  // The holder caught inside its write when the fault struck, and what became of it.
  std::optional<std::uint32_t> holder;
  bool holder_kept_lock = false;                            // released cleanly, never told lost
  std::optional<shared_clock::duration> holder_told_after;  // from the fault to its lost notification
  // The first grant to another client after the fault, from the fault; nullopt: none in the run.
  std::optional<shared_clock::duration> other_granted_after;
  bool holder_told_before_other_grant = false;  // its lost fired before that grant (or none came)
  // From the fault to the next grant to anyone (the holder's own next grant too).
  std::optional<shared_clock::duration> next_grant_after_fault;
  // From the last start (every process back) to the next grant to anyone.
  std::optional<shared_clock::duration> next_grant_after_back;
};

}  // namespace dlock::compare
