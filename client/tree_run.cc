#include "client/tree_run.h"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/array_command_util.h"
#include "client/exit_codes.h"
#include "client/tree_def.h"
#include "client/tree_literal.h"
#include "client/tree_rules.h"
#include "core/npy.h"
#include "core/npz.h"
#include "core/status_util.h"

namespace shardmap {
namespace {

bool IsNpz(const std::string& path) { return absl::EndsWith(path, ".npz"); }

// "@PREFIX/": every resident array PREFIX/KEY, as a dict tree.
bool IsResidentTree(const std::string& text) {
  return text.size() > 2 && text[0] == '@' && absl::EndsWith(text, "/");
}

// The dict tree of the resident arrays under `prefix` ("mlp/"), and their
// names in leaf order. NOT_FOUND when there are none.
absl::StatusOr<v1::TreeNode> ResidentTree(const RunFlags& f,
                                          const std::string& prefix,
                                          std::vector<std::string>* names) {
  SHARD_ASSIGN_OR_RETURN(auto client, Connect(f.coordinator));
  SHARD_ASSIGN_OR_RETURN(auto listed, client->List(prefix));
  std::vector<std::string> keys;
  for (const v1::ResidentInfo& info : listed) {
    if (absl::StartsWith(info.name(), prefix)) {
      keys.push_back(info.name().substr(prefix.size()));
    }
  }
  if (keys.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "--arg @", prefix, ": no resident arrays are named ", prefix, "..."));
  }
  std::vector<size_t> order;
  SHARD_ASSIGN_OR_RETURN(v1::TreeNode tree, DictTreeFromKeys(keys, &order));
  for (size_t k : order) names->push_back(prefix + keys[k]);
  return tree;
}

bool IsContainerText(const std::string& text) {
  const absl::string_view t = absl::StripLeadingAsciiWhitespace(text);
  return !t.empty() && (t[0] == '(' || t[0] == '[' || t[0] == '{');
}

// The specs of --in-spec / --out-spec as one prefix tree of `count`
// values (arguments or outputs; -1: unknown): a tuple of one tree per flag
// when there are `count` flags, else the one flag's tree for all. Sets
// *specs to its leaves, and *tree when a flag holds a container
// (otherwise the flat specs suffice).
absl::Status SpecTree(const std::vector<std::string>& texts,
                      absl::string_view flag, int count,
                      std::vector<PartitionSpec>* specs,
                      std::optional<v1::TreeNode>* tree) {
  v1::TreeNode root;
  root.set_kind(v1::TreeNode::TREE_TUPLE);
  bool containers = false;
  for (size_t i = 0; i < texts.size(); ++i) {
    containers = containers || IsContainerText(texts[i]);
    auto literal = ParseTreeLiteral(texts[i]);
    if (!literal.ok())
      return Annotate(literal.status(), absl::StrCat(flag, " ", i));
    for (const std::string& leaf : literal->leaves) {
      auto spec = PartitionSpec::Parse(leaf);
      if (!spec.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " ", i, ": ", spec.status().message()));
      }
      specs->push_back(*std::move(spec));
    }
    *root.add_children() = std::move(literal->tree);
  }
  if (!containers) return absl::OkStatus();
  *tree = texts.size() == 1 && count != 1 ? root.children(0) : root;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TreeRule>> Rules(
    const std::vector<std::string>& texts, absl::string_view flag) {
  std::vector<TreeRule> rules;
  for (const std::string& text : texts) {
    auto parsed = ParseTreeRules(text);
    if (!parsed.ok()) return Annotate(parsed.status(), flag);
    rules.insert(rules.end(), parsed->begin(), parsed->end());
  }
  return rules;
}

// --out-tree: "args[N]" or a literal whose leaves are '*'.
absl::StatusOr<v1::TreeNode> OutTree(const std::string& text,
                                     const v1::TreeNode& args) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  int n = 0;
  if (absl::ConsumePrefix(&t, "args[") && absl::ConsumeSuffix(&t, "]")) {
    if (!absl::SimpleAtoi(t, &n) || n < 0 || n >= args.children_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--out-tree '", text, "': there are ", args.children_size(),
          " arguments (args[0] ... args[", args.children_size() - 1, "])"));
    }
    return args.children(n);
  }
  auto literal = ParseTreeLiteral(text);
  if (!literal.ok()) return Annotate(literal.status(), "--out-tree");
  for (const std::string& leaf : literal->leaves) {
    if (leaf != "*") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--out-tree: a leaf is written '*', got '", leaf,
          "' (e.g. --out-tree \"{'w': *, 'b': *}\" or --out-tree args[0])"));
    }
  }
  return literal->tree;
}

}  // namespace

