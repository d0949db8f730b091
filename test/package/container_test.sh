#!/usr/bin/env bash
# The cluster image recipe (packaging/container/Dockerfile) as far as a machine without a container engine
# can take it:
#   1. the Dockerfile's structure: a build and a runtime stage, every COPY source exists (in the repository or
#      in what the build stage's script writes), every RUN is one of our scripts, NCCL_NET_PLUGIN=icn is set,
#      the start command is a tool the package installs;
#   2. the build stage's script packages this build tree (the image configures its own, without tests);
#   3. the runtime stage's script in a minimal Debian 12 root (debootstrap, cached): installs the .deb and
#      its transport libraries with apt from the mirror, then loads the plugin and moves data.
# Not run here: the CUDA base images (Ubuntu 22.04) and `docker build` itself.
#   container_test.sh SOURCE_DIR BUILD_DIR [CACHE_DIR]   exit 77 (skipped) without root/debootstrap/chroot
set -euo pipefail
src=$(realpath "$1") build=$(realpath "$2")
cache=${3:-$build/rootfs-cache}
dir=$src/packaging/container
skip() { echo "SKIP: $*"; exit 77; }
fail=0

echo "== Dockerfile"
python3 - "$src" "$build" <<'PY' || fail=1
import os, re, shlex, subprocess, sys, tempfile
src, build = sys.argv[1], sys.argv[2]
path = os.path.join(src, "packaging/container/Dockerfile")
lines, cur = [], ""
for raw in open(path):
    line = raw.rstrip("\n")
    if not cur and (not line.strip() or line.lstrip().startswith("#")):
        continue
    cur += line[:-1] + " " if line.endswith("\\") else line
    if not line.endswith("\\"):
        lines.append(cur.strip()); cur = ""
bad = []
def need(cond, what):
    print(("  ok: " if cond else "  FAIL: ") + what)
    if not cond: bad.append(what)
stages, stage = {}, None
for l in lines:
    op, _, rest = l.partition(" ")
    op = op.upper()
    if op == "FROM":
        m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
        stage = m.group(2) or str(len(stages))
        stages[stage] = {"from": m.group(1), "copy": [], "run": [], "env": {}, "cmd": None}
    elif op == "COPY":
        stages[stage]["copy"].append(shlex.split(rest))
    elif op == "RUN":
        stages[stage]["run"].append(rest)
    elif op == "ENV":
        for kv in shlex.split(rest):
            k, _, v = kv.partition("="); stages[stage]["env"][k] = v
    elif op == "CMD":
        stages[stage]["cmd"] = rest
need(list(stages) == ["build", "runtime"], "two stages, build then runtime: %s" % list(stages))
b, r = stages.get("build"), stages.get("runtime")
if not (b and r):
    sys.exit(1)
need(re.search(r"nvidia/cuda:.*-devel-", b["from"]) is not None, "build stage FROM a CUDA devel image: " + b["from"])
need(re.search(r"nvidia/cuda:.*-runtime-", r["from"]) is not None, "runtime stage FROM a CUDA runtime image: " + r["from"])
# RUN lines: each runs one of our scripts, which must exist and be executable.
script_args = {}
for st in (b, r):
    for run in st["run"]:
        first = shlex.split(run.split("&&")[0])
        script = first[0]
        rel = script.replace("/src/", "", 1) if script.startswith("/src/") else None
        if rel is None:  # a script copied in by a COPY of this stage
            for c in st["copy"]:
                if not c[0].startswith("--from") and os.path.basename(c[0]) == os.path.basename(script):
                    rel = c[0]
        ok = rel is not None and os.access(os.path.join(src, rel), os.X_OK)
        need(ok, "RUN %s is an executable script of the repository (%s)" % (script, rel))
        script_args[os.path.basename(script)] = first[1:]
# COPY sources: from the build context (the repository) or from the build stage's output directory.
out_dir = [a for a in script_args.get("build-deb.sh", []) if not a.startswith("--")][-1:]
for c in b["copy"] + r["copy"]:
    if c[0].startswith("--from="):
        need(c[1].rstrip("/") == (out_dir[0].rstrip("/") if out_dir else None),
             "COPY --from=build %s is build-deb.sh's output directory" % c[1])
    else:
        need(os.path.exists(os.path.join(src, c[0])), "COPY %s exists in the repository" % c[0])
need(r["env"].get("NCCL_NET_PLUGIN") == "icn", "runtime ENV NCCL_NET_PLUGIN=icn")
# The start command is a program the package installs.
with tempfile.TemporaryDirectory() as d:
    subprocess.run(["cmake", "--install", build, "--prefix", d], check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, DESTDIR=""))
    cmd = r["cmd"]
    prog = (shlex.split(cmd.strip("[]").replace(",", " ")) if cmd else [""])[0]
    need(os.access(os.path.join(d, "bin", prog), os.X_OK), "CMD %s is installed by the package" % prog)
sys.exit(1 if bad else 0)
PY

[ "$(id -u)" = 0 ] || skip "needs root (chroot, mount namespace) for the runtime stage"
for t in debootstrap chroot unshare; do command -v "$t" >/dev/null || skip "no $t"; done
unshare -m true 2>/dev/null || skip "cannot create a mount namespace"

t0=$(date +%s)
echo "== build stage: build-deb.sh (this build tree)"
work=$(mktemp -d /tmp/icn-container.XXXXXX)
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
root=$work/root
trap 'rm -rf --one-file-system "$work"' EXIT
if ! "$dir/build-deb.sh" "$src" "$build" "$work/out" >"$work/build.log" 2>&1; then
  tail -n 20 "$work/build.log"; echo "FAIL: build-deb.sh"; exit 1
fi
deb=$(ls "$work"/out/icn-nccl-plugin_*.deb)
echo "  ok: $(basename "$deb") ($(( $(date +%s) - t0 )) s)"

echo "== runtime stage: install-runtime.sh in a minimal Debian 12 root"
base=$("$src/test/package/minroot.sh" "$cache")
cp -al "$base" "$root"  # hard links: the cached base is never written (apt replaces files, never edits them)
mkdir -p "$root/tmp/icn"
cp "$deb" "$dir/install-runtime.sh" "$root/tmp/icn/"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
t1=$(date +%s)
log=$work/runtime.log
if unshare -m -- sh -c 'r=$1
    mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" && mount --rbind /dev "$r/dev" &&
    exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /tmp/icn/install-runtime.sh /tmp/icn' \
    sh "$root" >"$log" 2>&1; then
  echo "  ok: install-runtime.sh exits 0 ($(( $(date +%s) - t1 )) s)"
else
  echo "  FAIL: install-runtime.sh"; tail -n 30 "$log"; fail=1
fi
sed 's/^/  | /' "$log" | tail -n 8
if grep -qE "transports available: ib, tcp, ucx" "$log"; then echo "  ok: every transport's library installed"
else echo "  FAIL: the image lacks a transport library"; fail=1; fi
if grep -qE '^ +65536 +[0-9.]+ ' "$log"; then echo "  ok: a transfer between two processes in the image"
else echo "  FAIL: no transfer"; fail=1; fi
[ -x "$root/usr/bin/icn-topo" ] && echo "  ok: icn-topo (the doctor) installed" || { echo "  FAIL: no icn-topo"; fail=1; }
echo "total $(( $(date +%s) - t0 )) s"
exit $fail
