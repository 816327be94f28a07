//! The batch pipeline on a [`DeviceStream`]: rows in, packed output buffers
//! out, in the layout of `crate::layout` (so a device batch and a CPU batch compare
//! value for value). The kernels and the data flow are described in
//! `cuda/gt_batch.cuh`; this module lays out the inputs, sizes the buffers,
//! launches, and cuts big batches into chunks that fit the device.
//!
//! Rows come prepared by the engine: a row is text for the device (already
//! normalized, or as the device's model reads it, free of added tokens), ids the host encoded (rows the device
//! cannot take), or both in turn (text cut by added tokens, whose ids the
//! host found). All get the post-processor's template, truncation and
//! padding on the device.

use super::stream::{DevBuf, DeviceStream, DeviceStreamExt, Mark};
use crate::error::{Error, Result};
use crate::kernels::{
    as_bytes, next_cut, spm_next_cut, BytesTable, DevPtr, GtBpeArgs, GtBpeModel, GtBytesSlot,
    GtBytesTable, GtChain, GtCharTable, GtCompactArgs, GtMergeEntry, GtMergeScratch, GtOrderArgs,
    GtPackArgs, GtPairSlot, GtPairTable, GtPartSpan, GtPretokArgs, GtRowArgs, GtRowSource,
    GtRowSpan, GtScanArgs, GtSpmArgs, GtSpmCuts, GtSpmModel, GtTemplate, GtUnigramArgs,
    GtUnigramModel, GtWordPieceArgs, GtWordPieceModel, GtWords, Kernel, KernelArgs, Pod, LANES,
    LONG_WORD, PAT_REGEX, WORK_CLASSES,
};
use crate::layout::{narrow, row_layout, Batch, Dtype, Outputs};
use crate::layout::{ATTENTION_MASK, INPUT_IDS, SPECIAL_TOKENS_MASK, TOKEN_TYPE_IDS};
use crate::plan::bytelevel::{ByteLevelPlan, Matcher, MergeTable};
use crate::plan::spm::SpmPlan;
use crate::plan::unigram::UnigramPlan;
use crate::plan::wordpiece::WordPiecePlan;
use crate::plan::{each_family, FastPlan};
use std::borrow::Cow;
use std::ops::Range;
use tokenizers::{PaddingDirection, PaddingParams};

/// One row's input.
pub enum Row<'a> {
    /// Text the device pre-tokenizes and encodes.
    Text(Cow<'a, str>),
    /// Text the device reads after one space, which the layout writes
    /// (`DevicePiece::spaced`: the host copies no piece to put it there).
    Spaced(Cow<'a, str>),
    /// Words the host cut (normalized, back to back in `text`; word i ends
    /// at `ends[i]`), which the device encodes (cutting them further where
    /// SentencePiece cuts allow).
    Words { text: Cow<'a, str>, ends: Vec<u32> },
    /// Ids the host encoded (before truncation and the template).
    Ids(Vec<u32>),
    /// Text, words and ids in turn (none of them `Parts`): text that added
    /// tokens cut, with the added tokens' ids between its stretches.
    Parts(Vec<Row<'a>>),
}

impl Row<'_> {
    /// The row's parts in order (itself, unless it is `Parts`).
    fn parts(&self) -> &[Self] {
        match self {
            Row::Parts(parts) => parts,
            row => std::slice::from_ref(row),
        }
    }

    /// The text the device reads for this part, in two pieces: what the
    /// layout writes before it (a `Spaced` part's space), then the part's
    /// own (none for host ids).
    fn text(&self) -> (&'static str, &str) {
        match self {
            Row::Text(text) | Row::Words { text, .. } => ("", text),
            Row::Spaced(text) => (" ", text),
            Row::Ids(_) | Row::Parts(_) => ("", ""),
        }
    }

    /// Bytes the row takes in a chunk: its text, 4 per host id.
    fn bytes(&self) -> usize {
        self.parts()
            .iter()
            .map(|part| match part {
                Row::Ids(ids) => 4 * ids.len(),
                part => {
                    let (lead, text) = part.text();
                    lead.len() + text.len()
                }
            })
            .sum()
    }
}

/// Truncation of a single sequence, as the engine resolved it.
#[derive(Clone, Copy, Debug)]
pub struct Truncation {
    /// Raw tokens kept at most (max_length minus the template's tokens).
    pub max_seq: u32,
    pub left: bool,
}

/// Everything one call needs.
pub struct Job<'a> {
    /// The model on the device (a null byte-level one when every row is host ids).
    pub model: DeviceModel,
    /// Byte-level BPE: the pre-tokenizer's steps, tables on the device.
    pub chain: GtChain,
    /// SentencePiece cuts on the host, where it cuts rows into pieces (the
    /// model holds the device's); disabled for the other families.
    pub spm_cuts: GtSpmCuts,
    pub template: GtTemplate,
    pub truncation: Option<Truncation>,
    pub padding: Option<&'a PaddingParams>,
    pub outputs: Outputs,
}

/// Milliseconds spent, for `enc.timings`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timings {
    /// Device time from the first kernel to the end of packing (CUDA events;
    /// includes the uploads of later chunks and the read of the rows' lengths).
    pub kernels_ms: f64,
    /// Host time spent laying out and uploading inputs (without the device
    /// work an emulator does in it: that is `emulated_device_ms`).
    pub upload_ms: f64,
    /// Host time spent preparing rows for the device (normalizing, cutting
    /// words and pieces, encoding the rows the device cannot take).
    pub prepare_ms: f64,
    /// Rows the host encoded whole (the device could not take their text).
    pub rows_on_host: usize,
    /// Time the calling thread spent on the emulated device's behalf:
    /// waiting for its streams, filling its memory (None on a GPU).
    pub emulated_device_ms: Option<f64>,
    /// The most device memory the emulator had in use at once (None on a GPU).
    pub emulated_peak_bytes: Option<usize>,
}

