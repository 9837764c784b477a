"""`run_lisp_40_files_*`: a turn that reads 40 files with one run_lisp program, against one
that calls read_file 40 times.

LispM's own agent (`agent-bench.el`, case `turns`, byte-compiled as in
`bench_agent.py`) answers the same question twice, through the real
sidecar, against the scripted gateway (`timed_gateway.py`) with a fixed
latency of `LATENCY_MS` before every model reply: how many of the 40
notes in `notes/` contain "TODO".  In one turn the model sends one
`run_lisp` program that reads them all and counts; in the other it calls
`read_file` once per note, then answers.  Reads are allowed at once (the
policy `((default (read allow)))`; run_lisp's kind is `read`).  After
an untimed turn of each, `ROUNDS` rounds of both, side by side.

The round trips are counted in the gateway's own log (`GET
/_gateway/requests`): a turn's model requests, minus the first one (the
prompt), are its round trips for tool work.  Both turns must find the
same count, the number of notes made with "TODO": the run_lisp turn's
is the value of its program as the model got it (`Value: N`), the
read_file turn's the number of its 40 results that contain "TODO", as the
model saw them; if either differs (or the run_lisp turn's answer in
Emacs does not say it), the benchmark fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from .bench_agent import compiled_lispm, run_agent_bench, timed_gateway
from .core import Context, Metric, Target, median, spread

FILES = 40
#: Timed rounds of both turns, after one untimed turn of each.
ROUNDS = 5
#: The gateway's wait before it answers each model request.
LATENCY_MS = 200
PROGRAM_PROMPT = "How many notes have a TODO? Count them in one program."
CALLS_PROMPT = "How many notes have a TODO? Read them one by one."
PROGRAM = f"""(let ((count 0))
  (dolist (n (number-sequence 1 {FILES}))
    (when (string-search "TODO" (read-file (format "notes/note-%02d.org" n)))
      (cl-incf count)))
  count)"""


def note_path(n: int) -> str:
    """The path of note N (1 to `FILES`), relative to the agent's folder."""
    return f"notes/note-{n:02d}.org"


def make_notes(folder: Path) -> int:
    """Write the `FILES` notes under FOLDER; return how many contain "TODO"."""
    (folder / "notes").mkdir(parents=True, exist_ok=True)
    todos = 0
    for n in range(1, FILES + 1):
        lines = [f"#+title: Note {n}", "", f"* Meeting {n}"]
        lines += [f"- point {n}.{i}: the quick brown fox jumps over the lazy dog"
                  for i in range(20)]
        if n % 3 == 0:
            lines.append(f"** TODO Follow up on point {n}.7")
            todos += 1
        else:
            lines.append(f"** DONE Sent the minutes of meeting {n}")
        (folder / note_path(n)).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return todos


def script() -> list[dict[str, Any]]:
    """The model's part: one run_lisp program, or one read_file call per note."""
    reads = [{"tool": "read_file", "args": {"path": note_path(n)}} for n in range(1, FILES + 1)]
    return [
        {"match": PROGRAM_PROMPT,
         "steps": [{"tool": "run_lisp", "args": {"program": PROGRAM}},
                   {"say": "Notes with a TODO: {last_tool_result}"}]},
        {"match": CALLS_PROMPT, "steps": [*reads, {"say": f"I read the {FILES} notes."}]},
    ]


def turns_of(entries: Sequence[dict[str, Any]], prompt: str) -> list[list[dict[str, Any]]]:
    """The gateway's main requests for PROMPT, grouped by turn (a turn starts with no results)."""
    turns: list[list[dict[str, Any]]] = []
    for entry in entries:
        if entry["kind"] != "main" or entry["prompt"] != prompt:
            continue
        if not entry["tool_results"] or not turns:
            turns.append([])
        turns[-1].append(entry)
    return turns


def program_count(turn: Sequence[dict[str, Any]]) -> int:
    """The count the run_lisp turn answered: its program's value, as the model got it."""
    results = turn[-1]["tool_results"]
    found = re.fullmatch(r"Value: (\d+)", results[-1]["text"]) if results else None
    if len(results) != 1 or results[0]["name"] != "run_lisp" or found is None:
        raise RuntimeError(f"the run_lisp turn did not get one count from its program: {results}")
    return int(found[1])


