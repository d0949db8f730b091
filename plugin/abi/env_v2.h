// ncclEnv_v2_t (NCCL 2.30.7+; 2.28.7-2.30.4 know only v1): v1's table whose init also receives NCCL's logger.
// NCCL looks up "ncclEnvPlugin_v2" first, then "ncclEnvPlugin_v1". A returned pointer must stay valid until
// finalize or the next getEnv of the same name.
#pragma once
#include <cstddef>
#include <cstdint>

#include "abi/nccl_common.h"

extern "C" {
typedef struct {
  const char* name;
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char* suffix,
                       ncclDebugLogger_t logFunction);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} ncclEnv_v2_t;
}

static_assert(sizeof(ncclEnv_v2_t) == 4 * sizeof(void*), "ncclEnv_v2_t: name + 3 function pointers");
static_assert(offsetof(ncclEnv_v2_t, init) == sizeof(void*), "ncclEnv_v2_t.init");
static_assert(offsetof(ncclEnv_v2_t, finalize) == 2 * sizeof(void*), "ncclEnv_v2_t.finalize");
static_assert(offsetof(ncclEnv_v2_t, getEnv) == 3 * sizeof(void*), "ncclEnv_v2_t.getEnv");
