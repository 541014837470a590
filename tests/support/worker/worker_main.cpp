// dlock_conformance_worker: the other process in the conformance suite's cross-process properties.
//   rmw  URI NAME COUNTER_FILE ITERATIONS   lossy read-modify-write of an integer file under the
//        lock. Overlap detector: entering creates COUNTER_FILE.inside with O_CREAT|O_EXCL and
//        leaving unlinks it; if the create finds it already there, two holders are inside at
//        once: exit 3. (The marker is never waited on, so it detects overlap without being a lock.)
//   hold URI NAME [TTL_MS]                   acquire, print "acquired <token>", sleep until killed.
//   hold-read / hold-write URI NAME [TTL_MS]  the same with a reader-writer lock's side.
//   hold-permits URI NAME MAX K [TTL_MS]      the same with K permits of a semaphore of MAX.
//   rw-rmw URI NAME DIR ITERATIONS read|write|mutex  under the reader-writer lock's side (or the
//        mutex of the same name, which counts as a writer): a writer does the
//        lossy read-modify-write of DIR/counter; overlap detector: each holder first creates its
//        marker (DIR/writer with O_EXCL, or DIR/reader.<pid>), then looks for the markers it must not
//        meet (a writer: any other; a reader: DIR/writer): exit 3. Creating before looking means two
//        holders inside at once cannot both miss each other.
//   permits URI NAME MAX DIR ITERATIONS       one permit of a semaphore of MAX at a time: creates
//        DIR/permit.<pid>, then counts the permit.* markers: more than MAX is an overlap, exit 3.
//   multi-rmw URI PREFIX DIR SECONDS SEED  for SECONDS, takes random subsets of the 5 names
//        PREFIX0..PREFIX4, each given in a random order, with make_multi_lock, and does the
//        lossy read-modify-write (with rmw's overlap marker) of DIR/<name> for each name of the
//        set. Prints "rounds R" and "taken C0 C1 C2 C3 C4" (how often it took each name). A set
//        not taken within 20 s (a deadlock, or no progress) is exit 4.
// Exit codes: 0 done, 2 usage or dlock error, 3 overlap seen, 4 no progress.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_test/lossy_counter.hpp"

namespace {

using dlock::testing::read_counter;
using dlock::testing::write_counter;

dlock::lock_options quick_polling(const dlock::backend& b) {
  auto o = b.default_options();
  o.poll = {std::chrono::milliseconds(1), std::chrono::milliseconds(20)};
  return o;
}

int rmw(const std::string& uri, const std::string& name, const std::string& counter, int iterations) {
  auto b = dlock::open(uri);
  auto lock = b->make_lock(name, quick_polling(*b));
  for (int i = 0; i < iterations; ++i) {
    auto held = lock->acquire();
    if (!dlock::testing::lossy_increment(counter, std::chrono::microseconds(200))) return 3;
    held.release();
  }
  return 0;
}

template <class Acquire>
int hold_lease(Acquire&& acquire) {
  auto held = acquire();
  const auto token = held.fencing_token();
  std::cout << "acquired " << (token ? std::to_string(*token) : std::string("none")) << std::endl;
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

dlock::lock_options worker_options(const dlock::backend& b, long ttl_ms) {
  auto o = quick_polling(b);
  if (ttl_ms > 0) o.ttl = std::chrono::milliseconds(ttl_ms);
  return o;
}

int hold(const std::string& uri, const std::string& name, long ttl_ms) {
  auto b = dlock::open(uri);
  auto lock = b->make_lock(name, worker_options(*b, ttl_ms));
  return hold_lease([&] { return lock->acquire(); });
}

int hold_side(const std::string& uri, const std::string& name, dlock::access side, long ttl_ms) {
  auto b = dlock::open(uri);
  auto rw = b->make_rw_lock(name, worker_options(*b, ttl_ms));
  return hold_lease([&] { return rw->acquire(side); });
}

int hold_permits(const std::string& uri, const std::string& name, std::uint32_t max, std::uint32_t k, long ttl_ms) {
  auto b = dlock::open(uri);
  auto sem = b->make_semaphore(name, max, worker_options(*b, ttl_ms));
  return hold_lease([&] { return sem->acquire(k); });
}

// The markers in `dir` whose names start with `prefix`, other than `mine`.
int count_markers(const std::filesystem::path& dir, const std::string& prefix, const std::filesystem::path& mine) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().starts_with(prefix) && entry.path() != mine) ++n;
  return n;
}

