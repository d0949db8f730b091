#include "core/private_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace icn::privfile {
namespace {

Status fail(std::string* why, const std::string& what) {
  if (why) *why = what;
  return Status::SystemError;
}

std::string homeDir() {
  const char* h = std::getenv("HOME");
  if (h && *h) return h;
  std::vector<char> buf(16384);
  passwd pw{}, *res = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &res) == 0 && res && res->pw_dir) return res->pw_dir;
  return "";
}

}  // namespace

Status ensureDir(const std::string& dir, std::string* why) {
  if (dir.empty() || dir[0] != '/') return fail(why, "'" + dir + "' is not an absolute path");
  // Parents are created 0700 too when missing (~/.cache on a fresh account); existing parents are left alone.
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return fail(why, part + ": mkdir: " + strerror(errno));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return fail(why, dir + ": " + strerror(errno));
  if (!S_ISDIR(st.st_mode)) return fail(why, dir + ": not a directory (a symlink or file is not followed)");
  if (st.st_uid != getuid()) return fail(why, dir + ": owned by uid " + std::to_string(st.st_uid) + ", not us");
  if (st.st_mode & 077) {
    char mode[8];
    snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return fail(why, dir + ": mode " + mode + " lets group or others in; expected 0700");
  }
  return Status::Ok;
}

Status runtimeDir(std::string* dir, std::string* why) {
  const char* x = std::getenv("XDG_RUNTIME_DIR");
  *dir = (x && x[0] == '/') ? std::string(x) + "/icn" : "/tmp/icn-" + std::to_string(getuid());
  return ensureDir(*dir, why);
}

Status cacheDir(std::string* dir, std::string* why) {
  const char* x = std::getenv("XDG_CACHE_HOME");
  if (x && x[0] == '/') {
    *dir = std::string(x) + "/icn";
  } else {
    std::string home = homeDir();
    if (home.empty()) return fail(why, "no XDG_CACHE_HOME and no home directory");
    *dir = home + "/.cache/icn";
  }
  return ensureDir(*dir, why);
}

Status writeAtomic(const std::string& path, std::string_view data, bool sync, std::string* why, mode_t mode) {
  std::string tmpl = path + ".XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = mkostemp(name.data(), O_CLOEXEC);  // O_CREAT|O_EXCL, 0600: never follows or reuses an existing name
  if (fd < 0) return fail(why, tmpl + ": " + strerror(errno));
  size_t off = 0;
  bool ok = mode == 0600 || fchmod(fd, mode) == 0;
  while (ok && off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) off += static_cast<size_t>(n);
  }
  int err = ok ? 0 : errno;
  if (ok && sync && fsync(fd) != 0) {
    ok = false;
    err = errno;
  }
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(name.data(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(name.data());
    return fail(why, path + ": " + strerror(err));
  }
  return Status::Ok;
}

}  // namespace icn::privfile
