// The shardmap SDK's version and ABI version.
//
// SHARDMAP_SDK_ABI_VERSION changes whenever a type a plugin and the worker
// share (the headers in include/shardmap/) changes its layout or virtual
// functions. A worker refuses, at start, a plugin built against another ABI
// version (exit 78, both versions named).
//
// ABI 1: the first SDK. ABI 2: Context::AllocateUninitialized.
#ifndef SHARDMAP_SDK_VERSION_H_
#define SHARDMAP_SDK_VERSION_H_

#define SHARDMAP_SDK_VERSION "0.1.0"
#define SHARDMAP_SDK_ABI_VERSION 2

#endif  // SHARDMAP_SDK_VERSION_H_
