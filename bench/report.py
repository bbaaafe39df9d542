#!/usr/bin/env python3
"""Turns bench/run.sh's results file into one markdown report.

Input lines (written by run.sh from the drivers' output):
  META key=value ...
  RESULT rep=K impl=... op=... n=N bytes=B iters=I median_us=... ...
  FAIL rep=K step=NAME rc=RC

Every figure is the median over repetitions of each repetition's median
(over iterations); "min-max" is the range of those per-repetition medians.
Ratios compare shardmap with a reference from the same repetition, then
take the median (min-max) over repetitions. A ratio is shardmap's speed
over the reference's (reference time / shardmap time, or shardmap rate /
reference rate): above 1 shardmap is faster. Memory ratios are shardmap's
peak RSS over the reference's (above 1 shardmap uses more).

Usage: report.py RESULTS_FILE
"""

import statistics
import sys
from collections import defaultdict

MiB = 1 << 20


def parse(path):
    meta, results, fails = {}, [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            if parts[0] == "META":
                meta.update(kv)
            elif parts[0] == "RESULT":
                results.append(kv)
            elif parts[0] == "FAIL":
                fails.append(kv)
    return meta, results, fails


def size_text(b):
    b = int(b)
    if b >= MiB and b % MiB == 0:
        return f"{b // MiB} MiB"
    if b >= 1024 and b % 1024 == 0:
        return f"{b // 1024} KiB"
    return f"{b} B"


def num(x, digits=3):
    if x is None:
        return "—"
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}g}" if x < 1 else f"{x:.2f}"


def gbs(x):
    return "—" if x is None else f"{x:.3f}"


def ratio_text(values):
    if not values:
        return "—"
    med = statistics.median(values)

    def r(v):
        return f"{v:.3f}" if v < 0.1 else f"{v:.2f}"

    if len(values) == 1:
        return r(med)
    return f"{r(med)} ({r(min(values))}–{r(max(values))})"


class Table:
    """Results by (impl, op, n, bytes) -> {rep: record}."""

    def __init__(self, results):
        self.by = defaultdict(dict)
        for r in results:
            key = (r["impl"], r["op"], int(r.get("n", 0)), int(r.get("bytes", 0)))
            self.by[key][int(r["rep"])] = r

    def get(self, impl, op, n, b):
        return self.by.get((impl, op, n, b), {})

    def keys(self):
        return self.by.keys()


def field(reps, name):
    return {k: float(v[name]) for k, v in reps.items() if name in v}


def med(d):
    return statistics.median(d.values()) if d else None


def span(d):
    if not d:
        return "—"
    return f"{num(min(d.values()))}–{num(max(d.values()))}"


def ratios(a, b, invert=False):
    """Per repetition: b/a (times: reference over shardmap) or a/b."""
    out = []
    for rep in sorted(set(a) & set(b)):
        if a[rep] > 0 and b[rep] > 0:
            out.append(a[rep] / b[rep] if invert else b[rep] / a[rep])
    return out


def busbw_factor(op, n):
    if op in ("psum", "allreduce"):
        return 2 * (n - 1) / n
    if op in ("all_gather", "allgather"):
        return (n - 1) / n
    return 1.0  # a shift: every rank sends `bytes` over one link


ALGO_NAMES = {
    "ompi_tuned": "Open MPI tuned (auto)",
    "sendrecv_shift": "MPI_Sendrecv shift",
    "recursive_doubling": "recursive doubling",
    "direct_shift": "direct (one send, one recv)",
}

REF_OP = {"psum": "allreduce", "all_gather": "allgather", "ppermute": "sendrecv"}


