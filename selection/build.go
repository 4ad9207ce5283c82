package selection

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/signature"
)

// Selections built without an expression, for the fields and flags that
// predate the language (RunOptions.Since, Until and Where, jobs.Spec's,
// the command line's --since, --until and --where, the console's where=,
// q= and path= parameters): the same tree an expression would parse to,
// so that they print (String), plan and match the same way.

// Where selects the records having all these header values (none: every
// record).
func Where(headers map[string]string) *Selection {
	var xs []node
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		xs = append(xs, &atom{field: fHeader, key: k, op: opEq, vals: []string{headers[k]}})
	}
	return fromNodes(xs)
}

// Like selects the records whose header key has value's error signature
// (package signature): "KEY like VALUE", what replaying an error group
// selects.
func Like(key, value string) *Selection {
	return fromNodes([]node{&atom{field: fHeader, key: key, op: opLike, vals: []string{signature.Of(value)}}})
}

// TimeRange selects the records that entered the dump in [since, until);
// a zero time is unbounded.
func TimeRange(since, until time.Time) *Selection {
	var xs []node
	if !since.IsZero() {
		xs = append(xs, &atom{field: fTime, op: opGe, t: since.UTC()})
	}
	if !until.IsZero() {
		xs = append(xs, &atom{field: fTime, op: opLt, t: until.UTC()})
	}
	return fromNodes(xs)
}

// Contains selects the records whose payload contains text ("" selects
// every record).
func Contains(text string) *Selection {
	if text == "" {
		return All()
	}
	return fromNodes([]node{&atom{field: fPayload, op: opContains, vals: []string{text}}})
}

// JSON selects the records whose payload is JSON with a value at path
// and, when value is not "", that value (a string's text, or a number's,
// boolean's or null's JSON). decode, when set, turns payloads into JSON
// (protobuf into protojson). A path that does not parse is an error
// wrapping ErrPath.
func JSON(path, value string, decode func([]byte) ([]byte, bool)) (*Selection, error) {
	jp, err := ParseJSONPath(strings.TrimSpace(path))
	if err != nil {
		return nil, err
	}
	a := &atom{field: fJSON, path: jp, op: opHas}
	if value != "" {
		a.op, a.vals = opEq, []string{value}
	}
	return newSelection(a, decode), nil
}

// Segments selects the records of the named segments (none: every record).
func Segments(names ...string) *Selection {
	if len(names) == 0 {
		return All()
	}
	return fromNodes([]node{&atom{field: fSegment, op: opEq, vals: slices.Compact(slices.Sorted(slices.Values(names)))}})
}

// IDs selects the records with these IDs (none: every record).
func IDs(ids ...segment.RecordID) *Selection {
	if len(ids) == 0 {
		return All()
	}
	return fromNodes([]node{&atom{field: fID, op: opEq, ids: slices.Clone(ids)}})
}

// And selects the records every one of sels selects; nil ones and those of
// every record are left out. The result keeps the first Decode met.
func And(sels ...*Selection) *Selection {
	var xs []node
	var dec func([]byte) ([]byte, bool)
	for _, s := range sels {
		if s.IsAll() {
			continue
		}
		if dec == nil {
			dec = s.decode
		}
		if a, ok := s.root.(*nAnd); ok {
			xs = append(xs, a.xs...)
		} else {
			xs = append(xs, s.root)
		}
	}
	s := fromNodes(xs)
	if dec != nil && !s.IsAll() {
		s = newSelection(s.root, dec)
	}
	return s
}

func fromNodes(xs []node) *Selection {
	switch len(xs) {
	case 0:
		return All()
	case 1:
		return newSelection(xs[0], nil)
	}
	return newSelection(&nAnd{xs: xs}, nil)
}
