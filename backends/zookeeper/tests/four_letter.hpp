#pragma once
// ZooKeeper's four-letter words ("srvr", "cons", "dump"): what the server says about itself on its
// client port. Shared by the zookeeper tests and zookeeper_bench.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include "dlock/uri.hpp"

namespace dlock::zookeeper::testing {

// The server's answer to a four-letter word, on the first host of the zookeeper:// URI `text`;
// "" when it cannot be reached.
inline std::string four_letter(const std::string& text, const char* word) {
  const auto u = dlock::uri::parse(text);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(u.hosts()[0].port_or(2181));
  ::inet_pton(AF_INET, u.hosts()[0].host.c_str(), &a.sin_addr);
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::write(fd, word, 4) == 4) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) answer.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return answer;
}

}  // namespace dlock::zookeeper::testing
