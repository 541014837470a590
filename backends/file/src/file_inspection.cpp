#include "file_inspection.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "dlock/error.hpp"
#include "shared_files.hpp"

namespace dlock::file {
namespace {

struct flock_entry {
  bool exclusive = false;
  long pid = 0;
};

std::string host_name() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  return host.data();
}

// The FLOCK lines of /proc/locks on the file `file_name` of `dir` (none when it does not exist).
// A line: "<n>: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF"; blocked requests
// start "<n>: -> FLOCK ..." and are skipped (dlock never blocks in flock).
std::vector<flock_entry> flocks_on(const lock_directory& dir, const std::string& file_name) {
  struct stat st {};
  if (fstatat(dir.fd(), file_name.c_str(), &st, 0) != 0) return {};
  std::ifstream in("/proc/locks");
  if (!in) throw error(errc::backend_unavailable, "cannot read /proc/locks to inspect " + dir.where(file_name));
  std::vector<flock_entry> found;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string number, type, advisory, access, device;
    long pid = 0;
    words >> number >> type;
    if (type != "FLOCK") continue;
    words >> advisory >> access >> pid >> device;
    unsigned major_number = 0, minor_number = 0;
    unsigned long long inode = 0;
    if (std::sscanf(device.c_str(), "%x:%x:%llu", &major_number, &minor_number, &inode) != 3) continue;
    if (inode != st.st_ino || major_number != major(st.st_dev) || minor_number != minor(st.st_dev)) continue;
    found.push_back({access == "WRITE", pid});
  }
  return found;
}

}  // namespace

lock_info inspect_name(const lock_directory& dir, const std::string& name) {
  lock_info info;
  const auto host = host_name();
  // The gate's and the readers' turn's flocks are waits and short critical sections, not grants.
  for (const auto& f : flocks_on(dir, rw_files(name).lock)) {
    lock_holder h;
    h.owner = host + ":" + std::to_string(f.pid);
    // The mutex and a writer both hold LOCK_EX on the same file: the file does not say which.
    h.kind = f.exclusive ? hold_kind::write : hold_kind::read;
    info.holders.push_back(std::move(h));
  }
  return info;
}

std::vector<std::string> held_names(const lock_directory& dir, const std::string& prefix) {
  std::vector<std::string> names;
  const int fd = dup(dir.fd());
  if (fd < 0) throw error(errc::backend_unavailable, "cannot read the lock directory " + dir.path().string());
  DIR* d = fdopendir(fd);
  if (!d) {
    close(fd);
    throw error(errc::backend_unavailable, "cannot read the lock directory " + dir.path().string());
  }
  rewinddir(d);
  std::vector<std::string> files;
  while (const dirent* e = readdir(d)) {
    const std::string file = e->d_name;
    if (file.size() > 5 && file.ends_with(".lock")) files.push_back(file);
  }
  closedir(d);
  for (const auto& file : files) {
    const auto key = file.substr(0, file.size() - 5);
    if (!key.starts_with(prefix)) continue;
    if (!flocks_on(dir, file).empty()) names.push_back(key);
  }
  return names;
}

}  // namespace dlock::file
