// Process-wide UCP context for the UCX transport (RAII). The user's UCX_* variables are honoured:
// ucp_config_read reads them; ICN only fills gaps the user left (ICN_UCX_TLS, ICN_UCX_RNDV_THRESH).
#pragma once
#include "transport/ucx/ucx_lib.h"

#include <memory>
#include <string>

#include "core/status.h"

namespace icn::ucx {

class Context {
 public:
  static Status create(std::unique_ptr<Context>* out, std::string* why);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ucp_context_h get() const { return ctx_; }
  bool supportsCuda() const { return cuda_; }
  const std::string& version() const { return version_; }

 private:
  Context() = default;
  ucp_context_h ctx_ = nullptr;
  bool cuda_ = false;
  std::string version_;
};

const char* statusString(ucs_status_t s);

}  // namespace icn::ucx
