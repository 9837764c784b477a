"""The tools every agent's MCP server offers.

The seven tools: `list_agents`, the messaging tools (`send_message`,
`ask_agent`, `reply`), and LispM's own tools and skills (`search_tools`,
`skill`, `call_tool`, which run in Emacs under the user's policy); plus
the read-only views of Emacs (see `views.py`).  Each description is
written so that a model uses the tool right with no other prompting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from . import __version__
from .emacs_tools import LispTools
from .errors import tool_errors
from .messaging import Messenger
from .protocol import ListAgentsResult
from .views import Views, add_views

ListAgents = Callable[[], Awaitable[ListAgentsResult]]

INSTRUCTIONS = """\
You are one of several AI agents running side by side in the user's Emacs, \
managed by LispM. With these tools you can see the other agents, send them \
messages, ask them for help and answer their requests. Messages from other \
agents reach you as your next input, starting with a header such as \
[Message from codex], [Request R1 from claude] or [Reply from codex to request R1]."""

LIST_AGENTS = """\
List the agents running in this Emacs: every live agent, with its name (use \
it to address the agent), kind (claude, codex, ...; lispm for LispM's own \
agents), folder (the project it works in) and state (starting, running, \
idle, busy, waiting-for-approval). The result also says which of them is \
you, and lists the roles (name, description): for help from a fresh agent \
of a role, call ask_agent(role="<role>", request="..."), which starts a \
helper of that role in your folder; it answers your request, then retires."""

SEND_MESSAGE = """\
Send a message to another agent. It returns at once. The message reaches the \
other agent as its next input, headed [Message from <your name>], as soon as \
that agent is waiting for its user. Use it to inform; when you need an answer, \
use ask_agent instead. Refer to places as org links: [[file:/abs/path::LINE]], \
[[buffer:NAME]]."""

ASK_AGENT = """\
Ask another agent to do something or to answer a question. Give exactly one \
of `to`, a live agent's name, and `role`, a role's name (both from \
list_agents): with a role, LispM starts a new helper of that role in your \
folder and asks it; it answers this one request, then retires. It returns at \
once with the agent asked and a request id such as R1; that agent receives \
[Request R1 from <your name>] with your request. Its answer arrives later as \
your next input, headed [Reply from <agent> to request R1] (or a notice that \
it ended without replying). So after asking, end your turn: do not wait, poll \
or ask again. Write the request so it stands alone (the other agent does not \
see your conversation); refer to places as [[file:/abs/path::LINE]]."""

REPLY = """\
Answer a request that another agent sent you, received as [Request R1 from \
<agent>]: pass its id and your answer. Only the agent that was asked can \
reply, and only once per request; the asker receives [Reply from <your name> \
to request R1] followed by your text. Make the answer complete: it is all \
the asker gets."""

SEARCH_TOOLS = """\
Find LispM's tools and skills by words (for example "edit file", "shell", \
"grep"). Each result has a name, its kind (read, edit, shell, eval, message; \
or skill) and a short description. Run a tool with call_tool; learn a skill \
with skill."""

SKILL = """\
Learn one of LispM's skills by name (find them with search_tools): returns \
its instructions, and loads its code so that its tools can be called with \
call_tool from your next step on. A project's skill code loads only once the \
user trusts the project; its instructions can always be read."""

CALL_TOOL = """\
Run one of LispM's tools in your own folder, as an agent of LispM's default \
role: e.g. call_tool("edit_file", {"path": "notes.el", "old": "...", "new": \
"..."}). Find tools and their arguments with search_tools. Reads run at once; \
edits, shell commands and Lisp evaluation wait for the user's approval in \
Emacs (the call stays open meanwhile), and a denial comes back as an error \
with the user's reason. Paths outside your folder are refused."""

To = Annotated[str, Field(description="The name of the other agent, e.g. codex (see list_agents).")]
Text = Annotated[str, Field(description="The message, as plain text (markdown is fine).")]


def build_mcp(
    agent_name: str, instance: int, list_agents: ListAgents, messenger: Messenger,
    views: Views, lisp_tools: LispTools,
) -> MCPServer:
    """Return the MCP server of the agent AGENT_NAME.

    LIST_AGENTS fetches the live agents from Emacs, the source of truth;
    MESSENGER carries messages through the ledger; VIEWS shows Emacs as
    this agent may see it.
    """
    server: MCPServer = MCPServer(name="lispm", instructions=INSTRUCTIONS, version=__version__)

    @tool_errors
    async def list_agents_tool() -> dict[str, Any]:
        room = await list_agents()
        return {"you": agent_name, "agents": room["agents"], "roles": room.get("roles", [])}

    @tool_errors
    async def send_message(to: To, text: Text) -> str:
        return await messenger.send_message(agent_name, to, text)

    @tool_errors
    async def ask_agent(
        request: Annotated[str, Field(description="What you ask of the other agent.")],
        to: Annotated[str | None, Field(
            description="The name of the agent to ask, e.g. codex (see list_agents); "
                        "leave out when you give role.")] = None,
        role: Annotated[str | None, Field(
            description="A role's name, e.g. reviewer (see list_agents): a new helper "
                        "of that role is started and asked; leave out when you give to.")
        ] = None,
    ) -> str:
        return await messenger.ask_agent(agent_name, to, request, role)

    @tool_errors
    async def reply(
        request: Annotated[str, Field(description="The request id you were sent, e.g. R1.")],
        text: Annotated[str, Field(description="Your complete answer.")],
    ) -> str:
        return await messenger.reply(agent_name, request, text)

    @tool_errors
    async def search_tools(
        query: Annotated[str, Field(description="Words to look for.")],
    ) -> dict[str, Any]:
        return {"results": await lisp_tools.search(agent_name, instance, query)}

    @tool_errors
    async def skill(
        name: Annotated[str, Field(description="The skill's name, from search_tools.")],
    ) -> dict[str, Any]:
        return await lisp_tools.skill(agent_name, instance, name)

    @tool_errors
    async def call_tool(
        name: Annotated[str, Field(description="The tool's name, from search_tools.")],
        args: Annotated[dict[str, Any] | None,
                        Field(description="The tool's arguments, an object.")] = None,
    ) -> str:
        return await lisp_tools.call(agent_name, instance, name, args or {})

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    talks = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    server.add_tool(list_agents_tool, name="list_agents", title="List agents",
                    description=LIST_AGENTS, annotations=read_only)
    server.add_tool(send_message, name="send_message", title="Send a message",
                    description=SEND_MESSAGE, annotations=talks, structured_output=False)
    server.add_tool(ask_agent, name="ask_agent", title="Ask an agent",
                    description=ASK_AGENT, annotations=talks, structured_output=False)
    server.add_tool(reply, name="reply", title="Reply to a request",
                    description=REPLY, annotations=talks, structured_output=False)
    server.add_tool(search_tools, name="search_tools", title="Search LispM's tools",
                    description=SEARCH_TOOLS, annotations=read_only)
    server.add_tool(skill, name="skill", title="Learn a skill", description=SKILL,
                    annotations=talks)
    server.add_tool(call_tool, name="call_tool", title="Call a LispM tool",
                    description=CALL_TOOL, structured_output=False,
                    annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    add_views(server, views)
    return server
