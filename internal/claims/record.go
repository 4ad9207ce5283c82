package claims

import (
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// State is what a record says of its segment besides who holds it.
type State string

// States.
const (
	// StateOpen is a claim being worked on (with a token) or released
	// (without one).
	StateOpen State = ""
	// StateFinishing is a claim whose holder is completing, archiving,
	// moving or quarantining the segment: the record fences those steps.
	StateFinishing State = "finishing"
	// StateQuarantined is kept on the record of a segment moved to
	// quarantine by its holder, with its progress, so that a segment
	// released from quarantine resumes where it was left and never feeds
	// delivered records again.
	StateQuarantined State = "quarantined"
	// StatePending is the record of a side segment (records a restorer
	// set aside or carved from its Parent) made before the side segment
	// is published: the side segment cannot be claimed while its parent
	// may still publish it again (a parent resumed after an interruption
	// publishes it again, finding it there), so that it is never restored
	// meanwhile. A record with Named waits only while its parent is ready
	// and the parent's progress names it (Progress.Writing); one without
	// (an older dlqdump's) while its parent is ready.
	StatePending State = "pending"
)

// Version is the format of the record this package writes.
const Version = 2

// Record is the JSON document a sink keeps per segment name (sink.Records):
//
//	{"v":2,"owner":"orders-7f3a","token":"…","rev":12,"lease_ms":30000,
//	 "state":"","written":"2026-11-22T10:15:00.123Z","progress":{…}}
//
// A side segment's record, made before it is published, names its parent:
//
//	{"v":2,"rev":1,"state":"pending","parent":"NAME.dlq","named":true,"written":"…"}
//
// A holder that publishes a segment on behalf of its claim records the
// decision in its record until the segment is in place (see Publish):
//
//	{…,"publishing":[{"staged":"TOKEN-NAME.dlq","name":"NAME.dlq","area":1}]}
//
// A holder finishing a segment records where it takes it in the write that
// fences the finish (see Finish):
//
//	{…,"state":"finishing","to":{"area":1,"reason":"version 1.0.0.0, restorer expects 2.0.0.0"}}
//
// Owner is a label for people; claims are told apart by Token, random per
// claim, empty once released. Rev grows by one with every write, so no two
// writes store the same bytes and a sink's content-derived version always
// changes. LeaseMS is the holder's lease: an observer that sees the record
// unchanged for that long, by its own monotonic clock, may take the claim
// over. Written is the writer's wall clock, shown to people and never
// compared across machines. Progress is the Restorer's checkpoint, opaque
// here.
type Record struct {
	V       int    `json:"v"`
	Owner   string `json:"owner,omitempty"`
	Token   string `json:"token,omitempty"`
	Rev     uint64 `json:"rev"`
	LeaseMS int64  `json:"lease_ms,omitempty"`
	State   State  `json:"state,omitempty"`
	Parent  string `json:"parent,omitempty"`
	// Named, in a pending record, says that its parent's progress names
	// the side segment while it may publish it again (Progress.Writing):
	// the side may be claimed once that progress does not, though the
	// parent is still ready (a carving pass leaves it so). An older
	// dlqdump ignores it and waits until the parent is no longer ready.
	Named    bool            `json:"named,omitempty"`
	Written  time.Time       `json:"written,omitzero"`
	Progress json.RawMessage `json:"progress,omitempty"`
	// Publishing lists the segments the holder decided to publish on
	// behalf of its claim that may not be in place yet (see Publish).
	Publishing []Publication `json:"publishing,omitempty"`
	// Staged, in the record of a segment copied here from another store
	// (dlqdump mv), names the staged copy that its command moves into
	// place once the source's claim record says so.
	Staged string `json:"staged,omitempty"`
	// Control is a request written into a held record by someone who is
	// not its holder (a restore job paused or cancelled from outside):
	// the holder's writes keep it, and the holder learns it with its next
	// write (Claim.Control).
	Control string `json:"control,omitempty"`
	// To, in a record in StateFinishing, is where its holder decided to
	// take the segment (Claim.Finish, Claim.SaveFinal): whoever holds the
	// claim next, this holder or one that takes it over, completes that
	// decision rather than work on the segment (see Finished).
	To *Destination `json:"to,omitempty"`
}

// Held reports whether a restorer holds the claim (until it expires).
func (r *Record) Held() bool { return r.Token != "" }

// Lease returns the holder's lease, at least min (the observer caps it at MaxLease).
func (r *Record) Lease(min time.Duration) time.Duration {
	d := time.Duration(r.LeaseMS) * time.Millisecond
	return max(min, d)
}

func (r *Record) marshal() []byte {
	b, _ := json.Marshal(r) // a Record always marshals
	return b
}

// Parse parses a record; ok is false for bytes that are not one. Claims
// written by dlqdump before this format (fs claim files without "v", S3 claim
// objects with "v":1) are read too: their checkpoint becomes the progress,
// their wall-clock expiry is ignored.
func Parse(b []byte) (r Record, ok bool) {
	var doc struct {
		Record
		Checkpoint *json.RawMessage `json:"checkpoint"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&doc); err != nil {
		return Record{}, false
	}
	r = doc.Record
	if r.V < Version {
		if doc.Checkpoint == nil {
			return Record{}, false
		}
		r.V, r.Progress = Version, *doc.Checkpoint
		if r.State != StateOpen {
			r.State = StateFinishing
		}
	}
	if r.Progress != nil && !json.Valid(r.Progress) {
		return Record{}, false
	}
	return r, true
}

func newToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails on supported platforms
	return hex.EncodeToString(b[:])
}
