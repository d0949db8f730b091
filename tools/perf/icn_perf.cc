// icn-perf: bandwidth and latency between two processes through the NCCL net plugin API, like
// ib_write_bw / ib_write_lat but exercising exactly what NCCL's proxy calls.
//   icn-perf                         both ranks on this host (forks)
//   icn-perf --server [--port P]     rank 0 of a two-host run; prints the bootstrap port
//   icn-perf --client HOST:P         rank 1
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>

#include "core/json.h"
#include "perf_session.h"

using namespace icn;

namespace {

void usage() {
  fprintf(stderr,
          "usage: icn-perf [--plugin PATH (default: ICN_PLUGIN_PATH, else the library installed or built next to icn-perf)]\n"
          "                 [--min BYTES] [--max BYTES] [--window N] [--lat-iters N] [--bw-bytes BYTES]\n"
          "                 [--exchange [--conns N] [--slice-us US]]\n"
          "                [--bw-only | --lat-only] [--json FILE] [--server [--port P] | --client HOST:PORT]\n"
          "Sizes accept K/M/G suffixes. Without --server/--client both ranks run on this host.\n"
          "--exchange: NCCL's point-to-point pattern instead of one-way bandwidth: both ranks send and receive at\n"
          "once over N connections per direction (default 1), --window requests in flight on each (try 8, as\n"
          "NCCL's steps), tested oldest first; reports bandwidth per direction and time per message.\n"
          "--slice-us: step buffers fill and drain only in the rank's turn of an emulated GPU that the two ranks\n"
          "time-share in turns of US microseconds (as two processes on one GPU); needs one clock for both ranks.\n");
}

// The plugin next to this binary, never a path fixed at build time: --plugin or ICN_PLUGIN_PATH first,
// then an installed layout (bin/ and lib/ side by side), the build tree (tools/perf/ and plugin/), the
// same folder, and last the dynamic loader's own search path (LD_LIBRARY_PATH, ld.so.cache).
std::string findPlugin() {
  if (const char* env = getenv("ICN_PLUGIN_PATH"); env && *env) return env;
  static const char kName[] = "libnccl-net-icn.so";
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    std::string dir(self);
    dir.erase(dir.rfind('/'));
    for (const char* rel : {"/../lib/", "/../lib64/", "/../lib/x86_64-linux-gnu/", "/../lib/aarch64-linux-gnu/",
                            "/../../plugin/", "/"}) {
      std::string candidate = dir + rel + kName;
      if (access(candidate.c_str(), R_OK) == 0) return candidate;
    }
  }
  return kName;
}

size_t parseSize(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
  }
  return static_cast<size_t>(v);
}

int rankMain(int rank, netapi::Pipe& peer, const perf::Options& o) {
  netapi::Plugin p;
  std::string err;
  if (!p.load(o.plugin, &err) || p.init() != ncclSuccess) {
    fprintf(stderr, "rank %d: cannot load/init %s: %s\n", rank, o.plugin.c_str(), err.c_str());
    return 2;
  }
  ncclNetProperties_v11_t props{};
  p.net->getProperties(0, &props);
  perf::Session s(rank, p, peer, o);
  std::vector<perf::Point> pts;
  if (!s.connect(&err) || !s.run(&pts, &err)) {
    fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
    return 1;
  }
  s.close();
  if (rank != 0) return 0;
  printf("# icn-perf through %s, device %s (%d Mbps)\n", p.net->name, props.name, props.speed);
  if (o.exchange)
    printf("# exchange: both directions at once, %d connection(s) per direction, %d in flight on each%s\n", o.conns,
           o.window, o.sliceUs ? (", GPU turns of " + std::to_string(o.sliceUs) + " us").c_str() : "");
  printf("%12s %12s %12s %12s %12s%s\n", "bytes", "bw_GB/s", "lat_p50_us", "lat_p99_us", "lat_min_us",
         o.exchange ? "       msg_us       cpu_us" : "");
  for (auto& pt : pts) {
    printf("%12zu %12.6f %12.2f %12.2f %12.2f", pt.bytes, pt.gbps, pt.p50us, pt.p99us, pt.minus);
    if (o.exchange) printf(" %12.2f %12.2f", pt.msgUs, pt.cpuUs);
    printf("\n");
  }
  if (!o.json.empty()) {
    FILE* f = fopen(o.json.c_str(), "w");
    if (!f) return perror(o.json.c_str()), 1;
    // Names come from the plugin: quoted as JSON strings.
    fprintf(f, "{\"tool\":\"icn-perf\",\"plugin\":%s,\"device\":%s,\"speed_mbps\":%d,\"points\":[",
            icn::json::quote(p.net->name).c_str(), icn::json::quote(props.name ? props.name : "").c_str(), props.speed);
    for (size_t i = 0; i < pts.size(); i++)
      fprintf(f,
              "%s{\"bytes\":%zu,\"bw_gbps\":%.6f,\"lat_p50_us\":%.3f,\"lat_p99_us\":%.3f,\"lat_min_us\":%.3f,"
              "\"msg_us\":%.3f,\"cpu_us\":%.3f}",
              i ? "," : "", pts[i].bytes, pts[i].gbps, pts[i].p50us, pts[i].p99us, pts[i].minus, pts[i].msgUs,
              pts[i].cpuUs);
    fprintf(f, "]}\n");
    fclose(f);
  }
  return 0;
}

