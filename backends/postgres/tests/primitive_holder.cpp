// postgres_primitive_holder: the other process of the advisory primitives' SIGKILL test.
//   postgres_primitive_holder URI NAME MAX_COUNT
// takes a read hold of the reader-writer lock NAME and one permit of the semaphore NAME of
// MAX_COUNT named NAME-permits (a semaphore never holds beside a rw lock of its name), prints "held", and sleeps until
// killed. Exit 2 on any failure.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "dlock/dlock.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: postgres_primitive_holder URI NAME MAX_COUNT\n";
    return 2;
  }
  try {
    auto b = dlock::open(argv[1]);
    auto rw = b->make_rw_lock(argv[2]);
    auto sem = b->make_semaphore(std::string(argv[2]) + "-permits", static_cast<std::uint32_t>(std::stoul(argv[3])));
    auto reading = rw->try_acquire_read_for(std::chrono::seconds(10));
    auto permit = sem->try_acquire_for(std::chrono::seconds(10));
    if (!reading || !permit) {
      std::cerr << "not granted\n";
      return 2;
    }
    std::cout << "held" << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
