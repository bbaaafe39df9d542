#include "client/resident_display.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "wire/proto_convert.h"

namespace shardmap {

std::string ArrayText(const v1::ResidentInfo& info) {
  auto meta = HeaderFromProto(info.header(), info.name());
  return meta.ok() ? ShapeString(meta->dtype, meta->shape) : "?";
}

std::string MeshText(const v1::Mesh& proto) {
  auto mesh = MeshFromProto(proto);
  return mesh.ok() ? mesh->ToString() : "?";
}

nlohmann::json InfoJson(const v1::ResidentInfo& info) {
  nlohmann::json j = {{"name", info.name()}};
  if (auto meta = HeaderFromProto(info.header(), info.name()); meta.ok()) {
    j["dtype"] = DTypeName(meta->dtype);
    j["shape"] = meta->shape;
  }
  j["mesh"] = MeshText(info.mesh());
  j["spec"] = SpecFromProto(info.spec()).ToString();
  j["version"] = info.version();
  j["bytes"] = info.bytes();
  j["lost"] = info.lost();
  j["workers"] = std::vector<std::string>(info.worker_ids().begin(),
                                          info.worker_ids().end());
  return j;
}

nlohmann::json InfosJson(const std::vector<v1::ResidentInfo>& infos) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& info : infos) list.push_back(InfoJson(info));
  return list;
}

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, c == 0 ? "" : "  ",
                      c + 1 == row.size()
                          ? row[c]
                          : absl::StrFormat("%-*s", width[c], row[c]));
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string InfoTable(const std::vector<v1::ResidentInfo>& infos) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "ARRAY", "MESH", "SPEC", "VERSION", "BYTES", "STATUS"}};
  for (const auto& info : infos) {
    rows.push_back({info.name(), ArrayText(info), MeshText(info.mesh()),
                    SpecFromProto(info.spec()).ToString(),
                    absl::StrCat(info.version()), absl::StrCat(info.bytes()),
                    info.lost() ? "LOST" : "ok"});
  }
  return FormatTable(rows);
}

uint64_t TotalBytes(const std::vector<v1::ResidentInfo>& infos) {
  uint64_t total = 0;
  for (const auto& info : infos) total += info.bytes();
  return total;
}

}  // namespace shardmap
