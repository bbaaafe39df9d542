#include "worker/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shardmap/plugin.h"
#include "worker/functions/function_registry.h"

namespace shardmap {
namespace {

absl::Status Refuse(const std::string& path, absl::string_view problem) {
  return absl::FailedPreconditionError(
      absl::StrCat("plugin ", path, ": ", problem));
}

// Keeps what the plugin's registration adds, for checking afterwards.
class CollectingRegistrar final : public sdk::Registrar {
 public:
  void Add(sdk::Function function) override {
    functions_.push_back(std::move(function));
  }
  std::vector<sdk::Function>& functions() { return functions_; }

 private:
  std::vector<sdk::Function> functions_;
};

}  // namespace

std::vector<std::string> PluginPaths(const std::vector<std::string>& flags,
                                     const char* env) {
  std::vector<std::string> paths = flags;
  if (env != nullptr) {
    for (absl::string_view p : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      paths.emplace_back(p);
    }
  }
  return paths;
}

absl::Status RegisterPlugin(const std::string& path, const PluginEntry& entry,
                            FunctionRegistry& registry) {
  const int abi = entry.abi_version();
  if (abi != SHARDMAP_SDK_ABI_VERSION) {
    const char* sdk = entry.sdk_version != nullptr ? entry.sdk_version() : "?";
    return Refuse(path, absl::StrCat("built against SDK ABI version ", abi,
                                     " (SDK ", sdk != nullptr ? sdk : "?",
                                     "), but this worker has ABI version ",
                                     SHARDMAP_SDK_ABI_VERSION, " (SDK ",
                                     SHARDMAP_SDK_VERSION,
                                     "); rebuild the plugin against this SDK"));
  }
  CollectingRegistrar registrar;
  try {
    entry.register_functions(&registrar);
  } catch (const std::exception& e) {
    return Refuse(path, absl::StrCat("its registration threw: ", e.what()));
  } catch (...) {
    return Refuse(path, "its registration threw an exception");
  }
  if (registrar.functions().empty()) {
    return Refuse(path, "it registers no functions");
  }
  const std::string origin = absl::StrCat("plugin ", path);
  for (sdk::Function& fn : registrar.functions()) {
    if (absl::Status s = registry.Register(std::move(fn), origin); !s.ok()) {
      return Refuse(path, s.message());
    }
  }
  return absl::OkStatus();
}

absl::Status LoadPlugin(const std::string& path, FunctionRegistry& registry) {
  if (access(path.c_str(), F_OK) != 0) {
    return Refuse(path, "no such file");
  }
  if (access(path.c_str(), R_OK) != 0) {
    return Refuse(path, "the file is not readable");
  }
  // Never closed: the registry keeps the plugin's kernels.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return Refuse(path, absl::StrCat("cannot load it as a shared library: ",
                                     error != nullptr ? error : "unknown"));
  }
  PluginEntry entry;
  entry.abi_version =
      reinterpret_cast<int (*)()>(dlsym(handle, "shardmap_plugin_abi_version"));
  entry.sdk_version = reinterpret_cast<const char* (*)()>(
      dlsym(handle, "shardmap_plugin_sdk_version"));
  entry.register_functions = reinterpret_cast<void (*)(void*)>(
      dlsym(handle, "shardmap_plugin_register"));
  if (entry.abi_version == nullptr || entry.register_functions == nullptr) {
    return Refuse(path,
                  "it has no registration symbol (shardmap_plugin_register / "
                  "shardmap_plugin_abi_version); define its functions in a "
                  "SHARDMAP_PLUGIN(registrar) { ... } block");
  }
  return RegisterPlugin(path, entry, registry);
}

absl::Status LoadPlugins(const std::vector<std::string>& paths,
                         FunctionRegistry& registry) {
  for (const std::string& path : paths) {
    if (absl::Status s = LoadPlugin(path, registry); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace shardmap
