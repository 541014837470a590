#pragma once
// The keys of one name, in its folder <uri prefix><name>/ (name_prefix), each put with a lease of
// its own, by a transaction that creates it only if absent:
//   <folder><lease hex>             a mutex (Go's concurrency.Mutex, etcdctl lock)
//   <folder>read/<lease hex>        a reader (Go's contrib recipe RWMutex.RLock: <prefix>/read/...)
//   <folder>write/<lease hex>       a writer (RWMutex.Lock: <prefix>/write/...)
//   <folder>semaphore/<lease hex>   a semaphore's acquire, valued {"owner", "permits", "max_count"}
// The recipe names its keys by time (UnixNano); what it reads is only the folders and the create
// revisions, so dlock's lease ids in their place keep both in one line.
//
// One name, one lock: a mutex counts as a writer (both wait for every key created before theirs,
// the recipe's writers included), and a reader waits for the last key before it that is not a
// reader's. A semaphore never holds beside either: the transaction that creates a key also reads
// the other kind's keys, and the acquirer withdraws (errc::name_conflict) when it finds one. etcd
// runs transactions one at a time, so of two acquirers of different kinds the later one sees the
// earlier one's key: both may be refused, never both granted.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway.hpp"

namespace dlock::etcd {

inline constexpr std::string_view read_folder = "read/";
inline constexpr std::string_view write_folder = "write/";
inline constexpr std::string_view semaphore_folder = "semaphore/";

enum class key_kind { mutex, read, write, semaphore, foreign };
// What a key is by `rest`, the part of it after the name's folder: foreign when it has a '/' of
// its own outside those folders (etcdctl lock a/b puts a/b/<lease> as is).
key_kind kind_of_key(std::string_view rest);

// The creating transaction's reads of the other kind's keys, after its put:
// a mutex or reader-writer lock reads the semaphore's keys (a count),
json semaphore_keys(const std::string& folder);
// a semaphore reads every other key of the folder (two ranges around semaphore/, first key each).
json lock_keys_before_semaphores(const std::string& folder);
json lock_keys_after_semaphores(const std::string& folder);

// Throw errc::name_conflict when the creating transaction's answer (ranges from index `at`) found
// the other kind: `what` ("a mutex", "a read lock", "a write lock") of a name in use as a
// semaphore, or a semaphore of a name in use as a mutex or a reader-writer lock.
void refuse_if_semaphore(const json& txn, std::size_t at, std::string_view name, std::string_view what);
void refuse_if_lock(const json& txn, std::size_t at, const std::string& folder, std::string_view name);

// A semaphore key's value. max_count 0: not recorded (a foreign key), not checked.
struct semaphore_entry {
  std::string owner;
  std::uint32_t permits = 1;
  std::uint32_t max_count = 0;
};
std::string semaphore_value(const semaphore_entry& e);
semaphore_entry parse_semaphore_value(std::string_view value);

}  // namespace dlock::etcd