def collectives(t, out):
    out.append("### Collectives (time = slowest rank, median over iterations)\n")
    out.append(
        "| op | N | size | impl | algorithm | median µs | min–max µs | "
        "algbw GB/s | busbw GB/s | vs MPI TCP | vs MPI shm | vs Gloo ring | "
        "vs raw gRPC duplex |"
    )
    out.append("|" + "---|" * 13)
    duplex = field(t.get("grpc", "stream_duplex", 2, 256 * MiB), "median_us")
    duplex_bw = {k: 256 * MiB / (v * 1e-6) for k, v in duplex.items()}
    cases = sorted(
        {(op, n, b) for (impl, op, n, b) in t.keys() if impl == "shardmap"
         and op in REF_OP},
        key=lambda k: (list(REF_OP).index(k[0]), k[1], k[2]),
    )
    for op, n, b in cases:
        rows = [("shardmap", op), ("shardmap-shm", op)]
        for impl in ("mpi-tcp", "mpi-shm"):
            rows.append((impl, REF_OP[op]))
        if op == "psum":
            rows.append(("gloo-ring", "allreduce"))
        for impl, rop in rows:
            mine = field(t.get(impl, op, n, b), "median_us")
            reps = t.get(impl, rop, n, b)
            times = field(reps, "median_us")
            m = med(times)
            algo = next(iter(reps.values()), {}).get("algo", "")
            algbw = b / (m * 1e-6) / 1e9 if m else None
            busbw = algbw * busbw_factor(op, n) if algbw is not None else None
            cells = ["", "", "", ""]
            if impl.startswith("shardmap"):
                if not times:
                    continue  # e.g. an older run without shared memory
                for i, ref in enumerate(("mpi-tcp", "mpi-shm", "gloo-ring")):
                    rt = field(t.get(ref, REF_OP[op], n, b), "median_us")
                    if ref == "gloo-ring" and op != "psum":
                        continue
                    cells[i] = ratio_text(ratios(mine, rt))
                if impl == "shardmap" and n == 2 and b >= 4 * MiB and duplex_bw:
                    mine_bw = {k: b * busbw_factor(op, n) / (v * 1e-6)
                               for k, v in mine.items()}
                    cells[3] = ratio_text(ratios(duplex_bw, mine_bw))
            name = f"**{impl}**" if impl.startswith("shardmap") else impl
            out.append(
                f"| {op} | {n} | {size_text(b)} | {name} | "
                f"{ALGO_NAMES.get(algo, algo.replace('_', ' '))} | {num(m)} | "
                f"{span(times)} | {gbs(algbw)} | {gbs(busbw)} | "
                + " | ".join(cells) + " |"
            )
    out.append(
        "\nshardmap: the workers' collectives over gRPC peer streams "
        "(--no-shm); shardmap-shm: over shared-memory rings, the default "
        "between workers on one host (compare with MPI shm).\n"
        "busbw: psum/allreduce algbw·2(N−1)/N; all_gather algbw·(N−1)/N with "
        "size = the gathered total; ppermute (cyclic shift) = algbw (each rank "
        "sends its whole array over one link). \"vs raw gRPC duplex\" (N=2, "
        "large sizes): shardmap's busbw over one bare gRPC stream's "
        "per-direction throughput when both directions run at once, the "
        "ceiling for a ring step.\n"
    )


