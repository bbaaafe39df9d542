#include "core/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/atomic_file.h"
#include "core/npy_header.h"
#include "core/status_util.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "Tensor data is little-endian; the codec assumes the host is");

namespace shardmap {
namespace {

// Copies column-major `src` into row-major `dst`, both of `shape`.
void FortranToC(const uint8_t* src, const Shape& shape, size_t item,
                uint8_t* dst) {
  const int rank = static_cast<int>(shape.size());
  const int64_t n = NumElements(shape);
  if (n == 0) return;
  std::vector<int64_t> stride(rank), index(rank, 0);
  int64_t s = 1;
  for (int k = 0; k < rank; ++k) {
    stride[k] = s;
    s *= shape[k];
  }
  int64_t offset = 0;  // of element `index` in src, in elements
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * item, src + offset * item, item);
    for (int k = rank - 1; k >= 0; --k) {
      if (++index[k] < shape[k]) {
        offset += stride[k];
        break;
      }
      offset -= stride[k] * (shape[k] - 1);
      index[k] = 0;
    }
  }
}

void ByteSwap(uint8_t* data, int64_t n, size_t item) {
  for (int64_t i = 0; i < n; ++i, data += item) {
    std::reverse(data, data + item);
  }
}

// Appends the rest of `fd` to `out`. Returns 0 or the errno of the failure.
int ReadAll(int fd, std::string& out) {
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) out.reserve(st.st_size);
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return 0;
    out.append(buf, static_cast<size_t>(r));
  }
}

}  // namespace

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes,
                                absl::string_view name) {
  SHARD_ASSIGN_OR_RETURN(const NpyLayout layout, ReadNpyLayout(bytes, name));
  const NpyArrayHeader& h = layout.header;
  // Check the data length before allocating anything: the shape is untrusted.
  const size_t item = ItemSize(h.dtype);
  const uint64_t want = layout.data_bytes;
  const absl::string_view data = layout.data;
  if (data.size() < want) {
    return InvalidNpy(name, "truncated: expected ", want, " data bytes, found ",
                      data.size());
  }
  if (data.size() > want) {
    return InvalidNpy(name, data.size() - want, " trailing bytes after the ",
                      want, " data bytes of ", ShapeString(h.dtype, h.shape));
  }
  absl::StatusOr<Tensor> tensor = Tensor::Create(h.dtype, h.shape);
  if (!tensor.ok()) {
    return Annotate(tensor.status(), absl::StrCat("'", name, "'"));
  }
  const auto* src = reinterpret_cast<const uint8_t*>(data.data());
  if (h.fortran_order && h.shape.size() > 1) {
    FortranToC(src, h.shape, item, tensor->data());
  } else if (!data.empty()) {
    std::memcpy(tensor->data(), src, data.size());
  }
  if (h.byteswap) ByteSwap(tensor->data(), tensor->num_elements(), item);
  return tensor;
}

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    return absl::NotFoundError(
        absl::StrCat("input file '", path, "' does not exist"));
  }
  auto cannot_read = [&path](int err) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read input file '", path, "': ", std::strerror(err)));
  };
  if (fd < 0) return cannot_read(errno);
  // Map the file rather than read it, so parsing copies the data once,
  // straight into the tensor, without a second in-memory copy.
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return cannot_read(err);
  }
  if (!S_ISREG(st.st_mode) || st.st_size == 0) {
    std::string bytes;
    const int err = ReadAll(fd, bytes);
    ::close(fd);
    if (err != 0) return cannot_read(err);
    return ParseNpy(bytes, path);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return cannot_read(map_err);
  absl::StatusOr<Tensor> t =
      ParseNpy(absl::string_view(static_cast<const char*>(map), size), path);
  ::munmap(map, size);
  return t;
}

absl::string_view TensorBytes(const Tensor& tensor) {
  return absl::string_view(reinterpret_cast<const char*>(tensor.data()),
                           tensor.num_bytes());
}

std::string SerializeNpy(const Tensor& tensor) {
  return absl::StrCat(NpyHeader(tensor), TensorBytes(tensor));
}

absl::Status WriteNpy(const std::string& path, const Tensor& tensor) {
  const std::string header = NpyHeader(tensor);
  const absl::Status s =
      WriteFileAtomically(path, {header, TensorBytes(tensor)});
  if (!s.ok()) return absl::FailedPreconditionError(s.message());
  return absl::OkStatus();
}

}  // namespace shardmap
