"""LangGraph: a ReAct-style graph (model node, tool node) built by hand on `langchain-openai`
(Chat Completions), instrumented by `openinference-instrumentation-langchain`."""

from __future__ import annotations

from tests.frameworks import agent_side
from tests.frameworks.scenarios import SINGLE_AGENT, TASK, Cluster

SERVICE = "sre-graph"


def main() -> None:
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider, recorder = agent_side.tracer_provider(SERVICE)
    LangChainInstrumentor().instrument(tracer_provider=provider)
    server = agent_side.model_server()
    cluster = Cluster()

    @tool
    def get_pod_status(deployment: str, namespace: str) -> str:
        """Readiness and state of a deployment's pods."""
        return cluster.get_pod_status(deployment, namespace)

    @tool
    def get_logs(deployment: str, namespace: str) -> str:
        """Recent logs of a deployment's pods."""
        return cluster.get_logs(deployment, namespace)

    @tool
    def apply_manifest(manifest: str) -> str:
        """Apply a Kubernetes manifest (YAML) to the cluster."""
        return cluster.apply_manifest(manifest)

    @tool
    def restart_deployment(deployment: str, namespace: str) -> str:
        """Restart a deployment's pods."""
        return cluster.restart_deployment(deployment, namespace)

    tools = [get_pod_status, get_logs, apply_manifest, restart_deployment]
    model = ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-scripted", max_retries=0
    ).bind_tools(tools)

    def call_model(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile()
    del END

    runs: dict[str, list[str]] = {}
    for scenario in SINGLE_AGENT:
        server.play(list(scenario.turns))
        cluster.__init__()  # type: ignore[misc]
        with recorder.scenario(runs, scenario.name):
            result = app.invoke({"messages": [HumanMessage(TASK)]}, {"recursion_limit": 30})
        assert result["messages"][-1].content == scenario.answer
    server.stop()
    agent_side.finish(provider, runs)


if __name__ == "__main__":
    main()
