// Tests of server/checkpoint_manifest: a manifest read back as written,
// and every field of a damaged or edited one refused with DATA_LOSS naming
// the file and the field.
#include "server/checkpoint_manifest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

using json = nlohmann::json;

constexpr char kFile[] = "/ckpt/manifest.json";

CheckpointManifest TwoArrays() {
  CheckpointManifest m;
  CheckpointArray w;
  w.name = "model/w";
  w.meta = ArrayMeta{DType::kFloat32, {8, 4}};
  w.mesh = *Mesh::Parse("x=2,y=2");
  w.spec = *PartitionSpec::Parse("P('x')");
  w.digests = {{0, 11}, {1, 18446744073709551615ull}};
  CheckpointArray s;
  s.name = "step";
  s.meta = ArrayMeta{DType::kInt64, {}};
  s.mesh = *Mesh::Parse("x=4");
  s.spec = PartitionSpec();
  s.digests = {{0, 7}};
  m.arrays = {w, s};
  return m;
}

json Good() { return json::parse(SerializeCheckpointManifest(TwoArrays())); }

absl::Status Parse(const json& j) {
  return ParseCheckpointManifest(j.dump(), kFile).status();
}

void ExpectRefused(const json& j,
                   std::initializer_list<absl::string_view> parts) {
  absl::Status s = Parse(j);
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kDataLoss, parts)) << j.dump();
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kDataLoss, {kFile}));
}

TEST(CheckpointManifestTest, ReadsBackWhatItWrites) {
  auto m =
      ParseCheckpointManifest(SerializeCheckpointManifest(TwoArrays()), kFile);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->version, 2);
  ASSERT_EQ(m->arrays.size(), 2u);
  const CheckpointArray& w = m->arrays[0];
  EXPECT_EQ(w.name, "model/w");
  EXPECT_EQ(w.meta.dtype, DType::kFloat32);
  EXPECT_EQ(w.meta.shape, (Shape{8, 4}));
  EXPECT_EQ(w.mesh.ToString(), "x=2,y=2");
  EXPECT_EQ(w.spec.ToString(), "P('x',)");
  EXPECT_EQ(w.digests.at(1), 18446744073709551615ull);
  EXPECT_EQ(w.files.at(0), "blocks/0-0.npy");
  EXPECT_EQ(w.files.at(1), "blocks/0-1.npy");
  EXPECT_EQ(m->arrays[1].files.at(0), "blocks/1-0.npy");
  EXPECT_TRUE(IsCheckpointManifest(SerializeCheckpointManifest(TwoArrays())));
}

TEST(CheckpointManifestTest, ReadsVersion1) {
  json j = Good();
  j["format"] = "shardmap-checkpoint-v1";
  j["arrays"][0]["blocks"][0]["file"] = "block-0.npy";
  j["arrays"][0]["blocks"][1]["file"] = "block-1.npy";
  j["arrays"][1]["blocks"][0]["file"] = "block-0.npy";
  auto m = ParseCheckpointManifest(j.dump(), kFile);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->arrays[0].files.at(1), "arrays/model/w/block-1.npy");
}

TEST(CheckpointManifestTest, RefusesTheWholeFile) {
  EXPECT_TRUE(StatusIs(ParseCheckpointManifest("{\"format\": ", kFile).status(),
                       absl::StatusCode::kDataLoss, {kFile, "not JSON"}));
  EXPECT_TRUE(StatusIs(ParseCheckpointManifest("", kFile).status(),
                       absl::StatusCode::kDataLoss, {kFile}));
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_TRUE(StatusIs(ParseCheckpointManifest(deep, kFile).status(),
                       absl::StatusCode::kDataLoss, {"nested deeper"}));
  ExpectRefused(json::array(), {"must be a JSON object"});
  EXPECT_FALSE(IsCheckpointManifest("[]"));
  EXPECT_FALSE(IsCheckpointManifest("{\"format\": \"other\"}"));
}

TEST(CheckpointManifestTest, RefusesFormatAndArrays) {
  json j = Good();
  j.erase("format");
  ExpectRefused(j, {"format: is missing"});
  j["format"] = "shardmap-checkpoint-v9";
  ExpectRefused(j, {"format: 'shardmap-checkpoint-v9' is not"});
  j = Good();
  j["arrays"] = nullptr;
  ExpectRefused(j, {"arrays: must be a list"});
  j.erase("arrays");
  ExpectRefused(j, {"arrays: is missing"});
  j["arrays"] = {1};
  ExpectRefused(j, {"arrays[0]: must be an object"});
}

