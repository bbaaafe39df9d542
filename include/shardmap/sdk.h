// The shardmap SDK: everything a native function (built-in or plugin)
// needs. See docs/PLUGINS.md.
#ifndef SHARDMAP_SDK_SDK_H_
#define SHARDMAP_SDK_SDK_H_

#include "shardmap/context.h"
#include "shardmap/function.h"
#include "shardmap/plugin.h"
#include "shardmap/tensor.h"
#include "shardmap/version.h"

#endif  // SHARDMAP_SDK_SDK_H_
