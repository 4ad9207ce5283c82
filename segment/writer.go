package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"
	"time"
)

// WriterOptions tune a Writer's record-level API (Add, AddRecord). Writers that
// only take EncodedBlocks ignore them.
type WriterOptions struct {
	// Level is the compression level for the header's codec; 0 is the
	// codec's default (see NewCompressor).
	Level int
	// BlockSize is the raw size at which a block is cut. Default
	// DefaultBlockSize; at most MaxBlockSize.
	BlockSize int
	// Key, when set, encrypts the segment (format version 2): every block
	// is sealed with a block key derived from Key.Key and a salt random for
	// this Writer, and Key.Wrapped is stored in the header. It applies to
	// every block, those given to WriteBlock included. Default nil: not
	// encrypted.
	Key *DataKey
	// Summarize writes a summary of the records (summary.go) before the
	// footer, for selections to skip the segment or blocks of it: its
	// header keys and values, and per block a filter of the header values
	// and one of the payloads' bytes. Blocks given to WriteBlock must then
	// be summarized (EncodedBlock.Summarize); one that is not leaves the
	// segment without a summary. The header says the segment may carry
	// one (flag bit 1), which readers that predate summaries refuse.
	// Default false: no summary, the layout as before.
	Summarize bool
	// MaxSize, when positive, bounds the sealed segment's size with its
	// summary: the summary is made smaller, or left out, to fit (blocks
	// are not: the caller seals before a block that would not fit, as
	// SealedSizeOf tells). Default 0: the summary takes at most a
	// sixteenth of the blocks' stored bytes (and at least 4 KiB, at most
	// 4 MiB).
	MaxSize int64
}

// Writer writes one segment: the header when created, then blocks, then the
// footer on Close. A failed write leaves the Writer's state as it was before
// the call: the caller may truncate the destination to Size() and retry. It is
// not safe for concurrent use.
type Writer struct {
	w   io.Writer
	hdr Header

	start    int64   // where blocks start: the header's size
	seal     *sealer // nil when not encrypted
	counter  uint32  // blocks sealed so far: the next nonce
	sbuf     []byte  // a sealed block, header included
	off      int64
	index    []BlockInfo
	records  uint64
	raw      uint64
	stored   uint64
	min, max int64
	closed   bool
	sum      *sumAcc // the blocks' summaries, with Summarize

	// Record-level API state, set up on first use.
	opts WriterOptions
	comp *Compressor
	bb   BlockBuilder
	eb   EncodedBlock
	body []byte
}

// NewWriter writes h to w and returns a Writer appending blocks after it.
// h.FormatVersion is set to FormatVersion (FormatVersionEncrypted with
// opts.Key) and h.Encrypted to whether opts.Key is set; a zero h.Created is
// set to now and a zero h.ID to a new ID.
func NewWriter(w io.Writer, h Header, opts *WriterOptions) (*Writer, error) {
	h.FormatVersion, h.Encrypted, h.Summarized = FormatVersion, false, false
	if opts != nil && opts.Key != nil {
		h.FormatVersion, h.Encrypted = FormatVersionEncrypted, true
	}
	if opts != nil && opts.Summarize {
		h.Summarized = true
	}
	if h.Created.IsZero() {
		h.Created = time.Now()
	}
	if h.ID == (ID{}) {
		h.ID = NewID(h.Created)
	}
	if !h.Codec.valid() {
		return nil, fmt.Errorf("%w: codec %d", ErrFormat, h.Codec)
	}
	sw := &Writer{w: w, hdr: h}
	if opts != nil {
		sw.opts = *opts
	}
	if h.Summarized {
		sw.sum = &sumAcc{}
	}
	if sw.opts.BlockSize <= 0 {
		sw.opts.BlockSize = DefaultBlockSize
	}
	// Larger blocks would be refused by readers with the default cap (and
	// their raw length would not fit the block header beyond 4 GiB).
	sw.opts.BlockSize = min(sw.opts.BlockSize, MaxBlockSize)
	b := make([]byte, HeaderSize, 256)
	if h.Encrypted {
		k := opts.Key
		if err := k.check(); err != nil {
			return nil, err
		}
		salt := newSalt()
		s, err := newSealer(k.Key, &salt, h.DataVersion)
		if err != nil {
			return nil, err
		}
		sw.seal = s
		b = appendKeySection(b, &salt, k.Wrapped)
	}
	h.marshal(b, len(b))
	if _, err := w.Write(b); err != nil {
		return nil, fmt.Errorf("dlqdump: write segment header: %w", err)
	}
	sw.start = int64(len(b))
	sw.off = sw.start
	return sw, nil
}

