#include "server/sharding_picture.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardmap {
namespace {

// "0,1" for a short list; "0-7" for a run; as many as fit otherwise.
std::string DeviceList(const std::vector<int64_t>& devices) {
  bool run = devices.size() > 2;
  for (size_t i = 1; run && i < devices.size(); ++i) {
    run = devices[i] == devices[i - 1] + 1;
  }
  if (run) return absl::StrCat(devices.front(), "-", devices.back());
  return absl::StrJoin(devices, ",");
}

std::string Centered(const std::string& text, size_t width) {
  const size_t left = (width - text.size()) / 2;
  return std::string(left, ' ') + text +
         std::string(width - text.size() - left, ' ');
}

}  // namespace

std::string ShardingPicture(const Mesh& mesh, const BlockLayout& layout,
                            const std::string& indent) {
  const std::vector<int64_t>& blocks = layout.blocks_per_dim();
  const int64_t rows = blocks.empty() ? 1 : blocks[0];
  const int64_t cols = blocks.size() < 2 ? 1 : blocks[1];
  // The devices of each drawn cell (blocks along dimensions past the
  // second are merged into their cell).
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> cells;
  for (int64_t d = 0; d < mesh.num_devices(); ++d) {
    const std::vector<int64_t> index = layout.BlockIndex(d);
    const int64_t r = index.empty() ? 0 : index[0];
    const int64_t c = index.size() < 2 ? 0 : index[1];
    cells[{r, c}].push_back(d);
  }
  size_t width = 0;
  std::map<std::pair<int64_t, int64_t>, std::string> text;
  for (auto& [at, devices] : cells) {
    text[at] = DeviceList(devices);
    width = std::max(width, text[at].size());
  }
  width += 4;
  std::string rule = "+";
  for (int64_t c = 0; c < cols; ++c) {
    absl::StrAppend(&rule, std::string(width, '-'), "+");
  }
  std::string out = absl::StrCat(indent, rule, "\n");
  for (int64_t r = 0; r < rows; ++r) {
    std::string line = "|";
    for (int64_t c = 0; c < cols; ++c) {
      absl::StrAppend(&line, Centered(text[{r, c}], width), "|");
    }
    absl::StrAppend(&out, indent, line, "\n", indent, rule, "\n");
  }
  std::vector<std::string> deeper;
  for (size_t d = 2; d < blocks.size(); ++d) {
    if (blocks[d] > 1) {
      deeper.push_back(absl::StrCat("dimension ", d, " in ", blocks[d]));
    }
  }
  if (!deeper.empty()) {
    absl::StrAppend(&out, indent, "(also split: ", absl::StrJoin(deeper, ", "),
                    "; each cell lists the devices of all its blocks)\n");
  }
  return out;
}

}  // namespace shardmap