def raw(t, out):
    out.append("### Raw transport: gRPC between 2 processes (bare: protobuf bytes, stock settings; tuned and exchange: byte buffers, BDP probing and retries off)\n")
    out.append("| op | size | median µs | min–max µs | p99 µs | GB/s (per direction) | rate /s |")
    out.append("|---|---|---|---|---|---|---|")
    for op, b in (("stream_push", 256 * MiB), ("stream_duplex", 256 * MiB),
                  ("stream_rtt", 8), ("unary_rtt", 8)):
        reps = t.get("grpc", op, 2, b)
        times = field(reps, "median_us")
        m = med(times)
        p99 = med(field(reps, "p99_us"))
        bw = b / (m * 1e-6) / 1e9 if m and b > 8 else None
        out.append(f"| {op} | {size_text(b)} | {num(m)} | {span(times)} | "
                   f"{num(p99) if b == 8 else '—'} | {gbs(bw)} | — |")
    reps = t.get("grpc", "unary_rate", 2, 8)
    rate = field(reps, "rate_per_s")
    clients = next(iter(reps.values()), {}).get("clients", "?")
    out.append(f"| unary_rate ({clients} clients) | 8 B | — | — | — | — | "
               f"{num(med(rate))} ({span(rate)}) |")
    # The same streams done well: callback API, byte buffers over the
    # sender's memory, BDP probing and retries off.
    for op in ("stream_push", "stream_duplex"):
        times = field(t.get("grpc-tuned", op, 2, 256 * MiB), "median_us")
        m = med(times)
        bw = 256 * MiB / (m * 1e-6) / 1e9 if m else None
        out.append(f"| {op}, tuned (callback, byte buffers) | 256 MiB | "
                   f"{num(m)} | {span(times)} | — | {gbs(bw)} | — |")
    # The floor of the smallest collective step (exchange_bench): 8 bytes
    # each way at once over one stream, as a 4 B psum over two workers.
    for op, label in (("callback", "callback API, as the peer streams"),
                      ("polled", "each process's own thread polls its queue"),
                      ("polled_shared", "polled, beside a callback service "
                                        "as in a worker")):
        reps = t.get("grpc-exchange", op, 2, 8)
        times = field(reps, "median_us")
        if not times:
            continue
        out.append(f"| exchange, {label} | 8 B each way | {num(med(times))} | "
                   f"{span(times)} | {num(med(field(reps, 'p99_us')))} | — | — |")
    out.append("")
    mine = field(t.get("shardmap", "psum", 2, 4), "median_us")
    floor = field(t.get("grpc-exchange", "callback", 2, 8), "median_us")
    if mine and floor:
        # Time ratios per repetition (reference ÷ shardmap): above 1 faster.
        out.append(f"A 4 B psum over two workers (gRPC peer path) took "
                   f"{num(med(mine))} µs; the callback exchange above, the "
                   f"step it is made of, ÷ that time: "
                   f"{ratio_text(ratios(mine, floor))}.\n")


def end_to_end(t, out):
    out.append("### End to end (client → coordinator → workers → back)\n")
    out.append("| figure | shardmap | min–max | reference (same run) | reference | shardmap vs reference |")
    out.append("|---|---|---|---|---|---|")
    tiny = next((k for k in t.keys() if k[0] == "shardmap" and k[1] == "job_tiny"), None)
    if tiny:
        reps = t.get(*tiny)
        n = tiny[2]
        unary = t.get("grpc", "unary_rtt", 2, 8)
        for pname, label in (("median_us", "p50"), ("p99_us", "p99")):
            mine = field(reps, pname)
            ref = field(unary, pname)
            out.append(
                f"| tiny job latency {label} (identity, 16 float32, mesh x={n}) | "
                f"{num(med(mine))} µs | {span(mine)} µs | gRPC unary RTT {label} | "
                f"{num(med(ref))} µs | {ratio_text(ratios(mine, ref))} |")
    rate_key = next((k for k in t.keys() if k[0] == "shardmap" and k[1] == "job_rate"), None)
    if rate_key:
        reps = t.get(*rate_key)
        mine = field(reps, "rate_per_s")
        clients = next(iter(reps.values()), {}).get("clients", "?")
        ref = field(t.get("grpc", "unary_rate", 2, 8), "rate_per_s")
        out.append(
            f"| jobs/s, {clients} concurrent clients (same tiny job) | "
            f"{num(med(mine))} /s | {span(mine)} /s | gRPC unary RPC/s, {clients} clients | "
            f"{num(med(ref))} /s | {ratio_text(ratios(mine, ref, invert=True))} |")
        # What each of those jobs cost the cluster (job_bench, from /proc).
        for who, label in (("coordinator", "the coordinator"),
                           ("workers", f"the {rate_key[2]} workers together")):
            cpu = field(reps, f"{who}_cpu_us_per_job")
            switches = field(reps, f"{who}_switches_per_job")
            if not cpu:
                continue
            out.append(
                f"| CPU time per job at {clients} clients, {label} "
                f"(context switches per job) | {num(med(cpu))} µs "
                f"({num(med(switches))}) | {span(cpu)} µs "
                f"({span(switches)}) | — | — | — |")
    big = next((k for k in t.keys() if k[0] == "shardmap" and k[1] == "job_big"), None)
    if big:
        reps = t.get(*big)
        mine = field(reps, "median_us")
        b = big[3]
        push = field(t.get("grpc", "stream_push", 2, 256 * MiB), "median_us")
        # Scale the push to the job's size if they differ.
        push = {k: v * b / (256 * MiB) for k, v in push.items()}
        m = med(mine)
        gb = b / (m * 1e-6) / 1e9 if m else None
        out.append(
            f"| {size_text(b)} identity job, P('x') over {big[2]} workers | "
            f"{num(m / 1e3 if m else None)} ms ({gbs(gb)} GB/s) | "
            f"{span({k: v / 1e3 for k, v in mine.items()})} ms | "
            f"bare gRPC stream push of {size_text(b)}, one hop | "
            f"{num(med(push) / 1e3 if push else None)} ms | "
            f"{ratio_text(ratios(mine, push))} |")
        tuned = field(t.get("grpc-tuned", "stream_push", 2, 256 * MiB),
                      "median_us")
        tuned = {k: v * b / (256 * MiB) for k, v in tuned.items()}
        if tuned:
            out.append(
                f"| {size_text(b)} identity job (as above) | "
                f"{num(m / 1e3 if m else None)} ms | — | "
                f"tuned gRPC stream push of {size_text(b)}, one hop | "
                f"{num(med(tuned) / 1e3)} ms | "
                f"{ratio_text(ratios(mine, tuned))} |")
        first = field(reps, "first_us")
        if first:
            out.append(
                f"| {size_text(b)} identity job, the first big job on the "
                f"cluster (untimed above: it also faults every array's pages "
                f"in) | "
                f"{num(med(first) / 1e3)} ms | "
                f"{span({k: v / 1e3 for k, v in first.items()})} ms | "
                f"tuned gRPC stream push of {size_text(b)}, one hop | "
                f"{num(med(tuned) / 1e3) if tuned else '—'} ms | "
                f"{ratio_text(ratios(first, tuned)) if tuned else '—'} |")
        out.append(
            "\nThe big job moves its bytes over four hops (client → coordinator "
            "→ workers → coordinator → client), so 0.25 against one hop is the "
            "serial ideal; more means the hops overlap.\n")


