// How shardctl shows resident arrays: one line of text, a JSON object, a
// table (ls, put-tree, save and restore print them).
//
// Thread-safe: the functions share no state.
#ifndef SHARDMAP_CLIENT_RESIDENT_DISPLAY_H_
#define SHARDMAP_CLIENT_RESIDENT_DISPLAY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shardmap/v1/coordinator.pb.h"

namespace shardmap {

// "float32[4,6]" for the array `info` describes ("?" if its header is bad).
std::string ArrayText(const v1::ResidentInfo& info);

// The mesh as "{x: 2, y: 2}" ("?" if it is malformed).
std::string MeshText(const v1::Mesh& proto);

// {"name", "dtype", "shape", "mesh", "spec", "version", "bytes", "lost",
// "workers"}; dtype and shape are left out if the header is bad.
nlohmann::json InfoJson(const v1::ResidentInfo& info);
nlohmann::json InfosJson(const std::vector<v1::ResidentInfo>& infos);

// Columns padded to their widest cell; rows[0] is the header.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// NAME ARRAY MESH SPEC VERSION BYTES STATUS, one row per array.
std::string InfoTable(const std::vector<v1::ResidentInfo>& infos);

// The arrays' bytes summed.
uint64_t TotalBytes(const std::vector<v1::ResidentInfo>& infos);

}  // namespace shardmap

#endif  // SHARDMAP_CLIENT_RESIDENT_DISPLAY_H_
