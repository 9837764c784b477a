"""`run_lisp_check_ms`: Emacs reading and checking a 200-line run_lisp program (lisp-bench.el);
`run_lisp_child_start_ms`: starting a program's sandboxed Emacs (run-lisp-start-bench.el)."""

from __future__ import annotations

from .core import BENCH_DIR, Context, Metric, Target, run_emacs_json, spread

TIMEOUT = 120


async def check_200_lines(context: Context) -> list[Metric]:
    """Run lisp-bench.el in a batch Emacs; report its median round."""
    runtime = context.runtime_dir("lisp")
    data = await run_emacs_json(
        context.emacs_command("-l", str(BENCH_DIR / "lisp-bench.el")),
        context.env(runtime, TMPDIR=str(runtime)), "lisp-bench.el", TIMEOUT)
    return [
        Metric("run_lisp_check_ms", float(data["run_lisp_check_ms"]), "ms", Target("<=", 20),
               f"median of 21 rounds ({spread(data['rounds'], digits=1)}); read and check "
               f"a {data['lines']}-line program, lispm-lisp.el byte-compiled; from source: "
               f"{float(data['run_lisp_check_source_ms']):.0f} ms"),
    ]


async def child_start(context: Context) -> list[Metric]:
    """Run run-lisp-start-bench.el in a batch Emacs; report its medians."""
    runtime = context.runtime_dir("lisp-start")
    data = await run_emacs_json(
        context.emacs_command("-l", str(BENCH_DIR / "run-lisp-start-bench.el")),
        context.env(runtime, TMPDIR=str(runtime)), "run-lisp-start-bench.el", TIMEOUT)
    return [
        Metric("run_lisp_child_start_ms", float(data["run_lisp_child_start_ms"]), "ms",
               Target("<=", 150),
               f"median of 21 rounds ({spread(data['rounds'], digits=1)}); the program nil "
               f"from lispm-run-lisp-start to its result, sandbox: {data['sandbox']}; a bare "
               f"emacs --batch -Q in the same rounds: "
               f"{float(data['bare_emacs_start_ms']):.1f} ms"),
    ]
