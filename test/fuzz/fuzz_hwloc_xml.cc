// libFuzzer harness for the topology reader: the input is an hwloc XML document (as given with
// `icn-topo --hwloc-xml` or recorded by the shim). It is loaded through hwloc (not instrumented) into our
// Machine model, classified, rendered as NCCL topology XML and checked by the doctor: any document must
// load or be refused with a reason, and whatever loads must render without fault.
//
// hwloc 2.9 itself crashes (NULL dereference in hwloc_topology_load) on some malformed documents; see
// docs/readme/reliability.md. So each input is first loaded by hwloc alone in a forked child: inputs that
// kill the child are counted and skipped, the rest run through our code in this process (where libFuzzer
// collects coverage). Set ICN_FUZZ_HWLOC_NOFORK=1 to reproduce hwloc's own crashes in-process.
#include <hwloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/log.h"
#include "topo/doctor.h"
#include "topo/nccl_xml.h"
#include "topo/probe.h"

namespace {
void quietSink(int, unsigned long, const char*, int, const char*, ...) {}

bool g_fork = true;
long g_hwlocCrashes = 0;

// True when hwloc alone survives loading the document.
bool hwlocSurvives(const std::string& path) {
  if (!g_fork) return true;
  pid_t pid = fork();
  if (pid == 0) {
    // Die quietly: libFuzzer's and ASan's handlers would report (and save) hwloc's crash as ours.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) == 0 && hwloc_topology_set_xml(t, path.c_str()) == 0) hwloc_topology_load(t);
    _exit(0);  // no cleanup: hwloc's leaks on broken input are not ours to report
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  icn::setLogSink(&quietSink);
  setenv("HWLOC_HIDE_ERRORS", "2", 1);  // hwloc's own complaints about broken XML, by the thousand
  // No hwloc plugins: its built-in XML parser, and no libxml2 plugin loaded and unloaded per run (that plugin
  // leaks on malformed documents, and LeakSanitizer cannot name code that was unloaded).
  setenv("HWLOC_PLUGINS_PATH", "/nonexistent", 1);
  const char* nofork = getenv("ICN_FUZZ_HWLOC_NOFORK");
  g_fork = !(nofork && *nofork == '1');
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("hwloc-xml", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t off = 0;
  while (off < size) {
    ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  icn::topo::ProbeOptions opt;
  opt.hwlocXml = "/proc/self/fd/" + std::to_string(fd);
  if (!hwlocSurvives(opt.hwlocXml)) {
    if (++g_hwlocCrashes == 1) atexit([] { fprintf(stderr, "fuzz_hwloc_xml: hwloc itself crashed on %ld inputs\n", g_hwlocCrashes); });
    close(fd);
    return -1;  // hwloc's crash, not ours: keep it out of the corpus
  }
  opt.useNvml = opt.useVerbs = false;
  opt.env = std::map<std::string, std::string>{};
  icn::topo::Machine m;
  std::string err;
  if (icn::topo::probe(opt, m, err) == icn::Status::Ok) {
    std::string xml;
    if (icn::topo::writeTopologyXml(m, xml, err) == icn::Status::Ok && xml.empty()) abort();
    icn::topo::runDoctor(m);
  } else if (err.empty()) {
    abort();  // a refusal must say why
  }
  close(fd);
  return 0;
}
