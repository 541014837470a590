#pragma once
// One request to a server's status port and its whole answer, for the families' leader probes
// (ZooKeeper's four-letter words, etcd's JSON gateway): dlock compare depends on no backend's
// client library.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace dlock::compare_spi {

// Connects to host:port (an IPv4 address), sends `request`, and reads until the server closes the
// connection, keeping at most `max_answer` bytes. Empty when it cannot connect or send, or when
// the server says nothing within `timeout` (which bounds each send and each read).
std::string tcp_exchange(const std::string& host, int port, std::string_view request, std::chrono::milliseconds timeout,
                         std::size_t max_answer = 65536);

}  // namespace dlock::compare_spi