/// A packed batch whose token buffers live on the device.
pub struct DeviceBatch {
    pub row_starts: Vec<i64>,
    pub lengths: Vec<i64>,
    /// `row_starts` and `lengths` on the device too.
    pub row_starts_buf: DevBuf,
    pub lengths_buf: DevBuf,
    pub width: Option<usize>,
    /// (field name, buffer of `dtype` values), in transformers' order.
    pub fields: Vec<(&'static str, DevBuf)>,
    pub dtype: Dtype,
    pub timings: Timings,
}

impl DeviceBatch {
    /// A host batch copied onto the device (results the host had to compute
    /// whole, e.g. pairs or offsets, for a caller that asked for the device),
    /// its fields in `dtype`.
    pub fn upload(dev: &dyn DeviceStream, batch: Batch, dtype: Dtype) -> Result<DeviceBatch> {
        let mut fields = Vec::new();
        for (name, values) in batch.fields() {
            let buffer = match dtype {
                Dtype::Int64 => dev.upload_new(values)?,
                Dtype::Int32 => dev.upload_new(&narrow(values, name)?)?,
            };
            fields.push((name, buffer));
        }
        let row_starts_buf = dev.upload_new(&batch.row_starts)?;
        let lengths_buf = dev.upload_new(&batch.lengths)?;
        // Complete before any consumer stream may read it.
        dev.synchronize()?;
        Ok(DeviceBatch {
            row_starts_buf: dev.export(row_starts_buf),
            lengths_buf: dev.export(lengths_buf),
            row_starts: batch.row_starts,
            lengths: batch.lengths,
            width: batch.width,
            fields: export_all(dev, fields),
            dtype,
            timings: Timings::default(),
        })
    }
}

/// Buffers handed out with a call's results, exported (freed in the order
/// of the consumers' streams, see `DeviceStream::export`) only once the
/// call's work is done: until then an error frees them in the call's own
/// stream order, after the copies and kernels still using them.
fn export_all(
    dev: &dyn DeviceStream,
    fields: Vec<(&'static str, DevBuf)>,
) -> Vec<(&'static str, DevBuf)> {
    fields
        .into_iter()
        .map(|(name, buf)| (name, dev.export(buf)))
        .collect()
}

/// The model a device call runs per word, its pointers on that device; its
/// family's launches are [`DeviceWords`] ([`DeviceModel::words`], the one
/// dispatch over the families).
#[derive(Clone, Copy)]
pub enum DeviceModel {
    /// Byte-level BPE over the device's own pre-tokenization (`gt_bpe_words`).
    ByteLevel(GtBpeModel),
    SentencePiece(SpmDevice),
    Unigram(UnigramDevice),
    WordPiece(WordPieceDevice),
}

/// SentencePiece-style BPE (`gt_spm_words`) on the words of its cuts
/// (`gt_spm_cut_words`, tables on the device).
#[derive(Clone, Copy)]
pub struct SpmDevice {
    model: GtSpmModel,
    cuts: GtSpmCuts,
}

/// Unigram (`gt_unigram_words`) over its Metaspace words
/// (`gt_metaspace_words`, at this replacement) or, with 0, the words the host cut.
#[derive(Clone, Copy)]
pub struct UnigramDevice {
    model: GtUnigramModel,
    metaspace: u32,
}

/// WordPiece over pieces of raw text the host cut (`gt_wordpiece_words`),
/// with the most bytes of normalized text per input byte.
#[derive(Clone, Copy)]
pub struct WordPieceDevice {
    model: GtWordPieceModel,
    growth: u64,
}

impl DeviceModel {
    /// The family's launches.
    fn words(&self) -> &dyn DeviceWords {
        match self {
            DeviceModel::ByteLevel(model) => model,
            DeviceModel::SentencePiece(model) => model,
            DeviceModel::Unigram(model) => model,
            DeviceModel::WordPiece(model) => model,
        }
    }
}

/// A family's part of a chunk's launches (`tokenize_chunk`): what the
/// pre-tokenizer's pass and the word ordering read of it, and its per-word
/// kernels.
trait DeviceWords {
    /// The device's SentencePiece cut tables and Metaspace's replacement,
    /// for the pre-tokenizer's pass (`GtPretokArgs`).
    fn pretok(&self) -> (GtSpmCuts, u32) {
        (GtSpmCuts::disabled(), 0)
    }
    /// Where its rows' pieces may be cut, when the family says
    /// (`PieceCuts::of`); None: as the Split chain allows.
    fn piece_cuts(&self, _spm_cuts: GtSpmCuts) -> Option<PieceCuts> {
        None
    }
    /// The vocabulary the word ordering's shortcut reads (byte-level BPE's).
    fn shortcut(&self) -> GtBytesTable {
        GtBpeModel::null().vocab
    }
    /// Queues the model over the chunk's words; the scratch its kernels
    /// use, kept until they are queued.
    fn run_words(&self, launch: &WordLaunch<'_>) -> Result<Vec<DevBuf>>;
}

/// What the per-word kernels of a chunk get.
struct WordLaunch<'d> {
    dev: &'d dyn DeviceStream,
    words: GtWords,
    word_threads: u32,
    text_len: usize,
    n_words: u32,
    /// The long words' schedule (gt_bpe_rounds) and blocks.
    round_share: u32,
    long_blocks: u32,
}

impl WordLaunch<'_> {
    /// Scratch of `bytes_per_byte` for each byte of the chunk's text.
    fn scratch(&self, bytes_per_byte: usize) -> Result<DevBuf> {
        self.dev.alloc(bytes_per_byte * self.text_len)
    }

    /// The BPE families' merge scratch (see gt_bpe_words).
    fn merge_scratch(&self) -> Result<(Vec<DevBuf>, GtMergeScratch)> {
        let heap = self.scratch(2 * std::mem::size_of::<GtMergeEntry>())?;
        let bufs = vec![self.scratch(4)?, self.scratch(4)?, self.scratch(4)?, heap];
        let merge = GtMergeScratch {
            ids: bufs[0].ptr(),
            prev: bufs[1].ptr(),
            next: bufs[2].ptr(),
            heap: bufs[3].ptr(),
        };
        Ok((bufs, merge))
    }
}

impl DeviceWords for GtBpeModel {
    fn shortcut(&self) -> GtBytesTable {
        self.vocab
    }

    fn run_words(&self, launch: &WordLaunch<'_>) -> Result<Vec<DevBuf>> {
        let (bufs, scratch) = launch.merge_scratch()?;
        let args = GtBpeArgs {
            model: *self,
            words: launch.words,
            scratch,
            round_share: launch.round_share,
            long_blocks: launch.long_blocks,
        };
        let dev = launch.dev;
        run_long_words(dev, Kernel::BpeLongWords, &args, launch.long_blocks)?;
        dev.run(Kernel::BpeWords, &args, launch.word_threads)?;
        Ok(bufs)
    }
}

impl DeviceWords for SpmDevice {
    fn pretok(&self) -> (GtSpmCuts, u32) {
        (self.cuts, 0)
    }

    fn piece_cuts(&self, spm_cuts: GtSpmCuts) -> Option<PieceCuts> {
        Some(PieceCuts::Spm(spm_cuts))
    }

    fn run_words(&self, launch: &WordLaunch<'_>) -> Result<Vec<DevBuf>> {
        let (bufs, scratch) = launch.merge_scratch()?;
        let args = GtSpmArgs {
            model: self.model,
            words: launch.words,
            scratch,
            round_share: launch.round_share,
            long_blocks: launch.long_blocks,
        };
        let dev = launch.dev;
        run_long_words(dev, Kernel::SpmLongWords, &args, launch.long_blocks)?;
        dev.run(Kernel::SpmWords, &args, launch.word_threads)?;
        Ok(bufs)
    }
}

impl DeviceWords for UnigramDevice {
    fn pretok(&self) -> (GtSpmCuts, u32) {
        (GtSpmCuts::disabled(), self.metaspace)
    }

    /// Metaspace words never span a space: pieces may start at one.
    fn piece_cuts(&self, _spm_cuts: GtSpmCuts) -> Option<PieceCuts> {
        (self.metaspace != 0).then_some(PieceCuts::Spaces)
    }

