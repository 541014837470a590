#pragma once
// The whole public API:
//   auto backend = dlock::open("redis://127.0.0.1:6379?ttl=30s");
//   auto lock = backend->make_lock("orders/42");
//   if (auto lease = lock->try_acquire_for(std::chrono::seconds(5))) { ... lease.fencing_token() ... }
//   auto rw = backend->make_rw_lock("catalog");        // rw->try_acquire_read_for(...), acquire_write()
//   auto permits = backend->make_semaphore("api", 3);  // permits->try_acquire_for(timeout, n)
//   auto both = backend->make_multi_lock({"a", "b"});   // both->try_acquire_for(timeout): all or none
#include "dlock/backend.hpp"
#include "dlock/capabilities.hpp"
#include "dlock/diagnostics.hpp"
#include "dlock/distributed_lock.hpp"
#include "dlock/election.hpp"
#include "dlock/error.hpp"
#include "dlock/inspection.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/observer.hpp"
#include "dlock/registry.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/uri.hpp"
