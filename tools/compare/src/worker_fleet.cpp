#include "dlock_compare/worker_fleet.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <thread>

extern char** environ;

namespace dlock::compare {

namespace {

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

// The inherited environment with `extra` (NAME=VALUE) added, an inherited NAME replaced.
std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  const auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (std::none_of(extra.begin(), extra.end(), [&](const std::string& x) { return name_of(x) == name_of(entry); }))
      env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// Starts argv (argv[0] looked up in PATH when it has no slash: a launch prefix such as `ip`), its
// stderr appended to `log` unless that is empty.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment,
            const std::filesystem::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (!log.empty())
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto env_entries = environment_with(extra_environment);
  std::vector<char*> env;
  for (auto& e : env_entries) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw std::system_error(
        rc, std::generic_category(),
        "cannot start the worker " + argv[0] + (log.empty() ? "" : " (its stderr to " + log.string() + ")"));
  return pid;
}

std::optional<int> exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return std::nullopt;
}

}  // namespace

std::vector<std::string> worker_command_line(const std::filesystem::path& worker_executable, const worker_options& o) {
  return {worker_executable.string(),
          "--name",
          o.name,
          "--history",
          o.history.string(),
          "--fence",
          o.fence.string(),
          "--client",
          std::to_string(o.client),
          "--start-at-ns",
          std::to_string(o.start_at.time_since_epoch().count()),
          "--duration",
          ms(std::chrono::ceil<std::chrono::milliseconds>(o.stop_at - o.start_at)),
          "--work",
          ms(o.work),
          "--acquire-timeout",
          ms(o.acquire_timeout),
          "--stop-once-marker",
          o.stop_once_marker.string(),
          "--threads",
          std::to_string(o.threads)};
}

worker_fleet::worker_fleet(const fleet_plan& plan) {
  if (plan.work.empty()) throw std::invalid_argument("a worker fleet needs at least one client (one work length each)");
  start_at_ = shared_clock::now() + plan.start_delay;
  stop_at_ = start_at_ + plan.duration;
  worker_options o;
  o.uri = plan.uri;
  o.name = plan.name;
  o.history = plan.history;
  o.fence = plan.fence.empty() ? std::filesystem::path(plan.history.string() + ".fence") : plan.fence;
  o.start_at = start_at_;
  o.stop_at = stop_at_;
  o.acquire_timeout = plan.acquire_timeout;
  o.stop_once_marker = plan.stop_once_marker;
  clients_ = plan.work.size();
  clients_per_process_ = plan.clients_in_one_process ? clients_ : 1;
  o.threads = static_cast<std::uint32_t>(clients_per_process_);
  for (std::size_t i = 0; i < clients_; i += clients_per_process_) {
    o.client = static_cast<std::uint32_t>(i + 1);
    o.work = plan.work[i];
    try {
      const client_launch launch = i < plan.launch.size() ? plan.launch[i] : client_launch{};
      o.uri = launch.uri.empty() ? plan.uri : launch.uri;
      o.start_at = start_at_ + launch.start_later;
      auto command = worker_command_line(plan.worker_executable, o);
      command.insert(command.begin() + 1, plan.worker_subcommand.begin(), plan.worker_subcommand.end());
      command.insert(command.begin(), launch.prefix.begin(), launch.prefix.end());
      // The URI (a password perhaps) goes in the environment, where `ps` does not show it.
      auto environment = launch.environment;
      environment.push_back(std::string(worker_uri_variable) + "=" + o.uri);
      pids_.push_back(spawn(command, environment, plan.worker_log));
      reaped_.push_back(false);
    } catch (...) {
      wait(shared_clock::now());  // kills and reaps the ones already started
      throw;
    }
  }
}

worker_fleet::~worker_fleet() { wait(shared_clock::now()); }

pid_t worker_fleet::pid(std::uint32_t client) const {
  if (client == 0 || client > clients_)
    throw std::out_of_range("no client " + std::to_string(client) + " in a fleet of " + std::to_string(clients_) +
                            " (ids start at 1)");
  return pids_[(client - 1) / clients_per_process_];
}

std::vector<std::optional<int>> worker_fleet::wait(instant deadline) {
  std::vector<std::optional<int>> codes(pids_.size());
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    if (reaped_[i]) continue;
    int status = 0;
    for (;;) {
      const pid_t r = ::waitpid(pids_[i], &status, WNOHANG);
      if (r == pids_[i]) {
        codes[i] = exit_code(status);
        break;
      }
      if (r < 0 && errno != EINTR) break;  // not our child any more: nothing to reap
      if (shared_clock::now() >= deadline) {
        ::kill(pids_[i], SIGKILL);
        ::waitpid(pids_[i], &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    reaped_[i] = true;
  }
  return codes;
}

}  // namespace dlock::compare
