package segment

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Record IDs. A record keeps one ID for good, whatever copies its bytes go
// through, so that a destination can drop the duplicates a crash may cause
// and a person can name the record:
//
//   - A record's ID is its segment's Origin and its sequence number in that
//     segment, unless the record carries the header RecordIDHeader: then
//     that is its ID.
//   - A segment's Origin is 12 bytes of its header ID (bytes 4 to 15: the
//     low 16 bits of the creation time's milliseconds and the 80 random
//     bits), unless its header names another one: a copy that keeps every
//     record at its sequence number but gets a header ID of its own
//     (Rewrap) names its original's Origin, in the 12 header bytes before
//     the CRC (reserved in readers that predate it, which ignore them).
//   - Whatever copies records into a new segment at other sequence numbers
//     (the Restorer's side segments, a salvage of a damaged segment) gives
//     each the header RecordIDHeader with its ID, unless it has one
//     (Writer.CopyKeepID).
//
// Moving or copying a segment byte for byte (dlqdump mv, cp, quarantine and
// release) and reading it again after a crash keep its bytes, and so every
// ID. A dumper (dlqdump.Queue) removes RecordIDHeader from the headers it
// is given: a dead letter dumped again is a new record.

// RecordIDHeader is the header holding the ID of a record copied into a
// segment at another sequence number than its first (see Writer.CopyKeepID).
const RecordIDHeader = "record-id"

// Origin names the segment a record was first written into: 12 bytes of its
// header ID (see Header.Origin).
type Origin [12]byte

// String returns the origin in hex, 24 characters.
func (o Origin) String() string { return hex.EncodeToString(o[:]) }

// IsZero reports whether o is the zero Origin, which no segment has.
func (o Origin) IsZero() bool { return o == Origin{} }

// Origin returns the segment's Origin: CopyOf when set, else bytes 4 to 15
// of its ID.
func (h *Header) Origin() Origin {
	if !h.CopyOf.IsZero() {
		return h.CopyOf
	}
	return Origin(h.ID[4:16])
}

// RecordID identifies a record: the Origin of the segment it was first
// written into and its sequence number there. Its String form,
// "<24 hex digits>-<sequence number>", is what the command line and the
// console show, a selection takes ("id = ...") and a destination may use as
// an idempotency key. The zero RecordID is no record's.
type RecordID struct {
	Origin Origin
	Seq    uint64
}

// String returns the ID as "<origin in hex>-<decimal sequence number>",
// e.g. "019a3f2c7d1e5b8a90c4d2e1-42".
func (id RecordID) String() string {
	b := make([]byte, 0, 2*len(id.Origin)+1+20)
	b = hex.AppendEncode(b, id.Origin[:])
	b = append(b, '-')
	return string(strconv.AppendUint(b, id.Seq, 10))
}

// IsZero reports whether id is the zero RecordID.
func (id RecordID) IsZero() bool { return id == RecordID{} }

// ErrRecordID means a text is not a record ID.
var ErrRecordID = errors.New("dlqdump: not a record ID")

// ParseRecordID parses the String form of a record ID. Hex digits may be
// upper or lower case. An error wraps ErrRecordID and says what is wrong.
func ParseRecordID(s string) (RecordID, error) {
	var id RecordID
	o, seq, ok := strings.Cut(s, "-")
	if !ok {
		return id, fmt.Errorf("%w: %q: want <24 hex digits>-<sequence number>", ErrRecordID, s)
	}
	if len(o) != 2*len(id.Origin) {
		return id, fmt.Errorf("%w: %q: the origin has %d characters, want 24 hex digits", ErrRecordID, s, len(o))
	}
	if _, err := hex.Decode(id.Origin[:], []byte(o)); err != nil {
		return id, fmt.Errorf("%w: %q: the origin is not hex", ErrRecordID, s)
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || seq == "" || seq[0] == '+' || len(seq) > 1 && seq[0] == '0' {
		return id, fmt.Errorf("%w: %q: the sequence number %q is not a decimal number", ErrRecordID, s, seq)
	}
	id.Seq = n
	if id.Origin.IsZero() {
		return id, fmt.Errorf("%w: %q: the zero origin is no segment's", ErrRecordID, s)
	}
	return id, nil
}

// RecordID returns the ID of rec, a record of the segment h heads: the ID
// its RecordIDHeader holds, when it holds one that parses, else h's Origin
// and rec's sequence number.
func (h *Header) RecordID(rec *Record) RecordID {
	if v, ok := rec.Headers.Lookup(RecordIDHeader); ok {
		if id, err := ParseRecordID(string(v)); err == nil {
			return id
		}
	}
	return RecordID{Origin: h.Origin(), Seq: rec.Seq}
}

// CopyKeepID appends a record read from the segment src heads, like Copy,
// with the header RecordIDHeader holding its ID (src.RecordID) unless it
// has one: for copies that do not keep records at their sequence numbers.
func (w *Writer) CopyKeepID(src *Header, r *Record, extra map[string]string) error {
	if _, ok := r.Headers.Lookup(RecordIDHeader); !ok {
		m := make(map[string]string, len(extra)+1)
		for k, v := range extra {
			m[k] = v
		}
		m[RecordIDHeader] = src.RecordID(r).String()
		extra = m
	}
	return w.Copy(r, extra)
}
