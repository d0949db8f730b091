#!/usr/bin/env bash
# The launcher examples (examples/) and the container scripts, checked without a cluster: shell syntax
# (bash -n, and shellcheck when installed), Python syntax, the Kubernetes manifest's structure (PyYAML), every
# ICN_* variable they set is a real ICN setting (`icn-params`), and each sets NCCL_NET_PLUGIN=icn and runs the
# doctor.
#   examples_test.sh SOURCE_DIR ICN_PARAMS_BINARY
set -euo pipefail
src=$(realpath "$1") params=$2
ex=$src/examples
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "  FAIL: $*"; fail=1; }

shells=("$ex"/slurm/*.sbatch "$ex"/torchrun/*.sh "$src"/packaging/container/*.sh)
for f in "${shells[@]}"; do
  if bash -n "$f"; then ok "bash -n ${f#$src/}"; else bad "bash -n ${f#$src/}"; fi
done
if command -v shellcheck >/dev/null; then
  if shellcheck -S style "${shells[@]}"; then ok "shellcheck (${#shells[@]} scripts)"; else bad "shellcheck"; fi
else
  echo "  not run: shellcheck (not installed)"
fi
for f in "$ex"/torchrun/*.py; do
  if python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f"; then
    ok "python syntax ${f#$src/}"; else bad "python syntax ${f#$src/}"; fi
done

python3 - "$ex/kubernetes/icn-job.yaml" <<'PY' || fail=1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
bad = []
def need(c, what):
    print(("  ok: " if c else "  FAIL: ") + what)
    if not c: bad.append(what)
kinds = {d["kind"]: d for d in docs}
need(set(kinds) == {"Service", "Job"}, "manifest holds a Service and a Job: %s" % sorted(kinds))
svc, job = kinds.get("Service"), kinds.get("Job")
if svc and job:
    need(svc["spec"].get("clusterIP") == "None", "the Service is headless")
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    need(spec.get("completionMode") == "Indexed", "the Job is Indexed (JOB_COMPLETION_INDEX = node rank)")
    need(spec.get("completions") == spec.get("parallelism"), "every pod runs at once (completions == parallelism)")
    need(pod.get("subdomain") == svc["metadata"]["name"], "pods sit in the Service's DNS subdomain")
    need(svc["spec"]["selector"].get("job-name") == job["metadata"]["name"], "the Service selects the Job's pods")
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    need(env.get("NCCL_NET_PLUGIN") == "icn", "NCCL_NET_PLUGIN=icn")
    script = " ".join(c.get("command", []) + c.get("args", []))
    need("icn-topo doctor" in script, "the doctor runs before the job")
    need("--nnodes=%d" % spec["completions"] in script, "torchrun's --nnodes matches the Job's completions")
    need("%s-0.%s:" % (job["metadata"]["name"], svc["metadata"]["name"]) in script, "rendezvous at pod 0's DNS name")
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    keyfile = env.get("ICN_AUTH_KEY_FILE", "")
    need(any(keyfile.startswith(p + "/") for p in mounts.values()), "ICN_AUTH_KEY_FILE lies in a mounted volume")
sys.exit(1 if bad else 0)
PY

known=$("$params" | awk '{print $1}')
files=("${shells[@]}" "$ex"/kubernetes/*.yaml "$src"/packaging/container/Dockerfile)
for v in $(grep -ohE '\bICN_[A-Z0-9_]+' "${files[@]}" | sort -u); do
  if grep -qx "$v" <<<"$known"; then ok "$v is an ICN setting"; else bad "$v is not an ICN setting (icn-params)"; fi
done
for f in "$ex"/slurm/*.sbatch "$ex"/torchrun/*.sh "$ex"/kubernetes/*.yaml; do
  grep -qE 'NCCL_NET_PLUGIN(=| *value: *)icn|name: NCCL_NET_PLUGIN' "$f" || bad "${f#$src/} does not set NCCL_NET_PLUGIN=icn"
  grep -q 'icn-topo doctor' "$f" || bad "${f#$src/} does not run the doctor"
done
[ $fail = 0 ] && ok "every example sets NCCL_NET_PLUGIN=icn and runs the doctor"
exit $fail
