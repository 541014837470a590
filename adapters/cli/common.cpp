#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <optional>
#include <poll.h>
#include <sstream>
#include <stop_token>
#include <thread>
#include <unistd.h>

#include "command_group.hpp"

namespace dlock::cli {
namespace {

// The URI texts this process was given (argv, file or environment), for scrub_secrets.
std::vector<std::string>& given_uris() {
  static std::vector<std::string> uris;
  return uris;
}

void replace_all(std::string& text, const std::string& what, const std::string& with) {
  if (what.empty()) return;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size()))
    text.replace(at, what.size(), with);
}

// Replaces `secret` where it stands as a token of its own (no letter or digit right before or
// after it): a short password such as "p" must not turn "parameter" into "***arameter".
void replace_secret(std::string& text, const std::string& secret) {
  if (secret.empty()) return;
  const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (auto at = text.find(secret); at != std::string::npos;) {
    const auto end = at + secret.size();
    const bool standalone = (at == 0 || !alnum(text[at - 1])) && (end == text.size() || !alnum(text[end]));
    if (standalone) {
      text.replace(at, secret.size(), "***");
      at = text.find(secret, at + 3);
    } else {
      at = text.find(secret, at + 1);
    }
  }
}

// The part of `raw` that redaction hid: what lies between the common prefix and suffix of the two.
std::string hidden_part(const std::string& raw, const std::string& redacted) {
  std::size_t prefix = 0;
  while (prefix < raw.size() && prefix < redacted.size() && raw[prefix] == redacted[prefix]) ++prefix;
  std::size_t suffix = 0;
  while (suffix < raw.size() - prefix && suffix < redacted.size() - prefix &&
         raw[raw.size() - 1 - suffix] == redacted[redacted.size() - 1 - suffix])
    ++suffix;
  return raw.substr(prefix, raw.size() - prefix - suffix);
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// The file's content must be exactly one URI: a file meant for something else, or two URIs,
// is refused rather than guessed at. The message names the file, never its content.
std::string read_uri_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw usage_error("--uri-file " + path + ": cannot read it (" + std::strerror(errno) + ")");
  std::ostringstream content;
  content << in.rdbuf();
  std::string uri = trimmed(content.str());  // not const: returned by move
  if (uri.empty()) throw usage_error("--uri-file " + path + " is empty; expected one line holding the URI");
  if (uri.find_first_of("\r\n") != std::string::npos)
    throw usage_error("--uri-file " + path + " holds more than one line; expected one line holding the URI");
  return uri;
}

std::string remember(std::string uri) {
  given_uris().push_back(uri);
  return uri;
}

[[noreturn]] void exit_interrupted(int sig, const char* verb, const std::string& what) {
  std::fprintf(stderr, "dlock %s: %s while waiting for %s: gave up waiting%s\n", verb, strsignal(sig), what.c_str(),
               std::strcmp(verb, "run") == 0 ? "; the command was not started" : "");
  std::fflush(nullptr);
  ::_exit(128 + sig);
}

// --wait ran out (and deadline_overrun after it) while the helper thread was still connecting or
// still in a server call that did not return: the process ends now, as the user asked, whatever
// the server does. A grant the server makes after this moment is never handed over: it is left to
// its ttl, as a crashed client's would be.
[[noreturn]] void exit_overrun(const char* verb, const lock_request& request, bool connected) {
  const std::string wait = format_duration(*request.wait);
  if (connected)
    std::fprintf(stderr, "dlock %s: %s: the server did not answer before --wait %s ran out%s\n", verb,
                 describe(request).c_str(), wait.c_str(),
                 std::strcmp(verb, "run") == 0 ? "; the command was not started" : "");
  else
    std::fprintf(stderr, "dlock %s: %s: still connecting when --wait %s ran out%s\n", verb,
                 scrub_secrets(redact_for_message(request.uri)).c_str(), wait.c_str(),
                 std::strcmp(verb, "run") == 0 ? "; the command was not started" : "");
  std::fflush(nullptr);
  ::_exit(connected ? exit_timeout : exit_unavailable);
}

// Signals are answered by the main thread alone: the helper thread (and the library threads it
// starts, which inherit its mask) would otherwise see EINTR in the middle of a server call.
void block_termination_signals_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// A lease that is ours already must not outlive an interruption: released before exiting.
// Releasing a lease that is no longer ours fails harmlessly.
void release_quietly(lease& held) {
  std::error_code ignored;
  if (held) held.release(ignored);
}

void release_quietly(held_lock& got) {
  release_quietly(got.held);
  std::error_code ignored;
  got.held_set.release(ignored);
}

