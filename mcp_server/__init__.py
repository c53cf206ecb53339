"""MCP server: the evaluator and skill memory as tools for external agents (installed as kernelskill.mcp_server)."""
