#include "core/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_util.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "Tensor data is little-endian; the codec assumes the host is");

namespace shardmap {
namespace {

// A .npy file is: the magic "\x93NUMPY", a major and minor version byte, the
// header length (uint16 LE in 1.0, uint32 LE in 2.0 and 3.0), the header (a
// Python dict literal, latin1 in 1.0/2.0, utf8 in 3.0, padded with spaces and
// a '\n' so the data is 64-byte aligned), then the raw data.
constexpr absl::string_view kMagic("\x93NUMPY", 6);
constexpr size_t kMaxHeaderV1 = 10000;       // numpy's own reading limit
constexpr size_t kMaxHeaderV2 = 1 << 20;     // ours for the 4-byte length field
constexpr size_t kArrayAlign = 64;           // numpy.lib.format.ARRAY_ALIGN
constexpr size_t kGrowthAxisMaxDigits = 21;  // ...GROWTH_AXIS_MAX_DIGITS
constexpr int kMaxNesting = 16;
constexpr absl::string_view kSupported =
    "supported: '<f4' (float32), '<f8' (float64), '<i4' (int32), '<i8' "
    "(int64), in byte order '<', '>' or '='";

bool IsOneOf(char c, absl::string_view set) {
  return set.find(c) != absl::string_view::npos;
}

template <typename... Args>
absl::Status Invalid(absl::string_view name, const Args&... problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid .npy file '", name, "': ", problem...));
}

// The subset of Python literals that numpy headers contain.
struct PyValue {
  enum Kind { kString, kBool, kInt, kTuple, kList, kOther };
  Kind kind = kOther;
  std::string text;            // kString: the contents; others: the token.
  std::vector<PyValue> items;  // kTuple, kList.
};
using PyDict = std::vector<std::pair<std::string, PyValue>>;

// Recursive-descent parser for "{'key': value, ...}". Errors are plain
// problem descriptions; the caller adds the file name.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<PyDict> ParseDict() {
    PyDict dict;
    if (!Consume('{')) return Error("expected '{'");
    while (!Consume('}')) {
      if (!dict.empty() && !Consume(',')) return Error("expected ',' or '}'");
      if (Consume('}')) break;  // trailing comma
      SHARD_ASSIGN_OR_RETURN(PyValue key, ParseValue(0));
      if (key.kind != PyValue::kString) return Error("expected a string key");
      if (!Consume(':')) return Error("expected ':'");
      SHARD_ASSIGN_OR_RETURN(PyValue value, ParseValue(0));
      dict.emplace_back(std::move(key.text), std::move(value));
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after '}'");
    return dict;
  }

