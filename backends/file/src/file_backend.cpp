#include "file_backend.hpp"

#include "file_inspection.hpp"
#include "file_lock.hpp"
#include "file_primitives.hpp"
#include "lock_file.hpp"

namespace dlock::file {

file_backend::file_backend(const uri& u, const lock_options& defaults)
    : backend(file_caps, file_primitives, lock_scope::host, name_limits{max_name_length}, defaults, u.redacted()),
      dir_(std::make_shared<const lock_directory>(directory_of(u))) {}

std::unique_ptr<distributed_lock> file_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<file_lock>(std::move(name), caps(), std::move(options), dir_);
}

std::unique_ptr<rw_lock> file_backend::do_make_rw_lock(std::string name, lock_options options) {
  return std::make_unique<file_rw_lock>(std::move(name), rw_caps(), std::move(options), dir_);
}

std::unique_ptr<semaphore> file_backend::do_make_semaphore(std::string name, std::uint32_t max_count,
                                                           lock_options options) {
  return std::make_unique<file_semaphore>(std::move(name), max_count, semaphore_caps(), std::move(options), dir_);
}

lock_info file_backend::do_inspect(const std::string& name) { return inspect_name(*dir_, name); }

std::vector<std::string> file_backend::do_list(const std::string& prefix) { return held_names(*dir_, prefix); }

}  // namespace dlock::file
