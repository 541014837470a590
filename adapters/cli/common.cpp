#include "common.hpp"

#include <csignal>
#include <fcntl.h>
#include <unistd.h>

namespace dlock::cli {

std::unique_ptr<distributed_lock> open_lock(const std::string& uri, const std::string& name,
                                            std::optional<std::chrono::milliseconds> ttl) {
  auto backend = dlock::open(uri);
  lock_options options = backend->default_options();
  if (ttl) options.ttl = *ttl;
  // The lock keeps what it needs of the backend (backends hand their locks a shared_ptr).
  return backend->make_lock(name, options);
}

lease acquire_within(distributed_lock& lock, std::optional<std::chrono::milliseconds> wait) {
  if (!wait) return lock.acquire();
  lease l = wait->count() == 0 ? lock.try_acquire() : lock.try_acquire_for(*wait);
  if (!l)
    throw error(errc::timeout, "lock '" + std::string(lock.name()) + "' is held by someone else; gave up after " +
                                   (wait->count() == 0 ? std::string("one try") : format_duration(*wait)));
  return l;
}

std::string token_text(const lease& l) {
  auto t = l.fencing_token();
  return t ? std::to_string(*t) : std::string("-");
}

event_pipe& event_pipe::instance() {
  static event_pipe p;
  return p;
}

event_pipe::event_pipe() {
  if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
}

void event_pipe::post(char event) const noexcept {
  const int saved = errno;
  [[maybe_unused]] auto n = ::write(fds_[1], &event, 1);
  errno = saved;
}

namespace {
extern "C" void post_signal(int sig) { event_pipe::instance().post(static_cast<char>(sig)); }
}  // namespace

void event_pipe::catch_signals() {
  struct sigaction sa {};
  sa.sa_handler = post_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::sigaction(sig, &sa, nullptr);
}

}  // namespace dlock::cli
