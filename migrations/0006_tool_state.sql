-- What tools keep between calls (ToolContext::with_state): one JSON object per session, by
-- tool name, so a new tool that keeps state needs no table or column of its own. Existing
-- sessions start with no tool state.
ALTER TABLE sessions ADD COLUMN tool_state TEXT NOT NULL DEFAULT '{}';