 private:
  absl::Status Error(absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed header dict at offset ", pos_, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && IsOneOf(text_[pos_], " \t\r\n")) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::StatusOr<PyValue> ParseValue(int depth) {
    if (depth > kMaxNesting) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end");
    PyValue v;
    const char c = text_[pos_];
    if (c == '\'' || c == '"') {
      v.kind = PyValue::kString;
      for (++pos_; pos_ < text_.size() && text_[pos_] != c; ++pos_) {
        if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
        v.text.push_back(text_[pos_]);
      }
      if (pos_ >= text_.size()) return Error("unterminated string");
      ++pos_;
      return v;
    }
    if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      v.kind = c == '(' ? PyValue::kTuple : PyValue::kList;
      ++pos_;
      bool comma = false;
      while (!Consume(close)) {
        if (!v.items.empty() && !(comma = Consume(','))) {
          return Error(
              absl::StrCat("expected ',' or '", std::string(1, close), "'"));
        }
        if (Consume(close)) break;  // trailing comma
        SHARD_ASSIGN_OR_RETURN(PyValue item, ParseValue(depth + 1));
        v.items.push_back(std::move(item));
      }
      // "(3)" is the int 3, not a tuple.
      if (v.kind == PyValue::kTuple && v.items.size() == 1 && !comma) {
        PyValue inner = std::move(v.items[0]);
        return inner;
      }
      return v;
    }
    const size_t start = pos_;
    while (pos_ < text_.size() && !IsOneOf(text_[pos_], ",:)]}{([ \t\r\n'\"")) {
      ++pos_;
    }
    if (pos_ == start) {
      return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
    }
    v.text = std::string(text_.substr(start, pos_ - start));
    if (v.text == "True" || v.text == "False") {
      v.kind = PyValue::kBool;
    } else {
      const size_t digits = v.text[0] == '-' || v.text[0] == '+' ? 1 : 0;
      if (v.text.size() > digits &&
          v.text.find_first_not_of("0123456789", digits) == std::string::npos) {
        v.kind = PyValue::kInt;
      }
    }
    return v;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// "float16" for "<f2", "bool" for "|b1": used only in error messages.
std::string DescribeDescr(absl::string_view descr) {
  if (!descr.empty() && IsOneOf(descr[0], "<>=|")) descr.remove_prefix(1);
  if (descr.empty()) return "empty";
  constexpr absl::string_view kSized = "iufc";
  const char* const sized_words[] = {"int", "uint", "float", "complex"};
  constexpr absl::string_view kOthers = "bUSaVMm";
  const char* const other_words[] = {
      "bool", "unicode string", "byte string", "byte string",
      "void", "datetime64",     "timedelta64"};
  if (const size_t k = kSized.find(descr[0]); k != kSized.npos) {
    int bytes = 0;
    if (absl::SimpleAtoi(descr.substr(1), &bytes) && bytes > 0 &&
        bytes <= 1024) {
      return absl::StrCat(sized_words[k], 8 * bytes);
    }
    return sized_words[k];
  }
  const size_t k = kOthers.find(descr[0]);
  return k == kOthers.npos ? "unknown" : other_words[k];
}

struct Descr {
  DType dtype;
  bool byteswap;
};

absl::StatusOr<Descr> ParseDescr(const PyValue& v, absl::string_view name) {
  if (v.kind == PyValue::kList) {
    return Invalid(name,
                   "structured dtypes (descr is a list of fields) are "
                   "not supported; ",
                   kSupported);
  }
  if (v.kind != PyValue::kString) {
    return Invalid(name, "'descr' is not a string: '", v.text, "'");
  }
  const std::string& d = v.text;
  const size_t kind_at = !d.empty() && IsOneOf(d[0], "<>=|") ? 1 : 0;
  if (d.size() > kind_at && d[kind_at] == 'O') {
    return Invalid(name, "dtype '", d,
                   "': object arrays are not supported "
                   "(shardmap never unpickles)");
  }
  if (d.size() == 3 && IsOneOf(d[0], "<>=")) {
    for (DType t : kAllDTypes) {
      const char kind = IsFloating(t) ? 'f' : 'i';
      if (d[1] == kind && d[2] == '0' + static_cast<char>(ItemSize(t))) {
        return Descr{t, d[0] == '>'};
      }
    }
  }
  return Invalid(name, "unsupported dtype '", d, "' (", DescribeDescr(d), "); ",
                 kSupported);
}

absl::StatusOr<Shape> ParseShape(const PyValue& v, absl::string_view name) {
  if (v.kind != PyValue::kTuple) {
    return Invalid(name, "'shape' is not a tuple");
  }
  Shape shape;
  for (const PyValue& item : v.items) {
    int64_t dim = 0;
    if (item.kind != PyValue::kInt) {
      return Invalid(name, "dimension '", item.text, "' is not an integer");
    }
    if (!absl::SimpleAtoi(item.text, &dim)) {
      return Invalid(name, "dimension ", item.text, " is out of range");
    }
    if (dim < 0) return Invalid(name, "dimension ", dim, " is negative");
    shape.push_back(dim);
  }
  return shape;
}

// The header text and the data of a .npy file.
struct Sections {
  absl::string_view header;
  absl::string_view data;
};

absl::StatusOr<Sections> SplitSections(absl::string_view bytes,
                                       absl::string_view name) {
  if (bytes.size() < kMagic.size() + 2 ||
      bytes.substr(0, kMagic.size()) != kMagic) {
    return Invalid(name, "bad magic string (not a .npy file)");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return Invalid(name, "unsupported format version ", major, ".", minor,
                   " (supported: 1.0, 2.0, 3.0)");
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagic.size() + 2 + len_bytes;
  if (bytes.size() < prefix) {
    return Invalid(name, "truncated header: file has only ", bytes.size(),
                   " bytes");
  }
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) {
    header_len |= size_t{static_cast<uint8_t>(bytes[8 + i])} << (8 * i);
  }
  const size_t max_len = major == 1 ? kMaxHeaderV1 : kMaxHeaderV2;
  if (header_len > max_len) {
    return Invalid(name, "header length ", header_len, " exceeds the limit of ",
                   max_len, " bytes");
  }
  if (bytes.size() - prefix < header_len) {
    return Invalid(name, "truncated header: expected ", header_len,
                   " header bytes, found ", bytes.size() - prefix);
  }
  return Sections{bytes.substr(prefix, header_len),
                  bytes.substr(prefix + header_len)};
}

struct ArrayHeader {
  Descr descr;
  bool fortran_order;
  Shape shape;
};

// numpy requires exactly the keys 'descr', 'fortran_order' and 'shape'.
absl::StatusOr<ArrayHeader> InterpretHeader(absl::string_view text,
                                            absl::string_view name) {
  absl::StatusOr<PyDict> dict = HeaderParser(text).ParseDict();
  if (!dict.ok()) return Invalid(name, dict.status().message());
  const PyValue* fields[3] = {nullptr, nullptr, nullptr};
  constexpr absl::string_view kKeys[3] = {"descr", "fortran_order", "shape"};
  for (const auto& [key, value] : *dict) {
    const auto* it = std::find(std::begin(kKeys), std::end(kKeys), key);
    if (it == std::end(kKeys)) {
      return Invalid(name, "unexpected key '", key, "'");
    }
    const PyValue*& slot = fields[it - std::begin(kKeys)];
    if (slot != nullptr) return Invalid(name, "duplicate key '", key, "'");
    slot = &value;
  }
  for (int i = 0; i < 3; ++i) {
    if (fields[i] == nullptr) {
      return Invalid(name, "header has no '", kKeys[i], "' key");
    }
  }
  ArrayHeader h;
  SHARD_ASSIGN_OR_RETURN(h.descr, ParseDescr(*fields[0], name));
  if (fields[1]->kind != PyValue::kBool) {
    return Invalid(name, "'fortran_order' is not True or False");
  }
  h.fortran_order = fields[1]->text == "True";
  SHARD_ASSIGN_OR_RETURN(h.shape, ParseShape(*fields[2], name));
  return h;
}

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

std::string DescrOf(DType dtype) {
  return absl::StrCat("<", IsFloating(dtype) ? "f" : "i", ItemSize(dtype));
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

// Returns 0 or the errno of the failed write.
int WriteAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<size_t>(n, 1 << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

}  // namespace

// Exactly numpy 1.24's _write_array_header: sorted keys, repr values, spare
// spaces for growing the first axis, then _wrap_header's padding (a full 64
// spaces when the header would otherwise end exactly on the boundary).
std::string NpyHeader(const Tensor& t) {
  std::string dict = absl::StrCat(
      "{'descr': '", DescrOf(t.dtype()),
      "', 'fortran_order': False, 'shape': ", ShapeTuple(t.shape()), ", }");
  if (t.rank() > 0) {
    const size_t digits = absl::StrCat(t.shape()[0]).size();
    if (digits < kGrowthAxisMaxDigits) {
      dict.append(kGrowthAxisMaxDigits - digits, ' ');
    }
  }
  const size_t hlen = dict.size() + 1;  // with the final '\n'
  size_t prefix = kMagic.size() + 2 + 2;
  size_t padlen = kArrayAlign - (prefix + hlen) % kArrayAlign;
  const bool v2 = hlen + padlen > 65535;
  if (v2) {
    prefix = kMagic.size() + 2 + 4;
    padlen = kArrayAlign - (prefix + hlen) % kArrayAlign;
  }
  const uint32_t len = static_cast<uint32_t>(hlen + padlen);
  std::string out(kMagic);
  out.push_back(v2 ? 2 : 1);
  out.push_back(0);
  for (int i = 0; i < (v2 ? 4 : 2); ++i) out.push_back((len >> (8 * i)) & 0xff);
  out += dict;
  out.append(padlen, ' ');
  out.push_back('\n');
  return out;
}

namespace {

// The data bytes `h` declares. INVALID_ARGUMENT over 2^62.
absl::StatusOr<uint64_t> DataBytes(const ArrayHeader& h,
                                   absl::string_view name) {
  unsigned __int128 expected = ItemSize(h.descr.dtype);
  for (int64_t d : h.shape) {
    expected *= static_cast<uint64_t>(d);
    if (expected > (static_cast<unsigned __int128>(1) << 62)) {
      return Invalid(name, "shape ", ShapeTuple(h.shape), " is too large");
    }
  }
  return static_cast<uint64_t>(expected);
}

}  // namespace

absl::StatusOr<uint64_t> NpyDeclaredSize(absl::string_view head,
                                         absl::string_view name) {
  SHARD_ASSIGN_OR_RETURN(const Sections sections, SplitSections(head, name));
  SHARD_ASSIGN_OR_RETURN(const ArrayHeader h,
                         InterpretHeader(sections.header, name));
  SHARD_ASSIGN_OR_RETURN(const uint64_t data, DataBytes(h, name));
  return (head.size() - sections.data.size()) + data;
}

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes,
                                absl::string_view name) {
  SHARD_ASSIGN_OR_RETURN(const Sections sections, SplitSections(bytes, name));
  SHARD_ASSIGN_OR_RETURN(const ArrayHeader h,
                         InterpretHeader(sections.header, name));
  // Check the data length before allocating anything: the shape is untrusted.
  const size_t item = ItemSize(h.descr.dtype);
  SHARD_ASSIGN_OR_RETURN(const uint64_t want, DataBytes(h, name));
  const absl::string_view data = sections.data;
  if (data.size() < want) {
    return Invalid(name, "truncated: expected ", want, " data bytes, found ",
                   data.size());
  }
  if (data.size() > want) {
    return Invalid(name, data.size() - want, " trailing bytes after the ", want,
                   " data bytes of ", ShapeString(h.descr.dtype, h.shape));
  }
  absl::StatusOr<Tensor> tensor = Tensor::Create(h.descr.dtype, h.shape);
  if (!tensor.ok()) {
    return Annotate(tensor.status(), absl::StrCat("'", name, "'"));
  }
  const auto* src = reinterpret_cast<const uint8_t*>(data.data());
  if (h.fortran_order && h.shape.size() > 1) {
    FortranToC(src, h.shape, item, tensor->data());
  } else if (!data.empty()) {
    std::memcpy(tensor->data(), src, data.size());
  }
  if (h.descr.byteswap) ByteSwap(tensor->data(), tensor->num_elements(), item);
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

std::string SerializeNpy(const Tensor& tensor) {
  std::string out = NpyHeader(tensor);
  out.append(reinterpret_cast<const char*>(tensor.data()), tensor.num_bytes());
  return out;
}

absl::Status WriteNpy(const std::string& path, const Tensor& tensor) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  auto fail = [&path](absl::string_view what, int err) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot ", what, " output file '", path, "': ", std::strerror(err)));
  };
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("create", errno);
  const std::string header = NpyHeader(tensor);
  // No fsync: the rename makes the write atomic for readers, which is what
  // matters here; durability across a machine crash is not promised.
  int err = WriteAll(fd, header.data(), header.size());
  if (err == 0) err = WriteAll(fd, tensor.data(), tensor.num_bytes());
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return fail("write", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return fail("rename a temporary file to", err);
  }
  return absl::OkStatus();
}

}  // namespace shardmap