def memory(t, out):
    out.append("### Peak memory (VmHWM)\n")
    out.append("| process | during | peak RSS MiB, median (min–max over reps) | data | reference rank's peak RSS; shardmap ÷ reference |")
    out.append("|---|---|---|---|---|")
    big = next((k for k in t.keys() if k[0] == "shardmap" and k[1] == "job_big"), None)
    if big:
        reps = t.get(*big)
        c = field(reps, "coordinator_rss_kb")
        c = {k: v / 1024 for k, v in c.items()}
        out.append(f"| coordinator | {size_text(big[3])} identity job | "
                   f"{num(med(c))} ({span(c)}) | {size_text(big[3])} in, same out | — |")
        w = {k: max(int(x) for x in v["rss_kb"].split(",")) / 1024
             for k, v in reps.items() if v.get("rss_kb")}
        out.append(f"| each worker (max of {big[2]}) | {size_text(big[3])} identity job | "
                   f"{num(med(w))} ({span(w)}) | {size_text(big[3] // big[2])} block | — |")
    for (impl, op, n, b) in sorted(t.keys()):
        if not impl.startswith("shardmap") or op != "psum" or b != 64 * MiB:
            continue
        reps = t.get(impl, op, n, b)
        mode = next(iter(reps.values()), {}).get("mode", "procs")

        def worst(rs):
            return {k: max(int(x) for x in v["rss_kb"].split(",")) / 1024
                    for k, v in rs.items() if v.get("rss_kb")}

        def each(rs):
            vals = [int(x) / 1024 for v in rs.values()
                    for x in v.get("rss_kb", "").split(",") if x]
            return f"{num(min(vals))}–{num(max(vals))}" if vals else "—"

        def total(rs):
            return {k: sum(int(x) for x in v["rss_kb"].split(",")) / 1024
                    for k, v in rs.items() if v.get("rss_kb")}

        # Worker processes compare with one reference rank; a process
        # holding every worker as a thread with all reference ranks summed.
        pick = worst if mode == "procs" else total
        mine = worst(reps)
        refs = []
        for ref in ("mpi-tcp", "mpi-shm", "gloo-ring"):
            rr = pick(t.get(ref, "allreduce", n, b))
            if rr:
                refs.append(f"{ref} {num(med(rr))} MiB"
                            f"{'' if mode == 'procs' else f' ({n} ranks)'}: "
                            f"{ratio_text(ratios(rr, mine))}")
        if mode == "procs":
            who = f"each worker process ({impl}), N={n}"
            value = (f"max over workers {num(med(mine))} ({span(mine)}); "
                     f"all workers, all reps {each(reps)}")
        else:
            who = (f"the one process holding all {n} workers (threads, "
                   f"{impl}), N={n}")
            value = f"{num(med(mine))} ({span(mine)})"
        out.append(f"| {who} | psum 64 MiB | {value} | "
                   f"64 MiB in + 64 MiB out per worker | "
                   f"{'; '.join(refs) or '—'} |")
    out.append("")


