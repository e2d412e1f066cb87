//! Signed checkpoints of the audit chain (ADR 0029): the server's Ed25519 signature over
//! `"countersign audit checkpoint v1\0" ‖ seq ‖ hash ‖ since ‖ at_ms` (integers as 8 bytes,
//! big-endian; `hash` the chain's 32 bytes at `seq`). Whoever holds a checkpoint (an operator
//! who published it elsewhere, a receipt) can tell a chain rewritten after it from the one the
//! server signed.

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::chain::{Hash, hex, parse_hash, parse_hex};
use crate::agent::clock::Millis;

/// What a checkpoint's signature covers first.
const DOMAIN: &[u8] = b"countersign audit checkpoint v1\0";

/// The chain's head as the server signed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The last record it covers.
    pub seq: i64,
    /// The chain's hash at `seq` (hex).
    pub hash: String,
    /// Records up to here existed before the chain did (ADR 0029).
    pub since: i64,
    pub at_ms: Millis,
    /// The Ed25519 public key that signed it (hex).
    pub key: String,
    /// The signature (hex, 64 bytes).
    pub signature: String,
}

/// Why a checkpoint does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("its key is not an Ed25519 public key in hex")]
    Key,
    #[error("its hash is not 64 hex digits")]
    Hash,
    #[error("its signature is not 64 bytes in hex")]
    Encoding,
    #[error("its signature does not verify with its key")]
    Signature,
    #[error("it is signed with key {found}, not {expected}")]
    OtherKey { found: String, expected: String },
}

fn message(seq: i64, hash: &Hash, since: i64, at_ms: Millis) -> Vec<u8> {
    let mut m = Vec::with_capacity(DOMAIN.len() + 8 + 32 + 8 + 8);
    m.extend_from_slice(DOMAIN);
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(hash);
    m.extend_from_slice(&since.to_be_bytes());
    m.extend_from_slice(&at_ms.to_be_bytes());
    m
}

/// The server's checkpoint key, from the 32-byte seed the store keeps.
#[derive(Clone)]
pub struct CheckpointKey {
    key: SigningKey,
}

impl std::fmt::Debug for CheckpointKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointKey")
            .field("public", &self.public())
            .finish()
    }
}

impl CheckpointKey {
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        CheckpointKey {
            key: SigningKey::from_bytes(seed),
        }
    }

    /// The public key (hex): what `/.well-known/countersign-audit-key` serves.
    pub fn public(&self) -> String {
        hex(self.key.verifying_key().as_bytes())
    }

    /// Signs the chain's head `seq` / `hash`.
    pub fn sign(&self, seq: i64, hash: &Hash, since: i64, at_ms: Millis) -> Checkpoint {
        let signature = self.key.sign(&message(seq, hash, since, at_ms));
        Checkpoint {
            seq,
            hash: hex(hash),
            since,
            at_ms,
            key: self.public(),
            signature: hex(&signature.to_bytes()),
        }
    }
}

impl Checkpoint {
    /// Checks the signature against the key the checkpoint names, which must be `expected`
    /// (the server's published key) when given.
    pub fn verify(&self, expected: Option<&str>) -> Result<Hash, CheckpointError> {
        if let Some(expected) = expected
            && !expected.eq_ignore_ascii_case(&self.key)
        {
            return Err(CheckpointError::OtherKey {
                found: self.key.clone(),
                expected: expected.to_owned(),
            });
        }
        let key: [u8; 32] = parse_hex(&self.key)
            .and_then(|k| k.try_into().ok())
            .ok_or(CheckpointError::Key)?;
        let key = VerifyingKey::from_bytes(&key).map_err(|_| CheckpointError::Key)?;
        let hash = parse_hash(&self.hash).ok_or(CheckpointError::Hash)?;
        let signature: [u8; 64] = parse_hex(&self.signature)
            .and_then(|s| s.try_into().ok())
            .ok_or(CheckpointError::Encoding)?;
        key.verify(
            &message(self.seq, &hash, self.since, self.at_ms),
            &Signature::from_bytes(&signature),
        )
        .map_err(|_| CheckpointError::Signature)?;
        Ok(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_verifies_and_any_change_does_not() {
        let key = CheckpointKey::from_seed(&[7; 32]);
        let checkpoint = key.sign(12, &[3; 32], 2, 1_000);
        assert_eq!(checkpoint.verify(Some(&key.public())), Ok([3; 32]));
        for changed in [
            Checkpoint {
                seq: 13,
                ..checkpoint.clone()
            },
            Checkpoint {
                hash: hex(&[4; 32]),
                ..checkpoint.clone()
            },
            Checkpoint {
                since: 0,
                ..checkpoint.clone()
            },
            Checkpoint {
                at_ms: 1_001,
                ..checkpoint.clone()
            },
        ] {
            assert_eq!(changed.verify(None), Err(CheckpointError::Signature));
        }
        let other = CheckpointKey::from_seed(&[8; 32]);
        assert!(matches!(
            checkpoint.verify(Some(&other.public())),
            Err(CheckpointError::OtherKey { .. })
        ));
        // A checkpoint re-signed with another key is that key's, not the server's.
        let forged = other.sign(12, &[3; 32], 2, 1_000);
        assert!(forged.verify(None).is_ok());
        assert!(forged.verify(Some(&key.public())).is_err());
    }
}
