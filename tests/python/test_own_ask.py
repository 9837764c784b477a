"""LispM's own agents in the room (issue 13), the sidecar's part: an ask of a
role starts a helper in Emacs and asks it; answers reach an own agent whatever
it is doing; `lispm/requests` tells a restarted agent how its requests stand;
`list_agents` gives the roles; a resumed own agent keeps what waits for it.

Units run against a real ledger on tmp_path; the link and the MCP tools run
over the real sidecar, with the test as Emacs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
from mcp import Client

from lispm_sidecar.agent import Services
from lispm_sidecar.agents import Agents
from lispm_sidecar.delivery import DeliveryQueue
from lispm_sidecar.emacs_tools import LispTools
from lispm_sidecar.errors import InvalidParams, LispmError
from lispm_sidecar.ledger import Ledger, LedgerError, LedgerStore
from lispm_sidecar.mcp_tools import build_mcp
from lispm_sidecar.messaging import HelperNotReady, Messenger
from lispm_sidecar.protocol import ListAgentsResult
from lispm_sidecar.views import Views
from lispm_sidecar.watchers import AgentActivity

from .sidecar_client import SidecarProcess
from .test_delivery import Recorder, SetWatcher, looked, until
from .test_messaging import call, ledger

EMACS = {"name": "emacs", "instance": 9}
ROLES = [{"name": "reviewer", "description": "Reviews a change; reads only."}]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Ledger]:
    opened = await Ledger.open(tmp_path / "ledger.sqlite3")
    yield opened
    await opened.close()


# --- the Messenger: an ask of a role ---------------------------------------------


class Helpers:
    """A start-helper callback: the helper of ROLE for CALLER is `ROLE` (then
    `ROLE-2`, ...), live from then on, unless the role is unknown."""

    def __init__(self, live: set[str]) -> None:
        self.live = live
        self.started: list[tuple[str, str]] = []

    async def __call__(self, caller: str, role: str) -> str:
        if role != "reviewer":
            raise LispmError("Emacs failed emacs/start-helper: Unknown role nobody; "
                             "the roles are: reviewer")
        self.started.append((caller, role))
        name = role if len(self.started) == 1 else f"{role}-{len(self.started)}"
        self.live.add(name)
        return name


def messenger_of(store: Ledger, live: set[str], helpers: Helpers | None) -> Messenger:
    kinds = {"emacs": "lispm", "claude": "claude"}
    return Messenger(store, lambda: live, lambda _name: None,
                     lambda name: kinds.get(name, "lispm" if name in live else None), helpers)


async def test_an_ask_of_a_role_asks_the_helper_emacs_started(store: Ledger) -> None:
    live = {"emacs", "claude"}
    helpers = Helpers(live)
    messenger = messenger_of(store, live, helpers)
    asked = await messenger.ask("emacs", None, "review notes.el", role="reviewer")
    assert asked == ("asked reviewer, request R1", "R1", "reviewer")
    assert helpers.started == [("emacs", "reviewer")]
    request = await store.request("R1")
    assert (request.asker, request.asked, request.text) == ("emacs", "reviewer", "review notes.el")
    # A terminal agent's tool call does the same; each ask starts a new helper.
    assert await messenger.ask_agent("claude", None, "and mine", "reviewer") == \
        "asked reviewer-2, request R2"
    # The helper is asked as any agent: the wait-for graph counts its edge.
    waits = await messenger.wait_for()
    assert waits.waiting("emacs", "reviewer") == ["R1"]


async def test_exactly_one_of_to_and_role_and_nothing_written(store: Ledger) -> None:
    live = {"emacs", "claude"}
    helpers = Helpers(live)
    messenger = messenger_of(store, live, helpers)
    for to, role in ((None, None), ("claude", "reviewer")):
        with pytest.raises(InvalidParams, match=r"exactly one of to .* and role"):
            await messenger.ask("emacs", to, "?", role)
    with pytest.raises(LispmError, match="Unknown role nobody; the roles are: reviewer"):
        await messenger.ask("emacs", None, "?", "nobody")
    without = messenger_of(store, live, None)
    with pytest.raises(LispmError, match="no helper of role reviewer"):
        await without.ask("emacs", None, "?", "reviewer")
    assert helpers.started == [] and await store.entries(10) == []


async def test_registered_waits_for_the_agent_of_that_instance(
        store: Ledger, tmp_path: Path) -> None:
    services = SimpleNamespace(ledger=store, link=None, on_activity=lambda _agent: None,
                               on_connected=lambda _agent: None)
    agents = Agents(tmp_path / "run", 1, cast(Services, services))
    with pytest.raises(HelperNotReady, match=r"^reviewer \(instance 3\), started by Emacs, "
                                             r"did not register within 0.1 s$"):
        await agents.registered("reviewer", 3, 0.1)
    assert agents.arrivals == {}
    waiting = asyncio.create_task(agents.registered("reviewer", 3, 5))
    await asyncio.sleep(0.05)
    await agents.start("reviewer", "lispm", "/tmp", instance=2)  # an earlier one
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await agents.stop("reviewer", 2)
    await agents.start("reviewer", "lispm", "/tmp", instance=3)
    agent = await asyncio.wait_for(waiting, 5)
    assert (agent.name, agent.instance) == ("reviewer", 3) and agents.arrivals == {}
    # Registered before anyone waits: at once.
    assert (await agents.registered("reviewer", 3, 0)) is agent
    await agents.stop_all(keep_files=False)


# --- delivery: answers go in whatever the agent does -----------------------------


async def own_queue(store: Ledger, answers_anytime: bool = True,
                    ) -> tuple[DeliveryQueue, SetWatcher, Recorder]:
    recorder = Recorder(store)
    recorder.confirms = True  # Emacs says taken
    queue = DeliveryQueue("emacs", 1, store, recorder, lambda _q: None,
                          answers_anytime=answers_anytime)
    watcher = SetWatcher()
    queue.start()
    queue.attach(watcher)
    return queue, watcher, recorder


async def states_of(store: Ledger) -> dict[str, str]:
    return {m.text: m.state for m in await store.entries(100, "emacs") if m.recipient == "emacs"}


async def test_answers_reach_a_busy_own_agent_first_the_rest_waits_for_idle(
        store: Ledger) -> None:
    queue, watcher, recorder = await own_queue(store)
    watcher.set(AgentActivity.BUSY)
    await store.send("claude", "emacs", "fyi")
    asked = await store.ask("codex", "emacs", "which file?")
    first = await store.ask("emacs", "claude", "review?")
    second = await store.ask("emacs", "codex", "test?")
    await store.reply("claude", first.id, "fine")
    [ended] = await store.end_requests_to("codex")
    queue.wake()
    await until(lambda: len(recorder.texts) == 2, "both answers")
    assert recorder.texts == [f"[Reply from claude to request {first.id}]\nfine",
                              f"[Message from lispm]\n{ended.text}"]
    assert ended.text == f"codex ended without replying to request {second.id}."
    # Picked up at once, as Emacs took them; the rest is still queued.
    assert await states_of(store) == {
        "fyi": "queued", "which file?": "queued", "fine": "picked_up", ended.text: "picked_up"}
    since = watcher.consulted
    watcher.set(AgentActivity.WAITING_FOR_APPROVAL)
    await looked(watcher, since)
    assert len(recorder.texts) == 2
    watcher.set(AgentActivity.IDLE)
    await until(lambda: len(recorder.texts) == 4, "the rest, once idle")
    assert recorder.texts[2] == "[Message from claude]\nfyi"
    assert recorder.texts[3].startswith(f"[Request {asked.id} from codex]\nwhich file?")
    await queue.stop()


async def test_when_idle_answers_go_ahead_of_older_messages(store: Ledger) -> None:
    queue, watcher, recorder = await own_queue(store)
    await store.send("claude", "emacs", "older")
    first = await store.ask("emacs", "claude", "review?")
    await store.reply("claude", first.id, "fine")
    watcher.set(AgentActivity.IDLE)
    await until(lambda: len(recorder.texts) == 2, "both")
    assert [text.split("\n")[1] for text in recorder.texts] == ["fine", "older"]
    await queue.stop()


async def test_a_notice_about_a_request_asked_of_it_is_no_answer(store: Ledger) -> None:
    queue, watcher, recorder = await own_queue(store)
    watcher.set(AgentActivity.BUSY)
    asked = await store.ask("claude", "emacs", "review?")
    await store.mark_delivered(asked.message_id)
    notices, _ = await store.end_leftovers("claude", "claude was not resumed")
    assert [(m.recipient, m.request_id) for m in notices] == [("emacs", asked.id)]
    queue.wake()
    since = watcher.consulted
    await store.send("codex", "emacs", "nudge")  # any wake-up
    queue.wake()
    await looked(watcher, since)
    assert recorder.texts == []
    watcher.set(AgentActivity.IDLE)
    await until(lambda: len(recorder.texts) == 2, "both, once idle")
    await queue.stop()


async def test_a_terminal_agent_still_gets_answers_only_when_idle(store: Ledger) -> None:
    queue, watcher, recorder = await own_queue(store, answers_anytime=False)
    watcher.set(AgentActivity.BUSY)
    first = await store.ask("emacs", "claude", "review?")
    await store.reply("claude", first.id, "fine")
    since = watcher.consulted
    queue.wake()
    await looked(watcher, since)
    assert recorder.texts == [] and (await states_of(store))["fine"] == "queued"
    watcher.set(AgentActivity.IDLE)
    await until(lambda: len(recorder.texts) == 1, "the reply, once idle")
    await queue.stop()


async def test_an_answer_not_taken_waits_for_the_next_report(store: Ledger) -> None:
    queue, watcher, recorder = await own_queue(store)
    watcher.set(AgentActivity.BUSY)
    recorder.not_now = 1
    first = await store.ask("emacs", "claude", "review?")
    await store.reply("claude", first.id, "fine")
    queue.wake()
    await until(lambda: recorder.refused == 1, "the refusal")
    await asyncio.sleep(1.3)  # longer than a dialog's retry: no retry, no busy loop
    assert recorder.texts == [] and (await states_of(store))["fine"] == "queued"
    watcher.set(AgentActivity.IDLE)  # Emacs's next report
    await until(lambda: len(recorder.texts) == 1, "the reply")
    assert (await states_of(store))["fine"] == "picked_up"
    await queue.stop()


# --- the ledger: the notice about a request --------------------------------------


def test_notice_about_is_the_newest_to_that_recipient(tmp_path: Path) -> None:
    with LedgerStore(tmp_path / "ledger.sqlite3") as s:
        asked = s.ask("emacs", "codex", "test?")
        assert s.notice_about(asked.id, "emacs") is None
        [notice] = s.end_requests_to("codex")
        s.notify("claude", "about it too", asked.id)
        s.notify("emacs", "not about it")
        found = s.notice_about(asked.id, "emacs")
        assert found is not None and (found.id, found.text) == (notice.id, notice.text)
        assert s.notice_about(asked.id, "nobody") is None


# --- over the real sidecar -------------------------------------------------------


class FakeEmacs:
    """Emacs for the sidecar: it answers `emacs/start-helper` and registers the
    helper (after answering, or before with `register_first`), and records
    each `emacs/deliver`, taking it unless `take` is false."""

    def __init__(self) -> None:
        self.sidecar: SidecarProcess | None = None
        self.delivered: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.helpers: list[dict[str, Any]] = []
        self.register = True
        self.register_first = False
        self.roles: list[dict[str, str]] | None = ROLES
        self.take = True
        self._tasks: set[asyncio.Task[Any]] = set()

    async def _register(self, name: str, instance: int) -> None:
        assert self.sidecar is not None
        await self.sidecar.call("lispm/agent-start", {"name": name, "instance": instance,
                                                      "kind": "lispm", "folder": "/tmp"})

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        if method == "emacs/list-agents":
            return {"agents": [{"name": "emacs", "kind": "lispm", "folder": "/tmp",
                                "state": "idle"}],
                    **({"roles": self.roles} if self.roles is not None else {})}
        if method == "emacs/deliver":
            await self.delivered.put(params)
            return {"taken": self.take}
        if method == "emacs/start-helper":
            self.helpers.append(params)
            if params["role"] != "reviewer":
                return {"__error__": "Unknown role nobody; the roles are: reviewer"}
            name, instance = f"reviewer-{len(self.helpers)}", 100 + len(self.helpers)
            if self.register_first:
                await self._register(name, instance)
            elif self.register:
                task = asyncio.create_task(self._later(name, instance))
                self._tasks.add(task)
            return {"name": name, "instance": instance}
        raise AssertionError(f"unexpected request {method}")

    async def _later(self, name: str, instance: int) -> None:
        await asyncio.sleep(0.3)  # the sidecar already waits for it
        await self._register(name, instance)

    async def next_delivery(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.delivered.get(), 10)


class ErrorsAsEmacs(SidecarProcess):
    """A result `{"__error__": MESSAGE}` goes back as Emacs's JSON-RPC error -32058."""

    async def send_raw(self, body: bytes, header: bytes | None = None) -> None:
        message = orjson.loads(body) if header is None else None
        if isinstance(message, dict) and isinstance(message.get("result"), dict) \
                and "__error__" in message["result"]:
            body = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": {
                "code": -32058, "message": message["result"]["__error__"]}})
        await super().send_raw(body, header)