TEST(CheckpointManifestTest, RefusesBadNames) {
  for (const std::string& name :
       {std::string(""), std::string("/etc/x"), std::string("../../x"),
        std::string("a/../../b"), std::string("a\nb"), std::string(256, 'n')}) {
    json j = Good();
    j["arrays"][0]["name"] = name;
    ExpectRefused(j, {"arrays[0].name:"});
  }
  json j = Good();
  j["arrays"][0]["name"] = 5;
  ExpectRefused(j, {"arrays[0].name: must be a string"});
  j = Good();
  j["arrays"][1]["name"] = "model/w";
  ExpectRefused(j, {"arrays[1].name: 'model/w' repeats"});
}

// One field set to `value`, and what the error must say.
struct Case {
  const char* field;
  json value;
  const char* expect;
};

TEST(CheckpointManifestTest, RefusesBadArrayFields) {
  for (const Case& c : std::vector<Case>{
           {"dtype", "complex128", "arrays[0].dtype:"},
           {"dtype", nullptr, "arrays[0].dtype: must be a string"},
           {"shape", nullptr, "arrays[0].shape: must be a list"},
           {"shape", json::array({8, "4"}),
            "arrays[0].shape[1]: must be an integer"},
           {"shape", json::array({8, 4.5}),
            "arrays[0].shape[1]: must be an integer"},
           {"shape", json::array({8, -4}), "arrays[0].shape:"},
           {"shape", json::array({1ll << 40, 1ll << 40}), "arrays[0].shape:"},
           {"shape", json::array({7, 4}), "arrays[0].spec:"},
           {"mesh", "x=0", "arrays[0].mesh:"},
           {"mesh", "x=1000000000,y=1000000000", "arrays[0].mesh:"},
           {"spec", "P('z')", "arrays[0].spec:"},
           {"spec", "P(", "arrays[0].spec:"},
           {"blocks", nullptr, "arrays[0].blocks: must be a list"},
           {"blocks", json::array(),
            "arrays[0].blocks: block 0 of 'model/w' is missing"},
       }) {
    json j = Good();
    j["arrays"][0][c.field] = c.value;
    ExpectRefused(j, {c.expect});
  }
}

TEST(CheckpointManifestTest, RefusesBadBlocks) {
  for (const Case& c : std::vector<Case>{
           {"block", 2, "arrays[0].blocks[1].block: 2 is not a block"},
           {"block", -1, "arrays[0].blocks[1].block: -1 is not a block"},
           {"block", 0, "arrays[0].blocks[1].block: block 0 repeats"},
           {"block", "1", "arrays[0].blocks[1].block: must be an integer"},
           {"file", "/etc/shadow.npy",
            "arrays[0].blocks[1].file: is '/etc/shadow.npy', not "
            "'blocks/0-1.npy'"},
           {"file", "../../x.npy", "arrays[0].blocks[1].file:"},
           {"file", "blocks/1-0.npy", "arrays[0].blocks[1].file:"},
           {"digest", "abc",
            "arrays[0].blocks[1].digest: 'abc' is not a decimal 64-bit number"},
           {"digest", "", "arrays[0].blocks[1].digest:"},
           {"digest", "-1", "arrays[0].blocks[1].digest:"},
           {"digest", "1e5", "arrays[0].blocks[1].digest:"},
           {"digest", "18446744073709551616", "arrays[0].blocks[1].digest:"},
           {"digest", 12, "arrays[0].blocks[1].digest: must be a string"},
           {"digest", nullptr, "arrays[0].blocks[1].digest: must be a string"},
       }) {
    json j = Good();
    j["arrays"][0]["blocks"][1][c.field] = c.value;
    ExpectRefused(j, {c.expect});
  }
  json j = Good();
  j["arrays"][0]["blocks"][1].erase("digest");
  ExpectRefused(j, {"arrays[0].blocks[1].digest: is missing"});
  j = Good();
  j["arrays"][0]["blocks"][1] = "x";
  ExpectRefused(j, {"arrays[0].blocks[1]: must be an object"});
}

}  // namespace
}  // namespace shardmap