    fn run_words(&self, launch: &WordLaunch<'_>) -> Result<Vec<DevBuf>> {
        let dev = launch.dev;
        // n + 1 entries per word of n bytes (see gt_unigram_words).
        let entries = launch.text_len + launch.n_words as usize + 1;
        let (best, from, id) = (
            dev.alloc(8 * entries)?,
            dev.alloc(4 * entries)?,
            dev.alloc(4 * entries)?,
        );
        let args = GtUnigramArgs {
            model: self.model,
            words: launch.words,
            best: best.ptr(),
            from: from.ptr(),
            id: id.ptr(),
        };
        dev.run(Kernel::UnigramWords, &args, launch.word_threads)?;
        Ok(vec![best, from, id])
    }
}

impl DeviceWords for WordPieceDevice {
    fn run_words(&self, launch: &WordLaunch<'_>) -> Result<Vec<DevBuf>> {
        let norm = launch.scratch(self.growth as usize)?;
        let args = GtWordPieceArgs {
            model: self.model,
            words: launch.words,
            norm: norm.ptr(),
            growth: self.growth,
        };
        launch
            .dev
            .run(Kernel::WordPieceWords, &args, launch.word_threads)?;
        Ok(vec![norm])
    }
}

/// A fast plan's tables on one device: the model view points into `_buffers`.
pub struct DeviceTables {
    pub model: DeviceModel,
    /// Byte-level BPE: the Split chain, its compiled tables on the device.
    pub chain: GtChain,
    _buffers: Vec<DevBuf>,
}

// SAFETY: the model's pointers are device addresses of the immutable buffers
// owned alongside; nothing is written through them after the upload.
unsafe impl Send for DeviceTables {}
// SAFETY: as above.
unsafe impl Sync for DeviceTables {}

/// Uploads a plan's tables (once per tokenizer per device; the engine caches
/// it): its family's [`UploadTables`].
pub fn upload_tables(dev: &dyn DeviceStream, plan: &FastPlan) -> Result<DeviceTables> {
    let mut bufs = Vec::new();
    let mut chain = GtChain::default();
    let model = each_family!(plan, plan => plan.upload(dev, &mut bufs, &mut chain)?);
    // Every call reads them from here on (and the emulator checks that none writes them).
    for buf in &bufs {
        dev.read_only(buf);
    }
    Ok(DeviceTables {
        model,
        chain,
        _buffers: bufs,
    })
}

/// A family's tables on a device: it uploads them into `bufs` (byte-level
/// BPE its Split chain into `chain` too) and gives the model view into them.
trait UploadTables {
    fn upload(
        &self,
        dev: &dyn DeviceStream,
        bufs: &mut Vec<DevBuf>,
        chain: &mut GtChain,
    ) -> Result<DeviceModel>;
}

impl UploadTables for ByteLevelPlan {
    fn upload(
        &self,
        dev: &dyn DeviceStream,
        bufs: &mut Vec<DevBuf>,
        chain: &mut GtChain,
    ) -> Result<DeviceModel> {
        *chain = upload_chain(dev, self, bufs)?;
        Ok(DeviceModel::ByteLevel(byte_level_model(dev, self, bufs)?))
    }
}

impl UploadTables for SpmPlan {
    fn upload(
        &self,
        dev: &dyn DeviceStream,
        bufs: &mut Vec<DevBuf>,
        _: &mut GtChain,
    ) -> Result<DeviceModel> {
        let (merges, vocab) = self.tables();
        let (mut model, mut cuts) = self.device_views();
        model.merges = upload_pairs(dev, merges, bufs)?;
        model.vocab = upload_bytes(dev, vocab, bufs)?;
        if let Some(host) = &self.cuts {
            let (bits, joined) = host.arrays();
            let (bits, slots) = (dev.upload_new(bits)?, dev.upload_new(joined)?);
            cuts.bits = bits.ptr() as *const u32;
            cuts.joined.slots = slots.ptr() as *const GtPairSlot;
            bufs.extend([bits, slots]);
        }
        Ok(DeviceModel::SentencePiece(SpmDevice { model, cuts }))
    }
}

impl UploadTables for UnigramPlan {
    fn upload(
        &self,
        dev: &dyn DeviceStream,
        bufs: &mut Vec<DevBuf>,
        _: &mut GtChain,
    ) -> Result<DeviceModel> {
        let (pieces, scores) = self.tables();
        let (mut model, metaspace) = self.device_views();
        model.pieces = upload_bytes(dev, pieces, bufs)?;
        bufs.push(dev.upload_new(scores)?);
        model.scores = bufs[bufs.len() - 1].ptr() as *const f64;
        Ok(DeviceModel::Unigram(UnigramDevice { model, metaspace }))
    }
}

impl UploadTables for WordPiecePlan {
    fn upload(
        &self,
        dev: &dyn DeviceStream,
        bufs: &mut Vec<DevBuf>,
        _: &mut GtChain,
    ) -> Result<DeviceModel> {
        let (chars, first, rest) = self.tables();
        let (blocks, entries, blob) = chars.arrays();
        let mut model = *self.model();
        bufs.extend([
            dev.upload_new(blocks)?,
            dev.upload_new(entries)?,
            dev.upload_new(blob)?,
        ]);
        let at = |i: usize| bufs[i].ptr();
        model.chars = GtCharTable {
            blocks: at(0) as *const u16,
            entries: at(1) as *const u32,
            blob: at(2) as *const u8,
            exact_prefixes: std::ptr::null(), // the host's question
        };
        model.first = upload_bytes(dev, first, bufs)?;
        model.rest = upload_bytes(dev, rest, bufs)?;
        Ok(DeviceModel::WordPiece(WordPieceDevice {
            model,
            growth: self.growth() as u64,
        }))
    }
}

/// The byte-level plan's Split chain with its compiled tables on the device
/// (scanner steps need none).
fn upload_chain(
    dev: &dyn DeviceStream,
    plan: &ByteLevelPlan,
    bufs: &mut Vec<DevBuf>,
) -> Result<GtChain> {
    let mut chain = plan.chain.unwrap_or_default();
    let compiled = plan.splits.iter().filter_map(|step| match &step.matcher {
        Matcher::Compiled(regex) => Some(regex),
        _ => None,
    });
    let regex_steps = chain.steps.iter_mut().filter(|s| s.pattern == PAT_REGEX);
    for (step, regex) in regex_steps.zip(compiled) {
        let (trans, starts, block_of, blocks) = regex.arrays();
        let at = bufs.len();
        bufs.extend([
            dev.upload_new(trans)?,
            dev.upload_new(starts)?,
            dev.upload_new(block_of)?,
            dev.upload_new(blocks)?,
        ]);
        step.regex.trans = bufs[at].ptr() as *const u32;
        step.regex.starts = bufs[at + 1].ptr() as *const u32;
        step.regex.block_of = bufs[at + 2].ptr() as *const u16;
        step.regex.blocks = bufs[at + 3].ptr() as *const u8;
        step.regex.first_bytes = std::ptr::null(); // the host's search skip only
    }
    Ok(chain)
}

/// The byte-level model on the device. Its words table holds the tokens that
/// are their own BPE, so most words skip the merge loop (`ignore_merges` then
/// means "look the word up first", exact either way).
fn byte_level_model(
    dev: &dyn DeviceStream,
    plan: &ByteLevelPlan,
    bufs: &mut Vec<DevBuf>,
) -> Result<GtBpeModel> {
    let t = plan.tables();
    let own = plan.self_encoding_words();
    let shortcut = own.as_ref().unwrap_or(t.words);
    let host = plan.model();
    let byte_pair_ranks = dev.upload_new(t.byte_pair_ranks)?;
    let byte_pair_ranks_ptr = byte_pair_ranks.ptr() as *const u32;
    bufs.push(byte_pair_ranks);
    let char_atoms_ptr = match t.char_atoms.is_empty() {
        true => std::ptr::null(),
        false => {
            let char_atoms = dev.upload_new(t.char_atoms)?;
            let ptr = char_atoms.ptr() as *const u32;
            bufs.push(char_atoms);
            ptr
        }
    };
    Ok(GtBpeModel {
        merges: upload_pairs(dev, t.merges, bufs)?,
        vocab: upload_bytes(dev, shortcut, bufs)?,
        byte_pair_ranks: byte_pair_ranks_ptr,
        char_atoms: char_atoms_ptr,
        byte_ids: host.byte_ids,
        ignore_merges: 1,
        _pad: 0,
    })
}

/// A merge table on the device (its buffer kept in `bufs`).
fn upload_pairs(
    dev: &dyn DeviceStream,
    table: &MergeTable,
    bufs: &mut Vec<DevBuf>,
) -> Result<GtPairTable> {
    let slots = dev.upload_new(&table.slots)?;
    let mut view = GtPairTable {
        slots: slots.ptr() as *const GtPairSlot,
        mask: table.slots.len() as u64 - 1,
        merged_of_rank: std::ptr::null(), // the slots hold merged ids
    };
    bufs.push(slots);
    if !table.merged_of_rank.is_empty() {
        let merged_of_rank = dev.upload_new(&table.merged_of_rank)?;
        view.merged_of_rank = merged_of_rank.ptr() as *const u32;
        bufs.push(merged_of_rank);
    }
    Ok(view)
}

/// A byte-string table on the device (its buffers kept in `bufs`).
fn upload_bytes(
    dev: &dyn DeviceStream,
    table: &BytesTable,
    bufs: &mut Vec<DevBuf>,
) -> Result<GtBytesTable> {
    let arrays = table.arrays();
    let host = table.view();
    let slots = dev.upload_new(arrays.slots)?;
    let blob = dev.upload_new(arrays.blob)?;
    let filter = dev.upload_new(arrays.filter)?;
    let view = GtBytesTable {
        slots: slots.ptr() as *const GtBytesSlot,
        blob: blob.ptr() as *const u8,
        filter: filter.ptr() as *const u64,
        mask: host.mask,
        filter_mask: host.filter_mask,
    };
    bufs.extend([slots, blob, filter]);
    Ok(view)
}

/// Longest piece of text one device thread scans before a cut is looked for:
/// safe cuts are frequent, so 1 kB pieces give a 256 MB chunk ~256k threads.
pub const PIECE_BYTES: usize = 1024;
/// Entries per thread in the scan kernels.
const SCAN_TILE: u32 = 1024;

/// A group of a call's rows, in order, and where each is cut into pieces
/// (`PieceCuts::of_row`: one entry per row, found when the row was prepared
/// and its text was still in the cache).
pub struct RowGroup<'r> {
    pub rows: Vec<Row<'r>>,
    pub cuts: Vec<RowCuts>,
}