@pytest.fixture
def emacs() -> FakeEmacs:
    return FakeEmacs()


async def open_sidecar(runtime: Path, emacs: FakeEmacs) -> SidecarProcess:
    process = ErrorsAsEmacs(runtime, emacs)
    emacs.sidecar = process
    await process.start()
    await process.hello()
    return process


@pytest.fixture
async def sidecar(tmp_path: Path, emacs: FakeEmacs) -> AsyncIterator[SidecarProcess]:
    process = await open_sidecar(tmp_path / "run", emacs)
    await process.call("lispm/agent-start", {"name": "claude", "kind": "claude",
                                             "folder": "/tmp", "instance": 1})
    await process.call("lispm/agent-start", dict(EMACS, kind="lispm", folder="/tmp"))
    yield process
    await process.close()


async def error_of(sidecar: SidecarProcess, method: str, **params: Any) -> dict[str, Any]:
    reply = await sidecar.call(method, params, raw=True)
    assert "error" in reply, reply
    found: dict[str, Any] = reply["error"]
    return found


async def test_the_link_asks_a_helper_of_a_role(sidecar: SidecarProcess,
                                                emacs: FakeEmacs) -> None:
    answer = await sidecar.call("lispm/ask-agent", dict(EMACS, role="reviewer", text="review?"))
    assert answer == {"text": "asked reviewer-1, request R1", "request_id": "R1",
                      "to": "reviewer-1"}
    assert emacs.helpers == [{"role": "reviewer", "caller": "emacs", "caller_instance": 9}]
    # The helper registered before Emacs answered: asked at once all the same.
    emacs.register_first = True
    answer = await sidecar.call("lispm/ask-agent", dict(EMACS, role="reviewer", text="again?"))
    assert answer["to"] == "reviewer-2"
    entries = await ledger(sidecar)
    assert [(e["kind"], e["sender"], e["recipient"], e["text"]) for e in entries] == [
        ("request", "emacs", "reviewer-2", "again?"),
        ("request", "emacs", "reviewer-1", "review?")]
    # The helper answers; the reply reaches the asker at once (never said idle).
    await sidecar.call("lispm/reply", {"name": "reviewer-1", "instance": 101,
                                       "request_id": "R1", "text": "looks fine"})
    delivered = await emacs.next_delivery()
    assert (delivered["name"], delivered["kind"], delivered["sender"], delivered["request_id"],
            delivered["text"]) == ("emacs", "reply", "reviewer-1", "R1",
                                   "[Reply from reviewer-1 to request R1]\nlooks fine")