// Header returns the segment's header.
func (w *Writer) Header() Header { return w.hdr }

// Size returns the number of bytes written so far.
func (w *Writer) Size() int64 { return w.off }

// Records returns the number of records in the blocks written so far.
func (w *Writer) Records() uint64 { return w.records }

// Blocks returns the number of blocks written so far.
func (w *Writer) Blocks() int { return len(w.index) }

// SealedSize returns the size the segment would have, at most, if a block
// of blockLen bytes (0 for none; as EncodedBlock.Len, before encryption
// adds TagSize) were written and the segment then sealed; with
// WriterOptions.Summarize, the block's summary is taken to be of a small
// block (SealedSizeOf knows it).
func (w *Writer) SealedSize(blockLen int) int64 {
	var small *blockSum
	if blockLen > 0 && w.sum != nil {
		small = &blockSum{blockFilter: blockFilter{flags: filtHeaders | filtGrams, hdr: make([]byte, 8), grams: make([]byte, 8)}}
	}
	return w.sealedSize(blockLen, small)
}

// SealedSizeOf returns the size the segment would have, at most, if e were
// written and the segment then sealed, e's summary included.
func (w *Writer) SealedSizeOf(e *EncodedBlock) int64 {
	return w.sealedSize(e.Len(), &e.sum)
}

func (w *Writer) sealedSize(blockLen int, sum *blockSum) int64 {
	n := len(w.index)
	stored := w.stored
	if blockLen > 0 {
		n++
		if w.seal != nil {
			blockLen += TagSize
		}
		stored += uint64(blockLen - BlockHeaderSize)
	}
	size := w.off + int64(blockLen) + footerSize(n)
	if w.sum != nil && !w.sum.broken {
		// The summary is folded to its budget, or left out, when it
		// is larger. MaxSize is not taken off it here: a caller that
		// seals before a block whose summary would not fit keeps the
		// room for it (Close makes it fit MaxSize when it must: after
		// a first block that fills the segment alone).
		size += int64(min(w.sum.size(sum, w.seal != nil), summaryBudget(stored)))
	}
	return size
}

// summaryBudget is the most bytes the summary of a segment of stored bytes
// of blocks, size bytes without its summary, may take.
func (w *Writer) summaryBudget(stored uint64, size int64) int {
	b := summaryBudget(stored)
	if w.opts.MaxSize > 0 {
		b = min(b, int(max(0, w.opts.MaxSize-size)))
	}
	return b
}

// Truncate forgets the blocks at and after offset size, which must be the end
// of a block (or of the header), so that they can be written again after the
// caller truncated the destination to size.
func (w *Writer) Truncate(size int64) error {
	if w.closed {
		return ErrClosed
	}
	n := len(w.index)
	for n > 0 && w.index[n-1].Offset >= size {
		n--
	}
	end := w.start
	if n > 0 {
		end = w.index[n-1].End()
	}
	if end != size {
		return fmt.Errorf("dlqdump: truncate segment to %d: not the end of a block", size)
	}
	w.index = w.index[:n]
	if w.sum != nil {
		w.sum.truncate(n)
	}
	w.off = size
	w.records, w.raw, w.stored, w.min, w.max = 0, 0, 0, 0, 0
	for i, b := range w.index {
		if i == 0 {
			w.min, w.max = b.MinTime, b.MaxTime
		} else {
			w.min, w.max = min(w.min, b.MinTime), max(w.max, b.MaxTime)
		}
		w.records += uint64(b.Count)
		w.raw += uint64(b.RawLen)
		w.stored += uint64(b.StoredLen)
	}
	return nil
}

// WriteBlock appends an encoded block, giving it the next sequence numbers.
// In an encrypted segment it seals the block first (e is left as it was, so
// that a failed call may be repeated: the block is then sealed again under
// a new nonce).
func (w *Writer) WriteBlock(e *EncodedBlock) error {
	if w.closed {
		return ErrClosed
	}
	e.finish(w.records)
	buf, info := e.buf, e.info
	if w.seal != nil {
		var err error
		if buf, err = w.sealBlock(e); err != nil {
			return err
		}
		info.StoredLen += TagSize
	}
	if _, err := w.w.Write(buf); err != nil {
		return fmt.Errorf("dlqdump: write block at offset %d: %w", w.off, err)
	}
	info.Offset = w.off
	w.index = append(w.index, info)
	if w.sum != nil {
		w.sum.add(&e.sum)
	}
	w.off += int64(len(buf))
	if w.records == 0 {
		w.min, w.max = info.MinTime, info.MaxTime
	} else {
		w.min, w.max = min(w.min, info.MinTime), max(w.max, info.MaxTime)
	}
	w.records += uint64(info.Count)
	w.raw += uint64(info.RawLen)
	w.stored += uint64(info.StoredLen)
	return nil
}

