package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
)

// ReaderOptions tune a Reader.
type ReaderOptions struct {
	// Name is the segment's name, used in errors.
	Name string
	// MaxBlockSize caps the raw size of a block the reader accepts, and so
	// the memory one block takes. A larger block is damage (a *CorruptError
	// wrapping ErrTooLarge) and is skipped. Default MaxBlockSize, which
	// every block this package writes fits.
	MaxBlockSize int
	// MaxExpansion caps the raw size of a block at MaxExpansion times the
	// bytes the block takes in the segment, its header included. A block
	// over the cap is damage (a *CorruptError wrapping ErrTooLarge) and is
	// skipped. With it, the memory and the work of reading a segment are
	// bounded by MaxExpansion times its size, however small its records.
	// Realistic dead letters expand 3-10 times; zero padding compresses
	// over 1000 times, and a segment this package writes may hold anything,
	// so set it only where such data is not expected (untrusted files, the
	// fuzz tests). Default 0: no cap beyond MaxBlockSize.
	MaxExpansion int
	// Keys unwraps the data key of an encrypted segment, in NewReader.
	// Without it an encrypted segment's header, footer and checksums are
	// still read (VerifyBlock), but reading its records returns an error
	// wrapping ErrNoKey. Default nil.
	Keys KeyUnwrapper
	// RequireEncrypted makes NewReader refuse a segment that is not
	// encrypted, with an error wrapping ErrUnencrypted: for readers that
	// must take only data sealed under their keys (anyone who can write to
	// the store can write an unencrypted segment). Default false.
	RequireEncrypted bool
}

// Position is a place in a segment to resume reading from: the record with
// sequence number Seq, in the block that starts at Offset. The zero Position
// is the start of the segment.
type Position struct {
	Offset int64
	Seq    uint64
}

// Reader reads records from a segment through an io.ReaderAt, one block at a
// time: its memory is bounded by a block, never by the whole segment nor by
// the number of records. Every checksum is verified. Damage is reported as a
// *CorruptError naming the segment and the offset; reading then goes on
// with the next intact block, so every intact block's records are still
// returned. It is not safe for concurrent use; a Stream reads it ahead on
// several goroutines.
type Reader struct {
	src       io.ReaderAt
	size      int64
	name      string
	maxBlock  int
	expansion int64

	hdr        Header
	start      int64   // where blocks start: the header's size
	seal       *sealer // the block key, once unwrapped
	key        *DataKey
	keyErr     error  // why blocks cannot be opened, for an encrypted segment without its key
	wrapped    []byte // the wrapped data key of an encrypted segment
	salt       [saltSize]byte
	verifying  bool     // VerifyBlock: no key needed
	aad        [56]byte // the header of the block checkBlock verified last
	plain      []byte   // storage for opened blocks
	footer     *Footer
	footerErr  error
	footerLies bool  // its index did not match an authenticated block: not used since
	end        int64 // where blocks end: the summary's or the footer's offset, or size
	sum        *Summary
	sumErr     error
	sumDone    bool // Summary was called

	// iteration
	next    int64  // offset of the next block to load
	seq     uint64 // lowest sequence number the next block may start at
	seqSure bool   // the next block must start at seq: no records between (not after a Seek or damage)
	skipSeq uint64 // records below this sequence number are not returned
	nblock  int    // index of the next block
	done    bool
	pending error // damage to report on the next call (resync gave up)
	resyncs int64 // stored bytes checksummed since the last Seek

	// the current block, for Next
	cur     BlockInfo
	raw     []byte // storage for the raw bytes of blocks, reused
	blk     []byte // the current block's records, all checked
	nrec    int    // number of records in blk
	ri      int    // index of the next record in blk
	rpos    int    // offset of the next record in blk
	recBase int64

	// read-ahead window over src, and storage for stored bytes too large
	// for it
	win    []byte
	winOff int64
	big    []byte
}

// NewReader opens the segment in src, of the given size, and verifies its
// header. A segment without a valid footer (unsealed) is still read block by
// block; Sealed and FooterError tell which case it is. It is
// NewReaderContext with context.Background().
func NewReader(src io.ReaderAt, size int64, opts *ReaderOptions) (*Reader, error) {
	return NewReaderContext(context.Background(), src, size, opts)
}

