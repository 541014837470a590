// dlock_conformance_worker: the other process in the conformance suite's cross-process properties.
//   rmw  URI NAME COUNTER_FILE ITERATIONS   lossy read-modify-write of an integer file under the
//        lock. Overlap detector: entering creates COUNTER_FILE.inside with O_CREAT|O_EXCL and
//        leaving unlinks it; if the create finds it already there, two holders are inside at
//        once: exit 3. (The marker is never waited on, so it detects overlap without being a lock.)
//   hold URI NAME [TTL_MS]                   acquire, print "acquired <token>", sleep until killed.
// Exit codes: 0 done, 2 usage or dlock error, 3 overlap seen.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "dlock/dlock.hpp"

namespace {

long read_counter(const std::string& path) {
  std::ifstream in(path);
  long v = 0;
  in >> v;
  return v;
}

void write_counter(const std::string& path, long v) {
  std::ofstream out(path, std::ios::trunc);
  out << v << '\n';
}

dlock::lock_options quick_polling(const dlock::backend& b) {
  auto o = b.default_options();
  o.poll = {std::chrono::milliseconds(1), std::chrono::milliseconds(20)};
  return o;
}

int rmw(const std::string& uri, const std::string& name, const std::string& counter, int iterations) {
  auto b = dlock::open(uri);
  auto lock = b->make_lock(name, quick_polling(*b));
  const std::string marker = counter + ".inside";
  for (int i = 0; i < iterations; ++i) {
    auto held = lock->acquire();
    const int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0) {
      std::cerr << "overlap: " << marker << " already exists (errno " << errno << ")\n";
      return 3;
    }
    ::close(fd);
    const long v = read_counter(counter);
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // widen the race window
    write_counter(counter, v + 1);
    ::unlink(marker.c_str());
    held.release();
  }
  return 0;
}

int hold(const std::string& uri, const std::string& name, long ttl_ms) {
  auto b = dlock::open(uri);
  auto o = quick_polling(*b);
  if (ttl_ms > 0) o.ttl = std::chrono::milliseconds(ttl_ms);
  auto lock = b->make_lock(name, o);
  auto held = lock->acquire();
  const auto token = held.fencing_token();
  std::cout << "acquired " << (token ? std::to_string(*token) : std::string("none")) << std::endl;
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "rmw" && argc == 6) return rmw(argv[2], argv[3], argv[4], std::stoi(argv[5]));
    if (mode == "hold" && (argc == 4 || argc == 5)) return hold(argv[2], argv[3], argc == 5 ? std::stol(argv[4]) : 0);
    std::cerr << "usage: dlock_conformance_worker rmw URI NAME COUNTER_FILE ITERATIONS\n"
                 "       dlock_conformance_worker hold URI NAME [TTL_MS]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dlock_conformance_worker: " << e.what() << '\n';  // dlock messages are redacted
    return 2;
  }
}
