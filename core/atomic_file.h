// The one way shardmap writes a file it keeps (the worker's state
// directory, checkpoint blocks and manifests): the bytes go to a new
// temporary file in the same directory, are fsync'ed, the file is renamed
// over the target and the directory is fsync'ed. A reader sees the old
// file or the new one whole, never a part, and after an OK the new one
// survives a crash of the process or the machine.
//
// Thread-safe: every call uses its own temporary name.
#ifndef SHARDMAP_CORE_ATOMIC_FILE_H_
#define SHARDMAP_CORE_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardmap {

// Writes the concatenation of `pieces` to `path`, atomically (above). The
// directory must exist. On any failure the temporary file is removed,
// `path` is left as it was, and the error names the step, the path and
// the system's reason (strerror): RESOURCE_EXHAUSTED for a full disk, a
// quota or a file size limit (ENOSPC, EDQUOT, EFBIG), INTERNAL otherwise.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::Span<const absl::string_view> pieces);

// As WriteFileAtomically, for the file `name` (one path segment) in the
// open directory `dir_fd`: the temporary file, the rename and the sync all
// stay in that directory, whatever happens to its path meanwhile. `path`
// names the file in errors.
absl::Status WriteFileAtomicallyAt(int dir_fd, const std::string& name,
                                   const std::string& path,
                                   absl::Span<const absl::string_view> pieces);

// Reads the regular file `path` (not through a symbolic link) whole.
// NOT_FOUND if it does not exist; INVALID_ARGUMENT if it is not a regular
// file or is larger than `max_bytes`; read errors as above.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          uint64_t max_bytes);

// fsync()s directory `dir`, so entries created or renamed in it persist.
// Errors as above.
absl::Status SyncDirectory(const std::string& dir);

// The status for a failed system call `what` ("write", "rename ...") on
// `path` that set errno `err`, coded as above.
absl::Status FileError(absl::string_view what, absl::string_view path, int err);

}  // namespace shardmap

#endif  // SHARDMAP_CORE_ATOMIC_FILE_H_
