package claims

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
)

// The progress of an encrypted segment is authenticated: whoever holds the
// segment's data key (a Restorer, dlqdump rewrap) appends to the progress it
// writes a MAC keyed by the data key and bound to the segment's ID, as its
// last member:
//
//	{"offset":…,"seq":…,…,"mac":"<hex HMAC-SHA256>"}
//
// The MAC covers the progress's JSON as written before it (the closing
// brace put back), so that readers of the progress (ParseProgress ignores
// "mac") and the record's JSON are unchanged, and no re-encoding is needed
// to check it. Someone who can write to the store but has no key cannot
// make a progress that authenticates: a restorer does not act on one (skip
// records it says were delivered, finish a segment it says is done, hand a
// segment over to a copy it names).

// ErrUnauthenticated means a progress does not authenticate under the
// segment's key: written by a process without the key (an older dlqdump, or
// someone who can write to the store), or changed since.
var ErrUnauthenticated = errors.New("dlqdump: restore progress not authenticated by the segment's key")

const (
	macMember  = `,"mac":"`
	macInfo    = "dlqdump progress mac v1"
	macHexSize = 2 * sha256.Size
)

// progressMAC returns the MAC of body (a progress's JSON) for the segment of
// data key key and ID id.
func progressMAC(key []byte, id [16]byte, body []byte) []byte {
	mk, err := hkdf.Key(sha256.New, key, id[:], macInfo, sha256.Size)
	if err != nil {
		panic("dlqdump: derive progress key: " + err.Error()) // only for lengths HKDF cannot give
	}
	h := hmac.New(sha256.New, mk)
	h.Write(body)
	return h.Sum(nil)
}

// MarshalSigned encodes p with its MAC for the segment of data key key and
// ID id.
func (p *Progress) MarshalSigned(key []byte, id [16]byte) json.RawMessage {
	body := p.Marshal() // an object with members: Offset and Seq are always there
	mac := progressMAC(key, id, body)
	out := make([]byte, 0, len(body)+len(macMember)+macHexSize+2)
	out = append(out, body[:len(body)-1]...)
	out = append(out, macMember...)
	out = hex.AppendEncode(out, mac)
	return append(out, '"', '}')
}

// VerifyProgress returns nil when raw, a progress from a claim record,
// authenticates under the segment's data key key and ID id, and an error
// wrapping ErrUnauthenticated when it does not (no MAC, or not this one).
func VerifyProgress(raw json.RawMessage, key []byte, id [16]byte) error {
	raw = bytes.TrimSpace(raw)
	i := bytes.LastIndex(raw, []byte(macMember))
	if i < 0 || len(raw) != i+len(macMember)+macHexSize+2 || !bytes.HasSuffix(raw, []byte(`"}`)) {
		return ErrUnauthenticated
	}
	got := make([]byte, sha256.Size)
	if _, err := hex.Decode(got, raw[i+len(macMember):len(raw)-2]); err != nil {
		return ErrUnauthenticated
	}
	body := append(bytes.Clone(raw[:i]), '}')
	if !hmac.Equal(got, progressMAC(key, id, body)) {
		return ErrUnauthenticated
	}
	return nil
}

// Empty reports whether p records nothing a restorer acts on: the start of
// a segment, which needs no authentication.
func (p *Progress) Empty() bool {
	return !p.Started() && len(p.Aside) == 0 && len(p.Carve) == 0 && len(p.Writing) == 0 && p.Sides == 0 && p.Damaged == 0 && len(p.Labels) == 0 && p.Successor == ""
}
