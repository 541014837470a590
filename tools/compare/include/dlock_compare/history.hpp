#pragma once
// The history file: the protected resource's log of every critical section, shared by the
// client processes of one run (each appends whole event records with O_APPEND).
#include <filesystem>
#include <optional>
#include <vector>

#include "dlock_compare/event.hpp"

namespace dlock::compare {

class history_writer {
 public:
  // Creates the file if needed, appends otherwise. Throws std::system_error naming the path.
  explicit history_writer(const std::filesystem::path& path);
  ~history_writer();
  history_writer(const history_writer&) = delete;
  history_writer& operator=(const history_writer&) = delete;

  // One write(2) of one record: safe from any thread (the lost_token callback runs on the
  // watchdog's) and from any number of processes at once. Throws std::system_error.
  void append(const event& e);

  // An event of `kind` stamped now.
  void append_now(std::uint32_t client, std::uint32_t attempt, event_kind kind,
                  std::optional<std::uint64_t> token = std::nullopt);

 private:
  int fd_ = -1;
};

// Every complete record in the file, in file order. A trailing partial record (a writer killed
// mid-write cannot produce one with a single write(2), but a truncated copy could) is ignored;
// a record with the wrong format tag throws std::runtime_error naming its offset.
std::vector<event> read_history(const std::filesystem::path& path);

}  // namespace dlock::compare
