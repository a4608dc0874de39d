#!/usr/bin/env python3
"""Prove "no behaviour change" between two commits with the simulator evaluations.

    .venv/bin/python scripts/compare_behaviour.py run REF OUTDIR
    .venv/bin/python scripts/compare_behaviour.py compare DIR_A DIR_B

``run`` checks REF out in a temporary ``git worktree`` (the current working tree is never
touched), and from there runs the public command, through ``manage.py``:

* ``evaluate --suite S --thresholds G --json OUTDIR/S__gG.json`` for every bundled suite S
  and every G in 0, 4, 5 (one run per γ);
* ``evaluate --suite S --thresholds 0,4,5 --learn --json OUTDIR/S__learn.json`` for every
  stream suite S (the bundled suites named ``streams*``: the learning streams).

Every run uses this repository's ``.venv`` python, the heuristic backend, the oracle
operator and the embedded default configuration: ``DATABASE_URL``, ``REDIS_URL``,
``DJANGO_SETTINGS_MODULE``, ``PYTHONPATH``, ``OPENAI_API_KEY`` and every ``KAIROS_*`` are
removed from the environment, and ``KAIROS_VAR_DIR`` points to a fresh temporary folder of
that worktree (so neither SQLite files nor refitted calibrators of another checkout are
read). ``manage.py migrate`` runs first in that folder. Runs go 2 at a time
(``--parallel``). Each run's output (the table, any traceback) and a manifest with the
commit, durations and exit codes go to ``OUTDIR/_meta/``. Exit status 1 when any run
failed or wrote no result.

``compare`` compares the ``*.json`` of two such folders key by key and prints, per file,
``identical`` or each differing key path with both values. Keys in ``IGNORED_KEYS`` (timing
fields) are skipped; everything else, floats included, must be exactly equal. Exit status 1
on any difference, on a file present on one side only, on an empty or unreadable result,
and when either folder's manifest records a failed run.

Stdlib only (Python 3.11).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
THRESHOLDS = ("0", "4", "5")
LEARN_THRESHOLDS = "0,4,5"
STREAM_PREFIX = "streams"
META = "_meta"
RUN_TIMEOUT = 3600  # seconds; one evaluate run that takes longer is reported as failed

# Keys of the evaluate JSON that hold wall-clock durations, dates or timestamps and so
# differ between two runs of the same commit. Found by running the same suites twice
# (``evaluate`` and ``evaluate --learn``, d15f746) and diffing: the JSON of ``evaluate``
# holds no such key, so nothing is ignored. Add a key here only when a run of one commit
# against itself shows it differing.
IGNORED_KEYS: frozenset[str] = frozenset()

# Removed from the environment of every run: the embedded default configuration.
_DROPPED_ENV = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "PYTHONPATH",
                "OPENAI_API_KEY", "PYTHONSTARTUP")


# ------------------------------------------------------------------------------- run

@dataclass
class Job:
    suite: str
    mode: str  # "g0", "g4", "g5" or "learn"
    args: list[str]
    name: str = ""
    rc: int | None = None
    seconds: float = 0.0
    problem: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = f"{self.suite}__{self.mode}"


def _python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _git(*args: str, cwd: Path = REPO) -> str:
    out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def _environment(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _DROPPED_ENV and not k.startswith("KAIROS_")}
    env["KAIROS_VAR_DIR"] = str(var_dir)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _manage(tree: Path, env: dict[str, str], *args: str,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_python(), "manage.py", *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _check_imports(tree: Path, env: dict[str, str]) -> None:
    """The worktree's code is the code that runs (not this checkout's, not an install)."""
    code = ("import json, agents, devices, kairos_web; print(json.dumps("
            "[p for m in (agents, devices, kairos_web) for p in m.__path__]))")
    out = subprocess.run([_python(), "-c", code], cwd=tree, env=env, capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit(f"cannot import the project in the worktree:\n{out.stderr}")
    paths = json.loads(out.stdout.strip().splitlines()[-1])
    stray = [p for p in paths if not Path(p).resolve().is_relative_to(tree.resolve())]
    if stray:
        raise SystemExit(f"the worktree imports code from outside it: {stray}")


_SUITES_RE = re.compile(r"the bundled suites are (.+?)\s*$", re.S)
_SENTINEL = "__compare_behaviour_no_such_suite__"


def bundled_suites(tree: Path, env: dict[str, str]) -> list[str]:
    """The bundled suites, as the public command lists them when a suite is not found
    (so the list follows the code wherever the suites live); a glob of the tree if the
    message cannot be read."""
    out = _manage(tree, env, "evaluate", "--suite", _SENTINEL, "--thresholds", "4",
                  timeout=300)
    match = _SUITES_RE.search(out.stderr.strip())
    if out.returncode != 0 and match:
        names = [n.strip() for n in match.group(1).split(",") if n.strip()]
        if names and all(re.fullmatch(r"[\w.-]+", n) for n in names):
            return names
    found = sorted({p.stem for p in tree.glob("**/sim/suites/*.yaml")
                    if ".venv" not in p.parts})
    print(f"warning: could not read the bundled suites from `evaluate` "
          f"(rc {out.returncode}: {out.stderr.strip()[-300:]!r}); "
          f"using the {len(found)} files of */sim/suites/", file=sys.stderr)
    if not found:
        raise SystemExit("no bundled suite found")
    return found


def plan(suites: list[str]) -> list[Job]:
    """Learning streams first: they are the longest single runs."""
    jobs = [Job(s, "learn", ["evaluate", "--suite", s, "--backend", "heuristic",
                             "--thresholds", LEARN_THRESHOLDS, "--learn"])
            for s in suites if s.startswith(STREAM_PREFIX)]
    for s in suites:
        for g in THRESHOLDS:
            jobs.append(Job(s, f"g{g}", ["evaluate", "--suite", s, "--backend", "heuristic",
                                         "--thresholds", g]))
    return jobs


def _result_problem(path: Path) -> str:
    """Why the file at ``path`` is no result ('' when it is one)."""
    if not path.exists():
        return "no JSON written"
    if path.stat().st_size == 0:
        return "empty JSON file"
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        return f"unreadable JSON ({exc})"
    if not isinstance(data, dict) or not data.get("results"):
        return "JSON without results"
    return ""


def _run_job(job: Job, tree: Path, env: dict[str, str], outdir: Path) -> Job:
    target = outdir / f"{job.name}.json"
    log = outdir / META / f"{job.name}.log"
    started = time.monotonic()
    try:
        out = _manage(tree, env, *job.args, "--json", str(target), timeout=RUN_TIMEOUT)
        job.rc = out.returncode
        text = f"$ manage.py {' '.join(job.args)} --json {target.name}\n{out.stdout}{out.stderr}"
    except subprocess.TimeoutExpired as exc:
        job.rc = -1
        text = f"timed out after {RUN_TIMEOUT}s\n{exc.stdout or ''}{exc.stderr or ''}"
    job.seconds = round(time.monotonic() - started, 2)
    log.write_text(text if isinstance(text, str) else text.decode(errors="replace"))
    job.problem = (f"exit status {job.rc}" if job.rc != 0 else "") or _result_problem(target)
    if job.problem and target.exists() and job.rc != 0:
        target.rename(target.with_suffix(".json.failed"))  # never compared as a result
    return job


def cmd_run(args: argparse.Namespace) -> int:
    outdir = Path(args.outdir).resolve()
    if outdir.exists() and any(outdir.iterdir()):
        if not args.force:
            raise SystemExit(f"{outdir} is not empty (--force clears it)")
        for p in outdir.iterdir():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    (outdir / META).mkdir(parents=True, exist_ok=True)
    commit = _git("rev-parse", "--verify", f"{args.ref}^{{commit}}")
    t0 = time.monotonic()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    tmp = Path(tempfile.mkdtemp(prefix="kairos-behaviour-"))
    tree, var_dir = tmp / "tree", tmp / "var"
    var_dir.mkdir()
    print(f"{args.ref} = {commit}; worktree {tree}", flush=True)
    _git("worktree", "add", "--detach", str(tree), commit)
    jobs: list[Job] = []
    try:
        env = _environment(var_dir)
        _check_imports(tree, env)
        if not args.no_migrate:
            t = time.monotonic()
            out = _manage(tree, env, "migrate", "--noinput", timeout=900)
            (outdir / META / "migrate.log").write_text(out.stdout + out.stderr)
            if out.returncode != 0:
                raise SystemExit(f"manage.py migrate failed:\n{out.stderr[-3000:]}")
            print(f"migrate: {time.monotonic() - t:.1f}s", flush=True)
        suites = bundled_suites(tree, env)
        if args.suites:
            wanted = [s.strip() for s in args.suites.split(",") if s.strip()]
            unknown = sorted(set(wanted) - set(suites))
            if unknown:
                raise SystemExit(f"not bundled at {commit[:10]}: {', '.join(unknown)}")
            suites = [s for s in suites if s in wanted]
        jobs = plan(suites)
        streams = [s for s in suites if s.startswith(STREAM_PREFIX)]
        print(f"{len(suites)} suites ({len(streams)} streams): {len(jobs)} runs, "
              f"{args.parallel} at a time", flush=True)
        lock, done = threading.Lock(), [0]
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            futures = [pool.submit(_run_job, job, tree, env, outdir) for job in jobs]
            for future in as_completed(futures):
                job = future.result()
                with lock:
                    done[0] += 1
                    state = f"FAILED: {job.problem}" if job.problem else "ok"
                    print(f"[{done[0]:3d}/{len(jobs)}] {job.name:<34} {job.seconds:7.1f}s  "
                          f"{state}  (elapsed {time.monotonic() - t0:6.0f}s)", flush=True)
    finally:
        if args.keep:
            print(f"kept worktree {tree}", flush=True)
        else:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(tree)], capture_output=True)
            subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)
    total = round(time.monotonic() - t0, 1)
    failed = [j for j in jobs if j.problem]
    manifest = {
        "ref": args.ref, "commit": commit, "started": started_at, "seconds": total,
        "python": _python(), "parallel": args.parallel,
        "thresholds": list(THRESHOLDS), "learn_thresholds": LEARN_THRESHOLDS,
        "runs": [{"name": j.name, "suite": j.suite, "mode": j.mode,
                  "command": ["manage.py", *j.args, "--json", f"{j.name}.json"],
                  "rc": j.rc, "seconds": j.seconds, "problem": j.problem or None}
                 for j in sorted(jobs, key=lambda j: j.name)],
    }
    (outdir / META / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    slowest = sorted(jobs, key=lambda j: -j.seconds)[:5]
    print(f"done in {total:.0f}s ({total / 60:.1f} min); slowest: "
          + ", ".join(f"{j.name} {j.seconds:.0f}s" for j in slowest), flush=True)
    if failed:
        print(f"{len(failed)} run(s) failed or wrote no result: "
              + ", ".join(f"{j.name} ({j.problem})" for j in failed), file=sys.stderr)
        return 1
    print(f"{len(jobs)} results in {outdir}")
    return 0


# --------------------------------------------------------------------------- compare

def _label(items: list[Any], i: int) -> str:
    item = items[i]
    if isinstance(item, dict):
        if "threshold" in item:
            return f"[γ={item['threshold']}]"
        if isinstance(item.get("task"), str):
            return f"[{item['task']}]"
    return f"[{i}]"


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b  # 1 vs 1.0 and True vs 1 are differences


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Every difference between two JSON values, as 'path: a != b' lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in list(a) + [k for k in b if k not in a]:
            if key in IGNORED_KEYS:
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in b:
                out.append(f"{where}: only in A ({_short(a[key])})")
            elif key not in a:
                out.append(f"{where}: only in B ({_short(b[key])})")
            else:
                out.extend(diff(a[key], b[key], where))
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(min(len(a), len(b))):
            out.extend(diff(a[i], b[i], path + _label(a, i)))
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items in A, {len(b)} in B")
        return out
    if _same_scalar(a, b):
        return []
    return [f"{path or '<top>'}: {_short(a)} != {_short(b)}"]


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _failed_runs(folder: Path) -> list[str]:
    manifest = folder / META / "manifest.json"
    if not manifest.exists():
        return []
    try:
        runs = json.loads(manifest.read_text()).get("runs", [])
    except ValueError:
        return [f"unreadable {manifest}"]
    return [f"{r['name']} ({r['problem']})" for r in runs if r.get("problem")]


def cmd_compare(args: argparse.Namespace) -> int:
    a_dir, b_dir = Path(args.dir_a), Path(args.dir_b)
    bad = 0
    for d in (a_dir, b_dir):
        if not d.is_dir():
            raise SystemExit(f"{d} is not a folder")
        for failed in _failed_runs(d):
            print(f"{d}: run failed: {failed}")
            bad += 1
    a_files = {p.name for p in a_dir.glob("*.json")}
    b_files = {p.name for p in b_dir.glob("*.json")}
    if not a_files or not b_files:
        print(f"no result files in {a_dir if not a_files else b_dir}")
        return 1
    identical = differing = 0
    for name in sorted(a_files | b_files):
        if name not in b_files or name not in a_files:
            print(f"{name}: only in {'A' if name in a_files else 'B'}")
            differing += 1
            continue
        problems = [f"{side}: {p}" for side, d in (("A", a_dir), ("B", b_dir))
                    if (p := _result_problem(d / name))]
        if problems:
            print(f"{name}: no result ({'; '.join(problems)})")
            differing += 1
            continue
        lines = diff(json.loads((a_dir / name).read_text()),
                     json.loads((b_dir / name).read_text()))
        if not lines:
            identical += 1
            if not args.quiet:
                print(f"{name}: identical")
            continue
        differing += 1
        print(f"{name}: {len(lines)} difference(s)")
        for line in lines[:args.max_lines]:
            print(f"    {line}")
        if len(lines) > args.max_lines:
            print(f"    … and {len(lines) - args.max_lines} more")
    ignored = ", ".join(sorted(IGNORED_KEYS)) or "none"
    print(f"{identical} identical, {differing} different, {bad} failed run(s) "
          f"(A={a_dir}, B={b_dir}; ignored keys: {ignored})")
    return 1 if differing or bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run every evaluation of one commit")
    run.add_argument("ref", help="a commit, branch or tag")
    run.add_argument("outdir")
    run.add_argument("--parallel", type=int, default=2, help="runs at a time (default 2)")
    run.add_argument("--suites", help="only these bundled suites (comma-separated)")
    run.add_argument("--force", action="store_true", help="clear a non-empty OUTDIR")
    run.add_argument("--keep", action="store_true", help="keep the worktree (debugging)")
    run.add_argument("--no-migrate", action="store_true", help="skip manage.py migrate")
    run.set_defaults(func=cmd_run)
    cmp = sub.add_parser("compare", help="compare two result folders")
    cmp.add_argument("dir_a")
    cmp.add_argument("dir_b")
    cmp.add_argument("--quiet", action="store_true", help="print only the differences")
    cmp.add_argument("--max-lines", type=int, default=25,
                     help="differences printed per file (default 25)")
    cmp.set_defaults(func=cmd_compare)
    args = parser.parse_args(argv)
    if getattr(args, "parallel", 1) < 1:
        parser.error("--parallel must be at least 1")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