// NewReaderContext is NewReader; ctx bounds the unwrapping of an encrypted
// segment's data key by ReaderOptions.Keys (a key service call).
func NewReaderContext(ctx context.Context, src io.ReaderAt, size int64, opts *ReaderOptions) (*Reader, error) {
	r := &Reader{src: src, size: size, maxBlock: MaxBlockSize}
	if opts != nil {
		r.name = opts.Name
		if opts.MaxBlockSize > 0 {
			r.maxBlock = opts.MaxBlockSize
		}
		if opts.MaxExpansion > 0 {
			r.expansion = int64(opts.MaxExpansion)
		}
	}
	if size < HeaderSize {
		return nil, r.corrupt(0, -1, fmt.Errorf("%w: %d bytes, shorter than a segment header", ErrCorrupt, size))
	}
	hb, err := r.read(0, HeaderSize)
	if err != nil {
		return nil, err
	}
	if r.hdr, r.start, err = unmarshalHeader(hb); err != nil {
		return nil, r.corrupt(0, -1, err)
	}
	if r.hdr.Encrypted {
		if err := r.readKeySection(ctx, opts); err != nil {
			return nil, err
		}
	} else if opts != nil && opts.RequireEncrypted {
		return nil, fmt.Errorf("%w: segment %s is not encrypted, and this reader takes only encrypted segments", ErrUnencrypted, r.name)
	}
	r.end = size
	if err := r.readFooter(); err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return nil, err // I/O error
		}
		r.footerErr = err
	}
	r.next, r.seq, r.seqSure = r.start, 0, true
	return r, nil
}

// Start returns the offset where the segment's blocks start: HeaderSize, or
// after the key section of an encrypted segment.
func (r *Reader) Start() int64 { return r.start }

// DataKey returns the data key of an encrypted segment, unwrapped by
// ReaderOptions.Keys, for writing segments under the same key (the
// Restorer's side segments); nil when the segment is not encrypted or was
// opened without Keys.
func (r *Reader) DataKey() *DataKey { return r.key }

// Header returns the segment's header.
func (r *Reader) Header() Header { return r.hdr }

// Size returns the segment's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// Name returns the segment's name, as given in ReaderOptions.
func (r *Reader) Name() string { return r.name }

// Sealed reports whether the segment has a valid footer.
func (r *Reader) Sealed() bool { return r.footer != nil }

// Footer returns the segment's footer, nil when it is unsealed.
func (r *Reader) Footer() *Footer { return r.footer }

// FooterError says why the segment counts as unsealed (a *CorruptError
// wrapping ErrUnsealed or ErrCorrupt); nil when it is sealed.
func (r *Reader) FooterError() error { return r.footerErr }

// Block returns the block the last record returned by Next came from.
func (r *Reader) Block() BlockInfo { return r.cur }

// Pos returns the position of the next record Next would return.
func (r *Reader) Pos() Position {
	if r.ri < r.nrec {
		return Position{Offset: r.cur.Offset, Seq: r.cur.FirstSeq + uint64(r.ri)}
	}
	return Position{Offset: r.next, Seq: max(r.seq, r.skipSeq)}
}

// Seek makes Next continue from pos, as returned by Pos (possibly by another
// Reader of the same segment) or Block.Next.
func (r *Reader) Seek(pos Position) error {
	if err := r.checkSeek(pos); err != nil {
		return err
	}
	if pos.Offset == 0 && pos.Seq == 0 {
		pos.Offset = r.start
	}
	r.next, r.seq, r.skipSeq = pos.Offset, 0, pos.Seq
	r.seqSure = pos.Offset == r.start && pos.Seq == 0
	r.dropBlock()
	r.done, r.pending, r.resyncs = false, nil, 0
	r.nblock = 0
	if r.footer != nil {
		// Keep block indexes exact for errors.
		bl := r.footer.Blocks
		r.nblock = sort.Search(len(bl), func(i int) bool { return bl[i].Offset >= pos.Offset })
	}
	return nil
}

// checkSeek returns the error Seek(pos) would return. It reads only what
// NewReader set, so a Stream may call it while its goroutines read.
func (r *Reader) checkSeek(pos Position) error {
	if pos.Offset == 0 && pos.Seq == 0 {
		return nil
	}
	if pos.Offset < r.start || pos.Offset > r.end {
		return fmt.Errorf("dlqdump: segment %s: seek to offset %d outside the blocks [%d, %d]", r.name, pos.Offset, r.start, r.end)
	}
	return nil
}

