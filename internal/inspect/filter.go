package inspect

import (
	"bytes"
	"time"

	"github.com/dlqdump/dlqdump/segment"
)

// Filter selects records: by the time they entered the dump, header values,
// payload text and a JSON path. The zero Filter selects every record.
type Filter struct {
	// Since and Until select the records that entered the dump in
	// [Since, Until); zero is unbounded.
	Since, Until time.Time
	// Where selects the records having all these header values.
	Where map[string]string
	// Limit is how many records the caller wants at most (0: no limit);
	// Match does not look at it.
	Limit uint64
	// Text selects the records whose payload contains these bytes
	// (case-sensitive); "" selects all.
	Text string
	// Path, when set, selects the records whose payload is JSON with a
	// value at this path (and, with PathValue, that value).
	Path *JSONPath
	// PathValue, when Path is set and PathValue is not "", is the value
	// wanted at Path: a string's text, or a number's, boolean's or null's
	// JSON.
	PathValue string
	// Decode, when set, turns a payload into the JSON that Path looks at
	// (protobuf payloads into protojson); ok false selects nothing.
	// Default: the payload is the JSON.
	Decode func(payload []byte) (js []byte, ok bool)
}

// Timed reports whether the filter bounds the records' times.
func (f *Filter) Timed() bool { return !f.Since.IsZero() || !f.Until.IsZero() }

// Overlaps reports whether records between minT and maxT (Unix nanoseconds)
// may pass the time bounds.
func (f *Filter) Overlaps(minT, maxT int64) bool {
	if !f.Since.IsZero() && maxT < f.Since.UnixNano() {
		return false
	}
	if !f.Until.IsZero() && minT >= f.Until.UnixNano() {
		return false
	}
	return true
}

// Payload reports whether the filter looks into payloads (Text or Path):
// records of an encrypted segment that cannot be read never match it.
func (f *Filter) Payload() bool { return f.Text != "" || f.Path != nil }

// Match reports whether a record passes every condition.
func (f *Filter) Match(rec *segment.Record) bool {
	if !f.Since.IsZero() && rec.Time < f.Since.UnixNano() || !f.Until.IsZero() && rec.Time >= f.Until.UnixNano() {
		return false
	}
	for k, v := range f.Where {
		if got, ok := rec.Headers.Lookup(k); !ok || string(got) != v {
			return false
		}
	}
	if f.Text != "" && !bytes.Contains(rec.Payload, []byte(f.Text)) {
		return false
	}
	if f.Path != nil {
		js := rec.Payload
		if f.Decode != nil {
			var ok bool
			if js, ok = f.Decode(rec.Payload); !ok {
				return false
			}
		} else if f.PathValue != "" && bytes.IndexByte(js, '\\') < 0 && !bytes.Contains(js, []byte(f.PathValue)) {
			// Without escapes a JSON text holds every value's text as
			// it is: one that lacks the value has it nowhere.
			return false
		}
		got, ok := f.Path.Lookup(js)
		if !ok || f.PathValue != "" && got != f.PathValue {
			return false
		}
	}
	return true
}
