//! Text and reasoning parts: opened by a start chunk, grown by deltas, closed
//! by an end chunk; `finish-step` closes whatever is still open.

use std::collections::HashMap;

use super::{Applied, MessageReducer};
use crate::protocol::chunk::{self, ProviderMetadata};
use crate::protocol::message::{ReasoningPart, TextPart, TextState, UiPart};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BlockKind {
    Text,
    Reasoning,
}

/// The mutable fields of an open text or reasoning part.
struct BlockMut<'a> {
    text: &'a mut String,
    state: &'a mut Option<TextState>,
    provider_metadata: &'a mut Option<ProviderMetadata>,
}

fn block_part_mut(parts: &mut [UiPart], index: usize, kind: BlockKind) -> Option<BlockMut<'_>> {
    match (parts.get_mut(index), kind) {
        (Some(UiPart::Text(p)), BlockKind::Text) => Some(BlockMut {
            text: &mut p.text,
            state: &mut p.state,
            provider_metadata: &mut p.provider_metadata,
        }),
        (Some(UiPart::Reasoning(p)), BlockKind::Reasoning) => Some(BlockMut {
            text: &mut p.text,
            state: &mut p.state,
            provider_metadata: &mut p.provider_metadata,
        }),
        _ => None,
    }
}

impl MessageReducer {
    /// Opens a text or reasoning part; its deltas find it by its stream id.
    pub(super) fn start_block(&mut self, kind: BlockKind, start: &chunk::Boundary) -> Applied {
        let index = self.message.parts.len();
        self.active_blocks(kind).insert(start.id.clone(), index);
        self.message.parts.push(match kind {
            BlockKind::Text => UiPart::Text(TextPart {
                text: String::new(),
                state: Some(TextState::Streaming),
                provider_metadata: start.provider_metadata.clone(),
            }),
            BlockKind::Reasoning => UiPart::Reasoning(ReasoningPart {
                id: Some(start.id.clone()),
                text: String::new(),
                state: Some(TextState::Streaming),
                provider_metadata: start.provider_metadata.clone(),
            }),
        });
        Applied::Updated
    }

    fn active_blocks(&mut self, kind: BlockKind) -> &mut HashMap<String, usize> {
        match kind {
            BlockKind::Text => &mut self.active_text,
            BlockKind::Reasoning => &mut self.active_reasoning,
        }
    }

    /// Appends a delta to its open block; `None` if no block with that id is open.
    pub(super) fn append_delta(
        &mut self,
        kind: BlockKind,
        delta: &chunk::Delta,
    ) -> Option<Applied> {
        let index = *self.active_blocks(kind).get(&delta.id)?;
        let block = block_part_mut(&mut self.message.parts, index, kind)?;
        block.text.push_str(&delta.delta);
        if delta.provider_metadata.is_some() {
            block.provider_metadata.clone_from(&delta.provider_metadata);
        }
        Some(Applied::Updated)
    }

    /// Closes an open block; `None` if no block with that id is open.
    pub(super) fn end_block(&mut self, kind: BlockKind, end: &chunk::Boundary) -> Option<Applied> {
        let index = *self.active_blocks(kind).get(&end.id)?;
        let block = block_part_mut(&mut self.message.parts, index, kind)?;
        *block.state = Some(TextState::Done);
        if end.provider_metadata.is_some() {
            block.provider_metadata.clone_from(&end.provider_metadata);
        }
        self.active_blocks(kind).remove(&end.id);
        Some(Applied::Updated)
    }
}
