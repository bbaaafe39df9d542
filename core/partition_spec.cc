#include "core/partition_spec.h"

#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/bounded_input.h"

namespace shardmap {
namespace {

// A small recursive-descent parser over the Python text of a spec:
//
// clang-format off
//   spec  := 'None' | ('P' | 'PartitionSpec') '(' [entry (',' entry)* [',']] ')'
//   entry := 'None' | name | '(' [name (',' name)* [',']] ')'
//   name  := quoted string | identifier
// clang-format on
//
// Positions in messages are 0-based offsets into the text.
class SpecParser {
 public:
  explicit SpecParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<PartitionSpec> Parse() {
    SkipSpace();
    std::string head = Identifier();
    if (head == "None") {
      SkipSpace();
      if (pos_ != text_.size()) return Error("unexpected text after None");
      return PartitionSpec::Unsplit();
    }
    if (head == "Infer") {
      SkipSpace();
      if (pos_ != text_.size()) return Error("unexpected text after Infer");
      return PartitionSpec::Infer();
    }
    if (head != "P" && head != "PartitionSpec") {
      pos_ -= head.size();
      return Error("expected P(...), PartitionSpec(...), None or Infer");
    }
    SkipSpace();
    if (!Consume('(')) return Error("expected '(' after P");
    std::vector<PartitionSpec::Entry> entries;
    SkipSpace();
    while (!Consume(')')) {
      if (AtEnd()) return Error("expected ')' to close P(");
      auto entry = ParseEntry();
      if (!entry.ok()) return entry.status();
      entries.push_back(*std::move(entry));
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
        continue;
      }
      if (Peek() != ')') return Error("expected ',' or ')'");
    }
    SkipSpace();
    if (!AtEnd()) return Error("unexpected text after the closing ')'");
    return PartitionSpec(std::move(entries));
  }

 private:
  absl::StatusOr<PartitionSpec::Entry> ParseEntry() {
    if (Consume('(')) {
      PartitionSpec::Entry names;
      SkipSpace();
      while (!Consume(')')) {
        if (AtEnd()) return Error("expected ')' to close the tuple");
        if (Peek() == '(') {
          return Error(
              "a tuple inside a PartitionSpec cannot contain a nested tuple");
        }
        auto name = ParseName();
        if (!name.ok()) return name.status();
        if (*name == "None") return Error("None inside a tuple of axis names");
        names.push_back(*std::move(name));
        SkipSpace();
        if (Consume(',')) {
          SkipSpace();
          continue;
        }
        if (Peek() != ')') return Error("expected ',' or ')' in the tuple");
      }
      return names;  // () is None; ('x',) is 'x'.
    }
    auto name = ParseName();
    if (!name.ok()) return name.status();
    if (*name == "None") return PartitionSpec::Entry{};
    return PartitionSpec::Entry{*std::move(name)};
  }

  // A quoted axis name, or a bare identifier (None included).
  absl::StatusOr<std::string> ParseName() {
    if (Peek() == '\'' || Peek() == '"') {
      const char quote = text_[pos_++];
      const size_t start = pos_;
      while (!AtEnd() && text_[pos_] != quote) ++pos_;
      if (AtEnd()) {
        pos_ = start - 1;
        return Error("unterminated quoted axis name");
      }
      std::string name(text_.substr(start, pos_ - start));
      ++pos_;
      if (name.empty()) {
        pos_ = start - 1;
        return Error("empty axis name");
      }
      if (!IsAxisName(name)) {
        pos_ = start - 1;
        return Error(absl::StrCat("axis name '", Truncate(name),
                                  "' is not an identifier"));
      }
      return name;
    }
    const size_t start = pos_;
    std::string id = Identifier();
    if (id.empty()) return Error("expected an axis name, None or a tuple");
    if (!IsAxisName(id)) {
      pos_ = start;
      return Error(
          absl::StrCat("axis name '", Truncate(id), "' is not an identifier"));
    }
    return id;
  }

  std::string Identifier() {
    const size_t start = pos_;
    while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                        text_[pos_] == '_')) {
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed PartitionSpec \"", Truncate(text_),
                     "\" at position ", pos_, ": ", what));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

std::string Quote(const std::string& s) { return absl::StrCat("'", s, "'"); }

}  // namespace

PartitionSpec PartitionSpec::Unsplit() {
  PartitionSpec p;
  p.unsplit_ = true;
  return p;
}

PartitionSpec PartitionSpec::Infer() {
  PartitionSpec p;
  p.infer_ = true;
  return p;
}

absl::StatusOr<PartitionSpec> PartitionSpec::Parse(absl::string_view text) {
  return SpecParser(text).Parse();
}

std::vector<std::string> PartitionSpec::MentionedAxes() const {
  std::vector<std::string> axes;
  for (const Entry& e : entries_) axes.insert(axes.end(), e.begin(), e.end());
  return axes;
}

bool PartitionSpec::Mentions(absl::string_view axis) const {
  for (const Entry& e : entries_) {
    for (const std::string& a : e) {
      if (a == axis) return true;
    }
  }
  return false;
}

std::string PartitionSpec::ToString() const {
  if (unsplit_) return "None";
  if (infer_) return "Infer";
  if (entries_.empty()) return "P()";
  std::vector<std::string> parts;
  for (const Entry& e : entries_) {
    if (e.empty()) {
      parts.push_back("None");
    } else if (e.size() == 1) {
      parts.push_back(Quote(e[0]));
    } else {
      parts.push_back(
          absl::StrCat("(",
                       absl::StrJoin(e, ", ",
                                     [](std::string* o, const std::string& s) {
                                       absl::StrAppend(o, Quote(s));
                                     }),
                       ")"));
    }
  }
  // JAX prints a trailing comma for a single entry: P('i',).
  return absl::StrCat("P(", absl::StrJoin(parts, ", "),
                      parts.size() == 1 ? ",)" : ")");
}

absl::Status PartitionSpec::Validate(const Mesh& mesh, int rank,
                                     absl::string_view what,
                                     absl::string_view value) const {
  if (unsplit_ || infer_) return absl::OkStatus();
  absl::flat_hash_set<std::string> seen;
  for (const Entry& e : entries_) {
    for (const std::string& axis : e) {
      if (!mesh.AxisPosition(axis).has_value()) {
        std::vector<std::string> names;
        for (const MeshAxis& a : mesh.axes()) names.push_back(Quote(a.name));
        return absl::InvalidArgumentError(absl::StrCat(
            what, " is ", ToString(), ", which refers to mesh axis '", axis,
            "', but the mesh has axes (", absl::StrJoin(names, ", "), ")"));
      }
      if (!seen.insert(axis).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " is ", ToString(),
            ", which has duplicate entries for mesh axis '", axis,
            "': A single NamedSharding spec specification can map every "
            "mesh axis to at most one positional dimension, but ",
            ToString(), " has duplicate entries for `", axis, "`"));
      }
    }
  }
  if (static_cast<int>(entries_.size()) > rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", ToString(), " which has length ", entries_.size(),
        ", but ", value, " has rank ", rank, " (and ", rank, " < ",
        entries_.size(), "); entries must be no more than the array's rank",
        rank == 0 ? "; for scalar values (rank 0) use P()" : ""));
  }
  return absl::OkStatus();
}

bool PartitionSpec::SplitsAlike(const PartitionSpec& o, size_t rank) const {
  auto padded = [rank](const PartitionSpec& p) {
    std::vector<Entry> entries;
    if (!p.unsplit()) entries = p.entries();
    if (entries.size() < rank) entries.resize(rank);
    return entries;
  };
  return padded(*this) == padded(o);
}

}  // namespace shardmap