// sealBlock returns e sealed, in w.sbuf: its header with the sealed flag,
// the stored length with the tag and the nonce counter, then the sealed
// bytes, with the CRC32C over them. Every call takes a new counter, whether
// or not the block is then written.
func (w *Writer) sealBlock(e *EncodedBlock) ([]byte, error) {
	if w.counter == math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d blocks sealed in one segment", ErrTooLarge, w.counter)
	}
	counter := w.counter
	w.counter++
	le := binary.LittleEndian
	var h [BlockHeaderSize]byte
	copy(h[:], e.buf[:BlockHeaderSize])
	le.PutUint16(h[6:], le.Uint16(h[6:])|blockSealed)
	le.PutUint32(h[16:], le.Uint32(h[16:])+TagSize)
	le.PutUint32(h[52:], counter)
	stored := e.buf[BlockHeaderSize:]
	if cap(w.sbuf) < len(e.buf)+TagSize {
		w.sbuf = make([]byte, 0, len(e.buf)+TagSize+len(e.buf)/8)
	}
	buf := append(w.sbuf[:0], h[:]...)
	buf = w.seal.seal(buf, h[:56], stored, counter)
	crc := crc32.Update(crc32.Checksum(buf[BlockHeaderSize:], castag), castag, h[:56])
	le.PutUint32(buf[56:], crc)
	w.sbuf = buf
	return buf, nil
}

// Add appends a record that entered the dump at t with the given headers and
// payload. Records are buffered into blocks of WriterOptions.BlockSize.
func (w *Writer) Add(t time.Time, headers map[string]string, payload []byte) error {
	w.body = AppendHeaders(w.body[:0], headers)
	w.body = append(w.body, payload...)
	return w.AddRecord(t.UnixNano(), w.body)
}

// AddRecord appends a record with a prepared body (AppendHeaders followed by
// the payload) that entered the dump at t (Unix nanoseconds).
func (w *Writer) AddRecord(t int64, body []byte) error {
	if w.closed {
		return ErrClosed
	}
	if len(body) > MaxRecordSize {
		return fmt.Errorf("%w: record body of %d bytes, the cap is %d", ErrTooLarge, len(body), MaxRecordSize)
	}
	if w.bb.Count() > 0 && w.bb.Len()+RecordSize(len(body)) > w.opts.BlockSize {
		if err := w.flushBlock(); err != nil {
			return err
		}
	}
	saved := w.bb
	w.bb.Add(t, body)
	if w.bb.Len() >= w.opts.BlockSize {
		if err := w.flushBlock(); err != nil {
			// Take the record out again: the call failed, so the caller
			// will add it again.
			raw := w.bb.raw[:len(saved.raw)]
			w.bb = saved
			w.bb.raw = raw
			return err
		}
	}
	return nil
}

// Copy appends a record read from another segment, headers and time kept.
// extra headers, if any, are added to (or replace) the record's own.
func (w *Writer) Copy(r *Record, extra map[string]string) error {
	if len(extra) == 0 {
		w.body = AppendRecordHeaders(w.body[:0], r.Headers)
	} else {
		m := r.Headers.Map()
		if m == nil {
			m = make(map[string]string, len(extra))
		}
		for k, v := range extra {
			m[k] = v
		}
		w.body = AppendHeaders(w.body[:0], m)
	}
	w.body = append(w.body, r.Payload...)
	return w.AddRecord(r.Time, w.body)
}

// Flush writes the records buffered by Add as a block.
func (w *Writer) Flush() error {
	if w.closed {
		return ErrClosed
	}
	if w.bb.Count() == 0 {
		return nil
	}
	return w.flushBlock()
}

func (w *Writer) flushBlock() error {
	if w.comp == nil {
		c, err := getCompressor(w.hdr.Codec, w.opts.Level)
		if err != nil {
			return err
		}
		w.comp = c
	}
	w.comp.Encode(&w.eb, &w.bb)
	if w.sum != nil {
		w.eb.Summarize(&w.bb)
	}
	if err := w.WriteBlock(&w.eb); err != nil {
		return err
	}
	w.bb.Reset(w.bb.raw)
	return nil
}