def programs(t, out):
    out.append("### Expression programs vs native code (one thread, CPU time)\n")
    out.append("| case | program µs | min–max µs | native | native µs | "
               "program ÷ native time | issue 13's target |")
    out.append("|---|---|---|---|---|---|---|")
    cases = (("chain10", "12-op elementwise chain, 1M float32 (fused)",
              "hand-written C++ loop", "≤ 1.5"),
             ("mlp", "relu(x @ w1) @ w2, 512×1024 @ 1024×1024 float32",
              "direct Eigen calls", "≤ 1.2"))
    for op, label, native, target in cases:
        key = next((k for k in t.keys() if k[0] == "program" and k[1] == op), None)
        if key is None:
            continue
        mine = field(t.get(*key), "cpu_us")
        ref = field(t.get("native", op, key[2], key[3]), "cpu_us")
        out.append(f"| {label} | {num(med(mine))} | {span(mine)} | {native} | "
                   f"{num(med(ref))} | {ratio_text(ratios(ref, mine))} | {target} |")
        eigen = field(t.get("eigen", op, key[2], key[3]), "cpu_us")
        if eigen:
            out.append(f"| | | | one Eigen array expression (SIMD, fused) | "
                       f"{num(med(eigen))} | {ratio_text(ratios(eigen, mine))} | — |")
    out.append(
        "\nprogram: program::Evaluate on one worker's block (arguments copied "
        "in outside the timing); native: the same computation written by hand. "
        "Below 1 the program is faster (its elementwise kernels use Eigen's "
        "vectorized exp/tanh/logistic; the hand loop calls libm per element).\n")


def builtins(t, out):
    """builtin_bench: the built-in kernels through ShardExecutor::Run."""
    keys = sorted(k for k in t.keys() if k[0] == "builtin")
    if not keys:
        return
    out.append("### Built-in functions through the worker's call path "
               "(one thread)\n")
    out.append("| function | input | median µs | min–max µs |")
    out.append("|---|---|---|---|")
    for key in keys:
        mine = field(t.get(*key), "median_us")
        out.append(f"| {key[1]} | {size_text(key[3])} | {num(med(mine))} | "
                   f"{span(mine)} |")
    out.append("\nShardExecutor::Run (lookup, signature check, the SDK "
               "kernel) on one block; arguments copied in outside the "
               "timing.\n")


def donation(t, out):
    """donation_rss.py: one worker's peak RSS over in-place updates."""
    rows = []
    for mode in ("copied", "donated"):
        key = next((k for k in t.keys()
                    if k[0] == "shardmap" and k[1] == f"update_{mode}"), None)
        if key is None:
            continue
        reps = t.get(*key)
        put, peak = field(reps, "put_peak_mib"), field(reps, "peak_mib")
        copies = field(reps, "copies")
        rows.append(f"| {mode} | {size_text(key[3])} | {num(med(put))} | "
                    f"{num(med(peak))} ({span(peak)}) | {num(med(copies))} |")
    if not rows:
        return
    out.append("### A worker's peak memory over in-place updates "
               "(`--out @big`, with and without `--donate`)\n")
    out.append("| update | array | peak after the put, MiB | peak after "
               "the updates, MiB (min–max) | copies held at once |")
    out.append("|---|---|---|---|---|")
    out.extend(rows)
    out.append("")


