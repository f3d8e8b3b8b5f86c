#!/usr/bin/env python3
"""Which saved failures to minimize next on the device, one per failure class (glue).

Usage: reports/pick_minimize.py OUT_DIR SOURCE...
  SOURCE: a corpus folder or a packed corpus (corpus.tar.xz whose members are corpus/NAME.case).

A sweep under a deadline saves most failures as generated: its minimization budget is spent
early.  This groups the saved cases of all SOURCEs by class: kernel, verdict, failing gradient
and the signature's features less the incidental ones (INCIDENTAL: dtype, transforms, layout,
...; e.g. `torch.cudnn [bwd] | crash | empty_seq,row_gap`), and picks for each class not yet
holding a minimized case its smallest case (input elements, from its "minimized from A to B"
provenance line).  It writes OUT_DIR/pick_N_KIND.txt (the picked file names of source N, one a
line; KIND value or crash) and prints the plan lines for reports/h200_replay.sh (`minimize NAME
SOURCE OUT_DIR/pick_N_KIND.txt JOBS SECONDS`): value failures first, several at a time (they
minimize in milliseconds per run), then crashes one at a time (each run restarts the GPU
worker); a summary on stderr.
"""
import collections
import io
import os
import re
import sys
import tarfile

# Signature features that name how a case was built rather than which defect it meets: dropped
# from the class (the minimizer drops them from the case where the failure does not need them).
INCIDENTAL = ("dtype=", "t:", "layout:", "kv_broadcast:", "poison:", "varlen")
# Jobs of the value failures' minimizations, and seconds per minimization by kind (a crash
# costs a GPU worker's restart per run, about 0.2 s waiting plus the fault).
VALUE_JOBS = 4
SECONDS_EACH = {"value": 10, "crash": 10}
MINIMIZED = re.compile(r"^# provenance: minimized from (\d+) to (\d+) input elements")


def read_sources(source):
    """(name, text) of each case file of a corpus folder or packed corpus."""
    if os.path.isdir(source):
        for name in sorted(os.listdir(source)):
            if name.endswith(".case"):
                with open(os.path.join(source, name)) as f:
                    yield name, f.read()
        return
    with tarfile.open(source) as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            if m.isfile() and m.name.endswith(".case"):
                yield os.path.basename(m.name), io.TextIOWrapper(tar.extractfile(m)).read()


def classify(text):
    """(class key, elements, already minimized) of one case, or None without a signature."""
    signature, sizes = None, []
    for line in text.splitlines():
        if line.startswith("# provenance: signature "):
            signature = line[len("# provenance: signature "):]
        elif m := MINIMIZED.match(line):
            sizes.append((int(m.group(1)), int(m.group(2))))
    if not signature or not sizes:
        return None
    kernel, verdict, features, _shape = signature.split("|")
    feats = [f for f in features.split(",") if f and not f.startswith(INCIDENTAL)]
    grad = next((f for f in feats if f.startswith("grad:")), "")
    feats = [f for f in feats if not f.startswith("grad:")]
    # Minimized when any minimization along its history shrank it.
    return (kernel, verdict, grad, ",".join(feats)), sizes[-1][1], any(b < a for a, b in sizes)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out_dir, sources = argv[1], argv[2:]
    best = {}  # class -> (elements, source index, name)
    done = set()
    count = collections.Counter()
    for i, source in enumerate(sources):
        for name, text in read_sources(source):
            c = classify(text)
            if c is None:
                continue
            key, elements, minimized = c
            count[key] += 1
            if minimized:
                done.add(key)
            if key not in best or (elements, i, name) < best[key]:
                best[key] = (elements, i, name)
    todo = [k for k in best if k not in done]
    # Value failures first, then the largest classes.
    todo.sort(key=lambda k: (k[1] == "crash", -count[k], k))
    # One list per source and kind: value failures run several at a time, crashes one at a
    # time (a faulting kernel's context alone on the GPU: reports/h200_torch_split.sh).
    picks = collections.defaultdict(list)
    for k in todo:
        kind = "crash" if k[1] == "crash" else "value"
        picks[(kind != "value", best[k][1], kind)].append(best[k][2])
    os.makedirs(out_dir, exist_ok=True)
    for old in os.listdir(out_dir):
        if re.fullmatch(r"pick_\d+_(value|crash)\.txt", old):
            os.remove(os.path.join(out_dir, old))
    for (_, i, kind), names in sorted(picks.items()):
        path = os.path.join(out_dir, f"pick_{i}_{kind}.txt")
        with open(path, "w") as f:
            f.write("".join(n + "\n" for n in names))
        jobs = 1 if kind == "crash" else VALUE_JOBS
        print(f"minimize min_{i}_{kind} {sources[i]} {path} {jobs} {SECONDS_EACH[kind]}")
    print(f"{len(count)} classes in {sum(count.values())} cases; {len(done)} hold a minimized case; "
          f"{len(todo)} picked ({sum(1 for k in todo if k[1] != 'crash')} value, "
          f"{sum(1 for k in todo if k[1] == 'crash')} crash)", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
