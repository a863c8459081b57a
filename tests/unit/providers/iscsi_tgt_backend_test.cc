// TgtBackend (providers/iscsi/tgt_backend.cc) against a stand-in tgtadm on PATH that prints a
// report the test wrote: how much of tgtadm's output the backend reads. The backend against a
// real tgtd: tests/integration/test_iscsi_target.py.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "providers/iscsi/tgt_backend.h"
#include "unit/scratch_dir.h"

using namespace rosetctl;
using rosetctl::testing::ScratchDir;
using rosetctl::testing::write_file;

namespace {

// One target as tgt 1.0.85 prints it (`tgtadm --mode target --op show`): about 1 KiB.
std::string target_text(int tid) {
  std::string volume = fmt::format("vol-{}", tid);
  return fmt::format(R"(Target {0}: iqn.2026-11.io.roset:{1}
    System information:
        Driver: iscsi
        State: ready
    I_T nexus information:
    LUN information:
        LUN: 0
            Type: controller
            SCSI ID: IET     00{0:02}0000
            SCSI SN: beaf{0}0
            Size: 0 MB, Block size: 1
            Online: Yes
            Removable media: No
            Prevent removal: No
            Readonly: No
            SWP: No
            Thin-provisioning: No
            Backing store type: null
            Backing store path: None
            Backing store flags: 
        LUN: 1
            Type: disk
            SCSI ID: {1}
            SCSI SN: {1}
            Size: 67 MB, Block size: 512
            Online: Yes
            Removable media: No
            Prevent removal: No
            Readonly: No
            SWP: No
            Thin-provisioning: No
            Backing store type: rdwr
            Backing store path: /var/lib/rosetctl/iscsi-images/{1}.img
            Backing store flags: 
    Account information:
    ACL information:
        iqn.2026-11.io.roset.test:consumer-b
)",
                     tid, volume);
}

// PATH with `dir` first while in scope: find_program finds the stand-in tgtadm there.
class PathFirst {
 public:
  explicit PathFirst(const std::string& dir) {
    const char* path = std::getenv("PATH");
    saved_ = path != nullptr ? path : "";
    ::setenv("PATH", (dir + ":" + saved_).c_str(), 1);
  }
  ~PathFirst() { ::setenv("PATH", saved_.c_str(), 1); }
  PathFirst(const PathFirst&) = delete;
  PathFirst& operator=(const PathFirst&) = delete;

 private:
  std::string saved_;
};

}  // namespace

TEST_CASE("a tgtd with many targets: the backend reads tgtadm's whole report", "[iscsi]") {
  // Some fifty targets fill 64 KiB, where the output of a helper program used to be cut: the
  // targets past it were missed (a target just made "vanished", a taken id looked free).
  constexpr int kTargets = 120;
  std::string report;
  for (int tid = 1; tid <= kTargets; ++tid)
    report += target_text(tid);
  REQUIRE(report.size() > 100 * 1024);
  ScratchDir dir;
  write_file(dir / "report", report);
  write_file(dir / "tgtadm", "#!/bin/sh\nexec cat '" + (dir / "report") + "'\n");
  REQUIRE(::chmod((dir / "tgtadm").c_str(), 0755) == 0);
  PathFirst path(dir.path);

  auto backend = TgtBackend::open(TgtOptions{});
  REQUIRE(backend);
  auto targets = (*backend)->list_targets();
  REQUIRE(targets);
  REQUIRE(targets->size() == kTargets);
  CHECK(targets->back().volume_id == fmt::format("vol-{}", kTargets));
  CHECK(targets->back().serial == fmt::format("vol-{}", kTargets));
  CHECK(targets->back().backing_path ==
        fmt::format("/var/lib/rosetctl/iscsi-images/vol-{}.img", kTargets));
  CHECK(targets->back().initiators ==
        std::vector<std::string>{"iqn.2026-11.io.roset.test:consumer-b"});
}
