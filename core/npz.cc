#include "core/npz.h"

#include <sys/stat.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/atomic_file.h"
#include "core/bounded_input.h"
#include "core/npy.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

constexpr absl::string_view kSuffix = ".npy";
constexpr size_t kReadChunk = 1 << 20;

struct ZipDiscard {
  void operator()(zip_t* z) const { zip_discard(z); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipDiscard>;

struct ZipFileClose {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
using ZipFilePtr = std::unique_ptr<zip_file_t, ZipFileClose>;

std::string ZipErrorString(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string s = zip_error_strerror(&error);
  zip_error_fini(&error);
  return s;
}

// Reads up to `limit` bytes of `file` into `out` (appending). Returns the
// number read; fewer than asked means the member ended.
absl::StatusOr<uint64_t> ReadUpTo(zip_file_t* file, uint64_t limit,
                                  const std::string& name, std::string* out) {
  uint64_t total = 0;
  while (total < limit) {
    const size_t want =
        static_cast<size_t>(std::min<uint64_t>(kReadChunk, limit - total));
    const size_t old = out->size();
    out->resize(old + want);
    const zip_int64_t n = zip_fread(file, &(*out)[old], want);
    if (n < 0) {
      out->resize(old);
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot decompress '", name, "': ", zip_file_strerror(file)));
    }
    out->resize(old + static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
    if (n == 0) break;
  }
  return total;
}

// Reads member `index`, whose size the zip directory gives as `size`
// (already checked against the caller's byte limit). Nothing beyond what
// the .npy header declares is inflated: first the header, which must
// declare exactly `size` bytes, then the data, and one byte more to prove
// that the member ends there.
absl::StatusOr<std::string> ReadMember(zip_t* zip, zip_uint64_t index,
                                       zip_uint64_t size,
                                       const std::string& name) {
  ZipFilePtr file(zip_fopen_index(zip, index, 0));
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open '", name, "': ", zip_strerror(zip)));
  }
  std::string bytes;
  try {
    SHARD_RETURN_IF_ERROR(
        ReadUpTo(file.get(), std::min<uint64_t>(size + 1, kNpyMaxHeadBytes),
                 name, &bytes)
            .status());
    SHARD_ASSIGN_OR_RETURN(const uint64_t declared,
                           NpyDeclaredSize(bytes, name));
    if (declared != size) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "': the zip directory gives the member ",
                       size, " bytes but its .npy header declares ", declared));
    }
    if (bytes.size() <= size) {
      bytes.reserve(size + 1);
      SHARD_RETURN_IF_ERROR(
          ReadUpTo(file.get(), size + 1 - bytes.size(), name, &bytes).status());
    }
    if (bytes.size() > size) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "' decompresses to more than the ", size,
                       " bytes its .npy header and the zip directory declare"));
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate memory to read '", name, "'"));
  }
  return bytes;
}

// Writes `arrays` as a zip archive at `tmp` (a new file). The error is
// libzip's message.
absl::Status WriteZip(
    const std::string& tmp,
    const std::vector<std::pair<std::string, const Tensor*>>& arrays,
    bool compress) {
  int error = 0;
  ZipPtr zip(zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error));
  if (zip == nullptr) return absl::InternalError(ZipErrorString(error));
  auto fail = [&zip] { return absl::InternalError(zip_strerror(zip.get())); };
  // libzip reads the sources only in zip_close, so the headers must live
  // until then; the tensors' bytes are referenced, not copied.
  std::vector<std::string> headers;
  headers.reserve(arrays.size());
  for (const auto& [key, tensor] : arrays) {
    headers.push_back(NpyHeader(*tensor));
    const zip_buffer_fragment_t fragments[2] = {
        {reinterpret_cast<zip_uint8_t*>(headers.back().data()),
         headers.back().size()},
        {const_cast<zip_uint8_t*>(tensor->data()), tensor->num_bytes()}};
    zip_source_t* source =
        zip_source_buffer_fragment(zip.get(), fragments, 2, 0);
    if (source == nullptr) return fail();
    const std::string member = absl::StrCat(key, kSuffix);
    const zip_int64_t index =
        zip_file_add(zip.get(), member.c_str(), source, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(source);
      return fail();
    }
    if (zip_set_file_compression(zip.get(), index,
                                 compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                 0) != 0) {
      return fail();
    }
  }
  if (zip_close(zip.get()) != 0) return fail();
  zip.release();  // zip_close freed it.
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadNpz(
    const std::string& path, uint64_t max_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return absl::NotFoundError(
        absl::StrCat("input file '", path, "' does not exist"));
  }
  int error = 0;
  ZipPtr zip(zip_open(path.c_str(), ZIP_RDONLY, &error));
  if (zip == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid .npz file '", path, "': ", ZipErrorString(error)));
  }
  // The directory first: every member's name and size are checked before
  // anything is inflated.
  std::vector<zip_stat_t> entries;
  uint64_t total = 0;
  const zip_int64_t count = zip_get_num_entries(zip.get(), 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t zs;
    if (zip_stat_index(zip.get(), i, 0, &zs) != 0 ||
        !(zs.valid & ZIP_STAT_NAME) || !(zs.valid & ZIP_STAT_SIZE) ||
        !(zs.valid & ZIP_STAT_INDEX)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid .npz file '", path, "': ", zip_strerror(zip.get())));
    }
    if (zs.size > max_bytes - std::min(total, max_bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' holds more than ", max_bytes,
                       " bytes once decompressed (reached at member '",
                       Truncate(zs.name), "', of ", zs.size, " bytes)"));
    }
    total += zs.size;
    entries.push_back(zs);
  }
  std::vector<std::pair<std::string, Tensor>> arrays;
  std::set<std::string> members;
  for (const zip_stat_t& zs : entries) {
    const zip_uint64_t i = zs.index;
    const std::string member = zs.name;
    if (absl::EndsWith(member, "/")) continue;  // a directory entry
    if (!absl::EndsWith(member, kSuffix) || member.size() == kSuffix.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid .npz file '", path, "': member '", member,
                       "' is not named <key>.npy"));
    }
    if (!members.insert(member).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid .npz file '", path, "': duplicate member '", member, "'"));
    }
    const std::string name = absl::StrCat(path, ":", member);
    SHARD_ASSIGN_OR_RETURN(std::string bytes,
                           ReadMember(zip.get(), i, zs.size, name));
    SHARD_ASSIGN_OR_RETURN(Tensor tensor, ParseNpy(bytes, name));
    arrays.emplace_back(member.substr(0, member.size() - kSuffix.size()),
                        std::move(tensor));
  }
  return arrays;
}

absl::Status WriteNpz(
    const std::string& path,
    const std::vector<std::pair<std::string, const Tensor*>>& arrays,
    bool compress) {
  std::set<std::string> keys;
  for (const auto& [key, tensor] : arrays) {
    if (key.empty() || tensor == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("writing '", path,
                       "': empty key or null tensor for key '", key, "'"));
    }
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("writing '", path, "': duplicate key '", key, "'"));
    }
  }
  absl::Status s;
  if (arrays.empty()) {
    // libzip writes no file for an archive without members; numpy reads
    // this one, an end-of-central-directory record alone.
    static constexpr char kEocd[22] = {'P', 'K', 5, 6};
    s = WriteFileAtomically(path, {absl::string_view(kEocd, sizeof(kEocd))});
  } else {
    s = ReplaceFileAtomically(path,
                              [&arrays, compress](const std::string& tmp) {
                                return WriteZip(tmp, arrays, compress);
                              });
  }
  if (!s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write output file '", path, "': ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace shardmap
