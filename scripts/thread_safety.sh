#!/usr/bin/env bash
# Checks the ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations with
# clang's thread-safety analysis: every product, test and bench source of
# build/compile_commands.json is parsed by clang++-14 with -fsyntax-only
# (no code generation, no link) and -Werror=thread-safety, in parallel.
# Sources that reach no Mutex, CondVar or ABSL_ annotation (through their
# own text or the project headers they include) are skipped.
# Any finding (a guarded member touched without its lock, a *Locked helper
# called unlocked, a lock not released...) prints clang's message and fails
# the script. Run it after scripts/build.sh (the generated protobuf headers
# and compile_commands.json come from the build).
# Usage: scripts/thread_safety.sh [SOURCE_SUBSTRING...]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
CLANGXX=${CLANGXX:-clang++-14}
if ! command -v "$CLANGXX" >/dev/null; then
  echo "thread-safety: $CLANGXX not found (scripts/setup.sh installs clang-14)" >&2
  exit 1
fi
if [[ ! -f build/compile_commands.json ]]; then
  echo "thread-safety: build/compile_commands.json missing: run scripts/build.sh first" >&2
  exit 1
fi

exec python3 - "$CLANGXX" "$(nproc)" "$@" <<'PY'
import concurrent.futures, json, os, re, shlex, subprocess, sys, time

clangxx, jobs, filters = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
root = os.getcwd()
build = os.path.join(root, "build")
# Only the warnings of the analysis: clang's other warnings are not this
# check's business (g++ -Wall -Wextra covers them in the normal build).
CHECK = ["-fsyntax-only", "-Wno-everything", "-Wthread-safety",
         "-Werror=thread-safety"]


def clang_args(entry):
    """The entry's compile command, turned into a clang syntax-only check."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    # Drop the compiler (and a launcher such as ccache) before the first flag.
    while args and not args[0].startswith("-"):
        args = args[1:]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True  # and the path after it
        elif a in ("-c", "-g", entry["file"]) or a.startswith(("-O", "-W")):
            pass  # code generation, warnings: replaced by CHECK
        elif a.startswith("-fvect-cost-model"):
            pass  # g++ only
        else:
            out.append(a)
    return [clangxx] + out + CHECK + [entry["file"]]


def run(cmd, cwd, stdin=None):
    p = subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True,
                       text=True)
    return p.returncode, p.stderr


entries = [e for e in json.load(open("build/compile_commands.json"))
           if os.path.abspath(e["file"]).startswith(root + os.sep)
           and not os.path.abspath(e["file"]).startswith(build + os.sep)
           and (not filters or any(f in e["file"] for f in filters))]
if not entries:
    sys.exit("thread-safety: no source matches %s" % " ".join(filters))

# Only a source that reaches a lock or an annotation can have a finding:
# one whose own text, or a project header it includes (transitively),
# names a Mutex/CondVar or an ABSL_ thread-safety macro. The others (about
# half: pure math, parsers, most tests) are skipped; SHARDMAP_TSA_ALL=1
# checks every source.
LOCKISH = re.compile(r"Mutex|CondVar|ABSL_[A-Z_]*(?:LOCK|GUARDED|CAPABILITY|"
                     r"THREAD_SAFETY)")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SEARCH = [root, os.path.join(root, "include")]


def project_includes(path):
    """(mentions a lock or annotation, the project files it includes)."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return True, []  # unreadable: check it rather than guess
    found = []
    for name in INCLUDE.findall(text):
        for d in [os.path.dirname(path)] + SEARCH:
            candidate = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(candidate):
                found.append(candidate)
                break
    return bool(LOCKISH.search(text)), found


scanned = {}


def reaches_a_lock(source):
    todo, seen = [os.path.normpath(os.path.abspath(source))], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if path not in scanned:
            scanned[path] = project_includes(path)
        lockish, includes = scanned[path]
        if lockish:
            return True
        todo.extend(includes)
    return False


skipped = 0
if os.environ.get("SHARDMAP_TSA_ALL") != "1":
    kept = [e for e in entries if reaches_a_lock(e["file"])]
    skipped, entries = len(entries) - len(kept), kept
if not entries:
    print("thread-safety: no selected source reaches a lock (%d skipped)"
          % skipped)
    sys.exit(0)

# The check must be able to fail: a planted violation compiled with the
# flags of the first source must be reported, or absl's annotations are not
# active under this compiler and every "pass" below would mean nothing.
canary = """#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
struct Canary { absl::Mutex mu; int x ABSL_GUARDED_BY(mu) = 0; };
int Touch(Canary& c) { return c.x; }
"""
cmd = clang_args(entries[0])[:-1] + ["-x", "c++", "-"]
rc, err = run(cmd, entries[0]["directory"], canary)
if rc == 0 or "requires holding mutex" not in err:
    sys.exit("thread-safety: a planted violation was not reported; are "
             "absl's annotations active under %s?\n%s" % (clangxx, err))

start = time.monotonic()
failed = []
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    futures = {pool.submit(run, clang_args(e), e["directory"]): e["file"]
               for e in entries}
    for f in concurrent.futures.as_completed(futures):
        rc, err = f.result()
        if rc != 0:
            failed.append(futures[f])
            sys.stderr.write(err)
print("thread-safety: %d sources checked in %.0fs (%d reach no lock: "
      "skipped), %d with findings%s"
      % (len(entries), time.monotonic() - start, skipped, len(failed),
         "".join("\n  " + os.path.relpath(p) for p in sorted(failed))))
sys.exit(1 if failed else 0)
PY
