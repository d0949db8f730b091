// Net device-offload handle shared by net API v9..v11 (we only ever report host devices).
#pragma once
#include "abi/nccl_common.h"

extern "C" {
typedef int ncclNetDeviceType;  // enum in NCCL: HOST=0, UNPACK=1

typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v9_t;
}

static_assert(sizeof(ncclNetDeviceHandle_v11_t) == 32);
static_assert(offsetof(ncclNetDeviceHandle_v11_t, handle) == 8);
static_assert(offsetof(ncclNetDeviceHandle_v11_t, needsProxyProgress) == 24);
