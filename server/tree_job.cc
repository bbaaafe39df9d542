#include "server/tree_job.h"

#include <cctype>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/tree_rules.h"
#include "core/status_util.h"
#include "wire/proto_convert.h"

namespace shardmap {
namespace {

bool HasTrees(const v1::JobSpec& spec) {
  return spec.has_arg_tree() || spec.has_in_spec_tree() ||
         spec.in_rules_size() > 0 || spec.has_out_tree() ||
         spec.has_out_spec_tree() || spec.out_rules_size() > 0 ||
         spec.state_rules_size() > 0;
}

absl::StatusOr<std::vector<TreeRule>> RulesFromProto(
    const google::protobuf::RepeatedPtrField<v1::TreeRule>& rules,
    absl::string_view field) {
  std::vector<TreeRule> out;
  for (const v1::TreeRule& r : rules) {
    const PartitionSpec spec = SpecFromProto(r.spec());
    const std::string text = absl::StrCat(r.filter(), "=", spec.ToString());
    if (absl::Status s = ValidateTreeFilter(r.filter(), text); !s.ok()) {
      return Annotate(s, field);
    }
    out.push_back(TreeRule{r.filter(), spec});
  }
  return out;
}

// The specs of the leaves of `full` (named `value`, e.g. "args"): from
// the rules when there are any, else from the prefix tree over `specs`
// (unset: one spec for all, or a tuple of one per child of the root).
// `field` is "in_specs" or "out_specs"; *names gets each leaf's spec name.
absl::StatusOr<std::vector<v1::PartitionSpec>> LeafSpecs(
    const v1::TreeNode& full, absl::string_view value,
    const google::protobuf::RepeatedPtrField<v1::PartitionSpec>& specs,
    const v1::TreeNode* prefix,
    const google::protobuf::RepeatedPtrField<v1::TreeRule>& rules,
    absl::string_view field, absl::string_view rules_field,
    std::vector<std::string>* names) {
  const std::vector<TreeLeafPath> leaves = TreeLeafPaths(full);
  std::vector<v1::PartitionSpec> out;
  if (!rules.empty()) {
    if (!specs.empty() || prefix != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("give ", field, " or ", rules_field, ", not both"));
    }
    SHARD_ASSIGN_OR_RETURN(std::vector<TreeRule> parsed,
                           RulesFromProto(rules, rules_field));
    for (const TreeLeafPath& leaf : leaves) {
      auto rule = MatchTreeRule(parsed, leaf.path);
      if (!rule.ok()) {
        return Annotate(rule.status(),
                        absl::StrCat(rules_field, ": ", value, leaf.key));
      }
      out.push_back(SpecToProto(parsed[*rule].spec));
      names->push_back(
          absl::StrCat(rules_field, " rule '", parsed[*rule].filter, "'"));
    }
    return out;
  }
  v1::TreeNode implicit;
  if (prefix == nullptr) {
    implicit =
        specs.size() == 1 ? TreeLeafNode() : TreeTupleOfLeaves(specs.size());
    prefix = &implicit;
  } else {
    SHARD_RETURN_IF_ERROR(ValidateTree(*prefix, absl::StrCat(field, " tree")));
    if (CountTreeLeaves(*prefix) != static_cast<size_t>(specs.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", field, " tree has ", CountTreeLeaves(*prefix),
                       " leaves but ", specs.size(), " ", field, " were sent"));
    }
  }
  SHARD_ASSIGN_OR_RETURN(
      std::vector<int> index,
      BroadcastTreePrefix(*prefix, full, absl::StrCat("shard_map ", field)));
  const std::vector<TreeLeafPath> spec_leaves = TreeLeafPaths(*prefix);
  for (int i : index) {
    if (i < 0) {
      v1::PartitionSpec none;
      none.set_unsplit(true);
      out.push_back(none);
      names->push_back(std::string(field));
      continue;
    }
    out.push_back(specs[i]);
    names->push_back(absl::StrCat(field, spec_leaves[i].key));
  }
  return out;
}

// Replaces "<word>[<n>]" in `text` by names[n] (flat leaf numbers the
// planner used) for each (word, names) pair.
std::string RenameLeaves(
    absl::string_view text,
    const std::vector<std::pair<std::string, const std::vector<std::string>*>>&
        words) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    bool replaced = false;
    for (const auto& [word, names] : words) {
      if (text.substr(i, word.size() + 1) != absl::StrCat(word, "[")) continue;
      if (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) ||
                    text[i - 1] == '_')) {
        continue;
      }
      size_t j = i + word.size() + 1;
      size_t n = 0;
      const size_t digits = j;
      while (j < text.size() &&
             std::isdigit(static_cast<unsigned char>(text[j])) &&
             j - digits < 9) {
        n = n * 10 + (text[j] - '0');
        ++j;
      }
      if (j == digits || j >= text.size() || text[j] != ']' ||
          n >= names->size()) {
        continue;
      }
      out += (*names)[n];
      i = j + 1;
      replaced = true;
      break;
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

}  // namespace

