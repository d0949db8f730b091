// A system library opened at run time (dlopen), so the plugin loads on hosts that lack it and the transport
// that needs it reports why it is unavailable instead of the whole plugin failing to load.
#pragma once
#include <dlfcn.h>

#include <cstring>
#include <mutex>
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

// Libraries and what was resolved from them (T), opened on first use and kept for the life of the process:
// objects made through them may be released from static destructors in any order, and unloading a library
// under them would crash. The first failure's reason is kept and handed to every later caller.
template <typename T>
class Resident {
 public:
  // open(T*, why) opens and resolves; called once, by the first caller.
  template <typename Open>
  const T* get(Open open, std::string* why) {
    std::call_once(once_, [&] {
      auto* t = new T();
      if (open(t, &error_))
        loaded_ = t;
      else
        delete t;
    });
    if (!loaded_ && why) *why = error_;
    return loaded_;
  }
  // Only after get() succeeded.
  const T& operator*() const { return *loaded_; }
  const T* operator->() const { return loaded_; }

 private:
  std::once_flag once_;
  const T* loaded_ = nullptr;
  std::string error_;
};

}  // namespace icn::dynlib
