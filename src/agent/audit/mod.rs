//! Receipts anyone can check (issue #38, ADR 0029): the audit log as a hash chain
//! ([`chain`], extended by every store in the transaction that appends), the server's signed
//! checkpoints of it ([`checkpoint`], made by the [`notary::Notary`] every so many records, on
//! demand and at shutdown), the verifiable export and the receipt of one executed call
//! ([`export`]), and `countersign audit verify` ([`verify`], [`cli`]), which checks either
//! offline: the chain, the checkpoints' signatures, each passkey assertion against the key
//! recorded when the passkey was registered, and that the signatures satisfy the rule of the
//! recorded policy for the exact arguments that ran.

pub mod chain;
pub mod checkpoint;
pub mod cli;
pub mod export;
pub mod notary;
pub mod verify;

pub use checkpoint::{Checkpoint, CheckpointKey};
pub use notary::Notary;