async def test_the_link_refuses_a_bad_ask_of_a_role(sidecar: SidecarProcess,
                                                    emacs: FakeEmacs) -> None:
    unknown = await error_of(sidecar, "lispm/ask-agent", **EMACS, role="nobody", text="?")
    assert "Unknown role nobody; the roles are: reviewer" in unknown["message"], unknown
    both = await error_of(sidecar, "lispm/ask-agent", **EMACS, to="claude", role="reviewer",
                          text="?")
    neither = await error_of(sidecar, "lispm/ask-agent", **EMACS, text="?")
    for error in (both, neither):
        assert error["code"] == -32602 and "exactly one of to" in error["message"], error
    bad = await error_of(sidecar, "lispm/ask-agent", **EMACS, role="", text="?")
    assert (bad["code"], bad["message"]) == (-32602, "role must be a non-empty string")
    assert [h["role"] for h in emacs.helpers] == ["nobody"]
    assert await ledger(sidecar) == []


async def test_a_helper_that_never_registers_is_an_error_after_10_s(
        sidecar: SidecarProcess, emacs: FakeEmacs) -> None:
    emacs.register = False
    loop = asyncio.get_running_loop()
    began = loop.time()
    late = await error_of(sidecar, "lispm/ask-agent", **EMACS, role="reviewer", text="?")
    assert 9.5 < loop.time() - began < 15
    assert (late["code"], late["message"]) == (
        -32022, "reviewer-1 (instance 101), started by Emacs, did not register within 10 s")
    assert await ledger(sidecar) == []


