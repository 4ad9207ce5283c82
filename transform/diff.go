package transform

import (
	"bytes"
	"encoding/json"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/dlqdump/dlqdump"
)

// Document returns the JSON a diff compares of a record: its headers and
// payload (as a program sees them), indented by two spaces, keys sorted.
func Document(r *dlqdump.Replay) []byte {
	h := make(map[string]string, len(r.Headers))
	for k, v := range r.Headers {
		h[k] = v
	}
	pv, kind := decodePayload(r.Payload)
	doc := map[string]any{"headers": h, "payload": pv}
	if kind == kindBase64 {
		doc["payload_base64"] = true
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(doc) // strings, maps and json.Numbers: it cannot fail
	return b.Bytes()
}

// Diff returns a unified diff of the Documents of a record before and
// after a transform, with three lines of context, or "" when they are the
// same.
func Diff(before, after *dlqdump.Replay) string {
	a, b := Document(before), Document(after)
	if bytes.Equal(a, b) {
		return ""
	}
	d := difflib.UnifiedDiff{
		A:        difflib.SplitLines(string(a)),
		B:        difflib.SplitLines(string(b)),
		FromFile: "stored " + before.ID.String(),
		ToFile:   "delivered " + after.ID.String(),
		Context:  3,
	}
	s, _ := difflib.GetUnifiedDiffString(d) // writes to a buffer: no error
	return s
}
