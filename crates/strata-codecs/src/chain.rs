use crate::backend::Backend;
use crate::error::Result;
use crate::spec::{Capabilities, CodecSpec, Speed};
use crate::transform::Transform;
use std::borrow::Cow;

/// Transforms applied in order on encode (and in reverse on decode), then one backend.
#[derive(Debug)]
pub struct CodecChain {
    transforms: Vec<Box<dyn Transform>>,
    backend: Box<dyn Backend>,
}

impl CodecChain {
    pub fn new(transforms: Vec<Box<dyn Transform>>, backend: Box<dyn Backend>) -> Self {
        Self { transforms, backend }
    }

    /// The specs of every stage, in encode order: what a manifest records.
    pub fn specs(&self) -> Vec<CodecSpec> {
        let mut specs: Vec<CodecSpec> = self.transforms.iter().map(|t| t.spec()).collect();
        specs.push(self.backend.spec());
        specs
    }

    pub fn capabilities(&self) -> Capabilities {
        let mut caps = self.backend.capabilities();
        for t in &self.transforms {
            let c = t.capabilities();
            caps.lossless &= c.lossless;
            caps.partial_decode &= c.partial_decode;
            // The registry builds chains with at most one lossy stage.
            caps.error_bound = caps.error_bound.or(c.error_bound);
        }
        caps
    }

    /// The chain's nominal throughput: its stages' times per byte added up.
    pub fn speed(&self) -> Speed {
        self.transforms.iter().fold(self.backend.speed(), |acc, t| acc.then(t.speed()))
    }

    /// Encodes one segment of shape `shape` (C order).
    pub fn encode(&self, input: &[u8], shape: &[usize]) -> Result<Vec<u8>> {
        self.encode_staged(&self.staged(input, shape)?, shape)
    }

    /// `input` after every transform: the bytes the backend compresses (`input` itself
    /// when there are no transforms).
    pub fn staged<'a>(&self, input: &'a [u8], shape: &[usize]) -> Result<Cow<'a, [u8]>> {
        let mut staged = Cow::Borrowed(input);
        for t in &self.transforms {
            let mut next = Vec::new();
            t.encode(&staged, shape, &mut next)?;
            staged = Cow::Owned(next);
        }
        Ok(staged)
    }

    /// The backend alone, on bytes already [`staged`](Self::staged): `encode` is the two.
    pub fn encode_staged(&self, staged: &[u8], shape: &[usize]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.backend.encode(staged, shape, &mut out)?;
        Ok(out)
    }

    /// The backend with every setting it encodes with (its `Debug` form: the registry's
    /// context, such as pcodec's delta search, is in its fields but not in its spec).
    /// Backends are deterministic, so two chains of one key turn the same staged bytes
    /// into the same output.
    pub fn backend_key(&self) -> String {
        format!("{:?}", self.backend)
    }

    /// Decodes into `out`, which ends up exactly `decoded_len` bytes long.
    pub fn decode_into(&self, input: &[u8], decoded_len: usize, shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        self.backend.decode(input, decoded_len, shape, out)?;
        let mut scratch = Vec::new();
        for t in self.transforms.iter().rev() {
            t.decode(out, shape, &mut scratch)?;
        }
        Ok(())
    }

    pub fn decode(&self, input: &[u8], decoded_len: usize, shape: &[usize]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.decode_into(input, decoded_len, shape, &mut out)?;
        Ok(out)
    }
}
