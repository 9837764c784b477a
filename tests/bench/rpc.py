"""Emacs↔sidecar round trips, both ways, against a bare jsonrpc.el ↔ Python echo.

The timing happens in a batch Emacs (`rpc-bench.el`), which prints the seconds
of each measurement as one line of JSON; this module turns them into metrics.
"""

from __future__ import annotations

from typing import Any

from .core import BENCH_DIR, Context, Metric, Target, median, run_emacs_json, spread

COUNT = 2000
ROUNDS = 7
TIMEOUT = 300


async def run_emacs(context: Context, count: int = COUNT, rounds: int = ROUNDS) -> dict[str, Any]:
    """Run `rpc-bench.el` and return the JSON it printed."""
    env = context.env(
        context.runtime_dir("rpc"),
        LISPM_BENCH_ECHO_PEER=str(BENCH_DIR / "echo_peer.py"),
        LISPM_BENCH_RPC_COUNT=str(count),
        LISPM_BENCH_RPC_ROUNDS=str(rounds),
    )
    return await run_emacs_json(context.emacs_command("-l", str(BENCH_DIR / "rpc-bench.el")),
                                env, "rpc-bench.el", TIMEOUT)


async def roundtrip(context: Context) -> list[Metric]:
    """Measure `rpc_roundtrip_ratio` and the four per-request times behind it."""
    data = await run_emacs(context)
    count = int(data["count"])

    def ms_per_request(case: str) -> float:
        return median(data[case]) / count * 1000

    def note(case: str) -> str:
        return f"rounds {spread(data[case], 1000 / count)}"

    ours_ep, ours_pe = ms_per_request("ours_to_sidecar"), ms_per_request("ours_to_emacs")
    base_ep, base_pe = ms_per_request("echo_to_peer"), ms_per_request("echo_to_emacs")
    return [
        Metric(
            "rpc_roundtrip_ratio",
            (ours_ep + ours_pe) / (base_ep + base_pe),
            "×",
            Target("<=", 1.5),
            "ours / bare jsonrpc.el + stdlib echo",
        ),
        Metric("rpc_roundtrip_ms_per_req", (ours_ep + ours_pe) / 2, "ms",
               note="mean of both directions"),
        Metric("rpc_roundtrip_baseline_ms_per_req", (base_ep + base_pe) / 2, "ms",
               note="mean of both directions"),
        Metric("rpc_emacs_to_sidecar_ms_per_req", ours_ep, "ms", note=note("ours_to_sidecar")),
        Metric("rpc_sidecar_to_emacs_ms_per_req", ours_pe, "ms", note=note("ours_to_emacs")),
        Metric("rpc_baseline_emacs_to_peer_ms_per_req", base_ep, "ms",
               note=note("echo_to_peer")),
        Metric("rpc_baseline_peer_to_emacs_ms_per_req", base_pe, "ms",
               note=note("echo_to_emacs")),
    ]
