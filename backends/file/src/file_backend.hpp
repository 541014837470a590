#pragma once
// file:///dir: locks shared by the processes of one host, one flock'ed lock file per name.
#include <memory>

#include "dlock/spi.hpp"
#include "lock_directory.hpp"

namespace dlock::file {

// expiring: the kernel drops a flock when its holder dies (no ttl while it lives). fencing: the
// counter in the lock file. Not reentrant (flock is per open file description), not fair and not
// blocking (polling), not renewable (nothing to renew), no lost notification (a held flock cannot
// be taken away, and nothing tells the holder if its lock file is deleted or replaced).
inline constexpr capabilities file_capabilities{capability::expiring, capability::fencing};

class file_backend final : public backend {
 public:
  file_backend(const uri& u, const lock_options& defaults);
  const lock_directory& directory() const noexcept { return *dir_; }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;

 private:
  std::shared_ptr<const lock_directory> dir_;
};

}  // namespace dlock::file