absl::StatusOr<TreeJob> FlattenJobTrees(const v1::JobSpec& spec) {
  TreeJob job;
  job.flat = spec;
  if (!HasTrees(spec)) return job;
  job.has_trees = true;
  v1::JobSpec& flat = job.flat;
  // Arguments.
  v1::TreeNode args = spec.has_arg_tree() ? spec.arg_tree()
                                          : TreeTupleOfLeaves(spec.args_size());
  SHARD_RETURN_IF_ERROR(ValidateTree(args, "arg_tree"));
  if (args.kind() != v1::TreeNode::TREE_TUPLE) {
    return absl::InvalidArgumentError(
        "arg_tree must be a tuple (of the positional arguments)");
  }
  if (CountTreeLeaves(args) != static_cast<size_t>(spec.args_size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("arg_tree has ", CountTreeLeaves(args), " leaves but ",
                     spec.args_size(), " argument headers were sent"));
  }
  job.arg_leaves = TreeLeafPaths(args);
  // No in_specs at all: the planner infers them from resident arguments
  // (or says they are missing).
  if (spec.in_specs_size() > 0 || spec.in_rules_size() > 0 ||
      spec.has_in_spec_tree()) {
    SHARD_ASSIGN_OR_RETURN(
        std::vector<v1::PartitionSpec> in,
        LeafSpecs(args, "args", spec.in_specs(),
                  spec.has_in_spec_tree() ? &spec.in_spec_tree() : nullptr,
                  spec.in_rules(), "in_specs", "in_rules", &job.in_spec_names));
    flat.clear_in_specs();
    for (auto& s : in) *flat.add_in_specs() = std::move(s);
  }
  // Outputs: only with an out_tree is their number known here.
  if (spec.has_out_tree()) {
    SHARD_RETURN_IF_ERROR(ValidateTree(spec.out_tree(), "out_tree"));
    job.out_leaves = TreeLeafPaths(spec.out_tree());
    if (spec.out_specs_size() == 0 && spec.out_rules_size() == 0) {
      return absl::InvalidArgumentError(
          "out_specs is missing: give one spec for all outputs, a tree "
          "prefix of them, or rules (--out-rules)");
    }
    SHARD_ASSIGN_OR_RETURN(
        std::vector<v1::PartitionSpec> out,
        LeafSpecs(spec.out_tree(), "outputs", spec.out_specs(),
                  spec.has_out_spec_tree() ? &spec.out_spec_tree() : nullptr,
                  spec.out_rules(), "out_specs", "out_rules",
                  &job.out_spec_names));
    flat.clear_out_specs();
    for (auto& s : out) *flat.add_out_specs() = std::move(s);
  } else if (spec.has_out_spec_tree() || spec.out_rules_size() > 0) {
    return absl::InvalidArgumentError(
        "an out_specs tree or out_rules need out_tree (the structure of the "
        "outputs)");
  }
  // States without a spec of their own.
  if (spec.state_rules_size() > 0) {
    SHARD_ASSIGN_OR_RETURN(std::vector<TreeRule> rules,
                           RulesFromProto(spec.state_rules(), "state_rules"));
    for (v1::StateBinding& b : *flat.mutable_states()) {
      if (b.has_spec()) continue;
      auto rule = MatchTreeRule(rules, b.slot());
      if (!rule.ok()) {
        return Annotate(rule.status(),
                        absl::StrCat("state_rules: state '", b.slot(), "'"));
      }
      *b.mutable_spec() = SpecToProto(rules[*rule].spec);
    }
  }
  flat.clear_in_spec_tree();
  flat.clear_in_rules();
  flat.clear_out_spec_tree();
  flat.clear_out_rules();
  flat.clear_state_rules();
  return job;
}

std::vector<std::string> ArgLabels(const TreeJob& job) {
  std::vector<std::string> labels;
  if (!job.has_trees) {
    for (int i = 0; i < job.flat.args_size(); ++i) {
      labels.push_back(absl::StrCat("args[", i, "]"));
    }
    return labels;
  }
  for (const TreeLeafPath& leaf : job.arg_leaves) {
    labels.push_back(absl::StrCat("args", leaf.key));
  }
  return labels;
}

std::vector<std::string> OutputLabels(const TreeJob& job) {
  std::vector<std::string> labels;
  for (const TreeLeafPath& leaf : job.out_leaves) {
    labels.push_back(absl::StrCat("out", leaf.key));
  }
  return labels;
}

absl::StatusOr<JobPlan> PlanTreeJob(const TreeJob& job,
                                    const FunctionLookup& lookup,
                                    const ResidentIndex* index,
                                    program::ProgramCache* programs) {
  if (!job.has_trees) return PlanJob(job.flat, lookup, index, programs);
  const std::vector<std::string> values = ArgLabels(job);
  const bool outputs_known = job.flat.has_out_tree();
  auto outputs_match = [&](const v1::FunctionSignature& fn) -> absl::Status {
    if (!outputs_known || fn.num_outputs() < 0 ||
        static_cast<size_t>(fn.num_outputs()) == job.out_spec_names.size()) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("out_tree has ", job.out_spec_names.size(), " leaves but ",
                     fn.name(), " has ", fn.num_outputs(), " outputs"));
  };
  // A native function's outputs are known before planning (a program's
  // once it is checked).
  if (auto fn = lookup(job.flat.function()); fn.ok() && fn->program().empty()) {
    SHARD_RETURN_IF_ERROR(outputs_match(*fn));
  }
  auto plan = PlanJob(job.flat, lookup, index, programs);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        RenameLeaves(plan.status().message(),
                                     {{"args", &values},
                                      {"in_specs", &job.in_spec_names},
                                      {"out_specs", &job.out_spec_names}}));
  }
  SHARD_RETURN_IF_ERROR(outputs_match(plan->function));
  return plan;
}

void AddTreeResult(const v1::JobSpec& flat, const JobPlan& plan,
                   v1::JobResult* result) {
  if (flat.has_out_tree()) *result->mutable_output_tree() = flat.out_tree();
  for (const PartitionSpec& s : plan.out_specs) {
    *result->add_output_specs() = SpecToProto(s);
  }
}

}  // namespace shardmap
