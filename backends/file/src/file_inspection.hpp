#pragma once
// What file:// can tell an operator: the flocks on a name's lock file, read from /proc/locks
// (kernel-kept, read-only: looking never takes the lock, so it cannot make a racing acquire fail).
// The file records no owner id, so a holder is named "<host>:<pid>" -- the leading part of the
// default owner id -- by the pid the kernel shows for the flock.
#include <string>
#include <vector>

#include "dlock/inspection.hpp"
#include "lock_directory.hpp"

namespace dlock::file {

lock_info inspect_name(const lock_directory& dir, const std::string& name);
// The names whose lock file is flock'ed now and starts with `prefix`. A name stored hashed (see
// file_key) is listed by its key ("#<head>.<sha256>"), which is all the directory keeps of it.
std::vector<std::string> held_names(const lock_directory& dir, const std::string& prefix);

}  // namespace dlock::file
