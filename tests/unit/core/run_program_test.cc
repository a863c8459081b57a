// Tests for src/core/run_program.cc: real child processes (sh, cat, sleep), no root needed.
#include "core/run_program.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>

using namespace std::chrono_literals;
using rosetctl::Code;
using rosetctl::find_program;
using rosetctl::ProgramResult;
using rosetctl::run_program;

namespace {

std::string sh() {
  auto path = find_program("sh", "dash");
  REQUIRE(path);
  return *path;
}

ProgramResult run_sh(const std::string& script, std::chrono::milliseconds timeout = 10s) {
  auto result = run_program({sh(), "-c", script}, timeout);
  REQUIRE(result);
  return *result;
}

}  // namespace

TEST_CASE("run_program captures stdout, stderr and the exit code", "[run_program]") {
  ProgramResult result = run_sh("echo out; echo err >&2; exit 3");
  CHECK(result.out == "out\n");
  CHECK(result.err == "err\n");
  CHECK(result.exit_code == 3);
  CHECK(result.signal == 0);
  CHECK_FALSE(result.succeeded());
  CHECK(result.describe() == "exit code 3: err");
}

TEST_CASE("a program's words reach a message escaped", "[run_program]") {
  // Its last line, with a carriage return and a terminal escape that could rewrite the line.
  ProgramResult result = run_sh(R"(printf 'first\nbad\r\033[2Kfake "ok"\n' >&2; exit 1)");
  CHECK(result.describe() == R"(exit code 1: bad\x0d\x1b[2Kfake \"ok\")");
}

TEST_CASE("run_program passes arguments verbatim, never through a shell", "[run_program]") {
  auto echo = find_program("echo", "coreutils");
  REQUIRE(echo);
  auto result = run_program({*echo, "a b", "$HOME", ";", "*"}, 10s);
  REQUIRE(result);
  CHECK(result->out == "a b $HOME ; *\n");
  CHECK(result->succeeded());
}

TEST_CASE("run_program reports a program killed by a signal", "[run_program]") {
  ProgramResult result = run_sh("kill -KILL $$");
  CHECK(result.signal == 9);
  CHECK_FALSE(result.succeeded());
  CHECK(result.describe() == "killed by signal 9");
}

TEST_CASE("run_program kills a program that outlives its deadline", "[run_program]") {
  auto start = std::chrono::steady_clock::now();
  auto result = run_program({sh(), "-c", "sleep 30"}, 300ms);
  REQUIRE_FALSE(result);
  CHECK(result.status().code() == Code::kDeadlineExceeded);
  CHECK_THAT(result.status().message(), Catch::Contains("did not finish within 0.3 s"));
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("run_program's deadline also holds after the program closed its output",
          "[run_program]") {
  auto result = run_program({sh(), "-c", "exec >&- 2>&-; sleep 30"}, 300ms);
  REQUIRE_FALSE(result);
  CHECK(result.status().code() == Code::kDeadlineExceeded);
}

TEST_CASE("run_program gives the child /dev/null as stdin, LC_ALL=C and no other descriptors",
          "[run_program]") {
  int leaked = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  REQUIRE(leaked >= 0);
  ProgramResult result =
      run_sh("cat; echo \"locale=$LC_ALL\"; ls /proc/self/fd | sort -n | tr '\\n' ' '");
  ::close(leaked);
  // ls itself holds one more descriptor (the directory it lists), numbered 3.
  CHECK(result.out == "locale=C\n0 1 2 3 ");
  CHECK(result.succeeded());
}

TEST_CASE("run_program gives the child PATH and LC_ALL only, never the caller's secrets",
          "[run_program]") {
  // serve's environment may hold ROSET_API_KEY (or anything an operator exports); mkfs,
  // tgtadm and the other helpers need none of it.
  ::setenv("ROSET_API_KEY", "rsk_live_not_for_children", 1);
  ::setenv("LANG", "de_DE.UTF-8", 1);
  auto env = find_program("env", "coreutils");
  REQUIRE(env);
  auto result = run_program({*env}, 10s);
  ::unsetenv("ROSET_API_KEY");
  ::unsetenv("LANG");
  REQUIRE(result);
  std::string path = ::getenv("PATH") != nullptr ? ::getenv("PATH") : "";
  CHECK(result->out == "PATH=" + path + "\nLC_ALL=C\n");
}

TEST_CASE("run_program keeps at most kMaxCapturedBytes of output and still finishes",
          "[run_program]") {
  ProgramResult result = run_sh("head -c 1000000 /dev/zero");
  CHECK(result.out.size() == ProgramResult::kMaxCapturedBytes);
  CHECK(result.succeeded());
  // Said, so that a caller that parses the output does not take the start for the whole.
  CHECK(result.out_cut);
  CHECK_FALSE(result.err_cut);
}

TEST_CASE("a program whose report was cut is not quoted by a line from its middle",
          "[run_program]") {
  // iscsiadm, tgtadm: the error comes last, after what may be a long report.
  ProgramResult result = run_sh(
      "head -c 100000 /dev/zero | tr '\\0' x >&2; echo >&2; "
      "echo the real error >&2; exit 4");
  REQUIRE(result.err_cut);
  CHECK(result.describe() ==
        "exit code 4: its error output ran past the 65536 bytes rosetctl reads, and its last "
        "line with it");
  CHECK(run_sh("echo the real error >&2; exit 4").describe() == "exit code 4: the real error");
}

TEST_CASE("run_program keeps as much output as its caller asks for, and says when it kept all",
          "[run_program]") {
  auto whole = run_program({sh(), "-c", "head -c 1000000 /dev/zero; head -c 70000 /dev/zero >&2"},
                           10s, 2 * 1000 * 1000);
  REQUIRE(whole);
  CHECK(whole->out.size() == 1000000);
  CHECK_FALSE(whole->out_cut);
  CHECK(whole->err.size() == 70000);
  CHECK_FALSE(whole->err_cut);
  auto exact = run_program({sh(), "-c", "head -c 4096 /dev/zero"}, 10s, 4096);
  REQUIRE(exact);
  CHECK(exact->out.size() == 4096);
  CHECK_FALSE(exact->out_cut);
  auto over = run_program({sh(), "-c", "head -c 4097 /dev/zero >&2"}, 10s, 4096);
  REQUIRE(over);
  CHECK(over->err.size() == 4096);
  CHECK(over->err_cut);
}

TEST_CASE("run_program names a program that cannot be started", "[run_program]") {
  auto result = run_program({"/nonexistent/mkfs.nothing"}, 10s);
  REQUIRE_FALSE(result);
  CHECK_THAT(result.status().message(), Catch::Contains("/nonexistent/mkfs.nothing"));
}

TEST_CASE("find_program looks in PATH and the sbin directories, or says what to install",
          "[run_program]") {
  auto found = find_program("sh", "dash");
  REQUIRE(found);
  CHECK(found->front() == '/');
  auto missing = find_program("rosetctl-no-such-program", "some-package");
  REQUIRE_FALSE(missing);
  CHECK(missing.status().code() == Code::kFailedPrecondition);
  CHECK_THAT(missing.status().message(), Catch::Contains("install the some-package package"));
}