void AddTreeOptions(CLI::App* cmd, RunFlags& run) {
  cmd->add_option("--in-rules", run.in_rules,
                  "FILTER=SPEC[;FILTER=SPEC...]: nnx-style rules giving each "
                  "argument leaf a spec by its path (0/linear1/kernel), first "
                  "match wins; instead of --in-spec");
  cmd->add_option("--out-rules", run.out_rules,
                  "rules giving each output leaf a spec by its path in "
                  "--out-tree; instead of --out-spec");
  cmd->add_option("--out-tree", run.out_tree,
                  "the outputs' structure: args[N] (that of argument N) or a "
                  "literal such as \"{'w': *, 'b': *}\"");
  cmd->add_option("--state-out-spec", run.state_out_specs,
                  "SLOT=SPEC: store the written state back in this sharding "
                  "(resharded among the workers)");
}

bool UsesTrees(const RunFlags& f) {
  for (const std::string& a : f.args) {
    if ((IsNpz(a) && !absl::StartsWith(a, "@")) || IsResidentTree(a)) {
      return true;
    }
  }
  if (StoresTree(f)) return true;
  for (const auto* texts : {&f.in_specs, &f.out_specs}) {
    for (const std::string& t : *texts) {
      if (IsContainerText(t)) return true;
    }
  }
  return WritesTreeNpz(f) || !f.in_rules.empty() || !f.out_rules.empty() ||
         !f.out_tree.empty();
}

absl::Status ParseTreeSpecs(const RunFlags& f, JobRequest* job) {
  if (!f.in_rules.empty()) {
    if (!f.in_specs.empty()) {
      return absl::InvalidArgumentError(
          "give --in-spec or --in-rules, not both");
    }
    SHARD_ASSIGN_OR_RETURN(job->trees.in_rules,
                           Rules(f.in_rules, "--in-rules"));
  } else if (f.in_specs.size() > 1 && f.in_specs.size() != f.args.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "got ", f.args.size(), " --arg but ", f.in_specs.size(),
        " --in-spec; give one --in-spec per --arg, or one for all"));
  } else {
    SHARD_RETURN_IF_ERROR(SpecTree(f.in_specs, "--in-spec",
                                   static_cast<int>(f.args.size()),
                                   &job->in_specs, &job->trees.in_specs));
  }
  if (!f.out_rules.empty()) {
    if (!f.out_specs.empty()) {
      return absl::InvalidArgumentError(
          "give --out-spec or --out-rules, not both");
    }
    if (f.out_tree.empty()) {
      return absl::InvalidArgumentError(
          "--out-rules needs --out-tree (the outputs' structure, e.g. "
          "args[0])");
    }
    SHARD_ASSIGN_OR_RETURN(job->trees.out_rules,
                           Rules(f.out_rules, "--out-rules"));
    return absl::OkStatus();
  }
  if (f.out_specs.empty()) {
    return absl::InvalidArgumentError(
        "--out-spec or --out-rules is required (P() for a replicated "
        "output)");
  }
  return SpecTree(f.out_specs, "--out-spec", -1, &job->out_specs,
                  &job->trees.out_specs);
}

absl::Status ReadTreeArgs(const RunFlags& f, ParsedRun* run, int* exit_code) {
  JobRequest& job = run->job;
  v1::TreeNode args;
  args.set_kind(v1::TreeNode::TREE_TUPLE);
  std::vector<std::string> resident;  // per leaf
  std::vector<bool> is_resident;
  for (size_t i = 0; i < f.args.size(); ++i) {
    const std::string& a = f.args[i];
    if (IsResidentTree(a)) {
      std::vector<std::string> names;
      auto tree = ResidentTree(f, a.substr(1), &names);
      if (!tree.ok()) {
        *exit_code = tree.status().code() == absl::StatusCode::kNotFound
                         ? kExitDataErr
                         : ExitCodeForStatus(tree.status());
        return tree.status();
      }
      *args.add_children() = *std::move(tree);
      for (std::string& name : names) {
        resident.push_back(std::move(name));
        is_resident.push_back(true);
      }
      continue;
    }
    if (absl::StartsWith(a, "@")) {
      *args.add_children() = TreeLeafNode();
      resident.push_back(a.substr(1));
      is_resident.push_back(true);
      continue;
    }
    auto fail = [&](const absl::Status& s) {
      *exit_code =
          s.code() == absl::StatusCode::kNotFound ? kExitNoInput : kExitDataErr;
      return s;
    };
    if (!IsNpz(a)) {
      auto t = ReadNpy(a);
      if (!t.ok()) return fail(t.status());
      run->inputs.push_back(*std::move(t));
      *args.add_children() = TreeLeafNode();
      resident.emplace_back();
      is_resident.push_back(false);
      continue;
    }
    auto members = ReadNpz(a);
    if (!members.ok()) return fail(members.status());
    std::vector<std::string> keys;
    for (const auto& [key, unused] : *members) keys.push_back(key);
    std::vector<size_t> order;
    auto tree = DictTreeFromKeys(keys, &order);
    if (!tree.ok()) return fail(Annotate(tree.status(), a));
    *args.add_children() = *std::move(tree);
    for (size_t k : order) {
      run->inputs.push_back(std::move((*members)[k].second));
      resident.emplace_back();
      is_resident.push_back(false);
    }
  }
  *exit_code = kExitUsage;
  // Pointers into run->inputs, which no longer grows.
  job.args.clear();
  for (size_t leaf = 0, next = 0; leaf < is_resident.size(); ++leaf) {
    job.args.push_back(is_resident[leaf] ? nullptr : &run->inputs[next++]);
  }
  job.resident_args.clear();
  for (const std::string& name : resident) {
    if (!name.empty()) {
      job.resident_args = resident;
      break;
    }
  }
  if (!f.out_tree.empty()) {
    SHARD_ASSIGN_OR_RETURN(job.trees.outputs, OutTree(f.out_tree, args));
  } else if (job.trees.out_specs.has_value()) {
    job.trees.outputs = *job.trees.out_specs;  // one output per spec
  }
  job.trees.args = std::move(args);
  if (StoresTree(f)) {
    // Every output stored as PREFIX/PATH, its path in the output tree.
    if (!job.trees.outputs.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out ", f.outs[0],
                       " needs --out-tree (the outputs' structure, "
                       "e.g. args[0]): it names each stored output"));
    }
    const std::string prefix = f.outs[0].substr(1);
    job.resident_outputs.clear();
    for (const TreeLeafPath& p : TreeLeafPaths(*job.trees.outputs)) {
      job.resident_outputs.push_back(prefix + p.path);
    }
  }
  return absl::OkStatus();
}

