#pragma once
// A fresh directory under the system's temporary directory, removed with everything in it.
#include <filesystem>
#include <system_error>

#include "dlock_test/support.hpp"

namespace dlock::compare::testing {

class temp_dir {
 public:
  temp_dir() : path_(std::filesystem::temp_directory_path() / dlock::testing::unique_name("dlock-compare")) {
    std::filesystem::create_directory(path_);
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace dlock::compare::testing
