"""Small real LangGraph graphs for the AgentlogSaver tests (and the crash worker's ``__main__``).

Usage: python -m tests.integrations.langgraph_graphs STORE_URL THREAD TURNS
  records TURNS chat turns on THREAD, printing ``ACK <checkpoint id>`` as each ``put`` returns.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.types import interrupt

from agentlog.integrations.langgraph import AgentlogSaver

FILLER = "the quick brown fox jumps over the lazy dog " * 4
"""About 180 characters: every message of a turn has the same size, so storage per turn is flat."""


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def reply(state: Chat) -> dict[str, Any]:
    """The model: one assistant message answering the last user message."""
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"re: {last.content}", id=f"ai-{len(state['messages'])}")]}


def chat_graph(saver: AgentlogSaver) -> Any:
    """START -> reply -> END over an ``add_messages`` channel."""
    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def agent(state: Chat) -> dict[str, Any]:
    """A ReAct model: a ``read_file`` call after each user message, then an answer."""
    last = state["messages"][-1]
    step = len(state["messages"])
    route = {"model_provider": "deepseek", "model_name": "deepseek-chat"}
    if isinstance(last, HumanMessage):
        call = {"id": f"call-{step}", "name": "read_file", "args": {"path": f"notes-{step}.md"}}
        return {"messages": [AIMessage(content="Let me look.", id=f"ai-{step}", tool_calls=[call],
                                       response_metadata=route)]}
    answer = AIMessage(content=f"It says: {last.content}", id=f"ai-{step}", response_metadata=route)
    return {"messages": [answer]}


def tools(state: Chat) -> dict[str, Any]:
    """The tool node: answers every call of the last assistant message."""
    calls = state["messages"][-1].tool_calls
    return {"messages": [ToolMessage(content=f"contents of {call['args']['path']}", tool_call_id=call["id"],
                                     name=call["name"], id=f"tool-{call['id']}") for call in calls]}


def react_graph(saver: AgentlogSaver) -> Any:
    """agent -> tools -> agent ... until the agent answers without a call."""
    builder = StateGraph(Chat)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda state: "tools" if state["messages"][-1].tool_calls else END,
                                  ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def approval(state: Chat) -> dict[str, Any]:
    """Human in the loop: pause for a decision, then log it."""
    decision = interrupt({"question": "send it?", "draft": state["messages"][-1].content})
    answer = HumanMessage(content=f"decision: {decision}", id=f"decision-{len(state['messages'])}")
    return {"messages": [answer]}


def approval_graph(saver: AgentlogSaver | None, *, subgraph: bool = False) -> Any:
    """reply -> approval (interrupts) -> END; with ``subgraph`` the two run inside a child graph."""
    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_node("approval", approval)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", "approval")
    builder.add_edge("approval", END)
    if not subgraph:
        return builder.compile(checkpointer=saver)
    outer = StateGraph(Chat)
    outer.add_node("inner", builder.compile())
    outer.add_edge(START, "inner")
    outer.add_edge("inner", END)
    return outer.compile(checkpointer=saver)


def user(turn: int) -> dict[str, Any]:
    """The input of turn ``turn``: one user message of the filler's size."""
    return {"messages": [HumanMessage(content=f"turn {turn}: {FILLER}", id=f"user-{turn}")]}


def config(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


class AckingSaver(AgentlogSaver):
    """Prints the id of each checkpoint once ``put`` has returned (it is durable then)."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = super().put(config, checkpoint, metadata, new_versions)
        print(f"ACK {stored['configurable']['checkpoint_id']}", flush=True)
        return stored


def main(url: str, thread: str, turns: int) -> None:
    saver = AckingSaver(url)
    graph = chat_graph(saver)
    for turn in range(1, turns + 1):
        graph.invoke(user(turn), config(thread))
    saver.close()



class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]


def delta_chat_graph(saver: AgentlogSaver) -> Any:
    """``chat_graph`` over LangGraph's ``DeltaChannel`` (beta): values rebuilt from the parent chain."""
    def delta_reply(state: DeltaChat) -> dict[str, Any]:  # a node's annotation names its input schema
        return reply(state)  # type: ignore[arg-type]  # the same shape, another reducer

    builder = StateGraph(DeltaChat)
    builder.add_node("reply", delta_reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
