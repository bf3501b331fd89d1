// Runs every row of the error suite (ErrorRows.h). A CLI row runs the real `foundry` and must end
// with the row's exit code and exactly one error line naming the problem (or, for exit 0, exactly one
// warning), never a crash, a hang or a temporary file left behind. An in-process row must throw a
// foundry::Error of the row's kind, with its field and message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "errors/ErrorRows.h"
#include "support/Subprocess.h"
#include "support/TempDir.h"
#include "support/TestRuntime.h"

namespace foundry::errors {

// gtest prints a failing row by its id.
void PrintTo(const CliRow& row, std::ostream* os) {
  *os << row.id;
}
void PrintTo(const InProcessRow& row, std::ostream* os) {
  *os << row.id;
}

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const fs::path kFoundry = FOUNDRY_EXECUTABLE;
const fs::path kSource = FOUNDRY_SOURCE_DIR;

using Env = std::map<std::string, std::optional<std::string>>;

test::StreamTarget substituted(test::StreamTarget target, const fs::path& tmp) {
  target.file = substituteTmp(target.file.string(), tmp);
  return target;
}

test::ProcessSpec foundrySpec(const fs::path& tmp, const std::vector<std::string>& args, const Env& env,
                              double timeoutSeconds = 300) {
  test::ProcessSpec spec;
  spec.argv.push_back(kFoundry.string());
  for (const auto& a : args) spec.argv.push_back(substituteTmp(a, tmp));
  // The suite's kernel cache (defaultCache) and the default log level, unless the row sets them.
  spec.env["FOUNDRY_CACHE_DIR"] = defaultCache(tmp).string();
  spec.env["FOUNDRY_LOG_LEVEL"] = "warn";
  for (const auto& [name, value] : env) {
    spec.env[name] = value ? std::optional<std::string>(substituteTmp(*value, tmp)) : std::nullopt;
  }
  spec.workDir = tmp;
  spec.timeoutSeconds = timeoutSeconds;
  return spec;
}

CliContext contextFor(const fs::path& tmp) {
  CliContext ctx;
  ctx.tmp = tmp;
  ctx.source = kSource;
  ctx.foundry = [tmp](const std::vector<std::string>& args, const Env& env) {
    const auto r = test::runProcess(foundrySpec(tmp, args, env));
    if (r.exitCode != 0) throw std::runtime_error("setup run of foundry failed: " + r.summary());
    return r.out;
  };
  return ctx;
}

// Files a failed atomic write could leave: ".<name>.tmp.<pid>.<n>"; with `pid`, only that process's.
std::vector<std::string> temporaries(const fs::path& dir, std::optional<pid_t> pid = std::nullopt) {
  const std::string mark = pid ? ".tmp." + std::to_string(*pid) + "." : ".tmp.";
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().filename().string().find(mark) != std::string::npos) out.push_back(it->path().string());
  }
  return out;
}

const char* errorPrefixFor(int exitCode) {
  switch (exitCode) {
    case kExitCheckFailed:
      return "foundry: check failed: ";
    case 2:
      return "foundry: user error: ";
    case 3:
      return "foundry: unsupported: ";
    case 4:
      return "foundry: device error: ";
    default:
      return "foundry: internal error: ";
  }
}

// A progress line of `foundry run` on a stderr that is not a terminal: "progress: <phase> <done>/<total>".
bool isProgressLine(const std::string& line) {
  for (const std::string phase : {"progress: prefill ", "progress: decode "}) {
    if (!line.starts_with(phase)) continue;
    const std::string count = line.substr(phase.size());
    const auto slash = count.find('/');
    const auto digits = [](const std::string& s) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    return slash != std::string::npos && digits(count.substr(0, slash)) && digits(count.substr(slash + 1));
  }
  return false;
}

// ---------------------------------------------------------------------------------------------

class CliErrorRow : public ::testing::TestWithParam<CliRow> {};

