// ncclEnv_v1_t (NCCL 2.28.7+ environment plugin), written from NCCL's published plugin header (facts, not code).
// NCCL_ENV_PLUGIN=<x> makes NCCL dlopen "<x>", then "libnccl-env-<x>.so"; unset: "libnccl-env.so".
// It then looks up the data symbol "ncclEnvPlugin_v1", calls init once, and routes every ncclGetEnv through
// getEnv. A returned pointer must stay valid until finalize or the next getEnv of the same name.
#pragma once
#include <cstddef>
#include <cstdint>

#include "abi/nccl_common.h"

extern "C" {
typedef struct {
  const char* name;
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char* suffix);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} ncclEnv_v1_t;
}

static_assert(sizeof(ncclEnv_v1_t) == 4 * sizeof(void*), "ncclEnv_v1_t: name + 3 function pointers");
static_assert(offsetof(ncclEnv_v1_t, name) == 0, "ncclEnv_v1_t.name");
static_assert(offsetof(ncclEnv_v1_t, init) == sizeof(void*), "ncclEnv_v1_t.init");
static_assert(offsetof(ncclEnv_v1_t, finalize) == 2 * sizeof(void*), "ncclEnv_v1_t.finalize");
static_assert(offsetof(ncclEnv_v1_t, getEnv) == 3 * sizeof(void*), "ncclEnv_v1_t.getEnv");