// Close flushes buffered records and seals the segment with its footer. It
// does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var sum []byte
	if w.sum != nil {
		var err error
		if sum, err = w.summary(); err != nil {
			return err
		}
	}
	b := append(sum, appendFooter(nil, w.index, w.records, w.raw, w.stored, w.min, w.max, time.Now(), len(sum))...)
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("dlqdump: write segment footer at offset %d: %w", w.off, err)
	}
	w.off += int64(len(b))
	w.closed = true
	if w.comp != nil {
		putCompressor(w.comp)
		w.comp = nil
	}
	return nil
}

// compressorKey names the Compressors a pool of compressorPools holds.
type compressorKey struct {
	codec Codec
	level int
}

// compressorPools keeps the Compressors of closed Writers for the next ones,
// by codec and level: a zstd encoder's tables take longer to set up than a
// small segment takes to compress.
var compressorPools sync.Map // compressorKey -> *sync.Pool

func getCompressor(codec Codec, level int) (*Compressor, error) {
	if p, ok := compressorPools.Load(compressorKey{codec, level}); ok {
		if c, _ := p.(*sync.Pool).Get().(*Compressor); c != nil {
			return c, nil
		}
	}
	return NewCompressor(codec, level)
}

func putCompressor(c *Compressor) {
	p, _ := compressorPools.LoadOrStore(compressorKey{c.codec, c.level}, new(sync.Pool))
	p.(*sync.Pool).Put(c)
}

// summary encodes the segment's summary section; in an encrypted segment
// its body is sealed under the next nonce counter, as a block would be (a
// retried Close seals it again under a new one).
func (w *Writer) summary() ([]byte, error) {
	var counter uint32
	if w.seal != nil {
		if w.counter == math.MaxUint32 {
			return nil, fmt.Errorf("%w: %d blocks sealed in one segment", ErrTooLarge, w.counter)
		}
		counter = w.counter
		w.counter++
	}
	return w.sum.encode(w.summaryBudget(w.stored, w.off+footerSize(len(w.index))), w.seal, counter), nil
}

// summaryBudget is the most bytes a summary of a segment of stored bytes of
// blocks may take: a sixteenth of them, at least 4 KiB and at most
// maxSummaryBytes (the filters are folded to fit).
func summaryBudget(stored uint64) int {
	return int(min(max(stored/16, 4<<10), maxSummaryBytes))
}

// appendFooter appends footer and trailer; summaryLen is the size of the
// summary section just before the footer, 0 for none.
func appendFooter(dst []byte, index []BlockInfo, records, raw, stored uint64, minT, maxT int64, sealed time.Time, summaryLen int) []byte {
	start := len(dst)
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, blockMagic)
	dst = append(dst, blockTypeFooter, byte(summaryLen), byte(summaryLen>>8), byte(summaryLen>>16))
	dst = le.AppendUint32(dst, uint32(len(index)))
	dst = le.AppendUint64(dst, records)
	dst = le.AppendUint64(dst, raw)
	dst = le.AppendUint64(dst, stored)
	dst = le.AppendUint64(dst, uint64(minT))
	dst = le.AppendUint64(dst, uint64(maxT))
	dst = le.AppendUint64(dst, uint64(sealed.UnixNano()))
	for i := range index {
		b := &index[i]
		dst = le.AppendUint64(dst, uint64(b.Offset))
		dst = le.AppendUint64(dst, b.FirstSeq)
		dst = le.AppendUint32(dst, b.Count)
		dst = le.AppendUint32(dst, b.RawLen)
		dst = le.AppendUint64(dst, uint64(b.MinTime))
		dst = le.AppendUint64(dst, uint64(b.MaxTime))
	}
	dst = le.AppendUint32(dst, crc32.Checksum(dst[start:], castag))
	dst = le.AppendUint32(dst, uint32(len(dst)-start))
	return append(dst, endMagic[:]...)
}

// Seal appends a footer to a segment whose intact prefix was found by Scan,
// making it a sealed segment. w must write at offset s.End: the caller
// truncates the file there first.
func Seal(w io.Writer, s *ScanResult) error {
	var minT, maxT int64
	var raw, stored uint64
	for i, b := range s.Blocks {
		if i == 0 {
			minT, maxT = b.MinTime, b.MaxTime
		} else {
			minT, maxT = min(minT, b.MinTime), max(maxT, b.MaxTime)
		}
		raw += uint64(b.RawLen)
		stored += uint64(b.StoredLen)
	}
	b := appendFooter(nil, s.Blocks, s.Records, raw, stored, minT, maxT, time.Now(), 0)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("dlqdump: write segment footer at offset %d: %w", s.End, err)
	}
	return nil
}
