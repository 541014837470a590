#pragma once
// The etcd backend's reader-writer lock (etcd_rw_lock.cpp) and semaphore (etcd_semaphore.cpp), in
// the layout of layout.hpp, waiting as queue.hpp does.
#include <cstdint>
#include <memory>
#include <string>

#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "gateway.hpp"

namespace dlock::etcd {

// `folder`: the name's folder (name_prefix).
std::unique_ptr<rw_lock> make_rw_lock(std::string name, capabilities caps, lock_options options,
                                      std::shared_ptr<gateway> gw, std::string folder);
std::unique_ptr<semaphore> make_semaphore(std::string name, std::uint32_t max_count, capabilities caps,
                                          lock_options options, std::shared_ptr<gateway> gw, std::string folder);

}  // namespace dlock::etcd
