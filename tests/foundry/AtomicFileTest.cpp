// writeFileAtomically and its temporaries: what it does with what sits at the path (links, FIFOs,
// directories, modes, long names), the temporaries a signal or a dead process leaves, and the file
// identity a command uses to keep its outputs off its inputs.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/FileIdentity.h"
#include "foundry/TempFiles.h"
#include "support/TempDir.h"

namespace foundry {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string slurp(const fs::path& p) {
  const auto bytes = readWholeFile(p);
  return bytes ? std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size()) : "<unreadable>";
}

std::vector<std::string> namesIn(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

unsigned modeOf(const fs::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 07777;
}

TEST(AtomicFile, KeepsTheModeOfTheFileItReplaces) {
  test::TempDir dir;
  const auto p = dir.write("report.json", "old");
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
  writeFileAtomically(p, std::string_view("new"));
  EXPECT_EQ(slurp(p), "new");
  EXPECT_EQ(modeOf(p), 0600u);
}

TEST(AtomicFile, ANewFileGetsTheUmasksMode) {
  test::TempDir dir;
  const mode_t mask = ::umask(022);
  writeFileAtomically(dir.path() / "new.json", std::string_view("{}"));
  ::umask(mask);
  EXPECT_EQ(modeOf(dir.path() / "new.json"), 0644u);
}

TEST(AtomicFile, FollowsASymlinkAndKeepsIt) {
  test::TempDir dir;
  dir.write("elsewhere/real.json", "old");
  fs::create_symlink("elsewhere/real.json", dir.path() / "link.json");
  writeFileAtomically(dir.path() / "link.json", std::string_view("new"));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir.path() / "link.json")));
  EXPECT_EQ(slurp(dir.path() / "elsewhere/real.json"), "new");
  EXPECT_EQ(namesIn(dir.path() / "elsewhere"), std::vector<std::string>{"real.json"});
}

TEST(AtomicFile, ADanglingSymlinkCreatesTheFileItNames) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "elsewhere");
  fs::create_symlink("elsewhere/new.json", dir.path() / "link.json");
  writeFileAtomically(dir.path() / "link.json", std::string_view("new"));
  EXPECT_EQ(slurp(dir.path() / "elsewhere/new.json"), "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir.path() / "link.json")));
}

TEST(AtomicFile, RefusesAFifoWithoutOpeningIt) {
  test::TempDir dir;
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    writeFileAtomically(fifo, std::string_view("x"));
    FAIL() << "accepted";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot write " + fifo.string() + ": it is a FIFO"));
  }
  EXPECT_THROW(checkWritableTarget(fifo, "--json"), UserError);
  EXPECT_EQ(namesIn(dir.path()), std::vector<std::string>{"fifo"});
}

TEST(AtomicFile, RefusesADirectoryAndADeviceNamingTheFlag) {
  test::TempDir dir;
  try {
    checkWritableTarget(dir.path(), "--save");
    FAIL() << "accepted";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "--save");
    EXPECT_THAT(e.what(), HasSubstr("it is a directory"));
  }
  try {
    checkWritableTarget("/dev/null", "--json");
    FAIL() << "accepted";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--json: cannot write /dev/null: it is a character device"));
  }
}

TEST(AtomicFile, ANameNearNameMaxFits) {
  test::TempDir dir;
  for (const std::size_t length : {250u, 255u}) {
    const auto p = dir.path() / std::string(length, 'n');
    writeFileAtomically(p, std::string_view("x"));
    EXPECT_EQ(slurp(p), "x") << length;
    EXPECT_LE(temporaryPathFor(p).filename().string().size(), 255u);
  }
  EXPECT_EQ(namesIn(dir.path()).size(), 2u);
}

TEST(AtomicFile, TemporaryNamesSayWhoseTheyAre) {
  EXPECT_EQ(temporaryOwner(".report.json.tmp.1234.7"), 1234);
  EXPECT_EQ(temporaryOwner(temporaryPathFor("/x/" + std::string(250, 'n')).filename().string()), ::getpid());
  EXPECT_EQ(temporaryOwner("report.json.tmp.1234.7"), 0);  // not hidden: not ours
  EXPECT_EQ(temporaryOwner(".report.json.tmp.12a4.7"), 0);
  EXPECT_EQ(temporaryOwner(".report.json.tmp.1234."), 0);
  EXPECT_EQ(temporaryOwner(".tmp.1234.7"), 0);
}

TEST(AtomicFile, AWriteRemovesTheTemporariesOfDeadProcessesOnly) {
  test::TempDir dir;
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  const std::string deadTmp = fmt::format(".out.json.tmp.{}.0", dead);
  const std::string liveTmp = fmt::format(".out.json.tmp.{}.0", ::getppid());
  dir.write(deadTmp, "half");
  dir.write(liveTmp, "being written");
  writeFileAtomically(dir.path() / "out.json", std::string_view("whole"));
  EXPECT_EQ(namesIn(dir.path()), (std::vector<std::string>{liveTmp, "out.json"}));
}

class AtomicFileSignal : public ::testing::TestWithParam<int> {};

TEST_P(AtomicFileSignal, AWriteEndedByASignalRemovesItsTemporary) {
  test::TempDir dir;
  dir.write("out.json", "old");
  const pid_t child = ::fork();
  if (child == 0) {
    TemporaryFile tmp(dir.path() / "out.json", 0600);
    if (::write(tmp.fd(), "half", 4) != 4) ::_exit(2);
    ::kill(::getpid(), GetParam());
    ::_exit(3);  // not reached: the signal ends the process
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), GetParam());
  EXPECT_EQ(namesIn(dir.path()), std::vector<std::string>{"out.json"});
  EXPECT_EQ(slurp(dir.path() / "out.json"), "old");
}

INSTANTIATE_TEST_SUITE_P(Signals, AtomicFileSignal, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& p) { return std::string(sigabbrev_np(p.param)); });

TEST(FileIdentity, AnOutputMayNotBeAnInputUnderAnySpelling) {
  test::TempDir dir;
  const auto input = dir.write("in/inputs.safetensors", "x");
  fs::create_symlink("in/inputs.safetensors", dir.path() / "link");
  fs::create_hard_link(input, dir.path() / "hard");
  for (const fs::path& alias :
       {input, dir.path() / "link", dir.path() / "hard", dir.path() / "in/../in/inputs.safetensors"}) {
    try {
      checkOutputsApart({{"--inputs", input}}, {{"--save", alias}});
      FAIL() << alias << " accepted";
    } catch (const UserError& e) {
      EXPECT_EQ(e.field(), "--save");
      EXPECT_THAT(e.what(), HasSubstr("is also the --inputs file"));
    }
  }
  EXPECT_NO_THROW(
      checkOutputsApart({{"--inputs", input}, {"--expect", ""}}, {{"--save", dir.path() / "out"}, {"--json", ""}}));
}

TEST(FileIdentity, TwoOutputsMayNotBeOneNewFile) {
  test::TempDir dir;
  EXPECT_THROW(checkOutputsApart({}, {{"--json", dir.path() / "out"}, {"--save", dir.path() / "x/../out"}}), UserError);
  EXPECT_FALSE(sameFile(dir.path() / "a", dir.path() / "b"));
}

}  // namespace
}  // namespace foundry
