"""The reasoning graph as an MCP server for coding agents (tools, resources, prompts over stdio or /mcp)."""
