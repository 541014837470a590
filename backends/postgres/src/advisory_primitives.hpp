#pragma once
// postgres+advisory's reader-writer lock and semaphore.
//  * rw lock: readers hold pg_advisory_lock_shared, writers pg_advisory_lock, on the mutex's key
//    of the same name (spi::sha256_int64(name)): a writer and the mutex of one name exclude each
//    other. PostgreSQL queues a shared request behind a waiting exclusive one, and every wait here
//    is a blocking wait on the server: a waiting writer holds back new readers.
//  * semaphore: permit i of a name is the advisory lock on the two-int4 key made of the 8 bytes
//    spi::sha256_int64(u32 big-endian i || name); an acquire of k takes k free slots in one
//    statement (or gives back what it took). No slot knows max_count: processes that disagree on
//    it are not detected.
#include <cstdint>
#include <memory>
#include <string>

#include "advisory_grant.hpp"
#include "dlock/spi.hpp"

namespace dlock::pg {

std::unique_ptr<rw_lock> make_advisory_rw_lock(std::shared_ptr<advisory_state> st, std::string name,
                                               lock_options options);
std::unique_ptr<semaphore> make_advisory_semaphore(std::shared_ptr<advisory_state> st, std::string name,
                                                   std::uint32_t max_count, lock_options options);

}  // namespace dlock::pg