bool StoresTree(const RunFlags& f) {
  return f.outs.size() == 1 && IsResidentTree(f.outs[0]);
}

bool WritesTreeNpz(const RunFlags& f) {
  return f.outs.size() == 1 && IsNpz(f.outs[0]);
}

absl::Status WriteTreeOutputs(const std::string& path,
                              const JobResult& result) {
  if (!result.stored.empty()) {
    return absl::InvalidArgumentError(
        "outputs stored as resident arrays cannot also be written to an .npz");
  }
  std::vector<std::string> keys;
  if (result.output_tree.has_value()) {
    for (const TreeLeafPath& p : TreeLeafPaths(*result.output_tree)) {
      keys.push_back(p.path);
    }
  }
  const bool named = std::none_of(
      keys.begin(), keys.end(), [](const std::string& k) { return k.empty(); });
  if (!named || keys.size() != result.outputs.size()) {
    keys.clear();
    for (size_t i = 0; i < result.outputs.size(); ++i) {
      keys.push_back(absl::StrCat(i));
    }
  }
  std::vector<std::pair<std::string, const Tensor*>> arrays;
  for (size_t i = 0; i < keys.size(); ++i) {
    arrays.emplace_back(keys[i], &result.outputs[i]);
  }
  return WriteNpz(path, arrays, /*compress=*/false);
}

int ReportTreeRun(const RunFlags& f, const JobRequest& job,
                  const JobResult& result, double seconds) {
  std::vector<std::string> keys;
  if (result.output_tree.has_value()) {
    for (const TreeLeafPath& p : TreeLeafPaths(*result.output_tree)) {
      keys.push_back(p.key);
    }
  }
  nlohmann::json outputs = nlohmann::json::array();
  std::vector<std::string> lines;
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    const Tensor& t = result.outputs[i];
    const std::string key = keys.size() == result.outputs.size()
                                ? keys[i]
                                : absl::StrCat("[", i, "]");
    outputs.push_back({{"path", absl::StrCat("out", key)},
                       {"dtype", DTypeName(t.dtype())},
                       {"shape", t.shape()}});
    lines.push_back(
        absl::StrCat("out", key, ": ", ShapeString(t.dtype(), t.shape())));
  }
  const std::string what = f.fn.empty() ? "program" : f.fn;
  const std::string mesh =
      job.mesh.has_value() ? job.mesh->ToString() : "of the resident arguments";
  if (f.json) {
    std::cout << nlohmann::json{{"job_id", result.job_id},
                                {"function", what},
                                {"mesh", mesh},
                                {"devices", result.num_devices},
                                {"seconds", seconds},
                                {"file", f.outs[0]},
                                {"outputs", outputs}}
                     .dump()
              << std::endl;
    return kExitOk;
  }
  std::cerr << result.job_id << ": " << what << " on mesh " << mesh << " ("
            << result.num_devices << " devices) in "
            << absl::StrFormat("%.1f", seconds * 1e3) << " ms; "
            << result.outputs.size() << " outputs -> " << f.outs[0]
            << std::endl;
  for (const std::string& line : lines) std::cerr << line << std::endl;
  return kExitOk;
}

}  // namespace shardmap
