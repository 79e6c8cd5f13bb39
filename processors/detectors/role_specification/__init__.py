"""FM-1.2 Disobey role specification: an agent acts outside its role.

Rules, both in roles.py (they read the same roles the run's spans declared):
- `tool_outside_role`: an agent calls a tool its role does not list (`mast.agent.allowed_tools`
  on the agent's span, else `agent_tools` in the configuration);
- `read_only_role_mutates`: an agent whose role is to investigate (`mast.agent.read_only` on
  its span, or its name matching `read_only_agents`) performs a mutating call.

An agent's span ends after its calls, so calls are checked again when the run closes against
every role attribute seen by then.
"""