/// Runs `job` on `dev` over `n_rows` rows, which `groups` prepares a group at
/// a time: each group's chunks are queued before the next group is asked
/// for, so the host prepares group k + 1 while the device runs group k
/// (a group's rows are needed only until its chunks' inputs are staged).
/// Buffers dropped here are freed in stream order (after the kernels that
/// use them), so a call waits for the device once: when every chunk is
/// queued, for its rows' lengths (which size the packed output). Word and
/// token counts stay on the device, buffers sized by their bounds.
pub fn encode<'r>(
    dev: &dyn DeviceStream,
    job: &Job<'_>,
    n_rows: usize,
    groups: &mut dyn Iterator<Item = Result<RowGroup<'r>>>,
) -> Result<DeviceBatch> {
    let mut upload_ms = 0.0;
    let mut first_kernel = None;
    // Each chunk writes its rows' lengths here, read once all are queued.
    let lengths_dev = dev.alloc(4 * n_rows)?;
    let mut chunks = Vec::new();
    let mut first_row = 0;
    for group in groups {
        let group = group?;
        if group.cuts.len() != group.rows.len() || first_row + group.rows.len() > n_rows {
            return Err(Error::InvalidArgument(format!(
                "a device job's group has {} rows, cuts for {}, after {first_row} of {n_rows} rows",
                group.rows.len(),
                group.cuts.len()
            )));
        }
        for rows in chunk_rows(&group.rows, dev.chunk_bytes()) {
            let at = first_row + rows.start..first_row + rows.end;
            chunks.push(tokenize_chunk(
                dev,
                job,
                (&group.rows[rows.clone()], &group.cuts[rows]),
                at,
                &lengths_dev,
                &mut upload_ms,
                &mut first_kernel,
            )?);
        }
        first_row += group.rows.len();
    }
    if first_row != n_rows {
        return Err(Error::InvalidArgument(format!(
            "a device job of {n_rows} rows was given {first_row}"
        )));
    }
    let lengths: Vec<usize> = dev
        .download_vec::<u32>(&lengths_dev, 0, n_rows)?
        .into_iter()
        .map(|n| n as usize)
        .collect();
    let (row_starts, width) = row_layout(&lengths, job.padding, job.outputs.bytes_per_token())?;
    // Read by the packing kernels, then handed out with the results.
    let row_starts_buf = upload_staged(dev, &row_starts)?;
    let total = *row_starts.last().unwrap_or(&0) as usize;

    let value_bytes = job.outputs.dtype.size();
    let mut fields = vec![(INPUT_IDS, dev.alloc(value_bytes * total)?)];
    for (name, wanted) in [
        (ATTENTION_MASK, job.outputs.attention_mask),
        (TOKEN_TYPE_IDS, job.outputs.type_ids),
        (SPECIAL_TOKENS_MASK, job.outputs.special_tokens_mask),
    ] {
        if wanted {
            fields.push((name, dev.alloc(value_bytes * total)?));
        }
    }
    let out = |name: &str, base: usize| {
        fields
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, buf)| buf.ptr() + (value_bytes * base) as u64)
    };
    for chunk in &chunks {
        let (first, end) = (chunk.rows.start, chunk.rows.end);
        let base = row_starts[first] as usize;
        let elements = row_starts[end] as usize - base;
        let padding = job.padding;
        let mut args = GtPackArgs {
            spans: chunk.spans.ptr(),
            parts: chunk.parts.ptr(),
            part_starts: chunk.part_starts.ptr(),
            lengths: lengths_dev.ptr() + 4 * first as u64,
            row_starts: row_starts_buf.ptr() + 8 * first as u64,
            row_base: base as u64,
            n_rows: chunk.rows.len() as u32,
            value_bytes: value_bytes as u32,
            raw_ids: chunk.raw_ids.ptr(),
            host_ids: chunk.inputs.host_ids,
            tmpl: job.template,
            pad_left: u32::from(
                padding.is_some_and(|p| matches!(p.direction, PaddingDirection::Left)),
            ),
            pad_id: padding.map_or(0, |p| p.pad_id),
            pad_type_id: padding.map_or(0, |p| p.pad_type_id),
            ids: out(INPUT_IDS, base),
            attention_mask: out(ATTENTION_MASK, base),
            type_ids: out(TOKEN_TYPE_IDS, base),
            special_tokens_mask: out(SPECIAL_TOKENS_MASK, base),
        };
        // A launch's threads are counted in u32: a padded chunk of more
        // elements is packed in several launches, each from its own element.
        let most = pack_launch_elements();
        for from in (0..elements).step_by(most) {
            let at = base + from;
            args.row_base = at as u64;
            args.ids = out(INPUT_IDS, at);
            args.attention_mask = out(ATTENTION_MASK, at);
            args.type_ids = out(TOKEN_TYPE_IDS, at);
            args.special_tokens_mask = out(SPECIAL_TOKENS_MASK, at);
            dev.run(Kernel::Pack, &args, (elements - from).min(most) as u32)?;
        }
    }
    let lengths: Vec<i64> = lengths.iter().map(|&n| n as i64).collect();
    let lengths_buf = upload_staged(dev, &lengths)?;
    let end = dev.mark()?;
    let kernels_ms = match &first_kernel {
        Some(start) => dev.elapsed_ms(start, &end)?,
        None => 0.0,
    };
    // Complete before any consumer stream may read it.
    dev.synchronize()?;
    Ok(DeviceBatch {
        row_starts_buf: dev.export(row_starts_buf),
        lengths_buf: dev.export(lengths_buf),
        row_starts,
        lengths,
        width,
        fields: export_all(dev, fields),
        dtype: job.outputs.dtype,
        timings: Timings {
            kernels_ms,
            upload_ms,
            emulated_device_ms: dev.emulated_device_ms(),
            ..Timings::default()
        },
    })
}

/// The most output elements one `gt_pack` launch writes (its thread count is a u32).
const PACK_LAUNCH_ELEMENTS: usize = u32::MAX as usize;

#[cfg(test)]
thread_local! {
    /// Tests pack in launches of fewer elements (`PACK_LAUNCH_ELEMENTS` otherwise).
    pub static PACK_ELEMENTS_FOR_TESTS: std::cell::Cell<usize> =
        const { std::cell::Cell::new(PACK_LAUNCH_ELEMENTS) };
}

fn pack_launch_elements() -> usize {
    #[cfg(test)]
    return PACK_ELEMENTS_FOR_TESTS.with(|most| most.get());
    #[cfg(not(test))]
    PACK_LAUNCH_ELEMENTS
}