bool create_marker(const std::filesystem::path& marker) {
  const int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

int rw_rmw(const std::string& uri, const std::string& name, const std::filesystem::path& dir, int iterations,
           dlock::access side, bool as_mutex) {
  auto b = dlock::open(uri);
  auto rw = b->make_rw_lock(name, quick_polling(*b));
  auto mutex = b->make_lock(name, quick_polling(*b));
  const auto mine = side == dlock::access::write ? dir / "writer" : dir / ("reader." + std::to_string(::getpid()));
  const auto counter = (dir / "counter").string();
  for (int i = 0; i < iterations; ++i) {
    auto held = as_mutex ? mutex->acquire() : rw->acquire(side);
    if (!create_marker(mine)) {
      std::cerr << "overlap: two writers inside (" << mine << " exists)\n";
      return 3;
    }
    const int others =
        count_markers(dir, "writer", mine) + (side == dlock::access::write ? count_markers(dir, "reader.", mine) : 0);
    if (others != 0) {
      std::cerr << "overlap: a " << dlock::to_string(side) << " holder met " << others << " conflicting holder(s)\n";
      return 3;
    }
    if (side == dlock::access::write) {
      const long v = read_counter(counter);
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // widen the race window
      write_counter(counter, v + 1);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    std::filesystem::remove(mine);
    held.release();
  }
  return 0;
}

int permits(const std::string& uri, const std::string& name, std::uint32_t max, const std::filesystem::path& dir,
            int iterations) {
  auto b = dlock::open(uri);
  auto sem = b->make_semaphore(name, max, quick_polling(*b));
  const auto mine = dir / ("permit." + std::to_string(::getpid()));
  for (int i = 0; i < iterations; ++i) {
    auto held = sem->acquire();
    create_marker(mine);
    const int inside = count_markers(dir, "permit.", {});
    if (inside > static_cast<int>(max)) {
      std::cerr << "overlap: " << inside << " holders of a semaphore of " << max << "\n";
      return 3;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    std::filesystem::remove(mine);
    held.release();
  }
  return 0;
}

int multi_rmw(const std::string& uri, const std::string& prefix, const std::string& dir, int seconds, unsigned seed) {
  constexpr int names = 5;
  auto b = dlock::open(uri);
  std::mt19937 random(seed);
  long taken[names] = {};
  long rounds = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    std::vector<int> chosen;
    for (int i = 0; i < names; ++i)
      if (random() % 2) chosen.push_back(i);
    if (chosen.empty()) chosen.push_back(static_cast<int>(random() % names));
    std::shuffle(chosen.begin(), chosen.end(), random);  // make_multi_lock must not depend on it
    std::vector<std::string> set;
    for (int i : chosen) set.push_back(prefix + std::to_string(i));
    auto lock = b->make_multi_lock(set, quick_polling(*b));
    auto held = lock->try_acquire_for(std::chrono::seconds(20));
    if (!held) {
      std::cerr << "no progress: a set of " << set.size() << " names not taken in 20 s\n";
      return 4;
    }
    for (int i : chosen) {
      if (!dlock::testing::lossy_increment(dir + "/" + prefix + std::to_string(i), std::chrono::microseconds(200)))
        return 3;
      ++taken[i];
    }
    held.release();
    ++rounds;
  }
  std::cout << "rounds " << rounds << "\ntaken";
  for (long t : taken) std::cout << ' ' << t;
  std::cout << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "rmw" && argc == 6) return rmw(argv[2], argv[3], argv[4], std::stoi(argv[5]));
    if (mode == "hold" && (argc == 4 || argc == 5)) return hold(argv[2], argv[3], argc == 5 ? std::stol(argv[4]) : 0);
    const auto ttl_at = [&](int i) { return argc > i ? std::stol(argv[i]) : 0L; };
    if ((mode == "hold-read" || mode == "hold-write") && (argc == 4 || argc == 5))
      return hold_side(argv[2], argv[3], mode == "hold-read" ? dlock::access::read : dlock::access::write, ttl_at(4));
    if (mode == "hold-permits" && (argc == 6 || argc == 7))
      return hold_permits(argv[2], argv[3], std::stoul(argv[4]), std::stoul(argv[5]), ttl_at(6));
    if (mode == "rw-rmw" && argc == 7) {
      const std::string side = argv[6];
      return rw_rmw(argv[2], argv[3], argv[4], std::stoi(argv[5]),
                    side == "read" ? dlock::access::read : dlock::access::write, side == "mutex");
    }
    if (mode == "permits" && argc == 7)
      return permits(argv[2], argv[3], std::stoul(argv[4]), argv[5], std::stoi(argv[6]));
    if (mode == "multi-rmw" && argc == 7)
      return multi_rmw(argv[2], argv[3], argv[4], std::stoi(argv[5]), static_cast<unsigned>(std::stoul(argv[6])));
    std::cerr << "usage: dlock_conformance_worker rmw URI NAME COUNTER_FILE ITERATIONS\n"
                 "       dlock_conformance_worker hold URI NAME [TTL_MS]\n"
                 "       dlock_conformance_worker hold-read|hold-write URI NAME [TTL_MS]\n"
                 "       dlock_conformance_worker hold-permits URI NAME MAX K [TTL_MS]\n"
                 "       dlock_conformance_worker rw-rmw URI NAME DIR ITERATIONS read|write|mutex\n"
                 "       dlock_conformance_worker permits URI NAME MAX DIR ITERATIONS\n"
                 "       dlock_conformance_worker multi-rmw URI PREFIX DIR SECONDS SEED\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dlock_conformance_worker: " << e.what() << '\n';  // dlock messages are redacted
    return 2;
  }
}
