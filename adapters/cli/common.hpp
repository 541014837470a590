#pragma once
// What the subcommands share: where the URI comes from (argv, --uri-file, DLOCK_URI), keeping
// its password out of every message, opening and acquiring the lock while signals stay
// answered, and a self-pipe that turns signals and the lease's lost signal into readable events
// for a poll() loop.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "dlock/dlock.hpp"
#include "primitive.hpp"

namespace dlock::cli {

// The environment variable that may hold the URI, so that a password need not be on the
// command line (`ps` shows every process's argv to every user).
inline constexpr const char* uri_environment_variable = "DLOCK_URI";

// The URI and the operands that follow it. Where the URI comes from, first match wins:
//   1. the URI operand on the command line (the verb got one operand more than it needs without one),
//   2. --uri-file PATH: the file holds the URI on one line (surrounding white space is ignored),
//   3. the environment variable DLOCK_URI (unset or empty: absent).
// A URI operand together with --uri-file is a usage error (two URIs on one command line); the
// command line overrides DLOCK_URI. `operands` is how many operands the verb takes after the URI
// (run, hold: 1, the NAME; sweep, bench, demo: 0). The URI is nullopt when none was given; any
// other count of operands is a usage error saying `expected`.
struct uri_and_operands {
  std::optional<std::string> uri;
  std::vector<std::string> operands;
};
uri_and_operands take_uri(const args& a, std::size_t operands, const std::string& expected);

// take_uri for the verbs that act on the backend and run no command (inspect, list, break, sweep):
// a missing URI, or a '-- CMD', is a usage error too.
struct required_uri_and_operands {
  std::string uri;
  std::vector<std::string> operands;
};
required_uri_and_operands take_required_uri(const args& a, std::size_t operands, const std::string& expected);

// Every message the CLI prints goes through this: each URI text the CLI was given is replaced by
// its redacted form, and its password by "***", wherever they appear (also in a message from the
// library about a URI it could not parse).
std::string scrub_secrets(std::string message);

// A text with the password hidden, also when it does not parse as a URI (e.g. "redis:/u:pw@h"):
// everything between the first ':' and the last '@' is replaced by "***".
std::string redact_for_message(const std::string& uri_text);

// What run and hold ask for, every part checked before anything connects.
struct lock_request {
  std::string uri;
  std::string name;
  std::optional<std::chrono::milliseconds> ttl;
  std::optional<std::chrono::milliseconds> wait;  // nullopt: as long as it takes; 0: one try
  primitive_request primitive;                    // the mutex, a side of the rw lock, or permits
  std::shared_ptr<dlock::observer> observer;      // set on the backend (--metrics); may be null
  // `dlock run URI NAME NAME...`: every NAME, taken as one set of mutexes (dlock/multi_lock.hpp);
  // empty for one NAME. `name` is then the first NAME given.
  std::vector<std::string> set = {};
  // `dlock elect`: the mutex is the lock an election of `name` campaigns with (make_election).
  bool election = false;
};
// For messages: "lock 'x'" (describe), or "the set of locks 'a', 'b'" in the order they are taken.
std::string describe(const lock_request& request);

// `dlock run`'s operands: [URI] NAME [NAME...]. With two or more operands the first is the URI when
// it looks like one (SCHEME://...) or when neither --uri-file nor DLOCK_URI gives the URI; otherwise
// every operand is a NAME. `expected` as take_uri's.
uri_and_operands take_uri_and_names(const args& a, const std::string& expected);
// The checks that need no server: a non-empty name, a positive ttl, a URI that parses with the
// common options valid. Throws usage_error / dlock::error(invalid_uri) (exit 64).
void check_locally(const lock_request& request);

// The object the lease came from (one of the three, by request.primitive, or the set of locks
// when request.set names several), kept while it is held.
struct held_lock {
  std::unique_ptr<distributed_lock> lock;
  std::unique_ptr<rw_lock> rw;
  std::unique_ptr<semaphore> sem;
  std::unique_ptr<multi_lock> multi;
  std::unique_ptr<election> vote;  // request.election: its lock is the mutex waited for
  lease held;                      // empty when `multi` was taken
  multi_lease held_set;            // the set's lease when `multi` was taken
};

// With --wait D, run and hold give up at most this long after D has run out, whatever the server
// does (refuses, accepts and never answers, stalls in a call): connecting is part of the wait.
inline constexpr std::chrono::milliseconds deadline_overrun{500};

// Opens the URI (refusing, before connecting, a backend that does not make the primitive asked
// for: errc::missing_capability, exit 64), makes the lock and acquires it within `wait` on a helper thread, while this
// thread answers signals: SIGINT, SIGTERM or SIGHUP before the lease is ours ends the process at
// once with 128+signal (130, 143, 129), having started nothing (see the .cpp for what is left on
// the server). Throws dlock::error: errc::timeout when the lock stayed taken (exit 75), the
// backend's error otherwise (69, or 64 for a bad URI). With a wait, the process ends by itself at
// wait + deadline_overrun: 69 while still connecting, 75 while the server does not answer.
held_lock open_and_acquire(const lock_request& request, const char* verb);

// For a signal that came after the lease was handed over but before anything was started:
// releases the lease (or the set) and ends the process as open_and_acquire does, saying `what`
// (describe) was waited for. Other events stay queued.
void exit_if_interrupted(held_lock& got, const char* verb, const std::string& what);

class command_group;
// While CMD's process group runs: termination signals go to the whole group (`signalled` is set),
// and a loss posted to the event pipe terminates the group (SIGTERM, SIGKILL after `grace`).
// True once the group's leader exited; false after a loss ended the group.
bool supervise_until_exit_or_loss(command_group& group, std::chrono::milliseconds grace, bool& signalled);

// After the loss was reported: the release the lease's destructor would try can only find the
// lock gone, and would report that once more as a background error.
void discard_lost(lease& held);

std::string token_text(const lease& l);  // the fencing token, or "-"

// The process's self-pipe: signal handlers and other threads write one byte per event.
class event_pipe {
 public:
  static constexpr char acquired = 'A';  // open_and_acquire's helper thread finished
  static constexpr char lost = 'L';      // the lease's lost signal fired

  static event_pipe& instance();
  int read_fd() const noexcept { return fds_[0]; }
  void post(char event) const noexcept;  // async-signal-safe
  // Installs handlers that post the signal number as a byte for SIGINT, SIGTERM, SIGHUP, SIGCHLD.
  void catch_signals();

 private:
  event_pipe();
  int fds_[2];
};

bool is_termination_signal(int sig) noexcept;  // SIGINT, SIGTERM, SIGHUP

}  // namespace dlock::cli