def calls_count(turn: Sequence[dict[str, Any]]) -> int:
    """The count the read_file turn's model can give: its results containing "TODO"."""
    results = turn[-1]["tool_results"]
    if len(results) != FILES or any(r["name"] != "read_file" for r in results):
        raise RuntimeError(f"the read_file turn got {len(results)} results, not {FILES} reads")
    return sum("TODO" in r["text"] for r in results)


def round_trips(turns: Sequence[Sequence[dict[str, Any]]], what: str) -> int:
    """The model round trips for tool work of each of TURNS: requests − 1, the same in each."""
    counts = {len(turn) - 1 for turn in turns}
    if len(counts) != 1:
        raise RuntimeError(f"the {what} turns made different numbers of requests: {counts}")
    return counts.pop()


async def forty_files(context: Context) -> list[Metric]:
    """Both metrics of one run: round trips from the gateway's log, wall times from Emacs."""
    work = context.work / "run-lisp-40"
    elisp = await compiled_lispm(context)
    todos = make_notes(work / "project")
    (work / "prompts.json").write_text(json.dumps([PROGRAM_PROMPT, CALLS_PROMPT]))
    async with timed_gateway(context, work, script(), LATENCY_MS, name="run-lisp-gateway") as url:
        data = await run_agent_bench(context, elisp, work, "turns", ROUNDS, url)
        async with aiohttp.ClientSession() as session, \
                session.get(f"{url}/_gateway/requests") as response:
            entries = await response.json()
    program_turns = turns_of(entries, PROGRAM_PROMPT)
    calls_turns = turns_of(entries, CALLS_PROMPT)
    if len(program_turns) != ROUNDS + 1 or len(calls_turns) != ROUNDS + 1:
        raise RuntimeError(f"the gateway saw {len(program_turns)} run_lisp turns and "
                           f"{len(calls_turns)} read_file turns, not {ROUNDS + 1} of each")
    counts = {"run_lisp": {program_count(turn) for turn in program_turns},
              "read_file": {calls_count(turn) for turn in calls_turns}}
    if counts != {"run_lisp": {todos}, "read_file": {todos}}:
        raise RuntimeError(f"the turns counted {counts}; {todos} notes contain TODO")
    answers = {t["answer"] for t in data["turns"] if t["prompt"] == PROGRAM_PROMPT}
    if answers != {f"Notes with a TODO: Value: {todos}"}:
        raise RuntimeError(f"the run_lisp turns answered {answers} in Emacs")
    program_trips = round_trips(program_turns, "run_lisp")
    calls_trips = round_trips(calls_turns, "read_file")
    program_ms = [t["wall_ms"] for t in data["turns"] if t["prompt"] == PROGRAM_PROMPT]
    calls_ms = [t["wall_ms"] for t in data["turns"] if t["prompt"] == CALLS_PROMPT]
    ratio = median(program_ms) / median(calls_ms)
    setting = (f"{FILES} notes, {todos} with TODO, both turns counted {todos}; "
               f"gateway latency {LATENCY_MS} ms per request")
    return [
        Metric("run_lisp_40_files_round_trips", program_trips, "round trips", Target("<=", 1),
               f"{program_trips} against {calls_trips} (read_file per file): the model's "
               f"requests of a turn minus its first, from the gateway's log "
               f"({program_trips + 1} and {calls_trips + 1}); {setting}"),
        Metric("run_lisp_40_files_wall_ratio", ratio, "×", Target("<=", 0.1),
               f"median wall time of the run_lisp turn over the read_file turn's, "
               f"{ROUNDS} rounds side by side; {setting}"),
        Metric("run_lisp_40_files_program_turn_ms", median(program_ms), "ms",
               note=f"the run_lisp turn, median of {ROUNDS}, from lispm-own-agent-send to "
               f"the turn's end ({spread(program_ms, digits=0)})"),
        Metric("run_lisp_40_files_read_file_turn_ms", median(calls_ms), "ms",
               note=f"the turn of {FILES} read_file calls, the same way "
               f"({spread(calls_ms, digits=0)})"),
    ]
