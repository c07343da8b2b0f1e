"""The app's models (Conversation, AgentState, DisplayMessage, AgentRun) live here."""