/// Rows grouped so that each group's text fits `chunk_bytes` (a longer row
/// gets a group of its own).
fn chunk_rows(rows: &[Row<'_>], chunk_bytes: usize) -> Vec<Range<usize>> {
    groups_of_bytes(rows.iter().map(Row::bytes), chunk_bytes)
}

/// Consecutive items grouped so that each group's bytes fit `limit` (a
/// larger item gets a group of its own); no items: one empty group.
pub fn groups_of_bytes(sizes: impl Iterator<Item = usize>, limit: usize) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let (mut begin, mut bytes, mut end) = (0, 0, 0);
    for (i, n) in sizes.enumerate() {
        if i > begin && bytes + n > limit {
            groups.push(begin..i);
            (begin, bytes) = (i, 0);
        }
        bytes += n;
        end = i + 1;
    }
    if begin < end || end == 0 {
        groups.push(begin..end);
    }
    groups
}

/// One chunk's results, kept until packing.
struct Chunk {
    rows: Range<usize>,
    raw_ids: DevBuf,
    /// Its inputs (packing reads the host ids).
    inputs: StagedInputs,
    spans: DevBuf,
    parts: DevBuf,
    part_starts: DevBuf,
}

/// A chunk's inputs on the device, copied in one pinned upload: the text,
/// then its piece bounds, row sources, row parts, host ids and the work
/// classes' zeroed counters (16-byte aligned), so that no pageable copy
/// follows the text's.
struct StagedInputs {
    _buf: DevBuf,
    text: DevPtr,
    bounds: DevPtr,
    sources: DevPtr,
    row_parts: DevPtr,
    host_ids: DevPtr,
    class_counts: DevPtr,
}

impl StagedInputs {
    fn upload(dev: &dyn DeviceStream, rows: &[Row<'_>], layout: &Layout) -> Result<Self> {
        let zeros = [0u32; 2 * WORK_CLASSES];
        let arrays = [
            as_bytes(&layout.piece_bounds),
            as_bytes(&layout.sources),
            as_bytes(&layout.row_parts),
            as_bytes(&layout.host_ids),
            as_bytes(&zeros),
        ];
        let mut at = [0; 5];
        let mut end = layout.text_len;
        for (i, array) in arrays.iter().enumerate() {
            at[i] = end.next_multiple_of(16);
            end = at[i] + array.len();
        }
        let buf = dev.upload_beside(end, &|staging| {
            copy_texts(rows, &layout.text_starts, &mut staging[..layout.text_len]);
            for (i, array) in arrays.iter().enumerate() {
                staging[at[i]..at[i] + array.len()].copy_from_slice(array);
            }
        })?;
        let base = buf.ptr();
        Ok(StagedInputs {
            text: base,
            bounds: base + at[0] as u64,
            sources: base + at[1] as u64,
            row_parts: base + at[2] as u64,
            host_ids: base + at[3] as u64,
            class_counts: base + at[4] as u64,
            _buf: buf,
        })
    }
}

/// A buffer holding `values`, copied through pinned staging.
fn upload_staged<T: Pod>(dev: &dyn DeviceStream, values: &[T]) -> Result<DevBuf> {
    let bytes = as_bytes(values);
    dev.upload_with(bytes.len(), &|staging| staging.copy_from_slice(bytes))
}

/// Host layout of a chunk: texts back to back (row i's at `text_starts[i]`),
/// cut into pieces; host ids; each row's parts (`row_parts`, B + 1 entries).
#[derive(Default)]
struct Layout {
    text_len: usize,
    text_starts: Vec<usize>,
    piece_bounds: Vec<u32>,
    sources: Vec<GtRowSource>,
    row_parts: Vec<u32>,
    host_ids: Vec<u32>,
}

/// A row's cuts into pieces: (part, offset in the part's text with its
/// lead), in order.
pub type RowCuts = Vec<(usize, usize)>;

/// Where the host may cut a text row into pieces for the device's threads.
#[derive(Clone, Copy)]
pub enum PieceCuts {
    /// No cut: each text part is one piece.
    Whole,
    /// Before a space after a character that is not white space
    /// (`gt_next_cut`): safe for the scanners and for Metaspace words.
    Spaces,
    /// Between SentencePiece words (`gt_spm_next_cut`), host tables.
    Spm(GtSpmCuts),
}

// SAFETY: the SentencePiece cuts point into the plan's tables, never
// mutated while a call runs: reading them from many threads is safe.
unsafe impl Sync for PieceCuts {}

impl PieceCuts {
    /// The cuts for rows of a job whose device `model` and `chain` are
    /// these, with SentencePiece's host tables `spm_cuts`.
    pub fn of(model: &DeviceModel, chain: &GtChain, spm_cuts: GtSpmCuts) -> PieceCuts {
        match model.words().piece_cuts(spm_cuts) {
            Some(cuts) => cuts,
            None if chain.can_cut() => PieceCuts::Spaces,
            None => PieceCuts::Whole,
        }
    }

    /// One row's cuts: after at least `PIECE_BYTES` from the last one.
    pub fn of_row(&self, row: &Row<'_>) -> RowCuts {
        let mut found = Vec::new();
        for (k, part) in row.parts().iter().enumerate() {
            if !matches!(part, Row::Text(_) | Row::Spaced(_)) {
                continue;
            }
            let (lead, text) = part.text();
            let len = lead.len() + text.len();
            let mut from = 0;
            while len - from > PIECE_BYTES {
                // Searched in `text`: the lead is never the character before a
                // cut this far in (PIECE_BYTES > 1).
                let cut = lead.len() + self.next(text, from + PIECE_BYTES - lead.len());
                if cut >= len {
                    break;
                }
                found.push((k, cut));
                from = cut;
            }
        }
        found
    }