// A scheme followed by "://": what a URI given where the NAME was expected looks like. (With a URI
// from --uri-file or DLOCK_URI, such an operand is the NAME: names are any bytes.)
bool looks_like_uri(const std::string& text) {
  const auto colon = text.find("://");
  if (colon == std::string::npos || colon == 0) return false;
  return std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(colon), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  });
}

}  // namespace

uri_and_operands take_uri(const args& a, std::size_t operands, const std::string& expected) {
  const auto& positional = a.positional();
  const auto uri_file = a.get("uri-file");
  uri_and_operands result;
  if (positional.size() == operands + 1) {
    if (uri_file) throw usage_error("a URI on the command line and --uri-file " + *uri_file + ": give only one");
    result.uri = remember(positional.front());
    result.operands.assign(positional.begin() + 1, positional.end());
    return result;
  }
  if (positional.size() != operands) throw usage_error(expected);
  result.operands = positional;
  if (uri_file) {
    result.uri = remember(read_uri_file(*uri_file));
  } else if (const char* env = std::getenv(uri_environment_variable); env && *env) {
    result.uri = remember(env);
  } else if (operands > 0 && looks_like_uri(positional.front())) {
    // `dlock hold redis://h:6379` lacks the NAME, not the URI.
    remember(positional.front());
    throw usage_error("no NAME after the URI " + redact_for_message(positional.front()) + ": " + expected);
  }
  return result;
}

required_uri_and_operands take_required_uri(const args& a, std::size_t operands, const std::string& expected) {
  auto taken = take_uri(a, operands, expected);
  if (!taken.uri) throw usage_error("no URI: give it, or --uri-file PATH, or DLOCK_URI");
  if (a.has_command_separator()) throw usage_error(expected + ", and no '-- CMD'");
  return {std::move(*taken.uri), std::move(taken.operands)};
}

uri_and_operands take_uri_and_names(const args& a, const std::string& expected) {
  const auto& positional = a.positional();
  if (positional.size() <= 1) return take_uri(a, 1, expected);
  const char* env = std::getenv(uri_environment_variable);
  const bool uri_elsewhere = a.get("uri-file") || (env && *env);
  if (looks_like_uri(positional.front()) || !uri_elsewhere) return take_uri(a, positional.size() - 1, expected);
  return take_uri(a, positional.size(), expected);
}

std::string describe(const lock_request& request) {
  if (request.set.empty()) return describe(request.primitive, request.name);
  auto names = request.set;
  std::sort(names.begin(), names.end());
  std::string text = "the set of locks";
  for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", '" : " '") + names[i] + "'";
  return text;
}

std::string redact_for_message(const std::string& uri_text) {
  std::string redacted = redact_uri_text(uri_text);
  if (redacted != uri_text) return redacted;
  // Not recognised as a URI with a password (no "://"): hide whatever could be one.
  const auto at = uri_text.rfind('@');
  const auto colon = uri_text.find(':');
  if (at == std::string::npos || colon == std::string::npos || colon > at) return uri_text;
  return uri_text.substr(0, colon + 1) + "***" + uri_text.substr(at);
}

std::string scrub_secrets(std::string message) {
  for (const auto& raw : given_uris()) {
    const std::string redacted = redact_for_message(raw);
    if (redacted == raw) continue;
    replace_all(message, raw, redacted);
    replace_secret(message, hidden_part(raw, redacted));
    try {  // the password as the library decoded it (percent-escapes) may be printed that way
      if (auto password = uri::parse(raw).password()) replace_secret(message, *password);
    } catch (const error&) {
    }
  }
  return message;
}

void check_locally(const lock_request& request) {
  if (request.name.empty()) throw usage_error("the lock NAME is empty; expected a name of at least one byte");
  for (const auto& name : request.set)
    if (name.empty()) throw usage_error("a lock NAME is empty; expected names of at least one byte");
  auto sorted = request.set;
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
    throw usage_error("the lock NAME '" + *twice + "' is given twice; expected each NAME once");
  if (!request.set.empty() && request.primitive.what != primitive_request::kind::mutex)
    throw usage_error("several NAMEs are taken as one set of exclusive locks; --shared, --write and --permits "
                      "take one NAME");
  // The registry checks the scheme and the query keys before it connects; this also checks the
  // values of the common keys and the options make_lock will be given, by the core's own rules.
  const uri parsed = uri::parse(request.uri);
  lock_options options = parse_common_options(parsed);
  if (request.ttl) {
    options.ttl = *request.ttl;
    if (const auto info = default_registry().find(parsed.scheme()); info && !info->ttl_set_by.empty())
      throw usage_error("--ttl is not used by " + parsed.scheme() + "://: " + info->ttl_set_by +
                        " (give it in the URI instead)");
  }
  std::error_code ec;
  check_lock_options(options, ec);
  if (ec) throw usage_error(last_error_message());
}

