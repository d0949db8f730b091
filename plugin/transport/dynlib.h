// A system library opened at run time (dlopen), so the plugin loads on hosts that lack it and the transport
// that needs it reports why it is unavailable instead of the whole plugin failing to load.
#pragma once
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <utility>

namespace icn::dynlib {

class Library {
 public:
  Library() = default;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  Library(Library&& o) noexcept : h_(std::exchange(o.h_, nullptr)), soname_(std::move(o.soname_)) {}
  ~Library() {
    if (h_) dlclose(h_);
  }

  // RTLD_LOCAL: the library's symbols stay out of the global scope, where they could satisfy someone else's
  // references (NCCL's own verbs loader, a second plugin) by accident.
  bool open(const char* soname, std::string* why) {
    soname_ = soname;
    h_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (h_) return true;
    const char* err = dlerror();
    // A missing file is the common case on hosts without the library: say it plainly. Anything else
    // (a dependency missing, a wrong architecture) keeps the loader's words.
    if (!err || strstr(err, "No such file"))
      *why = soname_ + " not found";
    else
      *why = err;
    return false;
  }

  // Resolves `name` (at symbol version `version` when given, as the linker would have bound it) into *fn.
  template <typename F>
  bool resolve(F** fn, const char* name, const char* version, std::string* why) const {
    void* p = version ? dlvsym(h_, name, version) : dlsym(h_, name);
    *fn = reinterpret_cast<F*>(p);
    if (p) return true;
    *why = soname_ + " lacks " + name + (version ? std::string("@") + version : std::string());
    return false;
  }

  const std::string& soname() const { return soname_; }

 private:
  void* h_ = nullptr;
  std::string soname_;
};

}  // namespace icn::dynlib
