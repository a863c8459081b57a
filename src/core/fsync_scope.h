// What one fsync makes durable besides the file it is given, by filesystem.
#pragma once

namespace rosetctl {

// Whether one fsync on the filesystem holding `fd` also makes every earlier metadata change on
// that filesystem durable: new files, their sizes and extents, their names. True for xfs and for
// ext4 with a journal, whose logs commit in order. False for ext4 mounted without a journal
// (fsync writes the one inode), btrfs (fsync logs the one file), and anything else or unknown.
bool fsync_commits_earlier_metadata(int fd);

}  // namespace rosetctl