namespace {

using steady = std::chrono::steady_clock;

held_lock open_lock(const lock_request& request) {
  auto backend = dlock::open(request.uri, required_capabilities(request.primitive), request.observer);
  lock_options options = backend->default_options();
  if (request.ttl) options.ttl = *request.ttl;
  // The objects keep what they need of the backend (backends hand them a shared_ptr).
  held_lock made;
  if (!request.set.empty()) {
    made.multi = backend->make_multi_lock(request.set, options);
    return made;
  }
  switch (request.primitive.what) {
    case primitive_request::kind::mutex:
      if (request.election)
        made.vote = backend->make_election(request.name, options);
      else
        made.lock = backend->make_lock(request.name, options);
      break;
    case primitive_request::kind::read:
    case primitive_request::kind::write: made.rw = backend->make_rw_lock(request.name, options); break;
    case primitive_request::kind::permits:
      made.sem = backend->make_semaphore(request.name, request.primitive.of, options);
      break;
  }
  return made;
}

// Connecting is part of the wait: with --wait, a server that cannot be reached (restarting, not
// up yet) is tried again until the deadline, and only then is it exit 69. Without --wait, the
// first failure is final: a wrong host must not look like a long wait for the lock.
held_lock open_lock_until(const lock_request& request, std::optional<steady::time_point> deadline) {
  auto pause = std::chrono::milliseconds(100);
  for (;;) {
    try {
      return open_lock(request);
    } catch (const error& e) {
      const auto now = steady::now();
      if (e.code() != errc::backend_unavailable || !deadline || now >= *deadline) throw;
      std::this_thread::sleep_for(std::min<steady::duration>(pause, *deadline - now));
      pause = std::min(pause * 2, std::chrono::milliseconds(2000));
    }
  }
}

// One wait on whichever object open_lock made: forever without a deadline, else until it.
lease acquire_from(held_lock& made, const primitive_request& p, std::optional<steady::time_point> deadline,
                   std::stop_token stop) {
  using kind = primitive_request::kind;
  switch (p.what) {
    case kind::read:
    case kind::write: {
      const access side = p.what == kind::read ? access::read : access::write;
      return deadline ? made.rw->try_acquire_until(side, *deadline, std::move(stop))
                      : made.rw->acquire(side, std::move(stop));
    }
    case kind::permits:
      return deadline ? made.sem->try_acquire_until(*deadline, std::move(stop), p.permits)
                      : made.sem->acquire(std::move(stop), p.permits);
    case kind::mutex: break;
  }
  distributed_lock& mutex = made.vote ? made.vote->lock() : *made.lock;
  return deadline ? mutex.try_acquire_until(*deadline, std::move(stop)) : mutex.acquire(std::move(stop));
}

void acquire_until(held_lock& made, const lock_request& request, std::optional<steady::time_point> deadline,
                   std::stop_token stop) {
  // A deadline already passed: one try. A stop request throws operation_canceled.
  if (made.multi) {  // one deadline for the whole set; whatever was taken is given back on failure
    made.held_set =
        deadline ? made.multi->try_acquire_until(*deadline, std::move(stop)) : made.multi->acquire(std::move(stop));
    if (!made.held_set)
      throw error(errc::timeout,
                  describe(request) + ": one of them is held by someone else; " +
                      (request.wait->count() == 0 ? std::string("tried once (--wait 0)")
                                                  : "gave up after waiting " + format_duration(*request.wait)));
    return;
  }
  made.held = acquire_from(made, request.primitive, deadline, std::move(stop));
  if (!made.held)
    throw error(errc::timeout,
                not_free(request.primitive, request.name) + "; " +
                    (request.wait->count() == 0 ? std::string("tried once (--wait 0)")
                                                : "gave up after waiting " + format_duration(*request.wait)));
}

}  // namespace