TEST_P(CliErrorRow, ExitCodeAndOneClearLine) {
  const CliRow& row = GetParam();
  test::TempDir dir;
  const CliContext ctx = contextFor(dir.path());
  if (row.setup) {
    try {
      row.setup(ctx);
    } catch (const std::exception& e) {
      FAIL() << "setup failed: " << e.what();
    }
  }
  test::ProcessSpec spec = foundrySpec(dir.path(), row.args, row.env, row.timeoutSeconds);
  spec.out = substituted(row.stdoutTo, dir.path());
  spec.err = substituted(row.stderrTo, dir.path());
  spec.fileSizeLimit = row.fileSizeLimit;
  test::Process child(spec);
  const pid_t pid = child.pid();
  const test::ProcessResult r = child.wait();
  ASSERT_FALSE(r.timedOut) << r.summary();
  ASSERT_EQ(r.signal, 0) << r.summary();
  EXPECT_EQ(r.exitCode, row.exitCode) << r.summary();

  std::vector<std::string> lines = r.errLines();
  std::erase_if(lines, isProgressLine);
  const std::string fragment = substituteTmp(row.fragment, dir.path());
  const auto errorLines =
      std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("foundry: "); });
  if (row.stderrTo.kind != test::StreamTarget::Kind::Captured) {
    // No error line to read: what is left is the exit code (checked above) and stdout.
    EXPECT_THAT(r.out, HasSubstr(fragment)) << r.summary();
  } else if (row.exitCode == 0 && row.quiet) {
    // Nothing on stderr; the fragment is on stdout.
    EXPECT_THAT(lines, ::testing::IsEmpty()) << r.summary();
    EXPECT_THAT(r.out, HasSubstr(fragment)) << r.summary();
  } else if (row.exitCode == 0 && row.logs) {
    // Log lines, one of them the fragment; no warning, no error.
    EXPECT_EQ(errorLines, 0) << r.summary();
    EXPECT_THAT(lines, ::testing::Contains(HasSubstr(fragment))) << r.summary();
    EXPECT_THAT(lines, ::testing::Each(::testing::Not(StartsWith("[foundry warning]")))) << r.summary();
    EXPECT_THAT(lines, ::testing::Each(::testing::Not(StartsWith("[foundry error]")))) << r.summary();
  } else if (row.exitCode == 0) {
    // One warning, no error.
    EXPECT_EQ(errorLines, 0) << r.summary();
    ASSERT_EQ(lines.size(), 1u) << "expected exactly one warning\n" << r.summary();
    EXPECT_THAT(lines[0], StartsWith("[foundry warning] "));
    EXPECT_THAT(lines[0], HasSubstr(fragment));
  } else {
    // Exactly one error line, first on stderr, of the kind the exit code says.
    EXPECT_EQ(errorLines, 1) << r.summary();
    ASSERT_FALSE(lines.empty()) << r.summary();
    EXPECT_THAT(lines[0], StartsWith(errorPrefixFor(row.exitCode))) << r.summary();
    if (row.multiLine) {
      EXPECT_THAT(r.err, HasSubstr(fragment));
    } else {
      EXPECT_EQ(lines.size(), 1u) << "expected one line on stderr\n" << r.summary();
      EXPECT_THAT(lines[0], HasSubstr(fragment));
    }
  }
  EXPECT_THAT(temporaries(dir.path()), ::testing::IsEmpty()) << "a half-written file remains";
  // The suite's cache lies outside the row's directory: what this run could have left there.
  if (const fs::path shared = defaultCache(dir.path()); !shared.string().starts_with(dir.path().string())) {
    EXPECT_THAT(temporaries(shared, pid), ::testing::IsEmpty()) << "a half-written cache entry remains";
  }
  if (row.check) {
    std::string problem;
    try {
      problem = row.check(ctx, CliOutcome{r.exitCode, r.out, r.err, r.seconds});
    } catch (const std::exception& e) {
      problem = std::string("the check threw: ") + e.what();
    }
    EXPECT_EQ(problem, "") << r.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, CliErrorRow, ::testing::ValuesIn(allCliRows()),
                         [](const ::testing::TestParamInfo<CliRow>& p) { return p.param.id; });

// ---------------------------------------------------------------------------------------------

class InProcessErrorRow : public ::testing::TestWithParam<InProcessRow> {};

TEST_P(InProcessErrorRow, KindFieldAndMessage) {
  const InProcessRow& row = GetParam();
  test::TempDir dir;
  InProcessContext ctx{dir.path(), []() -> Runtime& { return test::runtime(); }};
  if (!row.needsDevice) ctx.runtime = []() -> Runtime& { throw std::logic_error("this row does not use a device"); };
  try {
    row.action(ctx);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(errorKindName(e.kind()), std::string(errorKindName(row.kind))) << e.what();
    EXPECT_EQ(exitCodeFor(e.kind()), exitCodeFor(row.kind));
    if (row.field) {
      const auto* user = dynamic_cast<const UserError*>(&e);
      ASSERT_NE(user, nullptr) << e.what();
      EXPECT_EQ(user->field(), *row.field) << e.what();
    }
    EXPECT_THAT(e.what(), HasSubstr(substituteTmp(row.fragment, dir.path())));
    if (!row.mentions.empty()) {
      EXPECT_THAT(e.what(), HasSubstr(substituteTmp(row.mentions, dir.path())));
    }
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "a one-line message: " << e.what();
  } catch (const std::exception& e) {
    FAIL() << "not a foundry::Error: " << e.what();
  }
  EXPECT_THAT(temporaries(dir.path()), ::testing::IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Rows, InProcessErrorRow, ::testing::ValuesIn(inProcessRows()),
                         [](const ::testing::TestParamInfo<InProcessRow>& p) { return p.param.id; });

// ---------------------------------------------------------------------------------------------

TEST(ErrorSuite, RowsAreWellFormed) {
  std::set<std::string> ids;
  for (const auto& r : allCliRows()) {
    EXPECT_TRUE(ids.insert(r.id).second) << "duplicate id " << r.id;
    const bool stderrSeen = r.stderrTo.kind == test::StreamTarget::Kind::Captured;
    EXPECT_FALSE(r.area.empty() || r.input.empty() || (r.fragment.empty() && stderrSeen)) << r.id;
    EXPECT_TRUE(r.exitCode >= 0 && r.exitCode <= 4) << r.id << ": exit " << r.exitCode;
    EXPECT_TRUE(!r.quiet || r.exitCode == 0) << r.id << ": only a run that succeeds is quiet";
    EXPECT_TRUE(!r.logs || (r.exitCode == 0 && !r.quiet)) << r.id << ": only a run that succeeds logs";
  }
  for (const auto& r : inProcessRows()) {
    EXPECT_TRUE(ids.insert(r.id).second) << "duplicate id " << r.id;
    EXPECT_FALSE(r.area.empty() || r.input.empty() || r.via.empty() || r.fragment.empty()) << r.id;
    EXPECT_TRUE(r.action) << r.id;
    if (r.field) {
      EXPECT_EQ(r.kind, ErrorKind::User) << r.id << ": only a UserError has a field";
    }
  }
  EXPECT_GE(ids.size(), 60u);
}

}  // namespace
}  // namespace foundry::errors
