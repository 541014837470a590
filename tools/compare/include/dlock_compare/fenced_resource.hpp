#pragma once
// The fenced resource (Kleppmann's fix): it keeps the highest fencing token it has accepted and
// refuses a write carrying a smaller one. Its state is an 8-byte file shared by the client
// processes of a run, read and updated under flock(2), so the check and the update are one step
// across processes.
#include <cstdint>
#include <filesystem>
#include <optional>

#include "dlock_compare/event.hpp"

namespace dlock::compare {

class fenced_resource {
 public:
  // Creates the file (highest token 0) if needed. Throws std::system_error naming the path.
  explicit fenced_resource(const std::filesystem::path& path);
  ~fenced_resource();
  fenced_resource(const fenced_resource&) = delete;
  fenced_resource& operator=(const fenced_resource&) = delete;

  struct admission {
    fence_verdict verdict;
    instant at;  // taken under the file lock: the order of these instants is the resource's order
  };
  // Judges a write carrying `token` (nullopt: the backend has no tokens, verdict no_token) and
  // records an accepted token as the new highest. Throws std::system_error.
  admission admit(std::optional<std::uint64_t> token);

  std::uint64_t highest_accepted();  // 0 before the first accepted token

 private:
  std::uint64_t read_highest();
  int fd_ = -1;
};

}  // namespace dlock::compare
