//! The Gemini API's wire types (camelCase on the wire). One `Part` type serves requests and
//! responses: every field is optional and unknown response fields (`inlineData` of image models,
//! `executableCode`, …) are ignored.

use super::*;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GenerateContentRequest {
    pub(super) contents: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) system_instruction: Option<Content>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) generation_config: Option<GenerationConfig>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::models::providers) struct Content {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) role: Option<String>,
    #[serde(default)]
    pub(in crate::models::providers) parts: Vec<Part>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::models::providers) struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) thought: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) thought_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) function_call: Option<FunctionCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) function_response: Option<FunctionResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) inline_data: Option<Blob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) file_data: Option<FileData>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::models::providers) struct FunctionCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) id: Option<String>,
    pub(in crate::models::providers) name: String,
    #[serde(default)]
    pub(in crate::models::providers) args: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::models::providers) struct FunctionResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::models::providers) id: Option<String>,
    pub(in crate::models::providers) name: String,
    pub(in crate::models::providers) response: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::models::providers) struct Blob {
    pub(in crate::models::providers) mime_type: String,
    pub(in crate::models::providers) data: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::models::providers) struct FileData {
    pub(super) mime_type: String,
    pub(super) file_uri: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Tool {
    pub(super) function_declarations: Vec<FunctionDeclaration>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::models::providers) struct FunctionDeclaration {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) parameters_json_schema: Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GenerationConfig {
    pub(super) thinking_config: ThinkingConfig,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThinkingConfig {
    pub(super) include_thoughts: bool,
}

/// One SSE event of the response.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StreamChunk {
    #[serde(default)]
    pub(super) candidates: Vec<Candidate>,
    #[serde(default)]
    pub(super) usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    pub(super) prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    pub(super) error: Option<ErrorBody>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Candidate {
    #[serde(default)]
    pub(super) content: Option<Content>,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
    #[serde(default)]
    pub(super) index: u32,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UsageMetadata {
    pub(super) prompt_token_count: Option<u64>,
    pub(super) candidates_token_count: Option<u64>,
    pub(super) thoughts_token_count: Option<u64>,
    pub(super) total_token_count: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptFeedback {
    #[serde(default)]
    pub(super) block_reason: Option<String>,
}

/// `{"error": {"code": 429, "message": "…", "status": "RESOURCE_EXHAUSTED", "details": […]}}`
#[derive(Debug, Default, Deserialize)]
pub(super) struct ErrorBody {
    #[serde(default)]
    pub(super) code: Option<i64>,
    #[serde(default)]
    pub(super) message: Option<String>,
    #[serde(default)]
    pub(super) status: Option<String>,
    #[serde(default)]
    pub(super) details: Vec<Value>,
}
