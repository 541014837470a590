#pragma once
// What every grant of zookeeper:// shares, whatever it holds (one node of a mutex, the nodes of a
// reader-writer lock hold or of a semaphore's permits): its nodes live and die with one session.
#include <chrono>
#include <string>

#include "dlock/spi.hpp"
#include "session.hpp"

namespace dlock::zookeeper {

class session_lease : public spi::lease_state {
 public:
  clientid_t client_id() const noexcept { return held_session().client_id(); }
  zhandle_t* handle() const noexcept { return held_session().handle(); }
  // The server answered again: the session, and so our nodes, are safe until `until`.
  void extend_to(clock::time_point until) noexcept { set_valid_until(until); }

 protected:
  using spi::lease_state::lease_state;
  // The session whose ephemeral nodes this lease holds.
  virtual const session& held_session() const noexcept = 0;
};

}  // namespace dlock::zookeeper
