// Writes a command's output file (shardctl get/run --out) as a shell
// redirection would, and atomically where that is possible:
//  - a symlink is followed (to any depth up to 40 links) and its final
//    target is written, not the link replaced;
//  - a FIFO, character or block device (or anything else that is not a
//    regular file) is opened and written in place: a reader of the FIFO gets
//    the data, /dev/null stays a device node;
//  - a regular file or a new path is written with WriteFileAtomically
//    (core/atomic_file.h): a temporary file in the same directory, synced
//    and renamed over it, so a reader never sees half a file; an existing
//    file keeps its permission bits.
//
// Thread-safe: every write uses its own temporary file.
#ifndef SHARDMAP_CLIENT_OUTPUT_FILE_H_
#define SHARDMAP_CLIENT_OUTPUT_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace shardmap {

// The path that writing to `path` writes: `path` with every symlink of its
// last component followed (relative targets resolve against the link's
// directory). A dangling link gives the path it points to.
// Errors: FAILED_PRECONDITION naming `path` for a symlink loop (more than
//   40 links) or a link that cannot be read.
absl::StatusOr<std::string> ResolveOutputPath(const std::string& path);

// Writes the .npy bytes of `tensor` to `path` as described above.
// Errors: FAILED_PRECONDITION naming `path` (and the file it resolves to)
//   with the system's reason: a directory, a missing directory, no
//   permission, a full disk, a FIFO or device that refuses the data.
absl::Status WriteOutputNpy(const std::string& path, const Tensor& tensor);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_OUTPUT_FILE_H_
