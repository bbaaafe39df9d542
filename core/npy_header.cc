#include "core/npy_header.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/npy.h"
#include "core/py_literal.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

constexpr absl::string_view kMagic("\x93NUMPY", 6);
constexpr size_t kMaxHeaderV1 = 10000;       // numpy's own reading limit
constexpr size_t kMaxHeaderV2 = 1 << 20;     // ours for the 4-byte length field
constexpr size_t kArrayAlign = 64;           // numpy.lib.format.ARRAY_ALIGN
constexpr size_t kGrowthAxisMaxDigits = 21;  // ...GROWTH_AXIS_MAX_DIGITS
constexpr absl::string_view kSupported =
    "supported: '<f4' (float32), '<f8' (float64), '<i4' (int32), '<i8' "
    "(int64), in byte order '<', '>' or '='";

bool IsOneOf(char c, absl::string_view set) {
  return set.find(c) != absl::string_view::npos;
}

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
    return InvalidNpy(name,
                      "structured dtypes (descr is a list of fields) are "
                      "not supported; ",
                      kSupported);
  }
  if (v.kind != PyValue::kString) {
    return InvalidNpy(name, "'descr' is not a string: '", v.text, "'");
  }
  const std::string& d = v.text;
  const size_t kind_at = !d.empty() && IsOneOf(d[0], "<>=|") ? 1 : 0;
  if (d.size() > kind_at && d[kind_at] == 'O') {
    return InvalidNpy(name, "dtype '", d,
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
  return InvalidNpy(name, "unsupported dtype '", d, "' (", DescribeDescr(d),
                    "); ", kSupported);
}

absl::StatusOr<Shape> ParseShape(const PyValue& v, absl::string_view name) {
  if (v.kind != PyValue::kTuple) {
    return InvalidNpy(name, "'shape' is not a tuple");
  }
  Shape shape;
  for (const PyValue& item : v.items) {
    int64_t dim = 0;
    if (item.kind != PyValue::kInt) {
      return InvalidNpy(name, "dimension '", item.text, "' is not an integer");
    }
    if (!absl::SimpleAtoi(item.text, &dim)) {
      return InvalidNpy(name, "dimension ", item.text, " is out of range");
    }
    if (dim < 0) return InvalidNpy(name, "dimension ", dim, " is negative");
    shape.push_back(dim);
  }
  return shape;
}

std::string DescrOf(DType dtype) {
  return absl::StrCat("<", IsFloating(dtype) ? "f" : "i", ItemSize(dtype));
}

// The header text and the data of a .npy file.
struct NpySections {
  absl::string_view header;
  absl::string_view data;
};

// Splits `bytes` after the header (magic, version, length, dict).
absl::StatusOr<NpySections> SplitNpySections(absl::string_view bytes,
                                             absl::string_view name) {
  if (bytes.size() < kMagic.size() + 2 ||
      bytes.substr(0, kMagic.size()) != kMagic) {
    return InvalidNpy(name, "bad magic string (not a .npy file)");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return InvalidNpy(name, "unsupported format version ", major, ".", minor,
                      " (supported: 1.0, 2.0, 3.0)");
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagic.size() + 2 + len_bytes;
  if (bytes.size() < prefix) {
    return InvalidNpy(name, "truncated header: file has only ", bytes.size(),
                      " bytes");
  }
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) {
    header_len |= size_t{static_cast<uint8_t>(bytes[8 + i])} << (8 * i);
  }
  const size_t max_len = major == 1 ? kMaxHeaderV1 : kMaxHeaderV2;
  if (header_len > max_len) {
    return InvalidNpy(name, "header length ", header_len,
                      " exceeds the limit of ", max_len, " bytes");
  }
  if (bytes.size() - prefix < header_len) {
    return InvalidNpy(name, "truncated header: expected ", header_len,
                      " header bytes, found ", bytes.size() - prefix);
  }
  return NpySections{bytes.substr(prefix, header_len),
                     bytes.substr(prefix + header_len)};
}

// numpy requires exactly the keys 'descr', 'fortran_order' and 'shape'.
absl::StatusOr<NpyArrayHeader> InterpretNpyHeader(absl::string_view text,
                                                  absl::string_view name) {
  absl::StatusOr<PyDict> dict = ParsePyDict(text);
  if (!dict.ok()) return InvalidNpy(name, dict.status().message());
  const PyValue* fields[3] = {nullptr, nullptr, nullptr};
  constexpr absl::string_view kKeys[3] = {"descr", "fortran_order", "shape"};
  for (const auto& [key, value] : *dict) {
    const auto* it = std::find(std::begin(kKeys), std::end(kKeys), key);
    if (it == std::end(kKeys)) {
      return InvalidNpy(name, "unexpected key '", key, "'");
    }
    const PyValue*& slot = fields[it - std::begin(kKeys)];
    if (slot != nullptr) return InvalidNpy(name, "duplicate key '", key, "'");
    slot = &value;
  }
  for (int i = 0; i < 3; ++i) {
    if (fields[i] == nullptr) {
      return InvalidNpy(name, "header has no '", kKeys[i], "' key");
    }
  }
  NpyArrayHeader h;
  SHARD_ASSIGN_OR_RETURN(const Descr descr, ParseDescr(*fields[0], name));
  h.dtype = descr.dtype;
  h.byteswap = descr.byteswap;
  if (fields[1]->kind != PyValue::kBool) {
    return InvalidNpy(name, "'fortran_order' is not True or False");
  }
  h.fortran_order = fields[1]->text == "True";
  SHARD_ASSIGN_OR_RETURN(h.shape, ParseShape(*fields[2], name));
  return h;
}

// The data bytes `h` declares. INVALID_ARGUMENT over 2^62.
absl::StatusOr<uint64_t> NpyDataBytes(const NpyArrayHeader& h,
                                      absl::string_view name) {
  unsigned __int128 expected = ItemSize(h.dtype);
  for (int64_t d : h.shape) {
    expected *= static_cast<uint64_t>(d);
    if (expected > (static_cast<unsigned __int128>(1) << 62)) {
      return InvalidNpy(name, "shape ", ShapeTuple(h.shape), " is too large");
    }
  }
  return static_cast<uint64_t>(expected);
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

absl::StatusOr<NpyLayout> ReadNpyLayout(absl::string_view bytes,
                                        absl::string_view name) {
  SHARD_ASSIGN_OR_RETURN(const NpySections sections,
                         SplitNpySections(bytes, name));
  NpyLayout layout;
  SHARD_ASSIGN_OR_RETURN(layout.header,
                         InterpretNpyHeader(sections.header, name));
  SHARD_ASSIGN_OR_RETURN(layout.data_bytes, NpyDataBytes(layout.header, name));
  layout.data_offset = bytes.size() - sections.data.size();
  layout.data = sections.data;
  return layout;
}

absl::StatusOr<uint64_t> NpyDeclaredSize(absl::string_view head,
                                         absl::string_view name) {
  SHARD_ASSIGN_OR_RETURN(const NpyLayout layout, ReadNpyLayout(head, name));
  return layout.data_offset + layout.data_bytes;
}

}  // namespace shardmap
