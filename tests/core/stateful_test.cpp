// The named-field contract (core/stateful.hpp): round trips, names as stored, errors that name
// the field and the file.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/stateful.hpp"

namespace asteria {
namespace {

// The message of the Error f throws ("" when none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A component of two fields, one with '/' in its name.
struct Counter final : Stateful {
  std::vector<int64_t> counts;
  double rate = 0;
  std::string state_name() const override { return "counter"; }
  void save_state(StateWriter& out) override {
    out.put_ints("a/b", counts);
    out.put("rate", rate);
  }
  void load_state(const StateReader& in) override {
    std::vector<int64_t> c = in.ints("a/b");
    const double r = in.scalar("rate");
    counts = std::move(c);
    rate = r;
  }
};

TEST(Stateful, FieldsAreStoredUnderTheComponentWithColonsForSlashes) {
  Counter c;
  c.counts = {3, -4, int64_t{1} << 40};
  c.rate = 0.125;
  StateFields fields;
  save_states({&c}, fields);
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields.at("counter.a:b"), (std::vector<double>{3, -4, 1099511627776.0}));
  EXPECT_EQ(fields.at("counter.rate"), std::vector<double>{0.125});
}

TEST(Stateful, RoundTripRestoresEveryField) {
  Counter saved, loaded;
  saved.counts = {1, 2, 3};
  saved.rate = -2.5;
  StateFields fields = {{"other.x", {1}}};   // another component's: kept, ignored
  save_states({&saved}, fields);
  EXPECT_EQ(fields.count("other.x"), 1u);
  load_states({&loaded}, fields, "ckpt/rank00000.h5");
  EXPECT_EQ(loaded.counts, saved.counts);
  EXPECT_EQ(loaded.rate, saved.rate);
}

TEST(Stateful, MissingFieldIsNamedWithTheFile) {
  Counter c;
  const StateFields fields = {{"counter.rate", {1}}};
  const std::string e = error_of([&] { load_states({&c}, fields, "ckpt/rank00000.h5"); });
  EXPECT_NE(e.find("ckpt/rank00000.h5"), std::string::npos) << e;
  EXPECT_NE(e.find("'counter.a:b' is missing"), std::string::npos) << e;
  EXPECT_EQ(c.rate, 0);   // nothing loaded
}

TEST(Stateful, MalformedFieldsAreNamedWithTheFile) {
  const StateFields fields = {{"c.pair", {1, 2, 3}}, {"c.half", {0.5}}, {"c.big", {1e19}}};
  const StateReader in(fields, "c", "f.h5");
  std::string e = error_of([&] { in.get("pair", 2); });
  EXPECT_NE(e.find("f.h5: value 'c.pair' has 3 entries, expected 2"), std::string::npos) << e;
  e = error_of([&] { in.ints("half"); });
  EXPECT_NE(e.find("f.h5: value 'c.half' entry 0 is 0.5, not an integer"), std::string::npos) << e;
  e = error_of([&] { in.ints("big"); });
  EXPECT_NE(e.find("'c.big'"), std::string::npos) << e;
  e = error_of([&] { in.fail("the loader served ", 3, " instances"); });
  EXPECT_EQ(e, "f.h5: the loader served 3 instances");
}

TEST(Stateful, ReaderListsTheComponentsFieldsByStart) {
  const StateFields fields = {{"shadow.open.0_1.where", {}}, {"shadow.open.0_1.left_root", {}},
                              {"shadow.kept.0_1.where", {}}, {"shadowy.open.x", {}},
                              {"shadow.open.a:b", {}}};
  const StateReader in(fields, "shadow", "f.h5");
  EXPECT_EQ(in.fields("open."), (std::vector<std::string>{"open.0_1.left_root", "open.0_1.where", "open.a/b"}));
  EXPECT_EQ(in.fields().size(), 4u);
  EXPECT_TRUE(in.has("open.a/b"));
  EXPECT_FALSE(in.has("open.x"));
}

}  // namespace
}  // namespace asteria
