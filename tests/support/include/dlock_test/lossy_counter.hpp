#pragma once
// The lossy read-modify-write that worker processes run under a lock (the conformance worker, the
// SQL backends' schema-race worker): a number in a text file, read and written back with no lock
// of its own, so holders that overlap lose updates; and an overlap detector beside it.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

namespace dlock::testing {

// The number in the counter file `path`; 0 when it is missing or empty.
inline long read_counter(const std::string& path) {
  std::ifstream in(path);
  long v = 0;
  in >> v;
  return v;
}

inline void write_counter(const std::string& path, long v) {
  std::ofstream out(path, std::ios::trunc);
  out << v << '\n';
}

// One round inside the lock: creates `counter`.inside with O_CREAT|O_EXCL, and finding it there
// already (another holder inside at once) reports the overlap on stderr and returns false;
// otherwise adds one to the counter, `window` between the read and the write (to widen the race),
// and removes the marker. The marker is never waited on: it detects overlap without being a lock.
inline bool lossy_increment(const std::string& counter, std::chrono::microseconds window) {
  const std::string marker = counter + ".inside";
  const int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0) {
    std::cerr << "overlap: " << marker << " already exists (errno " << errno << ")\n";
    return false;
  }
  ::close(fd);
  const long v = read_counter(counter);
  std::this_thread::sleep_for(window);
  write_counter(counter, v + 1);
  ::unlink(marker.c_str());
  return true;
}

}  // namespace dlock::testing
