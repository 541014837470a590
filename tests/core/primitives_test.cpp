#include <gtest/gtest.h>

#include <random>
#include <set>

#include "dlock/dlock.hpp"
#include "dlock/spi.hpp"

namespace {

using namespace dlock;
using namespace std::chrono_literals;

TEST(Capabilities, ToStringAndParseRoundTrip) {
  EXPECT_EQ(capabilities{}.to_string(), "none");
  const capabilities c{capability::expiring, capability::renewable, capability::fencing};
  EXPECT_EQ(c.to_string(), "expiring|renewable|fencing");
  EXPECT_EQ(capabilities::parse(c.to_string()), c);
  EXPECT_EQ(capabilities::parse("fencing,expiring,renewable"), c);
  EXPECT_EQ(capabilities::parse("none"), capabilities{});
  for (auto one : all_capabilities) EXPECT_EQ(capabilities::parse(to_string(one)), capabilities{one});
  EXPECT_THROW(capabilities::parse("expiring|teleport"), dlock::error);
  EXPECT_EQ(c.missing({capability::fair, capability::fencing}), capabilities{capability::fair});
}

TEST(SafeKey, NeverCollides) {
  const auto alnum = [](unsigned char c) { return std::isalnum(c) != 0 || c == '-' || c == '_'; };
  std::mt19937_64 rng(12345);
  std::vector<std::string> names = {"a", "A", "lock", "Lock", "LOCK", "#", "#a", "#a.", "a.", ".", "a b", "a%20b"};
  const std::string sample_hash = spi::safe_key("a b", 80, alnum);  // "#a." + sha256
  names.push_back(sample_hash);
  names.push_back(sample_hash.substr(1));
  names.push_back(std::string(80, 'x'));
  names.push_back(std::string(81, 'x'));
  names.push_back(std::string(200, 'x'));
  names.push_back(std::string(200, 'x') + "y");
  for (int i = 0; i < 3000; ++i) {
    std::string n(1 + rng() % 100, '\0');
    for (auto& ch : n) ch = static_cast<char>(i % 3 == 0 ? 'a' + rng() % 3 : rng() % 256);
    names.push_back(n);
  }
  std::set<std::string> unique_names(names.begin(), names.end());
  std::map<std::string, std::string> by_key;
  for (const auto& n : unique_names) {
    const auto key = spi::safe_key(n, 80, alnum);
    EXPECT_LE(key.size(), 80u);
    for (unsigned char ch : key) EXPECT_TRUE(alnum(ch) || ch == '#' || ch == '.');
    auto [it, inserted] = by_key.emplace(key, n);
    EXPECT_TRUE(inserted || it->second == n) << "two names map to key " << key;
  }
}

TEST(RandomUuid, HasTheUuidTextLayoutAndNeverRepeats) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto id = spi::random_uuid();
    ASSERT_EQ(id.size(), 36u) << id;
    for (std::size_t at = 0; at < id.size(); ++at) {
      if (at == 8 || at == 13 || at == 18 || at == 23)
        EXPECT_EQ(id[at], '-') << id;
      else
        EXPECT_NE(std::string_view("0123456789abcdef").find(id[at]), std::string_view::npos) << id;
    }
    EXPECT_TRUE(seen.insert(id).second) << "repeated: " << id;
  }
}

TEST(Backoff, StaysWithinBounds) {
  const backoff_policy p{10ms, 800ms};
  for (unsigned attempt = 0; attempt < 40; ++attempt)
    for (int i = 0; i < 50; ++i) {
      const auto d = spi::backoff_delay(p, attempt);
      EXPECT_GE(d, p.min);
      EXPECT_LE(d, p.max);
      EXPECT_LE(d, p.min * (1 << std::min(attempt, 10u)));
    }
  EXPECT_EQ(spi::backoff_delay({5ms, 5ms}, 7), 5ms);
}

}  // namespace
