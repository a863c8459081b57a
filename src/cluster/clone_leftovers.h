// What a clone across nodes (cluster/cross_node_clone.cc) leaves when the controller is killed
// before it removes the snapshot it took: one intent file per clone in flight under
// <state-dir>/clones/, written as soon as the snapshot exists and removed once the snapshot is
// gone from both nodes. The controller takes up every file left there when it starts serving and
// after each clone, so the snapshot of a clone whose controller and caller were both killed does
// not stay on the source node (and its copy on the receiver) for good.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace rosetctl {

struct CloneLeftover {
  std::string file;         // the intent file
  std::string snapshot_id;  // the snapshot taken, as a placed id of the source node
  std::string receiver;     // the node the clone was made on
  std::string volume_name;  // the clone's name: its lock key (clone:<receiver>:<name>)
};

class CloneIntents {
 public:
  explicit CloneIntents(std::string directory) : directory_(std::move(directory)) {}

  // Records a clone's snapshot before anything can leave it behind; the file's path.
  Expected<std::string> record(const std::string& snapshot_id, const std::string& receiver,
                               const std::string& volume_name) const;
  // The snapshot is gone from both nodes: nothing is left to take up.
  void forget(const std::string& file) const;
  // Every intent file there; one that cannot be read or holds something else is logged and
  // skipped (never removed: an operator may want to see it).
  std::vector<CloneLeftover> list() const;

 private:
  std::string directory_;
};

}  // namespace rosetctl