// The wait runs on a helper thread with the caller's whole deadline (no slicing: a sliced wait
// would restart the polling backoff, i.e. poll the server more often, and give up a fair
// backend's place in its queue at every slice), and this thread waits for either its result or a
// signal. A signal while the helper waits for the lock asks its wait to stop (std::stop_token):
// the backend takes its waiter off the server (a queue slot, a ZooKeeper node, a waiter row, a
// waiting session) and gives back a grant that crossed the stop, then the process exits. A
// signal while it still connects, or a wait that has not ended `stop_patience` after the stop
// request (a server that does not answer the withdrawal), ends the process at once: what the
// pending wait leaves on the server is then what any waiter that dies leaves, and the servers
// clean it up when our connections close.
held_lock open_and_acquire(const lock_request& request, const char* verb) {
  struct attempt {
    std::mutex mutex;
    bool done = false;
    bool connected = false;  // open() returned: what is left is the wait for the lock
    held_lock result;
    std::exception_ptr failure;
    std::stop_source stop;
  };
  constexpr auto stop_patience = std::chrono::seconds{2};
  auto& events = event_pipe::instance();
  auto shared = std::make_shared<attempt>();
  std::optional<steady::time_point> deadline;
  if (request.wait) deadline = distributed_lock::deadline_after(*request.wait);
  std::thread helper([shared, &request, &events, deadline] {
    block_termination_signals_in_this_thread();
    held_lock got;
    std::exception_ptr failure;
    try {
      got = open_lock_until(request, deadline);
      {
        const std::lock_guard guard(shared->mutex);
        shared->connected = true;
      }
      acquire_until(got, request, deadline, shared->stop.get_token());
    } catch (...) {
      failure = std::current_exception();
    }
    {
      const std::lock_guard guard(shared->mutex);
      shared->result = std::move(got);
      shared->failure = failure;
      shared->done = true;
    }
    events.post(event_pipe::acquired);
  });

  pollfd fd{events.read_fd(), POLLIN, 0};
  int interrupted_by = 0;
  std::optional<steady::time_point> stopping_until;  // the wait was asked to stop: its end, at the latest
  for (bool done = false; !done;) {
    int timeout_ms = -1;
    auto until = steady::time_point::max();  // no deadline and no stop: wait for the result
    if (stopping_until)
      until = *stopping_until;
    else if (deadline)
      until = *deadline + deadline_overrun;
    if (until != steady::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - steady::now());
      timeout_ms = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(left.count(), 0, 60'000));
    }
    const int ready = ::poll(&fd, 1, timeout_ms);
    if (ready < 0) continue;  // EINTR: the handler has written its byte
    if (ready == 0 && until != steady::time_point::max() && steady::now() >= until) {
      const std::lock_guard guard(shared->mutex);
      if (!shared->done) {
        if (stopping_until) exit_interrupted(interrupted_by, verb, describe(request));
        exit_overrun(verb, request, shared->connected);
      }
      continue;  // handed over meanwhile: its event byte is in the pipe
    }
    char e;
    while (::read(events.read_fd(), &e, 1) == 1) {
      if (e == event_pipe::acquired) done = true;
      // The byte is a signal number (< 128) or an event letter: read it unsigned all the same.
      if (is_termination_signal(static_cast<unsigned char>(e)) && !interrupted_by)
        interrupted_by = static_cast<unsigned char>(e);
    }
    if (interrupted_by && !done && !stopping_until) {
      const std::lock_guard guard(shared->mutex);
      if (shared->done) break;                                                            // handed over meanwhile
      if (!shared->connected) exit_interrupted(interrupted_by, verb, describe(request));  // open() cannot be stopped
      shared->stop.request_stop();
      stopping_until = steady::now() + stop_patience;
    }
  }
  helper.join();
  if (interrupted_by) {  // a grant that came with the signal, or before the stop: start nothing
    release_quietly(shared->result);
    exit_interrupted(interrupted_by, verb, describe(request));
  }
  if (shared->failure) std::rethrow_exception(shared->failure);
  return std::move(shared->result);
}

void exit_if_interrupted(held_lock& got, const char* verb, const std::string& what) {
  auto& events = event_pipe::instance();
  std::string others;  // put back: the caller's loop reads them
  int interrupted_by = 0;
  for (char e; ::read(events.read_fd(), &e, 1) == 1;) {
    if (is_termination_signal(e))
      interrupted_by = interrupted_by ? interrupted_by : e;
    else
      others += e;
  }
  for (char e : others) events.post(e);
  if (!interrupted_by) return;
  release_quietly(got);
  exit_interrupted(interrupted_by, verb, what);
}

void discard_lost(lease& held) { release_quietly(held); }

bool supervise_until_exit_or_loss(command_group& group, std::chrono::milliseconds grace, bool& signalled) {
  auto& events = event_pipe::instance();
  pollfd fd{events.read_fd(), POLLIN, 0};
  for (;;) {
    if (group.reap()) return true;
    group.follow_terminal_stop();
    if (::poll(&fd, 1, 1000) <= 0) continue;  // the timeout re-checks the group, should SIGCHLD race
    bool lost = false;
    for (char e; ::read(events.read_fd(), &e, 1) == 1;) {
      if (e == event_pipe::lost) lost = true;
      if (is_termination_signal(e)) {
        group.signal(e);
        signalled = true;
      }
    }
    if (lost) {
      group.terminate(grace);
      return false;
    }
  }
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

bool is_termination_signal(int sig) noexcept { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP; }

}  // namespace dlock::cli
