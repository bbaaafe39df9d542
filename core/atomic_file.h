// The one way shardmap replaces a file (the worker's state directory,
// checkpoint blocks and manifests, .npy files, shardctl's --out): the bytes
// go to a new temporary file in the same directory, are fsync'ed, the file
// is renamed over the target and the directory is fsync'ed. A reader sees the
// old file or the new one whole, never a part, and after an OK the new one
// survives a crash of the process or the machine.
//
// Thread-safe: every call uses its own temporary name.
#ifndef SHARDMAP_CORE_ATOMIC_FILE_H_
#define SHARDMAP_CORE_ATOMIC_FILE_H_

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardmap {

// The permission bits WriteFileAtomically gives the file.
struct FileMode {
  mode_t bits = 0644;
  // false: `bits` less the process umask, as for any new file; true:
  // exactly `bits` (to keep those of the file being replaced).
  bool exact = false;
};

// Writes the concatenation of `pieces` to `path`, atomically (above), with
// permission bits `mode`. The directory must exist; a symbolic link at
// `path` is replaced, not followed. On any failure the temporary file is
// removed, `path` is left as it was, and the error names the step, the path
// and the system's reason (strerror): RESOURCE_EXHAUSTED for a full disk, a
// quota or a file size limit (ENOSPC, EDQUOT, EFBIG), INTERNAL otherwise.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::Span<const absl::string_view> pieces,
                                 FileMode mode = {});

// As WriteFileAtomically, for the file `name` (one path segment) in the
// open directory `dir_fd`: the temporary file, the rename and the sync all
// stay in that directory, whatever happens to its path meanwhile. `path`
// names the file in errors.
absl::Status WriteFileAtomicallyAt(int dir_fd, const std::string& name,
                                   const std::string& path,
                                   absl::Span<const absl::string_view> pieces,
                                   FileMode mode = {});

// WriteFileAtomically for a writer that makes its file by name (libzip):
// `write` creates and fills the temporary file whose path it is given, and
// its error is returned as it is; then the file is synced and renamed over
// `path`, and the directory synced, with errors as above. The temporary
// file is removed on any failure.
absl::Status ReplaceFileAtomically(
    const std::string& path,
    const std::function<absl::Status(const std::string& tmp)>& write);

// Writes all of `pieces` to the open file `fd`, resuming after short writes
// and EINTR. Returns 0 or the errno of the write that failed (EIO if one
// wrote nothing).
int WriteAllPieces(int fd, absl::Span<const absl::string_view> pieces);

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