// Next returns the next record. It returns io.EOF after the last one. On
// damage it returns a *CorruptError once; the following call goes on with the
// next intact block. The record's Headers and Payload stay valid until Next
// moves to another block, whose records it decodes into the same memory.
func (r *Reader) Next() (Record, error) {
	for r.ri >= r.nrec {
		if err := r.loadBlock(); err != nil {
			return Record{}, err
		}
	}
	p, end := recordAt(r.blk, r.rpos)
	r.rpos = end
	r.ri++
	return Record{
		Seq:     r.cur.FirstSeq + uint64(r.ri-1),
		Time:    r.recBase + p.delta,
		Headers: Headers{n: p.nh, b: p.hdr},
		Payload: p.payload,
	}, nil
}

// dropBlock forgets the current block's records.
func (r *Reader) dropBlock() {
	r.blk, r.nrec, r.ri, r.rpos = nil, 0, 0, 0
}

// NextBlock skips the rest of the current block and loads the next one,
// returning its description. Its records are then returned by Next.
func (r *Reader) NextBlock() (BlockInfo, error) {
	r.ri = r.nrec
	if err := r.loadBlock(); err != nil {
		return BlockInfo{}, err
	}
	return r.cur, nil
}

// loadBlock loads the next intact block into r.raw, for Next. It returns
// io.EOF at the end, or a *CorruptError for a damaged block after which it
// has already moved past the damage.
func (r *Reader) loadBlock() error {
	r.dropBlock()
	j, err := r.nextJob()
	if err != nil {
		return err
	}
	if err := r.openJob(&j); err != nil {
		return err
	}
	raw, _, err := decodeJob(&j, r.raw, nil, false)
	if raw != nil {
		r.raw = raw[:0] // keep the storage, whatever happened
	}
	if err != nil {
		return r.corrupt(j.info.Offset, j.idx, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	r.cur, r.recBase = j.info, j.base
	r.blk, r.nrec = raw, int(j.info.Count)
	// Drop records before the resume point.
	for r.ri < j.skip {
		r.rpos = skipRecord(r.blk, r.rpos)
		r.ri++
	}
	return nil
}

// AtEnd reports whether reading reached the end of the segment's blocks:
// Next or ReadBlock returned io.EOF there, not earlier.
func (r *Reader) AtEnd() bool { return r.done && r.next >= r.end }

func (r *Reader) corrupt(off int64, block int, err error) error {
	return &CorruptError{Segment: r.name, Offset: off, Block: block, Err: err}
}

// readAhead is the size of the reader's window over its source.
const readAhead = 256 << 10

// read returns n bytes at off, through the read-ahead window. The slice is
// valid until the next read. n is at most readAhead, or HeaderSize, or a
// footer whose size was checked against the segment's.
func (r *Reader) read(off int64, n int) ([]byte, error) {
	if off >= r.winOff && off+int64(n) <= r.winOff+int64(len(r.win)) {
		i := off - r.winOff
		return r.win[i : i+int64(n)], nil
	}
	want := int64(max(n, readAhead))
	want = max(min(want, r.size-off), int64(n))
	if cap(r.win) < int(want) {
		r.win = make([]byte, want)
	}
	r.win = r.win[:want]
	got, err := r.src.ReadAt(r.win, off)
	if got < n {
		r.win, r.winOff = r.win[:0], 0
		return nil, r.ioError(off, n, err)
	}
	r.win, r.winOff = r.win[:got], off
	return r.win[:n], nil
}

// readStored returns the n stored bytes of a block at off, n checked
// against the bytes left and the block cap: through the window when they fit
// it, else read into r.big, so that the window stays small. The slice is
// valid until the next read.
func (r *Reader) readStored(off int64, n int) ([]byte, error) {
	if n <= readAhead {
		return r.read(off, n)
	}
	if cap(r.big) < n {
		r.big = nil // let the old one go first
		r.big = make([]byte, n)
	}
	b := r.big[:n]
	got, err := r.src.ReadAt(b, off)
	if got < n {
		return nil, r.ioError(off, n, err)
	}
	return b, nil
}

// ioError reports a failed read of the source. Whatever it wraps, it never
// matches io.EOF: a network client may report a dropped connection as an
// error wrapping io.EOF, and a caller must not take that for the end of the
// segment, which this package reports only as the bare io.EOF.
func (r *Reader) ioError(off int64, n int, err error) error {
	switch {
	case err == nil || err == io.EOF:
		err = io.ErrUnexpectedEOF
	case errors.Is(err, io.EOF):
		err = fmt.Errorf("%w (%v)", io.ErrUnexpectedEOF, err)
	}
	return fmt.Errorf("dlqdump: segment %s: read %d bytes at offset %d: %w", r.name, n, off, err)
}
