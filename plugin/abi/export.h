// Marks a symbol NCCL (or the dynamic linker, for the preload shim) looks up by name: C linkage and default
// visibility. Everything else is built with -fvisibility=hidden; each library's version script lists these.
#pragma once

#define ICN_EXPORT extern "C" __attribute__((visibility("default")))