    /// The first cut of `text` at or after `from` (>= 1), or its end.
    fn next(&self, text: &str, from: usize) -> usize {
        match self {
            PieceCuts::Whole => text.len(),
            PieceCuts::Spaces => next_cut(text.as_bytes(), from),
            PieceCuts::Spm(cuts) => spm_next_cut(cuts, text, from),
        }
    }
}

fn lay_out(rows: &[Row<'_>], cuts: &[RowCuts]) -> Result<Layout> {
    let too_big = || Error::InvalidArgument("a device chunk is limited to 4 GiB of text".into());
    let mut l = Layout {
        piece_bounds: vec![0],
        row_parts: vec![0],
        ..Layout::default()
    };
    for (row, row_cuts) in rows.iter().zip(cuts) {
        l.text_starts.push(l.text_len);
        let mut row_cuts = &row_cuts[..];
        // A part is text pieces then host ids: text after ids starts the next one.
        let mut open: Option<GtRowSource> = None;
        for (k, part) in row.parts().iter().enumerate() {
            let mine = row_cuts.iter().take_while(|&&(of, _)| of == k).count();
            let part_cuts;
            (part_cuts, row_cuts) = row_cuts.split_at(mine);
            let pieces = l.piece_bounds.len() as u32 - 1;
            let host = l.host_ids.len() as u32;
            let source = match open.take() {
                Some(source)
                    if matches!(part, Row::Ids(_)) || source.host_end == source.host_begin =>
                {
                    source
                }
                Some(source) => {
                    l.sources.push(source);
                    GtRowSource::at(pieces, host)
                }
                None => GtRowSource::at(pieces, host),
            };
            l.lay_out_part(part, part_cuts)?;
            open = Some(GtRowSource {
                piece_end: l.piece_bounds.len() as u32 - 1,
                host_end: u32::try_from(l.host_ids.len()).map_err(|_| too_big())?,
                ..source
            });
        }
        if let Some(source) = open {
            l.sources.push(source);
        }
        l.row_parts.push(l.sources.len() as u32);
    }
    Ok(l)
}

impl GtRowSource {
    /// An empty part at these piece and host-id positions.
    fn at(piece: u32, host: u32) -> Self {
        GtRowSource {
            piece_begin: piece,
            piece_end: piece,
            host_begin: host,
            host_end: host,
        }
    }
}

impl Layout {
    /// Appends one part of a row: its text cut into pieces (at `cuts`, see
    /// `PieceCuts::of_row`), or its host ids.
    fn lay_out_part(&mut self, part: &Row<'_>, cuts: &[(usize, usize)]) -> Result<()> {
        let too_big =
            || Error::InvalidArgument("a device chunk is limited to 4 GiB of text".into());
        let l = self;
        match part {
            Row::Text(_) | Row::Spaced(_) => {
                let (lead, text) = part.text();
                let len = lead.len() + text.len();
                let base = l.text_len;
                l.text_len += len;
                for &(_, cut) in cuts {
                    l.piece_bounds
                        .push(u32::try_from(base + cut).map_err(|_| too_big())?);
                }
                if len > 0 {
                    l.piece_bounds
                        .push(u32::try_from(l.text_len).map_err(|_| too_big())?);
                }
            }
            Row::Words { text, ends } => {
                let base = l.text_len;
                l.text_len += text.len();
                for &end in ends {
                    let end = u32::try_from(base + end as usize).map_err(|_| too_big())?;
                    if end > *l.piece_bounds.last().unwrap_or(&0) {
                        l.piece_bounds.push(end);
                    }
                }
            }
            Row::Ids(ids) => l.host_ids.extend_from_slice(ids),
            Row::Parts(_) => {
                return Err(Error::InvalidArgument(
                    "a row's parts cannot have parts".into(),
                ))
            }
        }
        Ok(())
    }
}

/// Writes each text row at its start in `out`, rows spread over the CPU pool.
fn copy_texts(rows: &[Row<'_>], starts: &[usize], out: &mut [u8]) {
    /// Rows per task: enough work per task, enough tasks for every core.
    const ROWS_PER_TASK: usize = 64;
    struct Out(*mut u8, usize);
    // SAFETY: tasks write disjoint ranges (each row's own) of one live buffer.
    unsafe impl Sync for Out {}
    impl Out {
        /// Row bytes into [at, at + len): inside the buffer (checked).
        fn write(&self, at: usize, bytes: &[u8]) {
            assert!(at + bytes.len() <= self.1);
            // SAFETY: in bounds (checked); each range is written by one task only.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.0.add(at), bytes.len()) };
        }
    }
    let target = Out(out.as_mut_ptr(), out.len());
    let tasks = rows.len().div_ceil(ROWS_PER_TASK);
    let _ = crate::pool::current().map(tasks, |t| {
        let end = ((t + 1) * ROWS_PER_TASK).min(rows.len());
        for i in t * ROWS_PER_TASK..end {
            let mut at = starts[i];
            for part in rows[i].parts() {
                let (lead, text) = part.text();
                target.write(at, lead.as_bytes());
                target.write(at + lead.len(), text.as_bytes());
                at += lead.len() + text.len();
            }
        }
        Ok::<(), Error>(())
    });
}

/// Queues one chunk: its rows and their cuts, which are the call's rows `rows`.
fn tokenize_chunk(
    dev: &dyn DeviceStream,
    job: &Job<'_>,
    (chunk_rows, cuts): (&[Row<'_>], &[RowCuts]),
    rows: Range<usize>,
    lengths: &DevBuf,
    upload_ms: &mut f64,
    first_kernel: &mut Option<Mark>,
) -> Result<Chunk> {
    let clock = std::time::Instant::now();
    let (device_cuts, metaspace) = job.model.words().pretok();
    let emulated_before = dev.emulated_device_ms().unwrap_or(0.0);
    let layout = lay_out(chunk_rows, cuts)?;
    let inputs = StagedInputs::upload(dev, chunk_rows, &layout)?;
    // The host's part: an emulator's allocation is device time, counted there.
    let emulated = dev.emulated_device_ms().unwrap_or(0.0) - emulated_before;
    *upload_ms += clock.elapsed().as_secs_f64() * 1e3 - emulated;
    if first_kernel.is_none() {
        *first_kernel = Some(dev.mark()?);
    }
    let n_pieces = layout.piece_bounds.len() as u32 - 1;
    let text_len = layout.text_len;

    // Words: count per piece, scan, fill.
    let word_counts = dev.alloc(4 * (n_pieces as usize + 1))?;
    let mut pretok = GtPretokArgs {
        chain: job.chain,
        metaspace,
        _pad: 0,
        text: inputs.text,
        piece_bounds: inputs.bounds,
        word_counts: word_counts.ptr(),
        first_word: word_counts.ptr(),
        word_starts: 0,
        word_lens: 0,
        cuts: device_cuts,
    };
    dev.run(Kernel::PretokCount, &pretok, n_pieces)?;
    scan(dev, &word_counts, n_pieces)?;
    // No read of the word count: every non-empty word has a byte, so room
    // and threads for text_len words do, and the count stays on the device.
    let n_words = text_len as u32;
    let word_total = word_counts.ptr() + 4 * n_pieces as u64;
    let word_starts = dev.alloc(4 * n_words as usize)?;
    let word_lens = dev.alloc(4 * n_words as usize)?;
    pretok.word_starts = word_starts.ptr();
    pretok.word_lens = word_lens.ptr();
    dev.run(Kernel::PretokFill, &pretok, n_pieces)?;

    // The per-word kernels' grid: they loop over the words the device counted.
    let word_threads = stride_threads(n_words);

    // Words in order of work, so a warp's words take alike (see gt_batch.cuh).
    let order = dev.alloc(4 * n_words as usize)?;
    let order_args = GtOrderArgs {
        text: inputs.text,
        word_starts: word_starts.ptr(),
        word_lens: word_lens.ptr(),
        n_words: word_total,
        shortcut: job.model.words().shortcut(),
        class_counts: inputs.class_counts,
        order: order.ptr(),
        blocks: word_threads.div_ceil(LANES),
        _pad: 0,
    };
    run_blocks(dev, Kernel::OrderCount, &order_args, word_threads)?;
    run_blocks(dev, Kernel::OrderFill, &order_args, word_threads)?;

    // The model per word into scratch indexed by byte offset, then compaction.
    let tok_counts = dev.alloc(4 * (n_words as usize + 1))?;
    let raw_ids = {
        let model_out = dev.alloc(4 * text_len)?;
        let words = GtWords {
            text: inputs.text,
            word_starts: word_starts.ptr(),
            word_lens: word_lens.ptr(),
            out: model_out.ptr(),
            tok_counts: tok_counts.ptr(),
            n_words: word_total,
            order: order.ptr(),
            class_counts: inputs.class_counts,
            stride: word_threads,
            _pad: 0,
        };
        let launch = WordLaunch {
            dev,
            words,
            word_threads,
            text_len,
            n_words,
            // The long words' schedule (gt_bpe_rounds): the GPU's, unless a test sets another.
            round_share: crate::kernels::round_shares().1,
            long_blocks: long_word_blocks(text_len),
        };
        // Kept until the kernels that use them are queued (freed in stream order).
        let _scratch = job.model.words().run_words(&launch)?;
        scan_counted(dev, &tok_counts, n_words, word_total)?;
        // No read of the token count either: no model makes more ids than
        // its word has bytes (WordPiece's plan proves it for the device).
        let raw_ids = dev.alloc(4 * text_len)?;
        let compact = GtCompactArgs {
            word_starts: word_starts.ptr(),
            tok_offsets: tok_counts.ptr(),
            bpe_out: model_out.ptr(),
            raw_ids: raw_ids.ptr(),
            n_words: word_total,
            stride: word_threads,
            _pad: 0,
        };
        dev.run(Kernel::Compact, &compact, word_threads)?;
        raw_ids
    };

    // Parts: raw ranges and where each starts; rows: truncation, final lengths.
    let n_rows = rows.len();
    let n_parts = layout.sources.len();
    let parts = dev.alloc(std::mem::size_of::<GtPartSpan>() * n_parts)?;
    let part_starts = dev.alloc(4 * (n_parts + 1))?;
    let spans = dev.alloc(std::mem::size_of::<GtRowSpan>() * n_rows)?;
    let row_args = GtRowArgs {
        sources: inputs.sources,
        row_parts: inputs.row_parts,
        first_word: word_counts.ptr(),
        tok_offsets: tok_counts.ptr(),
        parts: parts.ptr(),
        part_starts: part_starts.ptr(),
        tmpl: job.template,
        truncate: u32::from(job.truncation.is_some()),
        max_seq: job.truncation.map_or(0, |t| t.max_seq),
        truncate_left: u32::from(job.truncation.is_some_and(|t| t.left)),
        spans: spans.ptr(),
        lengths: lengths.ptr() + 4 * rows.start as u64,
    };
    dev.run(Kernel::PartSpans, &row_args, n_parts as u32)?;
    scan(dev, &part_starts, n_parts as u32)?;
    dev.run(Kernel::RowSpans, &row_args, n_rows as u32)?;
    Ok(Chunk {
        rows,
        raw_ids,
        inputs,
        spans,
        parts,
        part_starts,
    })
}

/// Blocks of a BPE family's long-word launch (`gt_long_word`): one for each
/// LONG_WORD bytes of text (as many long words as there can be), at most
/// what the device holds at once (the grid of `STRIDE_THREADS`); each block
/// loops over the long words the device counted.
fn long_word_blocks(text_len: usize) -> u32 {
    (text_len / LONG_WORD).min((STRIDE_THREADS / LANES) as usize) as u32
}

/// Launches the long words' `blocks` (none for a chunk that cannot hold one).
fn run_long_words<A: KernelArgs>(
    dev: &dyn DeviceStream,
    kernel: Kernel,
    args: &A,
    blocks: u32,
) -> Result<()> {
    match blocks {
        0 => Ok(()),
        blocks => dev.run(kernel, args, blocks * LANES),
    }
}

/// Launches a block-cooperative kernel with a lane for each of `items`
/// (whole blocks: every lane of a block reaches its barriers).
fn run_blocks<A: KernelArgs>(
    dev: &dyn DeviceStream,
    kernel: Kernel,
    args: &A,
    items: u32,
) -> Result<()> {
    dev.run(kernel, args, items.div_ceil(LANES) * LANES)
}

/// Threads of a grid-stride launch over at most `items` items: about what
/// an H200 keeps resident (132 SMs x 2048 threads), fewer for fewer items.
/// Each thread loops over the items the device counted (word counts stay on
/// the device), instead of a thread per item there could be.
const STRIDE_THREADS: u32 = 132 * 2048;

fn stride_threads(items: u32) -> u32 {
    items.min(STRIDE_THREADS)
}

/// Exclusive scan of `values[0..n)` in place; `values[n]` becomes the total.
fn scan(dev: &dyn DeviceStream, values: &DevBuf, n: u32) -> Result<()> {
    scan_counted(dev, values, n, 0)
}

/// Exclusive scan of `values[0..count)` in place, `values[count]` the total,
/// where `count` (a u32 on the device, at most `n`; 0: `n` itself) is read
/// by the kernels: room and threads for `n`, work for `count`.
fn scan_counted(dev: &dyn DeviceStream, values: &DevBuf, n: u32, count: DevPtr) -> Result<()> {
    if n <= SCAN_TILE {
        let args = GtScanArgs {
            values: values.ptr(),
            tile_sums: 0,
            n,
            tile: SCAN_TILE,
            count,
        };
        return dev.launch(Kernel::ScanApply, args.as_bytes(), 1);
    }
    let tiles = n.div_ceil(SCAN_TILE);
    let sums = dev.alloc(4 * (tiles as usize + 1))?;
    let args = GtScanArgs {
        values: values.ptr(),
        tile_sums: sums.ptr(),
        n,
        tile: SCAN_TILE,
        count,
    };
    dev.run(Kernel::ScanSum, &args, tiles)?;
    // (The tiles past the count sum to 0: all the tile sums scan as they are.)
    scan(dev, &sums, tiles)?;
    dev.run(Kernel::ScanApply, &args, tiles)
}

#[cfg(test)]
mod tests {
    use super::super::emulator::Emulator;
    use super::*;

    /// `rows` laid out with each row's `cuts` (as the job's preparation finds them).
    fn lay_out_cut(rows: &[Row<'_>], cuts: PieceCuts) -> Layout {
        let found: Vec<RowCuts> = rows.iter().map(|row| cuts.of_row(row)).collect();
        lay_out(rows, &found).unwrap()
    }

    #[test]
    fn scan_is_exclusive_with_total() {
        let dev = Emulator::new(1 << 20);
        for n in [0u32, 1, 5, 1024, 1025, 5000, 2_100_000] {
            let mut values: Vec<u32> = (0..n).map(|i| i % 7).collect();
            values.push(99);
            let buf = dev.upload_new(&values).unwrap();
            scan(&dev, &buf, n).unwrap();
            let got = dev.download_vec::<u32>(&buf, 0, n as usize + 1).unwrap();
            let mut expect = Vec::with_capacity(n as usize + 1);
            let mut running = 0;
            for v in &values[..n as usize] {
                expect.push(running);
                running += v;
            }
            expect.push(running);
            assert_eq!(got, expect, "n = {n}");
        }
    }

    #[test]
    fn a_scan_of_a_count_on_the_device_leaves_the_values_past_it() {
        let dev = Emulator::new(1 << 20);
        for (n, count) in [
            (0u32, 0u32),
            (5, 0),
            (5, 5),
            (1024, 3),
            (3000, 1024),
            (3000, 2049),
            (2_100_000, 1_500_001),
        ] {
            let mut values: Vec<u32> = (0..n).map(|i| i % 7).collect();
            values.push(99);
            let buf = dev.upload_new(&values).unwrap();
            let on_device = dev.upload_new(&[count]).unwrap();
            scan_counted(&dev, &buf, n, on_device.ptr()).unwrap();
            let got = dev.download_vec::<u32>(&buf, 0, n as usize + 1).unwrap();
            let mut expect = values.clone();
            let mut running = 0;
            for v in expect.iter_mut().take(count as usize) {
                running += std::mem::replace(v, running);
            }
            expect[count as usize] = running;
            assert_eq!(got, expect, "n = {n}, count = {count}");
        }
    }

    #[test]
    fn rows_of_any_script_with_spaces_are_cut_into_pieces_of_about_a_kilobyte() {
        // No ASCII character but the spaces: cut after Cyrillic and Greek letters.
        let russian = "Привет мир это длинный текст ".repeat(400);
        let greek_after_ids = vec![
            Row::Ids(vec![1, 2]),
            Row::Spaced(Cow::Owned("καλημέρα κόσμε ".repeat(300))),
        ];
        let cjk = "日本語のテキスト".repeat(300);
        let rows = [
            Row::Text(Cow::Borrowed(&russian)),
            Row::Parts(greek_after_ids),
            Row::Text(Cow::Borrowed(&cjk)),
        ];
        let layout = lay_out_cut(&rows, PieceCuts::Spaces);
        let bounds = &layout.piece_bounds;
        // Each piece of the spaced rows is at most a kilobyte and a word; the
        // text without spaces stays one piece.
        let cjk_start = layout.text_starts[2] as u32;
        for piece in bounds.windows(2).filter(|w| w[1] <= cjk_start) {
            assert!(piece[1] - piece[0] <= PIECE_BYTES as u32 + 32, "{piece:?}");
        }
        assert!(bounds.len() > 30, "{} pieces", bounds.len());
        assert_eq!(bounds[bounds.len() - 2], cjk_start);
        assert_eq!(*bounds.last().unwrap() as usize, layout.text_len);
    }

    #[test]
    fn words_are_ordered_by_work_class() {
        let dev = Emulator::new(1 << 20);
        // Words of many lengths, some of them whole in the shortcut table.
        let words: Vec<String> = (0..3000).map(|i| "ab".repeat(1 + i * 7 % 300)).collect();
        let text = words.concat();
        let starts: Vec<u32> = words
            .iter()
            .scan(0, |at, w| Some(std::mem::replace(at, *at + w.len() as u32)))
            .collect();
        let lens: Vec<u32> = words.iter().map(|w| w.len() as u32).collect();
        let whole = BytesTable::build([(b"ab".as_slice(), 1), (b"abab".as_slice(), 2)].into_iter());
        let mut bufs = Vec::new();
        let up = |values: &[u32]| dev.upload_new(values).unwrap();
        let (text_buf, starts_buf, lens_buf) = (
            dev.upload_new(text.as_bytes()).unwrap(),
            up(&starts),
            up(&lens),
        );
        let n_words = up(&[words.len() as u32]);
        let counts = up(&[0; 2 * WORK_CLASSES]);
        let order = dev.alloc(4 * words.len()).unwrap();
        let args = GtOrderArgs {
            text: text_buf.ptr(),
            word_starts: starts_buf.ptr(),
            word_lens: lens_buf.ptr(),
            n_words: n_words.ptr(),
            shortcut: upload_bytes(&dev, &whole, &mut bufs).unwrap(),
            class_counts: counts.ptr(),
            order: order.ptr(),
            blocks: 3,
            _pad: 0,
        };
        // Three blocks, each looping over every third block of words (3000 words: 12 blocks).
        run_blocks(&dev, Kernel::OrderCount, &args, 3 * LANES).unwrap();
        run_blocks(&dev, Kernel::OrderFill, &args, 3 * LANES).unwrap();
        let order = dev.download_vec::<u32>(&order, 0, words.len()).unwrap();
        let mut seen = order.clone();
        seen.sort_unstable();
        assert!(
            seen.iter().copied().eq(0..words.len() as u32),
            "a permutation"
        );
        // Heavy work first: by the bit count of their length, longest first,
        // and the words whole in the shortcut table last.
        let class = |w: u32| match lens[w as usize] {
            2 | 4 => 0,
            len => 32 - len.leading_zeros(),
        };
        let classes: Vec<u32> = order.iter().map(|&w| class(w)).collect();
        assert!(classes.windows(2).all(|c| c[0] >= c[1]), "{classes:?}");
        assert_eq!(classes[0], 10); // 600 bytes: 10 bits
        assert_eq!(*classes.last().unwrap(), 0);
    }

    /// A job of host ids only (no model): groups of rows given in turn.
    fn ids_job() -> Job<'static> {
        Job {
            model: DeviceModel::ByteLevel(GtBpeModel::null()),
            chain: GtChain::default(),
            spm_cuts: GtSpmCuts::disabled(),
            template: GtTemplate::default(),
            truncation: None,
            padding: None,
            outputs: Outputs::default(),
        }
    }

    /// Groups of three one-id rows, each asked for after recording how many
    /// chunks the device had queued by then.
    fn counted_groups<'d>(
        dev: &'d Emulator,
        asked: &'d std::cell::RefCell<Vec<usize>>,
    ) -> impl Iterator<Item = Result<RowGroup<'static>>> + 'd {
        use super::super::emulator::Op;
        (0..4u32).map(move |g| {
            let queued = dev
                .trace()
                .iter()
                .filter(|op| **op == Op::Launch(Kernel::RowSpans))
                .count();
            asked.borrow_mut().push(queued);
            let rows: Vec<Row<'static>> = (0..3).map(|r| Row::Ids(vec![10 * g + r])).collect();
            let cuts = rows
                .iter()
                .map(|row| PieceCuts::Whole.of_row(row))
                .collect();
            Ok(RowGroup { rows, cuts })
        })
    }

    #[test]
    fn each_group_is_asked_for_after_the_last_ones_chunks_are_queued() {
        // 16-byte chunks: a group of three ids (12 bytes) is one chunk.
        let dev = Emulator::traced(16);
        let asked = std::cell::RefCell::new(Vec::new());
        let batch = encode(&dev, &ids_job(), 12, &mut counted_groups(&dev, &asked)).unwrap();
        // The host prepares group k + 1 while the device runs group k.
        assert_eq!(*asked.borrow(), [0, 1, 2, 3]);
        let ids = batch.fields[0].1.read_vec::<i64>(12).unwrap();
        assert_eq!(ids, [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32]);
    }

    #[test]
    fn a_job_is_given_the_rows_it_was_told_of() {
        let dev = Emulator::new(16);
        let asked = std::cell::RefCell::new(Vec::new());
        for n_rows in [11, 13] {
            match encode(&dev, &ids_job(), n_rows, &mut counted_groups(&dev, &asked)) {
                Err(Error::InvalidArgument(message)) => {
                    assert!(message.contains("rows"), "{message}")
                }
                other => panic!("{n_rows} rows: {:?}", other.err()),
            }
        }
    }

    #[test]
    fn rows_group_by_text_bytes() {
        let rows: Vec<Row<'_>> = ["aaaa", "bb", "cccccc", "", "d"]
            .into_iter()
            .map(|t| Row::Text(Cow::Borrowed(t)))
            .collect();
        assert_eq!(chunk_rows(&rows, 6), vec![0..2, 2..4, 4..5]);
        assert_eq!(chunk_rows(&rows, 1), vec![0..1, 1..2, 2..3, 3..5]);
        assert_eq!(chunk_rows(&[], 6), vec![0..0]);
    }

    #[test]
    fn layout_cuts_long_rows_at_safe_points() {
        let long = "word ".repeat(2000);
        let rows = vec![
            Row::Text(Cow::Borrowed(long.as_str())),
            Row::Ids(vec![7, 8]),
            Row::Text(Cow::Borrowed("")),
        ];
        let l = lay_out_cut(&rows, PieceCuts::Spaces);
        assert_eq!(
            (l.text_len, &l.text_starts[..]),
            (long.len(), &[0, long.len(), long.len()][..])
        );
        let mut text = vec![0u8; l.text_len];
        copy_texts(&rows, &l.text_starts, &mut text);
        assert_eq!(text, long.as_bytes());
        assert!(l.piece_bounds.len() > 3, "a 10 kB row is cut");
        for w in l.piece_bounds.windows(2) {
            assert!(w[0] < w[1]);
            assert!(w[1] as usize == long.len() || long.as_bytes()[w[1] as usize] == b' ');
        }
        assert_eq!(l.sources[1].host_end - l.sources[1].host_begin, 2);
        assert_eq!(l.sources[2].piece_begin, l.sources[2].piece_end);
        let uncut = lay_out_cut(&rows, PieceCuts::Whole);
        assert_eq!(uncut.piece_bounds, vec![0, long.len() as u32]);
    }

    #[test]
    fn a_spaced_row_is_laid_out_as_its_text_after_a_space() {
        for long in ["word ".repeat(900), "word ".repeat(2000), "w".repeat(3000)] {
            let joined = format!(" {long}");
            let spaced = [Row::Spaced(Cow::Borrowed(&long)), Row::Ids(vec![7])];
            let written = [Row::Text(Cow::Borrowed(&joined)), Row::Ids(vec![7])];
            for cuts in [PieceCuts::Spaces, PieceCuts::Whole] {
                let (a, b) = (lay_out_cut(&spaced, cuts), lay_out_cut(&written, cuts));
                assert_eq!(
                    (a.text_len, &a.piece_bounds, format!("{:?}", a.sources)),
                    (b.text_len, &b.piece_bounds, format!("{:?}", b.sources))
                );
                let mut text = vec![0u8; a.text_len];
                copy_texts(&spaced, &a.text_starts, &mut text);
                assert_eq!(text, joined.as_bytes());
            }
            assert_eq!(chunk_rows(&spaced, 1 << 20), chunk_rows(&written, 1 << 20));
        }
    }
}
