#include "dlock/spi.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <random>

namespace dlock::spi {
namespace {

constexpr char hex_digits[] = "0123456789abcdef";

std::string to_hex(const unsigned char* data, std::size_t size) {
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += hex_digits[data[i] >> 4];
    out += hex_digits[data[i] & 0xf];
  }
  return out;
}

std::array<unsigned char, 32> sha256(std::string_view data) {
  std::array<unsigned char, 32> digest{};
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

}  // namespace

std::string random_token() {
  // random_device is the OS's getrandom() on Linux: unpredictable across processes and hosts.
  thread_local std::random_device device;
  std::array<unsigned char, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); i += 4) {
    const auto word = device();
    for (std::size_t j = 0; j < 4; ++j) bytes[i + j] = static_cast<unsigned char>(word >> (8 * j));
  }
  return to_hex(bytes.data(), bytes.size());
}

std::string random_uuid() {
  const auto hex = random_token();
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20, 12);
}

std::string default_owner_id() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  return std::string(host.data()) + ":" + std::to_string(getpid()) + ":" + random_token();
}

std::string sha256_hex(std::string_view data) {
  const auto digest = sha256(data);
  return to_hex(digest.data(), digest.size());
}

std::int64_t sha256_int64(std::string_view data) {
  const auto digest = sha256(data);
  std::uint64_t key = 0;
  for (std::size_t i = 0; i < 8; ++i) key = (key << 8) | digest[i];
  return static_cast<std::int64_t>(key);
}

std::string safe_key(std::string_view name, std::size_t max_key_length,
                     const std::function<bool(unsigned char)>& allowed, std::string_view hashed_prefix) {
  const bool as_is =
      name.size() <= max_key_length && !name.starts_with(hashed_prefix) &&
      std::all_of(name.begin(), name.end(), [&](char c) { return allowed(static_cast<unsigned char>(c)); });
  if (as_is) return std::string(name);
  // Keep a readable head of the name so operators can still tell keys apart, then the hash.
  const std::string digest = sha256_hex(name);
  const std::size_t room = max_key_length > hashed_prefix.size() + 1 + digest.size()
                               ? max_key_length - hashed_prefix.size() - 1 - digest.size()
                               : 0;
  std::string head;
  for (char c : name) {
    if (head.size() >= std::min<std::size_t>(room, 32)) break;
    if (!allowed(static_cast<unsigned char>(c))) break;
    head += c;
  }
  return std::string(hashed_prefix) + head + "." + digest;
}

std::chrono::milliseconds backoff_delay(const backoff_policy& policy, unsigned attempt) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto ceiling = policy.min;
  for (unsigned i = 0; i < attempt && ceiling < policy.max; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, policy.max);
  std::uniform_int_distribution<std::int64_t> pick(policy.min.count(), ceiling.count());
  return std::chrono::milliseconds(pick(rng));
}

}  // namespace dlock::spi