async def test_the_mcp_tools_ask_a_role_and_list_the_roles(sidecar: SidecarProcess,
                                                           emacs: FakeEmacs) -> None:
    assert await call(sidecar, "claude", "ask_agent", role="reviewer", request="review?") == \
        (False, "asked reviewer-1, request R1")
    assert emacs.helpers == [{"role": "reviewer", "caller": "claude", "caller_instance": 1}]
    error, text = await call(sidecar, "claude", "ask_agent", role="nobody", request="?")
    assert error and "Unknown role nobody; the roles are: reviewer" in text, text
    error, text = await call(sidecar, "claude", "ask_agent", request="?")
    assert error and "exactly one of to" in text, text
    error, text = await call(sidecar, "claude", "list_agents")
    assert not error
    assert orjson.loads(text) == {
        "you": "claude", "roles": ROLES,
        "agents": [{"name": "emacs", "kind": "lispm", "folder": "/tmp", "state": "idle"}]}
    emacs.roles = None  # an Emacs that sends none
    assert orjson.loads((await call(sidecar, "claude", "list_agents"))[1])["roles"] == []


async def test_the_ask_agent_tool_tells_the_model_how_to_use_it(store: Ledger) -> None:
    async def room() -> ListAgentsResult:
        return {"agents": [], "roles": [{"name": "reviewer", "description": "Reviews."}]}

    server = build_mcp("claude", 1, room, messenger_of(store, {"claude"}, None),
                       cast(Views, None), cast(LispTools, None))
    async with Client(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        listed = await client.call_tool("list_agents", {})
    schema = tools["ask_agent"].input_schema
    assert schema["required"] == ["request"]
    assert {"to", "role", "request"} <= set(schema["properties"])
    assert "role" in schema["properties"]["role"]["description"]
    description = tools["ask_agent"].description or ""
    for said in ("exactly one", "role", "retires", "returns at", "end your turn"):
        assert said in " ".join(description.split()), said
    assert 'ask_agent(role="<role>"' in (tools["list_agents"].description or "")
    assert listed.structured_content == {
        "you": "claude", "agents": [],
        "roles": [{"name": "reviewer", "description": "Reviews."}]}


# --- lispm/requests, and a resumed own agent --------------------------------------


async def report(sidecar: SidecarProcess, activity: str) -> None:
    await sidecar.send_frames({"jsonrpc": "2.0", "method": "lispm/actor-activity",
                               "params": dict(EMACS, activity=activity)})


async def test_requests_say_how_they_stand_and_a_resumed_agent_keeps_what_waits(
        tmp_path: Path) -> None:
    earlier_emacs = FakeEmacs()
    earlier = await open_sidecar(tmp_path / "run", earlier_emacs)
    for instance, name in enumerate(("claude", "codex", "hermes"), start=1):
        await earlier.call("lispm/agent-start", {"name": name, "kind": "claude",
                                                 "folder": "/tmp", "instance": instance})
    await earlier.call("lispm/agent-start", dict(EMACS, kind="lispm", folder="/tmp"))
    # R3 to hermes: claude may then ask emacs, which waits on hermes only.
    for to in ("claude", "codex", "hermes"):  # R1, R2, R3
        await earlier.call("lispm/ask-agent", dict(EMACS, to=to, text=f"for {to}?"))
    await call(earlier, "claude", "reply", request="R1", text="fine")  # taken at once
    await earlier_emacs.next_delivery()
    await earlier.call("lispm/agent-stop", {"name": "codex", "instance": 2})  # R2 ends
    await earlier_emacs.next_delivery()  # its notice, at once
    await call(earlier, "claude", "ask_agent", to="emacs", request="handed over")  # R4
    await report(earlier, "idle")
    handed = await earlier_emacs.next_delivery()
    assert handed["request_id"] == "R4"
    await report(earlier, "busy")
    await earlier.call("lispm/agents", {})  # the report is in
    await call(earlier, "claude", "ask_agent", to="emacs", request="still queued")  # R5
    # Emacs, dying, no longer takes the reply to R3: it stays queued.
    earlier_emacs.take = False
    await call(earlier, "hermes", "reply", request="R3", text="late")
    assert (await earlier_emacs.next_delivery())["request_id"] == "R3"
    for _ in range(100):
        if {e["text"]: e["state"] for e in await ledger(earlier)}["late"] == "queued":
            break
        await asyncio.sleep(0.05)
    earlier.kill()
    await earlier.close()

    emacs = FakeEmacs()
    sidecar = await open_sidecar(tmp_path / "run", emacs)
    try:
        await sidecar.call("lispm/agent-start", {"name": "claude", "kind": "claude",
                                                 "folder": "/tmp", "instance": 1, "resume": True})
        await sidecar.call("lispm/agent-start", dict(EMACS, kind="lispm", folder="/tmp",
                                                     resume=True))
        # Resumed, nothing was forgotten: the reply to R3 (an answer) comes at once.
        late = await emacs.next_delivery()
        assert (late["kind"], late["request_id"], late["text"]) == \
            ("reply", "R3", "[Reply from hermes to request R3]\nlate")
        answer = await sidecar.call("lispm/requests", dict(
            EMACS, ids=["R1", "R2", "R3", "R4", "R77", "bogus"]))
        assert answer["requests"] == [
            {"request_id": "R1", "asker": "emacs", "asked": "claude", "state": "answered",
             "reply": "fine", "notice": None},
            {"request_id": "R2", "asker": "emacs", "asked": "codex", "state": "ended",
             "reply": None, "notice": "codex ended without replying to request R2."},
            {"request_id": "R3", "asker": "emacs", "asked": "hermes", "state": "answered",
             "reply": "late", "notice": None},
            # R4 was asked of emacs, not by it; R77 and bogus are no requests.
            *({"request_id": rid, "asker": None, "asked": None, "state": "unknown",
               "reply": None, "notice": None} for rid in ("R4", "R77", "bogus"))]
        [open_to_you] = answer["open_to_you"]
        assert open_to_you == {"request_id": "R4", "asker": "claude", "text": handed["text"]}
        assert handed["text"] == (
            "[Request R4 from claude]\nhanded over\n\n(claude waits for your answer: "
            "give it with your reply tool, request R4.)")
        # R5 is still queued: delivered as usual once idle, and not listed.
        await report(sidecar, "idle")
        queued = await emacs.next_delivery()
        assert (queued["kind"], queued["request_id"]) == ("request", "R5")
        bad = await error_of(sidecar, "lispm/requests", **EMACS, ids="R1")
        assert (bad["code"], bad["message"]) == (-32602, "ids must be a list of request ids")
        stranger = await error_of(sidecar, "lispm/requests", name="emacs", instance=3, ids=[])
        assert stranger["code"] == -32001
    finally:
        await sidecar.close()


# --- the user takes back a queued message ------------------------------------------


async def test_the_user_withdraws_a_queued_plain_message_and_its_sender_is_told(
        store: Ledger) -> None:
    live = {"emacs", "claude"}
    woken: list[str] = []
    messenger = Messenger(store, lambda: live, woken.append)
    await messenger.send_message("claude", "emacs", "FYI: the build is green.")
    await messenger.ask("claude", "emacs", "Anything else?")
    message, request = sorted(await store.entries(10), key=lambda m: m.id)
    assert await messenger.withdraw(message.id) == f"withdrew message {message.id} to emacs"
    withdrawn = await store.message(message.id)
    assert (withdrawn.state, withdrawn.reason) == ("failed", "withdrawn by the user")
    assert [m.text for m in await store.queued_for("claude")] == [
        "The user withdrew your message to emacs before delivery."]
    assert "emacs" in woken and "claude" in woken
    # A request someone waits on stays; a message no longer queued cannot be taken back.
    with pytest.raises(InvalidParams, match="only a plain message can be withdrawn"):
        await messenger.withdraw(request.id)
    with pytest.raises(LedgerError, match="it cannot be withdrawn"):
        await messenger.withdraw(message.id)
    assert [m.id for m in await store.queued_for("emacs")] == [request.id]
