package changelog

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Actions: what an Entry says was done. Programs may append others of their
// own (a word, lower case, dot-separated).
const (
	ActionJobCreate = "job.create"
	ActionJobPause  = "job.pause"
	ActionJobResume = "job.resume"
	ActionJobCancel = "job.cancel"
	ActionJobRetry  = "job.retry"
	ActionRelease   = "release"   // quarantined segments made ready again
	ActionDiscard   = "discard"   // records set aside into the quarantine by a person
	ActionReplay    = "replay"    // records delivered now, out of their turn
	ActionRestore   = "restore"   // records delivered by dlqdump restore
	ActionCopy      = "cp"        // segments copied in from another store
	ActionPrune     = "prune"     // segments removed by a retention
	ActionRewrap    = "rewrap"    // data keys wrapped for other recipients
	ActionMove      = "mv"        // segments moved to or from another store
	ActionSummarize = "summarize" // segments given a summary
)

// Entry is one change to a store.
type Entry struct {
	// Seq is the entry's place in the log: 1 for the first entry, then
	// one more for each. Set by Append.
	Seq uint64 `json:"seq"`
	// Time is when the change was made. Append sets it to the current
	// time when zero; it is kept in UTC.
	Time time.Time `json:"time"`
	// Actor says who made the change: a person (from the console's
	// authorisation hook, or the command line's --actor), the OS user and
	// host of a command ("alice@ops-1"), or a client's address.
	Actor string `json:"actor"`
	// Role is the actor's role in the console (viewer, operator, admin),
	// when the change came through it.
	Role string `json:"role,omitempty"`
	// Via is the program that made the change: "cli", "console", or a
	// program's own name.
	Via string `json:"via,omitempty"`
	// Action is what was done: one of the Action constants.
	Action string `json:"action"`
	// Scope is what it was done to: a job ID, record IDs, a selection,
	// segment names, an area.
	Scope string `json:"scope,omitempty"`
	// Reason is why, in the actor's words.
	Reason string `json:"reason,omitempty"`
	// Result says what the change did ("released 3 of 3 segments",
	// "delivered 1 record").
	Result string `json:"result,omitempty"`
	// Error is set when the change failed, in part or whole.
	Error string `json:"error,omitempty"`
	// Nonce is random, set by Append: it recognises its own entry after
	// a write whose answer was lost.
	Nonce string `json:"nonce"`
	// Prev is the Hash of the entry before ("" for the first), Hash the
	// SHA-256 of this entry's fields and Prev (Entry.Sum), both in hex.
	// Set by Append.
	Prev string `json:"prev,omitempty"`
	Hash string `json:"hash"`
}

// Bounds of an entry's fields in bytes: longer values are cut (at a
// character boundary, ending in "…"), so that a page of entries always fits
// in a record.
const (
	MaxActor  = 256
	MaxRole   = 32
	MaxVia    = 64
	MaxAction = 64
	MaxScope  = 2048
	MaxReason = 1024
	MaxResult = 1024
	MaxError  = 1024
)

// clip cuts s to at most n bytes at a character boundary, ending in "…",
// and replaces invalid UTF-8 (so that the JSON round trip keeps its bytes).
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := n - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

// normalize bounds e's fields and keeps its time in UTC.
func (e *Entry) normalize() {
	e.Time = e.Time.UTC()
	e.Actor = clip(e.Actor, MaxActor)
	e.Role = clip(e.Role, MaxRole)
	e.Via = clip(e.Via, MaxVia)
	e.Action = clip(e.Action, MaxAction)
	e.Scope = clip(e.Scope, MaxScope)
	e.Reason = clip(e.Reason, MaxReason)
	e.Result = clip(e.Result, MaxResult)
	e.Error = clip(e.Error, MaxError)
	e.Nonce = clip(e.Nonce, 64)
	e.Prev = clip(e.Prev, 64)
}

// hashVersion starts the bytes an entry's hash is taken over.
const hashVersion = "dlqdump changelog 1\n"

// Sum returns the hash of e's fields and Prev, in hex: what Hash holds for
// an entry that was not changed since it was appended. Each field is
// written with its length, so no two entries share the bytes hashed.
func (e *Entry) Sum() string {
	h := sha256.New()
	h.Write([]byte(hashVersion))
	for _, f := range []string{strconv.FormatUint(e.Seq, 10), e.Time.UTC().Format(time.RFC3339Nano), e.Actor, e.Role, e.Via,
		e.Action, e.Scope, e.Reason, e.Result, e.Error, e.Nonce, e.Prev} {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// What returns the action with its scope and result, as one line.
func (e *Entry) What() string {
	s := e.Action
	if e.Scope != "" {
		s += " " + e.Scope
	}
	if e.Result != "" {
		s += ": " + e.Result
	}
	return s
}
