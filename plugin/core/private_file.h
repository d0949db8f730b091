// Files only this user may read or replace: per-user directories (0700, owned by us, never a symlink) and atomic
// rewrites through an unpredictable temporary name (mkstemp: O_EXCL, mode 0600) renamed over the target. Another
// local user can then neither read what we write nor plant a link that makes us write elsewhere.
#pragma once
#include <sys/types.h>

#include <string>
#include <string_view>

#include "core/status.h"

namespace icn::privfile {

// Creates `dir` (and missing parents, 0700) and checks it: a real directory owned by this user with no group or
// other access. A directory that fails the check is an error (never used, never chmod-ed behind its owner's back).
Status ensureDir(const std::string& dir, std::string* why);
// $XDG_RUNTIME_DIR/icn when XDG_RUNTIME_DIR is set, else /tmp/icn-<uid>; created and checked as ensureDir().
Status runtimeDir(std::string* dir, std::string* why);
// $XDG_CACHE_HOME/icn, else $HOME/.cache/icn (the passwd entry's home when HOME is unset); created and checked.
Status cacheDir(std::string* dir, std::string* why);
// Writes `data` to a fresh mkstemp file next to `path` (created 0600, then given `mode`), optionally fsyncs it,
// and renames it over `path`. The temporary name never ends like `path` does, so readers that pick files by
// suffix (Prometheus' textfile collector) skip it. The temporary file is removed on any failure.
Status writeAtomic(const std::string& path, std::string_view data, bool sync, std::string* why, mode_t mode = 0600);

}  // namespace icn::privfile
