#pragma once
// An ensemble node's role as it reports it to the `srvr` four-letter word (the launcher's
// zoo.cfg whitelists every four-letter word), for finding the leader from outside.
#include <chrono>
#include <string>

namespace dlock::compare {

// "leader", "follower", "standalone"; empty when the node did not answer within `timeout` or
// answered without a mode (it is not serving: no quorum, an election under way).
std::string zookeeper_mode(const std::string& host, int port, std::chrono::milliseconds timeout);

}  // namespace dlock::compare
