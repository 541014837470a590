#include <vector>

#include "conformance_test.hpp"

namespace dlock::conformance {

TEST_P(Lock, NamesAreCaseSensitive) {
  const auto base = dlock::testing::unique_name("case");
  auto upper = make("Lock-" + base), lower = make("lock-" + base);
  auto a = upper->try_acquire();
  ASSERT_TRUE(a);
  EXPECT_TRUE(lower->try_acquire()) << "'Lock' and 'lock' excluded each other";
}

TEST_P(Lock, OddBytesWorkAndDistinctNamesNeverExcludeEachOther) {
  const auto u = dlock::testing::unique_name("odd");
  const std::vector<std::string> names = {u + " with spaces",
                                          u + "'quote\"",
                                          u + "\\back\\slash",
                                          u + "%41%",
                                          u + "_under_",
                                          u + std::string("\0nul", 4),
                                          u + std::string("\0nuk", 4),
                                          u + "\xc3\xa9\xe6\x97\xa5\xf0\x9f\x94\x92",
                                          u + "/a/b",
                                          u + "/a_b",
                                          u + "; DEL x\r\nFLUSHALL",
                                          u + "' OR '1'='1",
                                          "#" + u,
                                          u + "*",
                                          u + "?"};
  std::vector<std::unique_ptr<distributed_lock>> locks;
  std::vector<lease> leases;
  for (const auto& n : names) {
    locks.push_back(make(n));
    leases.push_back(locks.back()->try_acquire());
    EXPECT_TRUE(leases.back()) << "name #" << leases.size() - 1 << " was refused while only other names are held";
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto other = make(names[i]);
    EXPECT_FALSE(other->try_acquire()) << "name #" << i << " did not exclude a second owner";
  }
  for (auto& l : leases) l.release();
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_TRUE(make(names[i])->try_acquire()) << "name #" << i;
}

TEST_P(Lock, MaximumLengthWorksAndOneMoreIsRefused) {
  const std::size_t max = backend_->limits().max_length;
  ASSERT_LE(max, std::size_t{1} << 20) << "name limit too large to test";
  const auto u = dlock::testing::unique_name("max");
  ASSERT_GE(max, u.size() + 1);
  std::string a = u + std::string(max - u.size(), 'x');
  std::string b = a;
  b.back() = 'y';  // differs only in the last byte: a hashed key must still tell them apart
  auto la = make(a), lb = make(b);
  auto ha = la->try_acquire();
  ASSERT_TRUE(ha) << "a name of exactly " << max << " bytes was refused";
  EXPECT_TRUE(lb->try_acquire()) << "two max-length names differing in the last byte collide";
  EXPECT_FALSE(make(a)->try_acquire());
  try {
    auto too_long = backend_->make_lock(a + "z");
    ADD_FAILURE() << "a name of " << max + 1 << " bytes was accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_name);
    EXPECT_NE(std::string(e.what()).find(std::to_string(max)), std::string::npos) << "the message must state the limit";
  }
  try {
    auto empty = backend_->make_lock("");
    ADD_FAILURE() << "an empty name was accepted";
  } catch (const dlock::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_name);
  }
}

}  // namespace dlock::conformance
