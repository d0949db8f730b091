// `icn-topo doctor`: rules over the Machine model. Each finding carries evidence, consequence and fix.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "topo/model.h"

namespace icn::topo {

enum class Severity { Info, Warning, Error };
const char* toString(Severity s);

struct Finding {
  std::string rule;  // stable id, e.g. "nvlink-down"
  Severity severity = Severity::Warning;
  std::string subject;  // "GPU1 0000:0a:00.0"
  std::string evidence;
  std::string consequence;
  std::string fix;
};

struct DoctorOptions {
  std::optional<CpuSet> appCpus;  // cores the GPU processes run on (default: this process's binding, if any)
  std::optional<int> gpu;         // GPU the checked process drives (default: LOCAL_RANK via CUDA_VISIBLE_DEVICES)
};

std::vector<Finding> runDoctor(const Machine& m, const DoctorOptions& opt = {});
// Rule ids in evaluation order (for docs and tests).
const std::vector<std::string>& doctorRules();
std::string formatFindings(const std::vector<Finding>& f);
// Non-zero when a Warning or Error was found.
int doctorExitCode(const std::vector<Finding>& f);

// Rule groups (doctor.cc: placement and links; doctor_net.cc: GPUDirect, NIC, environment).
void checkPlacement(const Machine& m, const DoctorOptions& o, std::vector<Finding>& out);
void checkLinks(const Machine& m, std::vector<Finding>& out);
void checkGdr(const Machine& m, std::vector<Finding>& out);
void checkNics(const Machine& m, const DoctorOptions& o, std::vector<Finding>& out);
void checkEnv(const Machine& m, std::vector<Finding>& out);

// Helpers shared by the rule files.
std::string gpuName(const Machine& m, size_t g);
bool envTrue(const Machine& m, const char* k);
std::optional<CpuSet> effectiveAppCpus(const Machine& m, const DoctorOptions& o);

}  // namespace icn::topo