def training(t, out):
    """train_bench: the README's training step, cluster vs in-process."""
    key = next((k for k in t.keys()
                if k[0] == "shardmap" and k[1] == "train_step"), None)
    if key is None:
        return
    floor = next((k for k in t.keys()
                  if k[0] == "in_process" and k[1] == "train_step"), None)
    ref = t.get(*floor) if floor else {}
    out.append("### A training step (`linear_sgd_step`, data resident)\n")
    out.append("| figure | per step | min–max | in-process floor | "
               "step ÷ floor |")
    out.append("|---|---|---|---|---|")
    for pname, label in (("median_us", "p50"), ("p99_us", "p99")):
        mine, base = field(t.get(*key), pname), field(ref, pname)
        out.append(
            f"| step {label}, {size_text(key[3])} of x and y over "
            f"data={key[2]}, C++ client | {num(med(mine) / 1e3)} ms | "
            f"{span({k: v / 1e3 for k, v in mine.items()})} ms | "
            f"{num(med(base) / 1e3 if base else None)} ms | "
            f"{ratio_text(ratios(base, mine))} |")
    out.append("\nThe floor is the same step on the whole batch called as "
               "one worker calls it (ShardExecutor::Run, no network); "
               "both runs train from zero on the same data and must end at "
               "the same parameters.\n")


def python_client(t, out):
    """The Python client against the C++ client, same repetition."""
    rows = []
    for op, label, target in (
            ("job_tiny", "tiny job p50 (identity, 16 float32)", "≤ 1.5"),
            ("job_big", "identity job on a big array", "≤ 1.25")):
        key = next((k for k in t.keys() if k[0] == "python" and k[1] == op),
                   None)
        if key is None:
            continue
        mine = field(t.get(*key), "median_us")
        cpp = field(t.get("shardmap", *key[1:]), "median_us")
        if op == "job_big":
            label = f"{size_text(key[3])} identity job, there and back"
        rows.append(f"| {label}, mesh x={key[2]} | {num(med(mine))} µs | "
                    f"{span(mine)} µs | {num(med(cpp))} µs | "
                    f"{ratio_text(ratios(cpp, mine))} | {target} |")
    if not rows:
        return
    out.append("### The Python client vs the C++ client (same repetition)\n")
    out.append("| figure | Python | min–max | C++ client | Python ÷ C++ time "
               "| issue 16's target |")
    out.append("|---|---|---|---|---|---|")
    out.extend(rows)
    out.append("\nA time ratio of 1.25 is 0.8x the C++ client's throughput. "
               "The C++ figures are job_bench's (its own cluster, run just "
               "before).\n")


def main():
    meta, results, fails = parse(sys.argv[1])
    t = Table(results)
    out = []
    out.append(f"## shardmap benchmark ({meta.get('mode', '?')} mode, "
               f"{meta.get('repeats', '?')} interleaved repetitions)\n")
    facts = [f"{k}: {v.replace('_', ' ')}" for k, v in meta.items()
             if k not in ("mode", "repeats")]
    if facts:
        out.append("- " + "\n- ".join(facts) + "\n")
    out.append(
        "Figures: median over repetitions of each repetition's median; "
        "min–max = range of the repetitions' medians. Ratios: shardmap's "
        "speed over the reference's from the same repetition (reference time "
        "÷ shardmap time), median (min–max) over repetitions; above 1 "
        "shardmap is faster.\n")
    collectives(t, out)
    raw(t, out)
    end_to_end(t, out)
    training(t, out)
    python_client(t, out)
    programs(t, out)
    builtins(t, out)
    donation(t, out)
    memory(t, out)
    if fails:
        out.append("### Failed steps\n")
        for f in fails:
            out.append(f"- rep {f.get('rep')}: {f.get('step')} (exit {f.get('rc')}); "
                       "see its log")
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