int bootstrapServer(int port) {
  int l = socket(AF_INET6, SOCK_STREAM, 0);
  int one = 1, zero = 0;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(port));
  if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(l, 1)) return perror("bootstrap listen"), -1;
  socklen_t len = sizeof a;
  getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  printf("# waiting for the client on port %d\n", ntohs(a.sin6_port));
  fflush(stdout);
  int c = accept(l, nullptr, nullptr);
  close(l);
  return c;
}

int bootstrapClient(const std::string& target) {
  size_t colon = target.rfind(':');
  if (colon == std::string::npos) return -1;
  std::string host = target.substr(0, colon), port = target.substr(colon + 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  // The server may start a moment after the client (two hosts, two shells): retry for a while.
  int fd = -1;
  for (int attempt = 0; attempt < 300 && fd < 0; attempt++) {
    if (attempt) usleep(100 * 1000);
    for (addrinfo* r = res; r && fd < 0; r = r->ai_next) {
      fd = socket(r->ai_family, SOCK_STREAM, 0);
      if (connect(fd, r->ai_addr, r->ai_addrlen) != 0) close(fd), fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  perf::Options o;
  o.plugin = findPlugin();
  bool server = false;
  int port = 0;
  std::string client;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(), exit(2);
      return argv[++i];
    };
    if (a == "--plugin") o.plugin = next();
    else if (a == "--min") o.minBytes = parseSize(next());
    else if (a == "--max") o.maxBytes = parseSize(next());
    else if (a == "--window") o.window = std::clamp(atoi(next()), 1, 32);
    else if (a == "--lat-iters") o.latIters = std::max(10, atoi(next()));
    else if (a == "--bw-bytes") o.bwBytes = static_cast<double>(parseSize(next()));
    else if (a == "--bw-only") o.lat = false;
    else if (a == "--lat-only") o.bw = false;
    else if (a == "--exchange") o.exchange = true;
    else if (a == "--conns") o.conns = std::clamp(atoi(next()), 1, 16);
    else if (a == "--slice-us") o.sliceUs = std::max(0, atoi(next()));
    else if (a == "--json") o.json = next();
    else if (a == "--server") server = true;
    else if (a == "--port") port = atoi(next());
    else if (a == "--client") client = next();
    else return usage(), a == "--help" || a == "-h" ? 0 : 2;
  }
  if (o.minBytes == 0 || o.minBytes > o.maxBytes) return usage(), 2;
  if (server || !client.empty()) {
    int fd = server ? bootstrapServer(port) : bootstrapClient(client);
    if (fd < 0) return fprintf(stderr, "bootstrap connection failed\n"), 1;
    netapi::Pipe peer(fd);
    return rankMain(server ? 0 : 1, peer, o);
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return perror("socketpair"), 1;
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    close(sv[0]);
    netapi::Pipe peer(sv[1]);
    _exit(rankMain(1, peer, o));
  }
  close(sv[1]);
  int rc;
  {
    netapi::Pipe peer(sv[0]);
    rc = rankMain(0, peer, o);
  }
  int st = 0;
  waitpid(child, &st, 0);
  return rc != 0 ? rc : (WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}
