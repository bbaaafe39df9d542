// Plugins: shared libraries built against the SDK (include/shardmap/) whose
// functions the worker registers at start, next to the built-in ones
// (shardmap-worker --plugin PATH, also $SHARDMAP_PLUGINS).
//
// A plugin is loaded once and never unloaded. Every problem refuses the
// start: the worker exits 78 with the file and the problem named.
//
// Not thread-safe: called once at start, before the registry is shared.
#ifndef SHARDMAP_WORKER_PLUGIN_LOADER_H_
#define SHARDMAP_WORKER_PLUGIN_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/functions/function_registry.h"

namespace shardmap {

// The entry points SHARDMAP_PLUGIN defines (shardmap/plugin.h).
struct PluginEntry {
  int (*abi_version)() = nullptr;
  const char* (*sdk_version)() = nullptr;  // may be null
  void (*register_functions)(void* registrar) = nullptr;
};

// The --plugin paths, then those of `env` ($SHARDMAP_PLUGINS: paths
// separated by ':', empty ones skipped; null: none).
std::vector<std::string> PluginPaths(const std::vector<std::string>& flags,
                                     const char* env);

// Checks `entry`'s ABI version against the worker's, runs its registration
// and registers every function it added with origin "plugin <path>".
// FAILED_PRECONDITION naming `path` for an ABI mismatch (both versions), a
// registration that throws or adds nothing, a malformed signature, or a
// name some other function (built-in or plugin) has.
absl::Status RegisterPlugin(const std::string& path, const PluginEntry& entry,
                            FunctionRegistry& registry);

// dlopen()s `path` and RegisterPlugin()s it. FAILED_PRECONDITION naming the
// file for one that does not exist or cannot be read or loaded (dlerror's
// text), or that lacks the entry points.
absl::Status LoadPlugin(const std::string& path, FunctionRegistry& registry);

// LoadPlugin for each, in order; the first error.
absl::Status LoadPlugins(const std::vector<std::string>& paths,
                         FunctionRegistry& registry);

}  // namespace shardmap

#endif  // SHARDMAP_WORKER_PLUGIN_LOADER_H_
